"""The JSON form against flatc (tosa-tools' flatc and tosa.fbs) and tosa-opt's JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_sim.errors import NpuSimError, TosaFormatError, TosaVersionError, UnknownOperatorError
from npu_sim.tosa import DType, GraphBuilder, Op, read_graph, write_graph
from npu_sim.tosa.flatbuffer_io import read_tree
from npu_sim.tosa.json_io import read_json, read_json_tree, write_json, write_json_tree
from tests.tosa import tosa_tools_io as tt
from tests.tosa.test_flatbuffer_io import MLIR_CONTROL_FLOW, MLIR_VARIABLE


def _builder_graph():
    """Variables, control flow, SHAPE constants, bytes attributes, odd names, 1.0 version."""
    b = GraphBuilder()
    x = b.input("x \"quoted\" \\ tab\t é ☃ 😀", (1, 4), DType.INT8)
    state = b.variable("state", (1, 4), DType.INT8, np.zeros((1, 4), np.int8))
    old = b.variable_read(state)
    clamp = b.op(Op.CLAMP, [x], min_val=b"\x80", max_val=b"\x7f")
    shape = b.const_shape("new_shape", [4, 1])
    b.variable_write(state, clamp)
    flag = b.input("flag", (1,), DType.BOOL)
    (picked,) = b.cond_if(flag, [old, clamp], lambda bb, p, q: p, lambda bb, p, q: q)
    b.output(b.op(Op.RESHAPE, [picked, shape]))
    return b.build()


def test_write_json_is_what_flatc_prints_for_our_flatbuffer():
    g = _builder_graph()
    assert write_json(g) == tt.flatc_json(write_graph(g))


@pytest.mark.parametrize("mlir", [MLIR_VARIABLE, MLIR_CONTROL_FLOW], ids=["variable", "cflow"])
def test_printing_a_tosa_opt_file_matches_flatc_character_for_character(mlir):
    data = tt.tosa_opt_serialize(mlir)
    assert write_json_tree(read_tree(data)) == tt.flatc_json(data)
    g = read_graph(data)
    assert write_json(g) == tt.flatc_json(write_graph(g))


def test_flatc_builds_our_json_back_into_the_same_graph():
    g = _builder_graph()
    assert read_graph(tt.flatc_binary(write_json(g))) == g


@pytest.mark.parametrize("mlir", [MLIR_VARIABLE, MLIR_CONTROL_FLOW], ids=["variable", "cflow"])
def test_reads_tosa_opts_json_like_its_flatbuffer(mlir):
    from_json = read_json(tt.tosa_opt_serialize_json(mlir))
    from_flatbuffer = read_graph(tt.tosa_opt_serialize(mlir))
    for g in (from_json, from_flatbuffer):  # locations name tosa-opt's temporary input file
        for block in g.blocks():
            for op in block.operators:
                assert op.location.startswith("loc(")
                op.location = ""
    assert from_json == from_flatbuffer


def test_round_trip_and_fields():
    g = _builder_graph()
    text = write_json(g)
    assert read_json(text) == g
    doc = json.loads(text)
    assert doc["version"] == {"_major": 1, "_minor": 0, "_patch": 0, "_draft": False}
    ops = doc["regions"][0]["blocks"][0]["operators"]
    # enums by name, a union as its type name plus the table, bytes as int lists
    assert ops[0]["op"] == "IDENTITY" and ops[0]["attribute_type"] == "VariableReadAttribute"
    clamp = next(o for o in ops if o["op"] == "CLAMP")
    assert clamp["attribute"] == {"min_val": [128], "max_val": [127]}  # nan_mode 0: the default
    shapes = doc["regions"][0]["blocks"][0]["shapes"]
    assert shapes == [{"name": "new_shape", "rank": 2,
                       "data": [4, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]}]


def test_enum_values_may_be_numbers():
    doc = json.loads(write_json(_builder_graph()))
    for block in doc["regions"][0]["blocks"]:
        for op in block["operators"]:
            op["op"] = Op[op["op"]].value
        for tensor in block["tensors"]:
            tensor["type"] = DType[tensor["type"]].value
    assert read_json(json.dumps(doc)) == _builder_graph()


def _doc():
    return json.loads(write_json(_builder_graph()))


def test_not_json():
    with pytest.raises(TosaFormatError, match="not a TOSA JSON graph"):
        read_json("{ this is not json")
    with pytest.raises(TosaFormatError, match="empty"):
        read_json("  \n")
    with pytest.raises(TosaFormatError, match="JSON object"):
        read_json("[1, 2]")


def test_unknown_field():
    doc = _doc()
    doc["regions"][0]["blocks"][0]["tensors"][0]["colour"] = "red"
    with pytest.raises(TosaFormatError, match="colour"):
        read_json(json.dumps(doc))


def test_unknown_operator_name():
    doc = _doc()
    doc["regions"][0]["blocks"][0]["operators"][0]["op"] = "FROBNICATE"
    with pytest.raises(UnknownOperatorError, match="FROBNICATE"):
        read_json(json.dumps(doc))


def test_wrong_value_types():
    doc = _doc()
    doc["regions"][0]["blocks"][0]["tensors"][0]["shape"] = [1, "4"]
    with pytest.raises(TosaFormatError, match="shape"):
        read_json(json.dumps(doc))
    doc = _doc()
    doc["regions"][0]["blocks"][0]["tensors"][0]["data"] = [300]
    with pytest.raises(TosaFormatError, match="ubyte"):
        read_json(json.dumps(doc))


def test_wrong_major_version():
    doc = _doc()
    doc["version"]["_major"] = 2
    with pytest.raises(TosaVersionError):
        read_json(json.dumps(doc))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.data())
def test_fuzz_mutated_json(data):
    text = write_json(_builder_graph())
    position = data.draw(st.integers(0, len(text) - 1))
    replacement = data.draw(st.sampled_from(['"', "{", "]", "0", "-1", "true", "99999999999", "", ",",
                                             '"NONE"', "null", "[]", "{}"]))
    mutated = text[:position] + replacement + text[position + data.draw(st.integers(0, 3)):]
    try:
        read_json(mutated)
    except NpuSimError:
        pass


def test_json_tree_of_tosa_opt_equals_the_flatbuffer_tree():
    data = tt.tosa_opt_serialize(MLIR_CONTROL_FLOW)
    assert read_json_tree(tt.flatc_json(data)) == read_tree(data)
