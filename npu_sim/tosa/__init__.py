"""TOSA graphs: IR, element types, operators, reading, writing, building and checking."""

from npu_sim.tosa.builder import BlockBuilder, GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.flatbuffer_io import read_graph, write_graph
from npu_sim.tosa.ir import Block, BlockScale, Graph, Operator, Region, Tensor, TensorType
from npu_sim.tosa.json_io import read_json, write_json
from npu_sim.tosa.loader import load_graph, parse_graph, save_graph
from npu_sim.tosa.ops import Op, make_attribute
from npu_sim.tosa.profiles import ProfileReport, required_profiles
from npu_sim.tosa.validation import check_supported, validate

__all__ = ["DType", "Block", "BlockScale", "Graph", "Operator", "Region", "Tensor", "TensorType",
           "Op", "make_attribute", "GraphBuilder", "BlockBuilder", "read_graph", "write_graph",
           "read_json", "write_json", "load_graph", "parse_graph", "save_graph", "validate",
           "check_supported", "required_profiles", "ProfileReport"]
