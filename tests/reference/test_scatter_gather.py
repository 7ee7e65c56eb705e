"""GATHER and SCATTER against the reference model (exact), tiling, REQUIREs and ERROR_IFs."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError
from npu_sim.reference.scatter_gather import SUPPORTED_DTYPES
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op
from tests.kernel_testing import assert_same_bits, ours_tiled, random_tiles, run_bound, run_ours, window_volume
from tests.oracle import Operand, run_op
from tests.value_gen import random_bits

DTYPES = sorted(SUPPORTED_DTYPES)
I32 = DType.INT32


def gather_case(dtype, rng, max_dim=7):
    n, k, w, c = (int(v) for v in rng.integers(1, max_dim + 1, size=4))
    indices = rng.integers(0, k, size=(n, w)).astype(np.int32)
    indices.reshape(-1)[:1] = k - 1  # the last valid index in every case
    operands = [Operand(random_bits(dtype, (n, k, c), rng), dtype), Operand(indices, I32)]
    return operands, TensorType((n, w, c), dtype)


def scatter_case(dtype, rng, max_dim=7):
    n, k, c = (int(v) for v in rng.integers(1, max_dim + 1, size=3))
    w = int(rng.integers(1, k + 1))  # each index at most once per batch: W <= K
    indices = np.stack([rng.permutation(k)[:w] for _ in range(n)]).astype(np.int32)
    operands = [Operand(random_bits(dtype, (n, k, c), rng), dtype), Operand(indices, I32),
                Operand(random_bits(dtype, (n, w, c), rng), dtype)]
    return operands, TensorType((n, k, c), dtype)


CASES = {Op.GATHER: gather_case, Op.SCATTER: scatter_case}


@pytest.mark.parametrize("op,dtype", [(op, dt) for op in CASES for dt in DTYPES],
                         ids=lambda v: v.name)
def test_matches_reference_model_bit_for_bit(op, dtype):
    rng = np.random.default_rng(int(op) * 100 + int(dtype))
    for _ in range(3):
        operands, out_type = CASES[op](dtype, rng)
        (expected,) = run_op(op, operands, None, [out_type])
        (actual,) = run_ours(op, operands, None, [out_type])
        # The reference model canonicalises NaN payloads of wide float types.
        assert_same_bits(actual, expected, nan_equal=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda v: v.name)
def test_bound_gather_matches_reference_model(dtype):
    """Bound after a first call (a loop body's GATHER runs at every iteration): the same bits."""
    rng = np.random.default_rng(500 + int(dtype))
    operands, out_type = gather_case(dtype, rng)
    (values, indices) = operands
    again = Operand(rng.integers(0, values.value.shape[1], size=indices.value.shape).astype(np.int32), I32)
    (expected,) = run_op(Op.GATHER, [values, again], None, [out_type])
    (actual,) = run_bound(Op.GATHER, [values, again], None, [out_type], first=operands)
    assert_same_bits(actual, expected, nan_equal=True)


@pytest.mark.parametrize("bad", [-1, 4])
def test_a_bound_gather_still_requires_indices_in_range(bad):
    values = Operand(np.zeros((1, 4, 2), np.int8), DType.INT8)
    out = [TensorType((1, 2, 2), DType.INT8)]
    with pytest.raises(TosaRuntimeError, match="out of range"):
        run_bound(Op.GATHER, [values, Operand(np.array([[0, bad]], np.int32), I32)], None, out,
                  first=[values, Operand(np.array([[0, 1]], np.int32), I32)])
    one = [TensorType((1, 1, 2), DType.INT8)]   # one index (a loop's time step): checked as an int
    with pytest.raises(TosaRuntimeError, match="out of range"):
        run_bound(Op.GATHER, [values, Operand(np.array([[bad]], np.int32), I32)], None, one,
                  first=[values, Operand(np.array([[3]], np.int32), I32)])


def test_scatter_keeps_unwritten_values_and_payloads():
    values = np.arange(2 * 4 * 1, dtype=np.float32).reshape(2, 4, 1)
    payload = np.array([0x7FC00001], dtype=np.uint32).view(np.float32)[0]
    values[1, 3, 0] = payload
    indices = np.array([[2, 0], [1, 2]], dtype=np.int32)
    data = np.array([[[10], [11]], [[12], [13]]], dtype=np.float32)
    (out,) = run_ours(Op.SCATTER, [Operand(values, DType.FP32), Operand(indices, I32),
                               Operand(data, DType.FP32)], None, [TensorType((2, 4, 1), DType.FP32)])
    expected = np.array([[11, 1, 10, 3], [4, 12, 13, payload]], dtype=np.float32).reshape(2, 4, 1)
    assert_same_bits(out, expected)


@pytest.mark.parametrize("op", list(CASES), ids=lambda v: v.name)
def test_random_tilings_equal_whole_tensor(op):
    rng = np.random.default_rng(90 + int(op))
    for dtype in (DType.INT8, DType.BF16, DType.FP32):
        for _ in range(3):
            operands, out_type = CASES[op](dtype, rng, max_dim=9)
            from npu_sim.tosa.ops import attribute_class
            attribute = attribute_class(op)()
            (whole,) = run_ours(op, operands, attribute, [out_type])
            (tiled,) = ours_tiled(op, operands, attribute, [out_type], random_tiles(out_type.shape, rng))
            assert_same_bits(tiled, whole)


def test_windows():
    from npu_sim.tosa.ops import attribute_class

    values = np.zeros((3, 8, 5), np.int8)
    indices = np.zeros((3, 4), np.int32)
    gather_ops = [Operand(values, DType.INT8), Operand(indices, I32)]
    region = ((1, 2), (0, 2), (1, 3))
    # GATHER: one batch, all K, two channels of values.
    assert window_volume(Op.GATHER, gather_ops, attribute_class(Op.GATHER)(),
                         TensorType((3, 4, 5), DType.INT8), region, False) == 1 * 8 * 2
    scatter_ops = [Operand(values, DType.INT8), Operand(indices, I32),
                   Operand(np.zeros((3, 4, 5), np.int8), DType.INT8)]
    assert window_volume(Op.SCATTER, scatter_ops, attribute_class(Op.SCATTER)(),
                         TensorType((3, 8, 5), DType.INT8), region, False) == 1 * 2 * 2


# --------------------------------------------------------------------------- REQUIRE / ERROR_IF
def _gather(values, indices, out_shape, dtype=DType.INT8, index_dtype=I32):
    return run_ours(Op.GATHER, [Operand(values, dtype), Operand(indices, index_dtype)], None,
                [TensorType(out_shape, dtype)])


def _scatter(values, indices, data, dtype=DType.INT8):
    return run_ours(Op.SCATTER, [Operand(values, dtype), Operand(indices, I32), Operand(data, dtype)],
                None, [TensorType(np.shape(values), dtype)])


@pytest.mark.parametrize("bad", [-1, 4])
def test_gather_requires_indices_in_range(bad):
    values = np.zeros((1, 4, 2), np.int8)
    with pytest.raises(TosaRuntimeError, match="out of range"):
        _gather(values, np.array([[0, bad]], np.int32), (1, 2, 2))


@pytest.mark.parametrize("bad", [-1, 4])
def test_scatter_requires_indices_in_range(bad):
    with pytest.raises(TosaRuntimeError, match="out of range"):
        _scatter(np.zeros((1, 4, 2), np.int8), np.array([[bad]], np.int32), np.zeros((1, 1, 2), np.int8))


def test_scatter_requires_each_position_written_once():
    values = np.zeros((2, 4, 1), np.int8)
    data = np.ones((2, 2, 1), np.int8)
    _scatter(values, np.array([[1, 2], [1, 2]], np.int32), data)  # repeats across batches are fine
    with pytest.raises(TosaRuntimeError, match="written twice"):
        _scatter(values, np.array([[1, 2], [3, 3]], np.int32), data)


def test_scatter_duplicate_is_caught_by_every_tiling():
    # A tile whose k range misses the duplicated index still checks its batch rows.
    values = np.zeros((1, 6, 1), np.int8)
    operands = [Operand(values, DType.INT8), Operand(np.array([[5, 5]], np.int32), I32),
                Operand(np.ones((1, 2, 1), np.int8), DType.INT8)]
    from npu_sim.tosa.ops import attribute_class
    with pytest.raises(TosaRuntimeError, match="written twice"):
        ours_tiled(Op.SCATTER, operands, attribute_class(Op.SCATTER)(),
                   [TensorType((1, 6, 1), DType.INT8)], [((0, 1), (0, 3), (0, 1)), ((0, 1), (3, 6), (0, 1))])


@pytest.mark.parametrize("call,text", [
    (lambda: _gather(np.zeros((1, 4, 2), np.int8), np.zeros((1, 3), np.int32), (1, 3, 3)), "expected a \\[1, 3, 2\\]"),
    (lambda: _gather(np.zeros((1, 4, 2), np.int8), np.zeros((2, 3), np.int32), (1, 3, 2)), "batch"),
    (lambda: _gather(np.zeros((1, 4, 2), np.int8), np.zeros((1, 3), np.int16), (1, 3, 2), index_dtype=DType.INT16), "INT32"),
    (lambda: _gather(np.zeros((4, 2), np.int8), np.zeros((1, 3), np.int32), (1, 3, 2)), "rank 3"),
    (lambda: _gather(np.zeros((1, 4, 2), np.int8), np.zeros((1, 3), np.int32), (1, 3, 2), dtype=DType.BOOL), "unsupported"),
    (lambda: _scatter(np.zeros((1, 4, 2), np.int8), np.zeros((1, 3), np.int32), np.zeros((1, 2, 2), np.int8)), "expected a \\[1, 3, 2\\]"),
    (lambda: _scatter(np.zeros((1, 4, 2), np.int8), np.zeros((1, 2, 1), np.int32), np.zeros((1, 2, 2), np.int8)), "rank 2"),
], ids=["gather-out-shape", "gather-batch", "gather-index-type", "gather-rank", "gather-bool",
        "scatter-input-shape", "scatter-index-rank"])
def test_error_if(call, text):
    with pytest.raises(TosaRuntimeError, match=text):
        call()
