"""TOSA graphs: IR, element types, operators, reading, writing, building and checking.

The public names below are loaded on first use (``from npu_sim.tosa import Graph``), so that
importing one submodule (``npu_sim.tosa.dtype``) does not load the readers, the builder and the
``.tflite`` legalizer with it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from npu_sim.tosa.builder import BlockBuilder, GraphBuilder
    from npu_sim.tosa.dtype import DType
    from npu_sim.tosa.flatbuffer_io import read_graph, write_graph
    from npu_sim.tosa.ir import Block, BlockScale, Graph, Operator, Region, Tensor, TensorType
    from npu_sim.tosa.json_io import read_json, write_json
    from npu_sim.tosa.loader import load_graph, parse_graph, save_graph
    from npu_sim.tosa.ops import Op, make_attribute
    from npu_sim.tosa.profiles import ProfileReport, required_profiles
    from npu_sim.tosa.validation import check_supported, validate

#: Public name -> the submodule defining it.
_API: dict[str, str] = {
    **dict.fromkeys(["BlockBuilder", "GraphBuilder"], "builder"),
    "DType": "dtype",
    **dict.fromkeys(["read_graph", "write_graph"], "flatbuffer_io"),
    **dict.fromkeys(["Block", "BlockScale", "Graph", "Operator", "Region", "Tensor", "TensorType"], "ir"),
    **dict.fromkeys(["read_json", "write_json"], "json_io"),
    **dict.fromkeys(["load_graph", "parse_graph", "save_graph"], "loader"),
    **dict.fromkeys(["Op", "make_attribute"], "ops"),
    **dict.fromkeys(["ProfileReport", "required_profiles"], "profiles"),
    **dict.fromkeys(["check_supported", "validate"], "validation"),
}

__all__ = ["DType", "Block", "BlockScale", "Graph", "Operator", "Region", "Tensor", "TensorType",
           "Op", "make_attribute", "GraphBuilder", "BlockBuilder", "read_graph", "write_graph",
           "read_json", "write_json", "load_graph", "parse_graph", "save_graph", "validate",
           "check_supported", "required_profiles", "ProfileReport"]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'npu_sim.tosa' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"npu_sim.tosa.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
