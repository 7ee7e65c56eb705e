"""Elementwise kernels against the TOSA reference model (integers bit-exact, FP within bounds)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import NanPropagationMode, Op, make_attribute
from tests.fp_compliance import assert_fp_compliant
from tests.kernel_testing import assert_both_refuse, assert_same_bits, check_tiling, run_bound, run_ours
from tests.oracle import Operand, run_op
from tests.value_gen import fp_values, int_values

I8, I16, I32, BOOL = DType.INT8, DType.INT16, DType.INT32, DType.BOOL
F16, BF16, F32 = DType.FP16, DType.BF16, DType.FP32
FP = (F16, BF16, F32)
SHAPE = (2, 3, 4, 5)
SHAPE_B = (2, 1, 4, 1)  # broadcasts against SHAPE
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1

PROPAGATE, IGNORE = NanPropagationMode.PROPAGATE, NanPropagationMode.IGNORE


def _rng(*key: object) -> np.random.Generator:
    """A generator seeded from the test's parameters (stable across runs)."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _exact(op, operands, attribute, out_dtype, shape=SHAPE, **kw):
    """Our kernel, plain and bound (as the executor runs it from the third call), against the model."""
    outs = [TensorType(shape, out_dtype)]
    ref = run_op(op, operands, attribute, outs)[0]
    ours = run_ours(op, operands, attribute, outs)[0]
    assert_same_bits(ours, ref, f"{op.name} {out_dtype.name}", nan_equal=True, **kw)
    bound = run_bound(op, operands, attribute, outs)[0]
    assert_same_bits(bound, ref, f"bound {op.name} {out_dtype.name}", nan_equal=True, **kw)
    return ours


def _shift(value: int) -> Operand:
    return Operand(np.array([value], np.int8), I8, const=True)


def _zp(value, dtype: DType) -> Operand:
    return Operand(np.array([value], dtype.numpy_dtype), dtype, const=True)


# --------------------------------------------------------------------------- integer binary
def _int_binary_case(op: Op, dtype: DType, rng: np.random.Generator):
    """Operands that satisfy the op's REQUIREs, with edge values where legal."""
    if op in (Op.ADD, Op.SUB):
        a = int_values(dtype, SHAPE, rng, -(1 << 30), 1 << 30)
        b = int_values(dtype, SHAPE_B, rng, -(1 << 30), (1 << 30) - 1)
    elif op is Op.INTDIV:
        a = int_values(dtype, SHAPE, rng)
        b = int_values(dtype, SHAPE_B, rng, 1, I32_MAX)
        b = (b * rng.choice([-1, 1], SHAPE_B)).astype(np.int32)
        b[b == -1] = 3  # INT32_MIN / -1 overflows (REQUIRE)
    elif op in (Op.ARITHMETIC_RIGHT_SHIFT, Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT):
        a = int_values(dtype, SHAPE, rng)
        b = int_values(dtype, SHAPE_B, rng, 0, dtype.bits - 1)
    else:
        a = int_values(dtype, SHAPE, rng)
        b = int_values(dtype, SHAPE_B, rng)
    return [Operand(a, dtype), Operand(b, dtype)]


INT_BINARY = [(Op.ADD, I32), (Op.SUB, I32), (Op.INTDIV, I32), (Op.MAXIMUM, I32), (Op.MINIMUM, I32)] + [
    (op, t) for op in (Op.ARITHMETIC_RIGHT_SHIFT, Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT,
                       Op.BITWISE_AND, Op.BITWISE_OR, Op.BITWISE_XOR) for t in (I8, I16, I32)]


@pytest.mark.parametrize("op,dtype", INT_BINARY, ids=lambda v: getattr(v, "name", v))
def test_integer_binary_matches_reference(op, dtype):
    rng = _rng(op, dtype)
    operands = _int_binary_case(op, dtype, rng)
    attrs = [None]
    if op is Op.ARITHMETIC_RIGHT_SHIFT:
        attrs = [make_attribute(op, round=False), make_attribute(op, round=True)]
    if op in (Op.MAXIMUM, Op.MINIMUM):
        attrs = [make_attribute(op, nan_mode=PROPAGATE)]
    for attr in attrs:
        _exact(op, operands, attr, dtype)


