"""Numeric helpers shared by the TOSA kernels (TOSA 1.0 spec, pseudocode/library).

Everything here is vectorized numpy and bit-exact:

* ``apply_scale_32`` / ``apply_scale_16`` (scale_helpers.tosac) with their REQUIREs;
* integer ranges, saturation, two's-complement wrapping and rounding right shifts;
* ``round_to_float``: correctly rounded (ties-to-even) conversion of fp64 values to any
  TOSA float type (ml_dtypes alone rounds fp64 -> bf16/fp8 twice, via fp32);
* ``decode_scalar`` for attributes stored as raw bytes (CLAMP's min/max).

Helpers that check a REQUIRE take ``require(ok, condition)``; kernels pass
``args.require`` so the error names the operator. Without it the error names the helper.
"""

from __future__ import annotations

from typing import Callable

import ml_dtypes
import numpy as np

from npu_sim.errors import TosaRuntimeError
from npu_sim.tosa.dtype import DType, decode

Require = Callable[[bool, str], None]

_INT64_LIMIT = 1 << 63


def _requirer(helper: str, require: Require | None) -> Require:
    if require is not None:
        return require

    def check(ok: bool, condition: str) -> None:
        if not ok:
            raise TosaRuntimeError(helper, condition)

    return check


# --------------------------------------------------------------------------- integer ranges
def signed_range(dtype: DType) -> tuple[int, int]:
    """Inclusive (minimum_s, maximum_s) of an integer type (INT4 is [-8, 7] as stored)."""
    if dtype is DType.BOOL:
        return 0, 1
    return dtype.int_range


def unsigned_range(dtype: DType) -> tuple[int, int]:
    """Inclusive (minimum_u, maximum_u): [0, 2**bits - 1]."""
    return 0, (1 << dtype.bits) - 1


def all_in_range(values: np.ndarray, lo: int, hi: int) -> bool:
    """True when every element of ``values`` lies in [lo, hi] (empty arrays are in range)."""
    values = np.asarray(values)
    if values.size == 0:
        return True
    return bool(values.min() >= lo) and bool(values.max() <= hi)


def saturate(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Clip integer ``values`` to the signed range of ``dtype``, as its storage dtype."""
    lo, hi = signed_range(dtype)
    return np.clip(values, lo, hi).astype(dtype.numpy_dtype)


def wrap(values: np.ndarray, bits: int) -> np.ndarray:
    """Two's-complement wrap of int64 ``values`` to ``bits`` bits (the spec's truncate)."""
    values = np.asarray(values, dtype=np.int64)
    if bits >= 64:
        return values
    mask = np.int64((1 << bits) - 1)
    low = values & mask
    sign = np.int64(1 << (bits - 1))
    return (low ^ sign) - sign


def to_signed(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Integer ``values`` truncated to ``dtype`` (wrapping) in its storage dtype."""
    if dtype is DType.BOOL:
        return np.asarray(values) != 0
    return wrap(values, dtype.bits).astype(dtype.numpy_dtype)


