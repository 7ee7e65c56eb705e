"""Numeric helpers against independent exact computations (Python integers, value tables)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError
from npu_sim.reference.numerics import (
    apply_scale_16,
    apply_scale_32,
    count_leading_zeros_32,
    decode_scalar,
    mul_add_shift,
    round_to_float,
    rounding_right_shift,
    saturate,
    to_signed,
    wrap,
)
from npu_sim.tosa.dtype import DType, encode

RNG = np.random.default_rng(20240601)


def _scale32_exact(v: int, m: int, s: int, double_round: bool) -> int:
    """apply_scale_32 written out with Python integers, straight from scale_helpers.tosac."""
    r = 1 << (s - 1)
    if double_round and s > 31:
        r += (1 << 30) if v >= 0 else -(1 << 30)
    return (v * m + r) >> s


@pytest.mark.parametrize("double_round", [False, True])
def test_apply_scale_32_matches_exact_integers(double_round):
    n = 4000
    shift = RNG.integers(2, 63, n)
    limit = np.minimum(1 << (shift - 1), 1 << 31)
    value = (RNG.random(n) * 2 * limit - limit).astype(np.int64)
    value = np.clip(value, -limit, limit - 1)
    value[:4] = [-limit[0], limit[1] - 1, 0, -1]
    mult = RNG.integers(0, 1 << 31, n)
    mult[:3] = [0, (1 << 31) - 1, 1 << 30]
    ours = apply_scale_32(value, mult, shift, double_round)
    assert ours.dtype == np.int32
    expected = [_scale32_exact(int(v), int(m), int(s), double_round) for v, m, s in zip(value, mult, shift)]
    assert ours.tolist() == expected


def test_apply_scale_32_broadcasts_per_channel():
    value = np.arange(-6, 6, dtype=np.int64).reshape(4, 3)
    mult = np.array([1 << 30, 3 << 29, 1 << 29])
    shift = np.array([30, 31, 32])
    ours = apply_scale_32(value, mult, shift)
    expected = [[_scale32_exact(int(v), int(mult[c]), int(shift[c]), False) for c, v in enumerate(row)]
                for row in value]
    assert ours.tolist() == expected


@pytest.mark.parametrize("value,mult,shift,match", [
    (1, -1, 30, "multiplier >= 0"),
    (1, 1, 1, "2 <= shift"),
    (1, 1, 63, "2 <= shift"),
    (4, 1, 3, r"value < \(1 << \(shift - 1\)\)"),
    (-5, 1, 3, r"value >= \(-1 << \(shift - 1\)\)"),
    (1 << 31, 1, 40, "int32"),
])
def test_apply_scale_32_requires(value, mult, shift, match):
    with pytest.raises(TosaRuntimeError, match=match):
        apply_scale_32(np.array([value]), np.array([mult]), np.array([shift]))


def test_apply_scale_16_matches_exact_integers_for_int48():
    n = 3000
    shift = RNG.integers(31, 63, n)
    value = RNG.integers(-(1 << 47), 1 << 47, n)
    value[:2] = [-(1 << 47), (1 << 47) - 1]
    mult = RNG.integers(0, 1 << 15, n)
    mult[:2] = (1 << 15) - 1
    ours = apply_scale_16(value, mult, shift)
    expected = [(int(v) * int(m) + (1 << (int(s) - 1))) >> int(s) for v, m, s in zip(value, mult, shift)]
    assert ours.tolist() == expected


def test_apply_scale_16_requires():
    with pytest.raises(TosaRuntimeError, match="result"):
        apply_scale_16(np.array([1 << 40]), np.array([1 << 14]), np.array([10]))
    with pytest.raises(TosaRuntimeError, match="multiplier >= 0"):
        apply_scale_16(np.array([1]), np.array([-1]), np.array([10]))
    with pytest.raises(TosaRuntimeError, match="2 <= shift"):
        apply_scale_16(np.array([1]), np.array([1]), np.array([0]))


def test_require_callback_names_the_operator():
    seen = []

    def require(ok, condition):
        if not ok:
            seen.append(condition)
            raise TosaRuntimeError("RESCALE(out)", condition)

    with pytest.raises(TosaRuntimeError, match=r"^RESCALE\(out\): apply_scale_32"):
        apply_scale_32(np.array([1]), np.array([1]), np.array([1]), require=require)
    assert seen and "shift" in seen[0]


def test_mul_add_shift_exact_beyond_int64():
    value = np.array([(1 << 62) + 12345, -(1 << 62) - 7, 3])
    mult = np.array([(1 << 40) + 3, (1 << 33) + 1, 5])
    add = np.array([1 << 61, -(1 << 20), 1])
    shift = np.array([62, 50, 1])
    ours = mul_add_shift(value, mult, add, shift)
    expected = [(int(v) * int(m) + int(a)) >> int(s) for v, m, a, s in zip(value, mult, add, shift)]
    assert [int(x) for x in ours] == expected


def test_integer_helpers():
    x = np.array([127, 128, -129, 255, -1, 1 << 40], np.int64)
    assert wrap(x, 8).tolist() == [127, -128, 127, -1, -1, 0]
    assert to_signed(x, DType.INT16).tolist() == [127, 128, -129, 255, -1, 0]
    assert saturate(x, DType.INT8).tolist() == [127, 127, -128, 127, -1, 127]
    assert rounding_right_shift(np.array([5, -5, 6, -6, 7]), np.array([1, 1, 2, 2, 0])).tolist() == [3, -2, 2, -1, 7]


def test_count_leading_zeros_32_matches_bit_length():
    x = np.concatenate([RNG.integers(-(1 << 31), 1 << 31, 2000), [0, 1, -1, (1 << 31) - 1, -(1 << 31)],
                        [1 << k for k in range(31)]]).astype(np.int32)
    expected = [32 - (int(v) & 0xFFFFFFFF).bit_length() for v in x]
    assert count_leading_zeros_32(x).tolist() == expected


# --------------------------------------------------------------------------- rounding to floats
def _all_finite_values(dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    """Every finite value of an 8/16-bit float type (sorted, -0 dropped) with its bit pattern."""
    width = np.uint8 if dtype.numpy_dtype.itemsize == 1 else np.uint16
    bits = np.arange(1 << (8 * np.dtype(width).itemsize), dtype=np.int64).astype(width)
    with np.errstate(invalid="ignore"):
        values = bits.view(dtype.numpy_dtype).astype(np.float64)
    keep = np.isfinite(values) & ~((values == 0) & np.signbit(values))
    order = np.argsort(values[keep], kind="stable")
    return values[keep][order], bits[keep][order].astype(np.int64)


def _exact_round(x: np.ndarray, dtype: DType) -> np.ndarray:
    """Round to nearest, ties to the even bit pattern, by search in the table of all values."""
    values, bits = _all_finite_values(dtype)
    top, step = values[-1], values[-1] - values[-2]
    hi_idx = np.clip(np.searchsorted(values, x), 1, len(values) - 1)
    lo_v, hi_v = values[hi_idx - 1], values[hi_idx]
    pick_hi = (hi_v - x < x - lo_v) | ((hi_v - x == x - lo_v) & (bits[hi_idx] % 2 == 0))
    out = np.where(pick_hi, hi_v, lo_v)
    overflow_value = np.nan if dtype is DType.FP8E4M3 else np.inf
    # past the largest value: the next (virtual) value is max + step, and it has odd parity
    # except for fp8e4m3, whose max (1.75 * 2**8) has an even mantissa
    over_tie = x == top + step / 2
    over = (x > top + step / 2) | (over_tie & (dtype is not DType.FP8E4M3))
    out = np.where(over, overflow_value, out)
    out = np.where(-x > top + step / 2, -overflow_value, out)
    out = np.where(-x == top + step / 2, -overflow_value if dtype is not DType.FP8E4M3 else -top, out)
    return out


@pytest.mark.parametrize("dtype", [DType.FP16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2], ids=lambda t: t.name)
def test_round_to_float_is_correctly_rounded_from_fp64(dtype):
    values, _ = _all_finite_values(dtype)
    mids = (values[1:] + values[:-1]) / 2  # exact ties
    near = np.concatenate([mids * (1 + 2.0**-40), mids * (1 - 2.0**-40), mids])
    top = values[-1]
    step = values[-1] - values[-2]
    extra = np.array([top + step / 2, top + step / 2 * (1 - 2.0**-30), top * 4, 1e300, 0.0, 5e-324])
    x = np.concatenate([near, RNG.standard_normal(2000) * 10.0 ** RNG.uniform(-8, 6, 2000), extra, -extra])
    x = x[np.abs(x) < 1e308]
    ours = round_to_float(x, dtype).astype(np.float64)
    expected = _exact_round(x, dtype)
    same = (ours == expected) | (np.isnan(ours) & np.isnan(expected))
    assert np.all(same), (x[~same][:5], ours[~same][:5], expected[~same][:5])


def test_round_to_float_fp32_and_passthrough():
    x = np.array([1 + 2.0**-24, 1 + 3 * 2.0**-24, 1e39, -1e39, np.nan])
    out = round_to_float(x, DType.FP32)
    assert out.dtype == np.float32
    assert out[:4].tolist() == [1.0, 1 + 2.0**-22, np.inf, -np.inf] and np.isnan(out[4])
    bf = np.array([1.5], ml_dtypes.bfloat16)
    assert round_to_float(bf, DType.BF16) is bf
    assert round_to_float(bf, DType.FP8E5M2).dtype == ml_dtypes.float8_e5m2


def test_decode_scalar():
    for dtype, value in [(DType.INT8, -5), (DType.INT16, -30000), (DType.INT32, 1 << 30),
                         (DType.FP16, 1.5), (DType.BF16, -2.5), (DType.FP32, 3.25)]:
        raw = encode(np.array([value], dtype.numpy_dtype), dtype) + b"\0" * 7
        got = decode_scalar(raw, dtype)
        assert got.dtype == dtype.numpy_dtype and float(got) == value
    with pytest.raises(TosaRuntimeError, match="needs 4 bytes"):
        decode_scalar(b"\0\0", DType.FP32)


def test_apply_scale_32_per_channel_value_require_is_per_channel():
    """Values beyond the smallest channel's limit are fine on channels with larger shifts."""
    mult, shift = np.array([1 << 30, 1 << 30]), np.array([3, 40])
    value = np.array([[-4, 1 << 30], [3, -(1 << 31)]], np.int64)
    ours = apply_scale_32(value, mult, shift, True)
    assert ours.tolist() == [[_scale32_exact(int(v), int(mult[c]), int(shift[c]), True) for c, v in enumerate(row)]
                             for row in value]
    with pytest.raises(TosaRuntimeError, match=r"value < \(1 << \(shift - 1\)\)"):
        apply_scale_32(np.array([[4, 0]]), mult, shift)