def test_add_sub_extremes_without_overflow():
    a = np.array([I32_MAX, I32_MIN, I32_MAX, I32_MIN, 0, -1], np.int32)
    b = np.array([0, 0, I32_MIN, -1 + 1, I32_MIN, I32_MIN + 1], np.int32)
    _exact(Op.ADD, [Operand(a, I32), Operand(b, I32)], None, I32, shape=(6,))
    c = np.array([I32_MAX, I32_MIN, -1, 0, 0, I32_MIN], np.int32)
    d = np.array([0, 0, I32_MAX, I32_MAX, -I32_MAX, -1], np.int32)
    _exact(Op.SUB, [Operand(c, I32), Operand(d, I32)], None, I32, shape=(6,))


def test_intdiv_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, I32_MIN, I32_MAX, 1, -1], np.int32)
    b = np.array([2, 2, -2, -2, 2, -1, 3, 3], np.int32)
    ours = _exact(Op.INTDIV, [Operand(a, I32), Operand(b, I32)], None, I32, shape=(8,))
    assert ours.tolist() == [3, -3, -3, 3, -(1 << 30), -I32_MAX, 0, 0]


@pytest.mark.parametrize("dtype", [I8, I16, I32], ids=lambda t: t.name)
def test_mul_widening_and_wrapping(dtype):
    rng = _rng("mul", dtype)
    a, b = int_values(dtype, SHAPE, rng), int_values(dtype, SHAPE_B, rng)
    _exact(Op.MUL, [Operand(a, dtype), Operand(b, dtype), _shift(0)], None, I32)


@pytest.mark.parametrize("shift", [1, 15, 31, 40, 63])
def test_mul_int32_rounding_shift(shift):
    rng = _rng("mulshift", shift)
    limit_b = 1 << max(0, min(31, shift) - 1)  # keeps (a*b + round) >> shift inside int32
    a = int_values(I32, SHAPE, rng)
    b = int_values(I32, SHAPE_B, rng, -limit_b, limit_b - 1)
    _exact(Op.MUL, [Operand(a, I32), Operand(b, I32), _shift(shift)], None, I32)


def test_logical_binary_ops():
    rng = _rng("logical")
    a = rng.integers(0, 2, SHAPE).astype(bool)
    b = rng.integers(0, 2, SHAPE_B).astype(bool)
    for op in (Op.LOGICAL_AND, Op.LOGICAL_OR, Op.LOGICAL_XOR):
        _exact(op, [Operand(a, BOOL), Operand(b, BOOL)], None, BOOL)


@pytest.mark.parametrize("op", [Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL], ids=lambda o: o.name)
@pytest.mark.parametrize("dtype", [I32, *FP], ids=lambda t: t.name)
def test_comparisons(op, dtype):
    rng = _rng(op, dtype)
    if dtype is I32:
        a, b = int_values(I32, SHAPE, rng, -3, 3), int_values(I32, SHAPE_B, rng, -3, 3)
        a.reshape(-1)[:3] = [I32_MIN, I32_MAX, 0]
    else:
        a, b = fp_values(dtype, SHAPE, rng), fp_values(dtype, SHAPE_B, rng, specials=[np.nan, 0.0, -0.0, np.inf])
        a.reshape(-1)[-20:] = np.resize(b.reshape(-1), 20)  # some equal pairs (not aligned, still mixes)
    _exact(op, [Operand(a, dtype), Operand(b, dtype)], None, BOOL)
    _exact(op, [Operand(b, dtype), Operand(a, dtype)], None, BOOL)