def rounding_right_shift(values: np.ndarray, shift: np.ndarray | int) -> np.ndarray:
    """``(values + (1 << (shift - 1))) >> shift`` for shift > 0, ``values`` for shift == 0.

    Arithmetic (flooring) shift of int64 values; rounds half up, as the spec's
    ``round = 1 << (shift - 1)`` idiom does. The caller guarantees no int64 overflow.
    """
    values = np.asarray(values, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    half = np.where(shift > 0, np.left_shift(np.int64(1), np.maximum(shift - 1, 0)), 0)
    return (values + half) >> shift


def count_leading_zeros_32(values: np.ndarray) -> np.ndarray:
    """count_leading_zeros of int32 values (32 for zero), as int32."""
    u = np.asarray(values).astype(np.int64) & 0xFFFFFFFF
    n = np.zeros(u.shape, dtype=np.int32)
    for step in (16, 8, 4, 2, 1):
        top_zero = (u >> (32 - step)) == 0
        n += np.where(top_zero, step, 0).astype(np.int32)
        u = np.where(top_zero, (u << step) & 0xFFFFFFFF, u)
    n += (u == 0).astype(np.int32)  # only zero reaches here with u == 0
    return n


# --------------------------------------------------------------------------- exact scaling
def _max_abs(a: np.ndarray) -> int:
    if a.size == 0:
        return 0
    return max(abs(int(a.min())), abs(int(a.max())))


def mul_add_shift(value: np.ndarray, multiplier: np.ndarray, add: np.ndarray,
                  shift: np.ndarray) -> np.ndarray:
    """Exact ``(value * multiplier + add) >> shift`` (floor) for integer arrays, as int64.

    Uses int64 when the magnitudes prove there is no overflow (always, for
    in-spec TOSA operands) and falls back to Python integers otherwise. The result
    must fit int64 (callers REQUIRE much narrower ranges).
    """
    value, multiplier, add, shift = np.broadcast_arrays(
        *(np.asarray(x, dtype=np.int64) for x in (value, multiplier, add, shift)))
    if _max_abs(value) * _max_abs(multiplier) + _max_abs(add) < _INT64_LIMIT:
        return (value * multiplier + add) >> shift
    big = (value.astype(object) * multiplier.astype(object) + add.astype(object)) >> shift.astype(object)
    return np.asarray(big, dtype=object)


def _scale_operands(helper: str, req: Require, value: np.ndarray, multiplier: np.ndarray,
                    shift: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The operands of apply_scale_32/16 as int64 arrays; REQUIRE multiplier >= 0, 2 <= shift <= 62."""
    value = np.asarray(value, dtype=np.int64)
    multiplier = np.asarray(multiplier, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    req(bool(np.all(multiplier >= 0)), f"{helper}: REQUIRE(multiplier >= 0)")
    req(bool(np.all((shift >= 2) & (shift <= 62))), f"{helper}: REQUIRE(2 <= shift && shift <= 62)")
    return value, multiplier, shift


def apply_scale_32(value: np.ndarray, multiplier: np.ndarray, shift: np.ndarray,
                   double_round: bool = False, require: Require | None = None) -> np.ndarray:
    """The spec's ``apply_scale_32`` on arrays (broadcast together); returns int32.

    REQUIREs: multiplier >= 0, 2 <= shift <= 62, value in [-(1 << (shift-1)), 1 << (shift-1))
    and value representable as int32_t (the helper's parameter type).
    """
    req = _requirer("apply_scale_32", require)
    value, multiplier, shift = _scale_operands("apply_scale_32", req, value, multiplier, shift)
    req(all_in_range(value, -(1 << 31), (1 << 31) - 1), "apply_scale_32: value must fit int32_t")
    limit = np.left_shift(np.int64(1), shift - 1)
    req(bool(np.all((value >= -limit) & (value < limit))),
        "apply_scale_32: REQUIRE(value >= (-1 << (shift - 1)) && value < (1 << (shift - 1)))")
    round_ = limit
    if double_round:
        adjust = np.where(value >= 0, np.int64(1 << 30), np.int64(-(1 << 30)))
        round_ = round_ + np.where(shift > 31, adjust, np.int64(0))
    result = mul_add_shift(value, multiplier, round_, shift)
    return np.asarray(result).astype(np.int64).astype(np.int32)


def apply_scale_16(value: np.ndarray, multiplier: np.ndarray, shift: np.ndarray,
                   require: Require | None = None) -> np.ndarray:
    """The spec's ``apply_scale_16`` (int48 value, int16 multiplier); returns int32.

    REQUIREs: multiplier >= 0, 2 <= shift <= 62, result in the int32 range.
    """
    req = _requirer("apply_scale_16", require)
    value, multiplier, shift = _scale_operands("apply_scale_16", req, value, multiplier, shift)
    round_ = np.left_shift(np.int64(1), shift - 1)
    result = np.asarray(mul_add_shift(value, multiplier, round_, shift))
    req(all_in_range(result, -(1 << 31), (1 << 31) - 1),
        "apply_scale_16: REQUIRE(result >= minimum<int32_t> && result <= maximum<int32_t>)")
    return result.astype(np.int64).astype(np.int32)


# --------------------------------------------------------------------------- floating point
FLOAT_TYPES = (DType.FP32, DType.FP16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2)


def is_float(dtype: DType) -> bool:
    """is_floating_point<> of the spec (the TOSA 1.0 float types)."""
    return dtype in FLOAT_TYPES


def _round_to_odd_fp32(x: np.ndarray) -> np.ndarray:
    """fp64 -> fp32 rounding to odd: truncate toward zero, then set the last bit if inexact.

    Rounding to odd first and then to nearest-even in a format at least two bits
    narrower gives the correctly rounded result (no double-rounding error).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        y = x.astype(np.float32)
        overshot = np.abs(y.astype(np.float64)) > np.abs(x)
        y = np.where(overshot, np.nextafter(y, np.float32(0)), y).astype(np.float32)
        inexact = (y.astype(np.float64) != x) & ~np.isnan(x)
    bits = y.view(np.uint32) | inexact.astype(np.uint32)
    return bits.view(np.float32)


_EXACT_IN_FP32 = {np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16),
                  np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)}


def round_to_float(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Round real ``values`` (fp64 or narrower) to ``dtype`` with round-to-nearest-even.

    Overflow gives infinity of the right sign, or NaN for FP8E4M3 (no infinity);
    subnormals are kept (TOSA allows flushing, we do not flush). NaN stays NaN.
    """
    x = np.asarray(values)
    if x.dtype == dtype.numpy_dtype:
        return x
    if x.dtype in _EXACT_IN_FP32:
        # Exact in fp32, then one rounding (numpy and ml_dtypes round to nearest even).
        with np.errstate(over="ignore", invalid="ignore"):
            return x.astype(np.float32).astype(dtype.numpy_dtype)
    if x.dtype != np.float64:
        x = x.astype(np.float64)
    if dtype is DType.FP32:
        with np.errstate(over="ignore"):
            return x.astype(np.float32)
    if dtype is DType.FP16:
        with np.errstate(over="ignore"):
            return x.astype(np.float16)
    if dtype in (DType.BF16, DType.FP8E4M3, DType.FP8E5M2):
        with np.errstate(over="ignore", invalid="ignore"):
            return _round_to_odd_fp32(x).astype(dtype.numpy_dtype)
    raise ValueError(f"{dtype.name} is not a TOSA floating-point type")


# --------------------------------------------------------------------------- attributes
def decode_scalar(raw: bytes, dtype: DType) -> np.generic:
    """One value of ``dtype`` from its little-endian attribute bytes (CLAMP min/max)."""
    need = dtype.nbytes(1)
    if len(raw) < need:
        raise TosaRuntimeError("decode_scalar", f"{dtype.name} attribute needs {need} bytes, got {len(raw)}")
    return decode(bytes(raw[:need]), dtype, (1,))[0]


__all__ = [
    "FLOAT_TYPES", "Require", "all_in_range", "apply_scale_16", "apply_scale_32",
    "count_leading_zeros_32", "decode_scalar", "is_float",
    "mul_add_shift", "round_to_float", "rounding_right_shift", "saturate", "signed_range",
    "to_signed", "unsigned_range", "wrap",
]
