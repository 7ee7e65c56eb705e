"""Reduction kernels against the reference model, the spec's accuracy bounds, tiling, errors."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError
from npu_sim.reference.reduction import SUPPORTED_DTYPES
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import NanPropagationMode, Op, make_attribute
from tests.fp_compliance import NORMAL_FRAC, NORMAL_MIN, assert_fp_compliant
from tests.fp_compliance_dot import assert_dot_compliant
from tests.kernel_testing import assert_same_bits, ours_tiled, random_tiles, run_ours, window_volume
from tests.oracle import Operand, run_op
from tests.value_gen import random_values

FP = (DType.FP16, DType.BF16, DType.FP32)
#: acc_t of REDUCE_SUM (tosa.xml)
SUM_ACC = {DType.FP16: DType.FP16, DType.BF16: DType.FP32, DType.FP32: DType.FP32}


def _case(op, dtype, rng, max_rank=4, max_dim=6, values=None, nan_mode=NanPropagationMode.PROPAGATE):
    rank = int(rng.integers(1, max_rank + 1))
    shape = tuple(int(v) for v in rng.integers(1, max_dim + 1, size=rank))
    axis = int(rng.integers(0, rank))
    x = values(shape) if values is not None else random_values(dtype, shape, rng)
    fields = {"axis": axis}
    if op in (Op.REDUCE_MAX, Op.REDUCE_MIN):
        fields["nan_mode"] = nan_mode
    out_shape = tuple(1 if d == axis else s for d, s in enumerate(shape))
    return [Operand(x, dtype)], make_attribute(op, **fields), TensorType(out_shape, dtype)


def _small_int32(rng):
    # |x| * axis length stays below 2**31: no partial sum can overflow (a REQUIRE).
    def values(shape):
        limit = (1 << 31) // max(shape) - 1
        x = rng.integers(-limit, limit, size=shape, endpoint=True, dtype=np.int64)
        x.reshape(-1)[:1] = limit  # an extreme value in every case
        return x.astype(np.int32)
    return values


EXACT_CASES = [(op, dt) for op, dts in SUPPORTED_DTYPES.items() for dt in sorted(dts)
               if not dt.is_float]
EXACT_CASES += [(op, dt) for op in (Op.REDUCE_MAX, Op.REDUCE_MIN) for dt in FP]


@pytest.mark.parametrize("op,dtype", EXACT_CASES, ids=lambda v: v.name)
def test_exact_results_match_reference_model(op, dtype):
    rng = np.random.default_rng(int(op) * 100 + int(dtype))
    modes = (NanPropagationMode.PROPAGATE, NanPropagationMode.IGNORE) if dtype.is_float else (
        NanPropagationMode.PROPAGATE,)
    for nan_mode in modes:
        for _ in range(4):
            values = _small_int32(rng) if (op, dtype) == (Op.REDUCE_SUM, DType.INT32) else None
            operands, attribute, out_type = _case(op, dtype, rng, values=values, nan_mode=nan_mode)
            (expected,) = run_op(op, operands, attribute, [out_type])
            (actual,) = run_ours(op, operands, attribute, [out_type])
            # Max/min are exact; the reference model also agrees on the zero sign.
            assert_same_bits(actual, expected, nan_equal=True)


def test_max_min_nan_modes_and_zero_signs():
    rows = [[np.nan, 2.0, 1.0], [np.nan, np.nan, np.nan], [-np.inf, -np.inf, -np.inf]]

    def run(op, mode):
        zeros = [[0.0, -0.0, -1.0], [-0.0, 0.0, -1.0]] if op == Op.REDUCE_MAX else \
            [[0.0, -0.0, 1.0], [-0.0, 0.0, 1.0]]
        x = np.array(zeros + rows, dtype=np.float32)
        attribute = make_attribute(op, axis=1, nan_mode=mode)
        (out,) = run_ours(op, [Operand(x, DType.FP32)], attribute, [TensorType((5, 1), DType.FP32)])
        return out.reshape(-1)

    high = run(Op.REDUCE_MAX, NanPropagationMode.PROPAGATE)
    low = run(Op.REDUCE_MIN, NanPropagationMode.IGNORE)
    # apply_max_s keeps the first of equal zeros, apply_min_s takes the last one.
    assert high[0] == 0 and not np.signbit(high[0]) and np.signbit(high[1])
    assert low[0] == 0 and np.signbit(low[0]) and not np.signbit(low[1])
    assert np.isnan(high[2]) and low[2] == 1.0
    assert np.isnan(high[3]) and np.isnan(low[3])
    assert high[4] == -np.inf and low[4] == -np.inf
    assert run(Op.REDUCE_MAX, NanPropagationMode.IGNORE)[2] == 2.0


def _fp_sum_or_product_case(op, dtype, rng):
    if op == Op.REDUCE_SUM:
        def values(shape):
            x = random_values(dtype, shape, rng, edges=False, scale=8.0)
            flat = x.reshape(-1)
            flat[rng.random(flat.size) < 0.05] = 0  # some exact zeros / cancellation
            return x
    else:
        def values(shape):
            magnitude = rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
            return magnitude.astype(dtype.numpy_dtype)
    return _case(op, dtype, rng, max_rank=3, max_dim=12, values=values)


@pytest.mark.parametrize("dtype", FP, ids=lambda v: v.name)
def test_sum_meets_dot_product_accuracy(dtype):
    rng = np.random.default_rng(40 + int(dtype))
    for _ in range(2):
        operands, attribute, out_type = _fp_sum_or_product_case(Op.REDUCE_SUM, dtype, rng)
        x = operands[0].value
        axis = attribute.axis
        (ref,) = run_op(Op.REDUCE_SUM, operands, attribute, [out_type], precise=True)
        # The bound: the same sum of max(|x|, normal_min) (weights are all one).
        bnd = np.sum(np.maximum(np.abs(x.astype(np.float64)), NORMAL_MIN[dtype]), axis=axis,
                     keepdims=True)
        (actual,) = run_ours(Op.REDUCE_SUM, operands, attribute, [out_type])
        assert_dot_compliant(actual, ref, bnd, dtype, SUM_ACC[dtype], x.shape[axis], False)
        # Our fp64 accumulation rounds once: never further than the reference model's result.
        (theirs,) = run_op(Op.REDUCE_SUM, operands, attribute, [out_type])
        assert np.all(np.abs(actual.astype(np.float64) - ref) <= np.abs(theirs.astype(np.float64) - ref))


@pytest.mark.parametrize("dtype", FP, ids=lambda v: v.name)
def test_product_meets_spec_bound(dtype):
    rng = np.random.default_rng(50 + int(dtype))
    for _ in range(2):
        operands, attribute, out_type = _fp_sum_or_product_case(Op.REDUCE_PRODUCT, dtype, rng)
        n = operands[0].value.shape[attribute.axis]
        (ref,) = run_op(Op.REDUCE_PRODUCT, operands, attribute, [out_type], precise=True)
        err_bnd = np.maximum(np.abs(ref), NORMAL_MIN[dtype]) * (
            (1 + 2.0 ** (-NORMAL_FRAC[dtype] - 1)) ** n - 1)
        (actual,) = run_ours(Op.REDUCE_PRODUCT, operands, attribute, [out_type])
        assert_fp_compliant(actual, ref, dtype, err_bnd=err_bnd)


@pytest.mark.parametrize("op", [Op.REDUCE_SUM, Op.REDUCE_PRODUCT], ids=lambda v: v.name)
def test_fp_special_values_follow_ieee(op):
    x = np.array([[np.nan, 1.0], [np.inf, 2.0], [np.inf, -np.inf], [-0.0, -0.0],
                  [65504.0, 65504.0]], dtype=np.float16)
    (actual,) = run_ours(op, [Operand(x, DType.FP16)], make_attribute(op, axis=1),
                     [TensorType((5, 1), DType.FP16)])
    a = actual.reshape(-1).astype(np.float64)
    assert np.isnan(a[0]) and a[1] == np.inf
    assert np.isnan(a[2]) if op == Op.REDUCE_SUM else a[2] == -np.inf
    assert a[4] == np.inf  # overflow of the fp16 result
    if op == Op.REDUCE_SUM:
        assert a[3] == 0 and not np.signbit(a[3])  # acc starts at +0: 0 + -0 + -0 = +0
    else:
        assert a[3] == 0 and not np.signbit(a[3])  # 1 * -0 * -0 = +0


def test_int32_sum_requires_every_partial_sum_to_fit():
    top = (1 << 31) - 1
    fits = np.array([[top, 1, -2]], dtype=np.int32)  # top + 1 overflows before the -2
    with pytest.raises(TosaRuntimeError, match="overflow"):
        run_ours(Op.REDUCE_SUM, [Operand(fits, DType.INT32)], make_attribute(Op.REDUCE_SUM, axis=1),
             [TensorType((1, 1), DType.INT32)])
    ok = np.array([[top, -2, 1]], dtype=np.int32)
    (out,) = run_ours(Op.REDUCE_SUM, [Operand(ok, DType.INT32)], make_attribute(Op.REDUCE_SUM, axis=1),
                  [TensorType((1, 1), DType.INT32)])
    assert out.tolist() == [[top - 1]]
    low = np.array([[-(1 << 31), -1]], dtype=np.int32)
    with pytest.raises(TosaRuntimeError, match="overflow"):
        run_ours(Op.REDUCE_SUM, [Operand(low, DType.INT32)], make_attribute(Op.REDUCE_SUM, axis=1),
             [TensorType((1, 1), DType.INT32)])


@pytest.mark.parametrize("op", list(SUPPORTED_DTYPES), ids=lambda v: v.name)
def test_random_tilings_equal_whole_tensor(op):
    rng = np.random.default_rng(70 + int(op))
    for dtype in sorted(SUPPORTED_DTYPES[op]):
        values = _small_int32(rng) if (op, dtype) == (Op.REDUCE_SUM, DType.INT32) else None
        operands, attribute, out_type = _case(op, dtype, rng, max_dim=9, values=values)
        (whole,) = run_ours(op, operands, attribute, [out_type])
        (tiled,) = ours_tiled(op, operands, attribute, [out_type], random_tiles(out_type.shape, rng))
        assert_same_bits(tiled, whole)


def test_window_keeps_the_reduced_axis_whole():
    x = np.zeros((4, 5, 6), dtype=np.float32)
    attribute = make_attribute(Op.REDUCE_SUM, axis=1)
    out = TensorType((4, 1, 6), DType.FP32)
    assert window_volume(Op.REDUCE_SUM, [Operand(x, DType.FP32)], attribute, out,
                         ((1, 3), (0, 1), (2, 3)), False) == 2 * 5 * 1


@pytest.mark.parametrize("op,dtype,in_shape,axis,out_shape,text", [
    (Op.REDUCE_SUM, DType.INT32, (2, 3), 2, (2, 1), "axis 2 out of range"),
    (Op.REDUCE_MAX, DType.INT8, (2, 3), -1, (2, 1), "axis -1 out of range"),
    (Op.REDUCE_ALL, DType.BOOL, (2, 3), 1, (2, 3), "is not 1"),
    (Op.REDUCE_MIN, DType.INT16, (2, 3), 1, (3, 1), "differs from the input"),
    (Op.REDUCE_ANY, DType.BOOL, (2, 3), 1, (2, 1, 1), "rank"),
    (Op.REDUCE_SUM, DType.INT8, (2, 3), 1, (2, 1), "unsupported element type INT8"),
    (Op.REDUCE_PRODUCT, DType.INT32, (2, 3), 1, (2, 1), "unsupported element type INT32"),
    (Op.REDUCE_MAX, DType.FP8E4M3, (2, 3), 1, (2, 1), "unsupported element type FP8E4M3"),
    (Op.REDUCE_ALL, DType.INT8, (2, 3), 1, (2, 1), "unsupported element type INT8"),
], ids=lambda v: getattr(v, "name", str(v)))
def test_error_if(op, dtype, in_shape, axis, out_shape, text):
    x = np.zeros(in_shape, dtype=dtype.numpy_dtype)
    with pytest.raises(TosaRuntimeError, match=text):
        run_ours(op, [Operand(x, dtype)], make_attribute(op, axis=axis), [TensorType(out_shape, dtype)])