def test_select_all_types():
    rng = _rng("select")
    cond = rng.integers(0, 2, (2, 3, 1, 5)).astype(bool)
    for dtype in (BOOL, I8, I16, I32, *FP):
        if dtype is BOOL:
            a, b = rng.integers(0, 2, SHAPE).astype(bool), rng.integers(0, 2, SHAPE_B).astype(bool)
        elif dtype in FP:
            a, b = fp_values(dtype, SHAPE, rng), fp_values(dtype, SHAPE_B, rng)
        else:
            a, b = int_values(dtype, SHAPE, rng), int_values(dtype, SHAPE_B, rng)
        _exact(Op.SELECT, [Operand(cond, BOOL), Operand(a, dtype), Operand(b, dtype)], None, dtype)


# --------------------------------------------------------------------------- integer unary
def test_integer_unary_ops():
    rng = _rng("int-unary")
    x32 = int_values(I32, SHAPE, rng)
    x32.reshape(-1)[:6] = [I32_MIN, I32_MAX, 0, 1, -1, 1 << 20]
    _exact(Op.CLZ, [Operand(x32, I32)], None, I32)
    for dtype in (I8, I16, I32):
        _exact(Op.BITWISE_NOT, [Operand(int_values(dtype, SHAPE, rng), dtype)], None, dtype)
    no_min = int_values(I32, SHAPE, rng, I32_MIN + 1, I32_MAX)
    _exact(Op.ABS, [Operand(no_min, I32)], None, I32)
    b = rng.integers(0, 2, SHAPE).astype(bool)
    _exact(Op.LOGICAL_NOT, [Operand(b, BOOL)], None, BOOL)


@pytest.mark.parametrize("in_zp,out_zp", [(0, 0), (-128, 127), (127, -128), (5, -7)])
def test_negate_int8_zero_points(in_zp, out_zp):
    x = int_values(I8, SHAPE, _rng("neg8", in_zp, out_zp))
    _exact(Op.NEGATE, [Operand(x, I8), _zp(in_zp, I8), _zp(out_zp, I8)], None, I8)


@pytest.mark.parametrize("dtype", [I16, I32], ids=lambda t: t.name)
def test_negate_wide_ints(dtype):
    lo = I32_MIN + 1 if dtype is I32 else None  # -INT32_MIN overflows the int32 accumulator
    x = int_values(dtype, SHAPE, _rng("neg", dtype), lo=lo)
    _exact(Op.NEGATE, [Operand(x, dtype), _zp(0, dtype), _zp(0, dtype)], None, dtype)


# --------------------------------------------------------------------------- floating point
@pytest.mark.parametrize("dtype", FP, ids=lambda t: t.name)
@pytest.mark.parametrize("op", [Op.ADD, Op.SUB, Op.MUL], ids=lambda o: o.name)
def test_fp_arithmetic_within_bounds(op, dtype):
    rng = _rng(op, dtype)
    a, b = fp_values(dtype, SHAPE, rng), fp_values(dtype, SHAPE_B, rng, -1, 1)
    operands = [Operand(a, dtype), Operand(b, dtype)] + ([_shift(0)] if op is Op.MUL else [])
    outs = [TensorType(SHAPE, dtype)]
    ours = run_ours(op, operands, None, outs)[0]
    ref = run_op(op, operands, None, outs, precise=True)[0]
    assert_fp_compliant(ours, ref, dtype, op, inputs=[a, b])
    # Our +, -, * are correctly rounded, as the reference model's are: same bits.
    exact = run_op(op, operands, None, outs)[0]
    assert_same_bits(ours, exact, op.name, nan_equal=True, ignore_zero_sign=True)
    assert_same_bits(run_bound(op, operands, None, outs)[0], exact, op.name, nan_equal=True, ignore_zero_sign=True)


