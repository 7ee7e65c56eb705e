"""Integer steps handed on to their RESCALE in int64 (npu_sim.hw.int_pipelines): the kernels' bits."""

from __future__ import annotations

import re

import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError
from npu_sim.hw.int_pipelines import fuse_int_pipelines
from npu_sim.hw.table_folding import fold_plan
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from tests.hw.test_table_folding import (
    SHAPE,
    _binary,
    _bound,
    _const,
    _leaf_values,
    _Memory,
    _rescale,
    _run_plan,
    _run_steps,
)


def _biased_chain(bias: np.ndarray):
    """(a, b int8 in memory) -> RESCALEs to int32 -> ADD -> ADD of a constant bias -> RESCALE to int8."""
    a, b = _Memory(), _Memory()
    parts = [_rescale((0, a), DType.INT8, DType.INT32, 1 << 30, 20, in_zp=-5),
             _rescale((0, b), DType.INT8, DType.INT32, 3 << 28, 19, in_zp=7),
             _binary(Op.ADD, (1, 0), (1, 1)),
             _binary(Op.ADD, (1, 2), _const(bias, DType.INT32)),
             _rescale((1, 3), DType.INT32, DType.INT8, 1 << 30, 38, out_zp=-3)]
    return [p[0] for p in parts], [p[1] for p in parts], a, b


@pytest.mark.parametrize("bias", [np.arange(16, dtype=np.int32).reshape(SHAPE) * 1000 - 5000,
                                  np.full(SHAPE, (1 << 31) - 300, np.int32)], ids=["small", "near the limit"])
def test_a_lookup_its_bias_and_rescale_give_the_kernels_bits_or_their_error(bias):
    steps, feeds, a, b = _biased_chain(bias)
    rng = np.random.default_rng(4)
    bound = _bound(steps, feeds, {id(a): np.zeros(SHAPE, np.int8), id(b): np.zeros(SHAPE, np.int8)})
    plan = fold_plan(steps, bound, feeds, (4,))
    assert plan is not None
    fused = fuse_int_pipelines(plan, (4,))
    assert fused is not None and [entry[0] for entry in fused] == [4]   # lookup, ADD and RESCALE: one entry
    for _ in range(20):
        leaves = _leaf_values(a, b, rng)
        try:
            expected = _run_steps(steps, feeds, leaves)[4]
        except TosaRuntimeError as exc:
            with pytest.raises(TosaRuntimeError, match=re.escape(str(exc))):
                _run_plan(fused, leaves, len(steps))
            continue
        got = _run_plan(fused, leaves, len(steps))[4]
        assert got is not None and got.dtype == expected.dtype and np.array_equal(got, expected)


def test_a_step_read_elsewhere_or_written_out_is_not_taken_in():
    steps, feeds, a, b = _biased_chain(np.zeros(SHAPE, np.int32))
    bound = _bound(steps, feeds, {id(a): np.zeros(SHAPE, np.int8), id(b): np.zeros(SHAPE, np.int8)})
    plan = fold_plan(steps, bound, feeds, (3, 4))
    assert plan is not None and fuse_int_pipelines(plan, (3, 4)) is None