def test_apply_scale_32_value_range_hint_does_not_replace_the_checks():
    """A priori bounds too wide to prove the REQUIRE: the values are checked instead."""
    int32_range = (-(1 << 31), (1 << 31) - 1)
    assert apply_scale_32(np.array([3, -4]), np.array(1 << 30), np.array(3), value_range=int32_range).tolist() \
        == [_scale32_exact(v, 1 << 30, 3, False) for v in (3, -4)]
    with pytest.raises(TosaRuntimeError, match=r"value < \(1 << \(shift - 1\)\)"):
        apply_scale_32(np.array([4]), np.array(1 << 30), np.array(3), value_range=int32_range)


@pytest.mark.parametrize("per_channel", [False, True])
def test_apply_scale_32_exact_when_int64_would_overflow(per_channel):
    """The helper accepts int64 multipliers: products beyond int64 are computed exactly."""
    value = np.array([3, -(1 << 31), (1 << 31) - 1])
    mult, shift = (np.array([(1 << 62) + 5] * 3), np.array([62] * 3)) if per_channel else \
        (np.array((1 << 62) + 5), np.array(62))
    for double_round in (False, True):
        ours = apply_scale_32(value, mult, shift, double_round)
        expected = [_scale32_exact(int(v), (1 << 62) + 5, 62, double_round) for v in value]
        assert ours.tolist() == (np.array(expected, dtype=np.int64).astype(np.int32)).tolist()


def test_apply_scale_32_broadcasts_all_operands_with_mixed_double_round_shifts():
    value = np.arange(-6, 6, 3).reshape(4, 1)
    mult, shift = np.array([[1 << 30, 3 << 29, (1 << 31) - 1]]), np.array([12, 33, 40])
    ours = apply_scale_32(value, mult, shift, True)
    assert ours.tolist() == [[_scale32_exact(int(v), int(mult[0, c]), int(shift[c]), True) for c in range(3)]
                             for v in value[:, 0]]