@pytest.mark.parametrize("dtype", FP, ids=lambda t: t.name)
def test_pow_within_bounds(dtype):
    rng = _rng("pow", dtype)
    x = fp_values(dtype, SHAPE, rng, -2, 2, positive=True, specials=[0.0, 1.0, 2.0, 0.5])
    y = fp_values(dtype, SHAPE_B, rng, -1, 0.5, specials=[1.0, -1.0, 0.0, 2.0])
    y = np.where(x.reshape(SHAPE)[:, :1, :, :1] == 0, np.abs(y) + 1, y).astype(dtype.numpy_dtype)
    x = np.where((x == 0) & (y <= 0), 1.0, x.astype(np.float64)).astype(dtype.numpy_dtype)
    operands = [Operand(x, dtype), Operand(y, dtype)]
    outs = [TensorType(SHAPE, dtype)]
    ours = run_ours(Op.POW, operands, None, outs)[0]
    ref = run_op(Op.POW, operands, None, outs, precise=True)[0]
    assert_fp_compliant(ours, ref, dtype, Op.POW, inputs=[x, y])


@pytest.mark.parametrize("dtype", FP, ids=lambda t: t.name)
@pytest.mark.parametrize("op", [Op.MAXIMUM, Op.MINIMUM], ids=lambda o: o.name)
def test_fp_max_min_nan_modes(op, dtype):
    rng = _rng(op, dtype)
    a, b = fp_values(dtype, SHAPE, rng), fp_values(dtype, SHAPE_B, rng, specials=[np.nan, -0.0, np.inf])
    for mode in (PROPAGATE, IGNORE):
        out = _exact(op, [Operand(a, dtype), Operand(b, dtype)], make_attribute(op, nan_mode=mode), dtype,
                     ignore_zero_sign=True)
        both_nan = np.isnan(np.broadcast_to(a.astype(np.float32), SHAPE)) & np.isnan(
            np.broadcast_to(b.astype(np.float32), SHAPE))
        any_nan = np.isnan(a.astype(np.float32)) | np.isnan(b.astype(np.float32))
        nan_out = np.isnan(out.astype(np.float32))
        assert np.array_equal(nan_out, any_nan if mode == PROPAGATE else both_nan)


FP_UNARY = [Op.CEIL, Op.FLOOR, Op.EXP, Op.LOG, Op.SIN, Op.COS, Op.RECIPROCAL, Op.RSQRT]


@pytest.mark.parametrize("dtype", FP, ids=lambda t: t.name)
@pytest.mark.parametrize("op", FP_UNARY, ids=lambda o: o.name)
def test_fp_unary_within_bounds(op, dtype):
    rng = _rng(op, dtype)
    lo, hi = (-2, 1.5) if op is Op.EXP else (-3, 3)
    x = fp_values(dtype, (6, 40), rng, lo, hi)
    outs = [TensorType(x.shape, dtype)]
    ours = run_ours(op, [Operand(x, dtype)], None, outs)[0]
    ref = run_op(op, [Operand(x, dtype)], None, outs, precise=True)[0]
    assert_fp_compliant(ours, ref, dtype, op, inputs=[x])
    if op in (Op.CEIL, Op.FLOOR):  # exact operations: same bits as the reference model
        assert_same_bits(ours, run_op(op, [Operand(x, dtype)], None, outs)[0], op.name, nan_equal=True)


@pytest.mark.parametrize("dtype", FP, ids=lambda t: t.name)
def test_fp_abs_negate_exact(dtype):
    rng = _rng("absneg", dtype)
    x = fp_values(dtype, SHAPE, rng)
    _exact(Op.ABS, [Operand(x, dtype)], None, dtype)
    _exact(Op.NEGATE, [Operand(x, dtype), _zp(0, dtype), _zp(0, dtype)], None, dtype)


