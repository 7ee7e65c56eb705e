"""Float round trips around SLICEs of int8 data: taken out only where they give every value back."""

import numpy as np
import pytest

from npu_sim.reference.session import execute
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.passes.float_round_trips import integer_data_movement


def _graph(scale_in: float, scale_out: float):
    """int8 [1, 8] -> dequantize (zero point 3) -> two float SLICEs -> quantize each (zero point 3)."""
    b = GraphBuilder()
    x = b.input("x", (1, 8), DType.INT8)
    shift = b.const(None, np.array([0], np.int8))
    centred = b.op(Op.SUB, [b.op(Op.CAST, [x], dtype=DType.FP32), b.const(None, np.full((1, 1), 3.0, np.float32))])
    real = b.op(Op.MUL, [centred, b.const(None, np.full((1, 1), scale_in, np.float32)), shift])
    parts = []
    for start in (0, 4):
        part = b.op(Op.SLICE, [real, b.const_shape(None, [0, start]), b.const_shape(None, [1, 4])])
        inverse = b.const(None, np.full((1, 1), np.float32(1 / np.float32(scale_out)), np.float32))
        scaled = b.op(Op.MUL, [part, inverse, shift])
        wide = b.op(Op.ADD, [b.op(Op.CAST, [scaled], dtype=DType.INT32), b.const(None, np.full((1, 1), 3, np.int32))])
        parts.append(b.op(Op.CAST, [wide], dtype=DType.INT8))
    b.output(*parts)
    return b.build()


def _kinds(graph):
    return [op.op for op in graph.main.operators if op.op not in (Op.CONST, Op.CONST_SHAPE)]


@pytest.mark.parametrize("scale", [0.0078125, 0.00776996, 0.0364847])
def test_a_round_trip_that_gives_every_value_back_becomes_int8_slices(scale):
    graph = _graph(scale, scale)
    rewritten = integer_data_movement(graph)
    assert _kinds(rewritten) == [Op.SLICE, Op.SLICE]
    x = np.arange(-128, 128, dtype=np.int8).reshape(32, 1, 8)
    for row in x:
        want, got = execute(graph, {"x": row}), execute(rewritten, {"x": row})
        assert all(np.array_equal(want[a], got[b]) for a, b in zip(graph.main.outputs, rewritten.main.outputs))
    assert _kinds(graph)[:3] == [Op.CAST, Op.SUB, Op.MUL]   # the given graph is left as it was


def test_a_round_trip_that_changes_values_is_left_alone():
    graph = _graph(0.01, 0.02)   # a requantization: not the identity
    assert integer_data_movement(graph) is graph
