"""TOSA graphs: IR, element types, operators, reading and writing."""

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, Region, Tensor, TensorType
from npu_sim.tosa.ops import Op, make_attribute

__all__ = ["DType", "Block", "Graph", "Operator", "Region", "Tensor", "TensorType", "Op",
           "make_attribute"]