def test_fp_special_value_tables():
    """The spec's floating-point behaviour tables (signs of zeros and infinities)."""
    x = np.array([-np.inf, np.inf, -0.0, 0.0, np.nan], np.float32)

    def run(op, *extra):
        return run_ours(op, [Operand(x, F32), *extra], None, [TensorType((5,), F32)])[0]

    np.testing.assert_array_equal(run(Op.ABS), [np.inf, np.inf, 0, 0, np.nan])
    assert not np.signbit(run(Op.ABS)[2])
    np.testing.assert_array_equal(run(Op.RECIPROCAL), [-0.0, 0.0, -np.inf, np.inf, np.nan])
    assert np.signbit(run(Op.RECIPROCAL)[0])
    np.testing.assert_array_equal(run(Op.RSQRT)[1:], [0.0, -np.inf, np.inf, np.nan])
    assert np.isnan(run(Op.RSQRT)[0])
    np.testing.assert_array_equal(run(Op.EXP), [0.0, np.inf, 1, 1, np.nan])
    np.testing.assert_array_equal(run(Op.LOG)[1:], [np.inf, -np.inf, -np.inf, np.nan])
    neg = run(Op.NEGATE, _zp(0.0, F32), _zp(0.0, F32))
    np.testing.assert_array_equal(neg, [np.inf, -np.inf, 0, -0.0, np.nan])
    assert not np.signbit(neg[2]) and np.signbit(neg[3])
    assert np.signbit(run(Op.SIN)[2]) and np.signbit(run(Op.CEIL)[2]) and np.signbit(run(Op.FLOOR)[2])


# --------------------------------------------------------------------------- tiling
def _tiling_cases(rng):
    i32a, i32b = int_values(I32, SHAPE, rng, -1000, 1000), int_values(I32, SHAPE_B, rng, 1, 31)
    fa, fb = fp_values(F16, SHAPE, rng), fp_values(F16, SHAPE_B, rng)
    boolc = rng.integers(0, 2, (1, 3, 4, 1)).astype(bool)
    i8 = int_values(I8, SHAPE, rng)
    cases = [(op, [Operand(i32a, I32), Operand(i32b, I32)], None, I32) for op in (
        Op.ADD, Op.SUB, Op.INTDIV, Op.ARITHMETIC_RIGHT_SHIFT, Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT,
        Op.BITWISE_AND, Op.BITWISE_OR, Op.BITWISE_XOR)]
    cases += [(op, [Operand(i32a, I32), Operand(i32b, I32)], make_attribute(op, nan_mode=PROPAGATE), I32)
              for op in (Op.MAXIMUM, Op.MINIMUM)]
    cases += [(op, [Operand(fa, F16), Operand(fb, F16)], None, BOOL) for op in (Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL)]
    cases += [(Op.MUL, [Operand(i32a, I32), Operand(i32b, I32), _shift(3)], None, I32),
              (Op.MUL, [Operand(fa, F16), Operand(fb, F16), _shift(0)], None, F16),
              (Op.POW, [Operand(fp_values(F16, SHAPE, rng, -1, 1, positive=True, specials=[]), F16),
                        Operand(fp_values(F16, SHAPE_B, rng, -1, 0, specials=[]), F16)], None, F16),
              (Op.SELECT, [Operand(boolc, BOOL), Operand(fa, F16), Operand(fb, F16)], None, F16),
              (Op.NEGATE, [Operand(i8, I8), _zp(3, I8), _zp(-2, I8)], None, I8)]
    cases += [(op, [Operand(boolc, BOOL), Operand(np.broadcast_to(boolc, SHAPE).copy(), BOOL)], None, BOOL)
              for op in (Op.LOGICAL_AND, Op.LOGICAL_OR, Op.LOGICAL_XOR)]
    cases += [(op, [Operand(fa, F16)], None, F16) for op in FP_UNARY + [Op.ABS]]
    cases += [(op, [Operand(i32a, I32)], None, I32) for op in (Op.CLZ, Op.BITWISE_NOT, Op.ABS)]
    cases += [(Op.LOGICAL_NOT, [Operand(boolc, BOOL)], None, BOOL)]
    return cases


def test_tiled_execution_matches_whole_tensor():
    rng = _rng("tiling")
    for op, operands, attr, out_dtype in _tiling_cases(rng):
        shape = np.broadcast_shapes(*(np.shape(o.value) for o in operands if np.ndim(o.value) == len(SHAPE)))
        check_tiling(op, operands, attr, [TensorType(tuple(shape), out_dtype)], rng)


