"""Chain windows: the backward walk of a fused chain through the kernels' window functions."""

import numpy as np
import pytest

from npu_sim.errors import UnsupportedFeatureError
from npu_sim.reference import kernel_api
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute
from scheduler.ir.npu_ops import OpKind, Step, ValueKind
from scheduler.passes.lowering import lower
from scheduler.passes.windows import Chain, can_tile, chain_tile, step_windows
from tests.scheduler.graphs import conv3d_graph, float_graph, int_graph, layout_graph, small_cnn


def _walk(steps, region, lookup):
    """The chain's regions step by step through kernel_api.input_window (the reference)."""
    regions = [None] * len(steps)
    regions[-1] = region
    out = [None] * len(steps)
    for index in range(len(steps) - 1, -1, -1):
        step = steps[index]
        consts = [lookup(o) if isinstance(o, str) else None for o in step.operands]
        windows = step_windows(step, regions[index], consts)
        for operand, window in zip(step.operands, windows):
            if isinstance(operand, int):
                regions[operand] = window
        out[index] = (regions[index], windows)
    return out


def _halves(shape):
    """The full region and, per dimension longer than 1, its two halves."""
    full = tuple((0, n) for n in shape)
    yield full
    for d, n in enumerate(shape):
        if n > 1:
            yield tuple((0, n // 2) if e == d else r for e, r in enumerate(full))
            yield tuple((n // 2, n) if e == d else r for e, r in enumerate(full))


@pytest.mark.parametrize("make", [small_cnn, layout_graph, int_graph, float_graph, conv3d_graph])
def test_chain_matches_the_step_by_step_walk(make):
    lowered = lower(make())
    values = lowered.values

    def lookup(key):
        return values[key].data if values[key].kind is ValueKind.CONSTANT else None

    checked = 0
    for op in lowered.main.ops:
        if op.kind is not OpKind.COMPUTE or not can_tile(op.steps):
            continue
        chain = Chain(op.steps, lookup)
        for region in _halves(op.steps[-1].output_types[0].shape):
            tiles = chain(region)
            assert [(t.out_region, t.windows) for t in tiles] == _walk(op.steps, region, lookup)
            assert tiles == chain_tile(op.steps, region, lookup)
            for t in tiles:   # plain ints in plain tuples (they become input offsets in the Program)
                assert all(type(w) is tuple and all(type(a) is int and type(b) is int for a, b in w)
                           for w in (t.out_region, *t.windows))
            checked += 1
    assert checked > 0


def _abs_step():
    t = TensorType((4, 6), DType.INT32)
    return Step(Op.ABS, make_attribute(Op.ABS), ("x",), (t,), (t,), "abs")


def test_window_results_become_tuples_of_ints(monkeypatch):
    def lists_of_numpy_ints(attribute, input_types, output_types, out_region):
        return [[[np.int64(a), np.int32(b)] for a, b in out_region]]

    monkeypatch.setitem(kernel_api.INPUT_WINDOWS, Op.ABS, lists_of_numpy_ints)
    (tile,) = Chain([_abs_step()], lambda key: None)(((1, 3), (0, 6)))
    assert tile.windows == (((1, 3), (0, 6)),)
    assert all(type(v) is int for pair in tile.windows[0] for v in pair)


def test_operator_without_window_function_is_reported(monkeypatch):
    monkeypatch.delitem(kernel_api.INPUT_WINDOWS, Op.ABS, raising=False)
    chain = Chain([_abs_step()], lambda key: None)
    with pytest.raises(UnsupportedFeatureError, match="ABS cannot be tiled"):
        chain(((0, 4), (0, 6)))
