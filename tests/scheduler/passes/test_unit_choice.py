"""Unit choice: MAC operators of a dtype the MAC array has no rate for go to the vector unit."""

from __future__ import annotations

from scheduler.ir.npu_ops import OpKind
from scheduler.passes.lowering import lower
from scheduler.passes.unit_choice import assign_units
from tests.scheduler.graphs import float_graph, machine, small_cnn


def _units(graph, preset: str) -> dict[str, str]:
    lowered = lower(graph)
    assign_units(lowered, machine(preset))
    return {op.op_label: op.unit for block in lowered.main.walk_blocks() for op in block.ops
            if op.kind is OpKind.COMPUTE}


def test_fp32_mac_operators_run_on_the_vector_unit_without_an_fp32_rate():
    tiny, edge = _units(float_graph(), "tiny"), _units(float_graph(), "edge")   # tiny: int8 and int16 rates
    assert [tiny[label] for label in ("MATMUL", "FFT2D", "RFFT2D")] == ["vector"] * 3
    assert [edge[label] for label in ("MATMUL", "FFT2D", "RFFT2D")] == ["mac_array"] * 3   # edge: fp32 too
    assert (tiny["SIGMOID"], tiny["ADD"]) == ("lut", "vector")   # the others keep their unit


def test_int8_convolutions_stay_on_the_mac_array():
    assert _units(small_cnn(), "tiny") == {
        "CONV2D+RESCALE+CLAMP": "mac_array", "DEPTHWISE_CONV2D+RESCALE+CLAMP": "mac_array", "RESCALE": "vector",
        "CONV2D+RESCALE+RESCALE+ADD+RESCALE": "mac_array", "MAX_POOL2D": "vector"}