def test_tiled_output_has_region_shape():
    from npu_sim.reference import input_window, run_kernel
    from tests.kernel_testing import make_args

    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    b = np.array([[[1, 2, 3, 4]]], np.int32)
    args = make_args(Op.ADD, [Operand(a, I32), Operand(b, I32)], None, [TensorType((2, 3, 4), I32)])
    region = ((1, 2), (0, 2), (1, 3))
    windows = input_window(args, region)
    assert windows == [((1, 2), (0, 2), (1, 3)), ((0, 1), (0, 1), (1, 3))]
    args.inputs = [a[1:2, 0:2, 1:3], b[:, :, 1:3]]
    args.out_region, args.input_offsets = region, [(1, 0, 1), (0, 0, 1)]
    out = run_kernel(args)[0]
    np.testing.assert_array_equal(out, (a + b)[1:2, 0:2, 1:3])


# --------------------------------------------------------------------------- errors
def _raises(op, operands, attr, out_type, match):
    with pytest.raises(TosaRuntimeError, match=match):
        run_ours(op, operands, attr, [out_type])


def test_broadcast_errors():
    a = np.zeros((2, 3), np.int32)
    _raises(Op.ADD, [Operand(a, I32), Operand(np.zeros((3,), np.int32), I32)], None,
            TensorType((2, 3), I32), "rank")
    _raises(Op.ADD, [Operand(a, I32), Operand(np.zeros((2, 2), np.int32), I32)], None,
            TensorType((2, 3), I32), "shape2")
    _raises(Op.ADD, [Operand(a, I32), Operand(a, I32)], None, TensorType((2, 4), I32), "broadcast_shape")
    _raises(Op.SELECT, [Operand(np.zeros((2, 1), bool), BOOL), Operand(a, I32), Operand(a[:1], I32)],
            None, TensorType((1, 3), I32), "broadcast_shape")


def test_unsupported_types_rejected():
    a = np.zeros((2,), np.int8)
    _raises(Op.ADD, [Operand(a, I8), Operand(a, I8)], None, TensorType((2,), I8), "not a supported")
    _raises(Op.CLZ, [Operand(a, I8)], None, TensorType((2,), I8), "not a supported")
    _raises(Op.ADD, [Operand(a.astype(np.int32), I32), Operand(a.astype(np.int32), I32)], None,
            TensorType((2,), I16), "output type")


def test_integer_requires():
    big = np.array([I32_MAX, 1], np.int32)
    one = np.array([1, 1], np.int32)
    t2 = TensorType((2,), I32)
    _raises(Op.ADD, [Operand(big, I32), Operand(one, I32)], None, t2, "apply_add_s")
    _raises(Op.SUB, [Operand(-big - 1, I32), Operand(one, I32)], None, t2, "apply_sub_s")
    _raises(Op.INTDIV, [Operand(big, I32), Operand(np.array([1, 0], np.int32), I32)], None, t2, "value2 != 0")
    _raises(Op.INTDIV, [Operand(np.array([I32_MIN, 1], np.int32), I32), Operand(-one, I32)], None, t2,
            "apply_intdiv_s")
    for op in (Op.ARITHMETIC_RIGHT_SHIFT, Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT):
        _raises(op, [Operand(big, I32), Operand(np.array([32, 0], np.int32), I32)], None, t2, "value2")
        _raises(op, [Operand(big.astype(np.int8), I8), Operand(np.array([8, 0], np.int8), I8)], None,
                TensorType((2,), I8), "value2 <= 7")
        _raises(op, [Operand(big, I32), Operand(np.array([-1, 0], np.int32), I32)], None, t2, "0 <= value2")
    _raises(Op.ABS, [Operand(np.array([I32_MIN, 0], np.int32), I32)], None, t2, "apply_sub_s")
    _raises(Op.NEGATE, [Operand(np.array([I32_MIN, 0], np.int32), I32), _zp(0, I32), _zp(0, I32)], None,
            t2, "apply_sub_s")


def test_mul_requires():
    a = np.array([1 << 20, 3], np.int32)
    t2 = TensorType((2,), I32)
    _raises(Op.MUL, [Operand(a, I32), Operand(a, I32), _shift(64)], None, t2, "shift <= 63")
    _raises(Op.MUL, [Operand(a, I32), Operand(a, I32), _shift(-1)], None, t2, "0 <= shift")
    _raises(Op.MUL, [Operand(a.astype(np.int16), I16), Operand(a.astype(np.int16), I16), _shift(1)], None,
            t2, "shift == 0")
    _raises(Op.MUL, [Operand(a.astype(np.float32), F32), Operand(a.astype(np.float32), F32), _shift(2)], None,
            TensorType((2,), F32), "shift == 0")
    big = np.array([I32_MAX, 1], np.int32)
    _raises(Op.MUL, [Operand(big, I32), Operand(big, I32), _shift(1)], None, t2, "product")


def test_negate_zero_point_errors():
    for dtype in (I16, I32, F32):
        x = np.zeros((2,), dtype.numpy_dtype)
        t = TensorType((2,), dtype)
        _raises(Op.NEGATE, [Operand(x, dtype), _zp(1, dtype), _zp(0, dtype)], None, t, "input1_zp != 0")
        _raises(Op.NEGATE, [Operand(x, dtype), _zp(0, dtype), _zp(1, dtype)], None, t, "output_zp != 0")


def test_pow_requires():
    t = TensorType((2,), F32)
    one = np.ones(2, np.float32)

    def pow_raises(x, y, match):
        _raises(Op.POW, [Operand(np.array(x, np.float32), F32), Operand(np.array(y, np.float32), F32)],
                None, t, match)

    pow_raises([-1.0, 1.0], one, "value1 >= 0")
    pow_raises([0.0, 1.0], [0.0, 1.0], "value1 > 0 || value2 > 0")
    pow_raises([np.nan, 1.0], one, "isNaN")
    pow_raises([np.inf, 1.0], one, "is_finite")
    pow_raises([1.0, 1.0], [1.0, -np.inf], "is_finite")


def test_nan_mode_must_be_set():
    a = np.zeros((2,), np.float32)
    _raises(Op.MAXIMUM, [Operand(a, F32), Operand(a, F32)], make_attribute(Op.MAXIMUM), TensorType((2,), F32),
            "nan_mode")


def test_reference_model_agrees_on_requires():
    """REQUIRE violations the model reports as UNPREDICTABLE (it does not abort on these)."""
    t1 = TensorType((1,), I32)
    i32 = lambda v: Operand(np.array([v], np.int32), I32)  # noqa: E731
    assert_both_refuse(Op.ADD, [i32(I32_MAX), i32(1)], None, [t1], "apply_add_s")
    assert_both_refuse(Op.ABS, [i32(I32_MIN)], None, [t1], "apply_sub_s")
    assert_both_refuse(Op.MUL, [i32(I32_MAX), i32(I32_MAX), _shift(1)], None, [t1], "product")
    f = lambda v: Operand(np.array([v], np.float32), F32)  # noqa: E731
    assert_both_refuse(Op.POW, [f(-2.0), f(2.0)], None, [TensorType((1,), F32)], "value1 >= 0")


@pytest.mark.parametrize("op", [Op.ADD, Op.GREATER, Op.SELECT], ids=lambda o: o.name)
def test_rank0_operands_keep_rank0(op):
    """Rank-0 tensors (e.g. a COND_IF condition) stay rank 0 through elementwise kernels."""
    a, b = np.array(5, np.int32), np.array(-2, np.int32)
    if op is Op.SELECT:
        operands = [Operand(np.array(True), BOOL), Operand(a, I32), Operand(b, I32)]
        out = I32
    else:
        operands = [Operand(a, I32), Operand(b, I32)]
        out = BOOL if op is Op.GREATER else I32
    _exact(op, operands, None, out, shape=())
