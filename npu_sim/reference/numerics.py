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

from collections.abc import Callable
from typing import Any

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
#: signed_range of the integer types, computed once
_SIGNED_RANGES: dict[DType, tuple[int, int]] = {
    t: t.int_range for t in (DType.INT4, DType.INT8, DType.INT16, DType.INT32, DType.INT48, DType.INT64)}


def signed_range(dtype: DType) -> tuple[int, int]:
    """Inclusive (minimum_s, maximum_s) of an integer type (INT4 is [-8, 7] as stored)."""
    known = _SIGNED_RANGES.get(dtype)
    if known is not None:
        return known
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
    return np.asarray((low ^ sign) - sign)   # (a rank-0 array's arithmetic gives a numpy scalar)


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
    """count_leading_zeros of int32 values (32 for zero), as int32.

    32 minus the bit length of the unsigned 32-bit pattern; frexp's exponent is that
    bit length (exact: every 32-bit integer is an fp64 value; frexp(0) gives 0).
    """
    u = np.asarray(values).astype(np.int64) & 0xFFFFFFFF
    return (32 - np.frexp(u.astype(np.float64))[1]).astype(np.int32)


# --------------------------------------------------------------------------- exact scaling
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_ROUND_30 = 1 << 30


def _max_abs(a: np.ndarray) -> int:
    if a.size == 0:
        return 0
    return max(abs(int(a.min())), abs(int(a.max())))


def _min_max(a: np.ndarray) -> tuple[int, int]:
    """(min, max) of a non-empty integer array as Python ints."""
    if a.size == 1:
        v = int(a.reshape(-1)[0])
        return v, v
    return int(a.min()), int(a.max())


_INT_BOUNDS: dict[np.dtype, tuple[int, int]] = {
    np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max))
    for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
}


def int_bounds(dtype: np.dtype) -> tuple[int, int] | None:
    """(min, max) of a numpy integer dtype (computed once, unlike ``np.iinfo``); None otherwise."""
    return _INT_BOUNDS.get(dtype)


def clip_int(values: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """``np.clip(values, lo, hi)`` for integer arrays and int bounds (a new array).

    Bounds the array's dtype holds are passed as numpy scalars of that dtype, which
    skips np.clip's per-call ``iinfo`` look-ups for Python ints; the result is the same.
    """
    values = np.asarray(values)
    known = _INT_BOUNDS.get(values.dtype)
    if known is not None and known[0] <= lo and hi <= known[1]:
        scalar = values.dtype.type
        return values.clip(scalar(lo), scalar(hi))
    return np.clip(values, lo, hi)


def mul_add_shift(value: np.ndarray | int, multiplier: np.ndarray | int, add: np.ndarray | int,
                  shift: np.ndarray | int) -> np.ndarray:
    """Exact ``(value * multiplier + add) >> shift`` (floor) for integer arrays, as int64.

    Uses int64 when the magnitudes prove there is no overflow (always, for
    in-spec TOSA operands) and falls back to Python integers otherwise. The result
    must fit int64 (callers REQUIRE much narrower ranges).
    """
    value, multiplier, add, shift = (np.asarray(x, dtype=np.int64) for x in (value, multiplier, add, shift))
    if _max_abs(value) * _max_abs(multiplier) + _max_abs(add) < _INT64_LIMIT:
        # numpy broadcasting gives the shape broadcast_arrays would
        return (value * multiplier + add) >> shift
    value, multiplier, add, shift = np.broadcast_arrays(value, multiplier, add, shift)
    big = (value.astype(object) * multiplier.astype(object) + add.astype(object)) >> shift.astype(object)
    return np.asarray(big, dtype=object)


def uniform_scale(ndim: int, multiplier: np.ndarray, shift: np.ndarray) -> tuple[int, int] | None:
    """(multiplier, shift) as Python ints when one scale applies to every element of a value of
    rank ``ndim``.

    That is when both are signed-integer arrays (exact as int64) of one element
    whose broadcasting leaves the value's shape.
    """
    if (multiplier.size == 1 and shift.size == 1 and multiplier.ndim <= ndim and shift.ndim <= ndim
            and multiplier.dtype.kind == "i" and shift.dtype.kind == "i"):
        return int(multiplier.item()), int(shift.item())
    return None


def _scale_operands(helper: str, req: Require, value: np.ndarray, multiplier: np.ndarray,
                    shift: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The operands of apply_scale_32/16 as int64 arrays; REQUIRE multiplier >= 0, 2 <= shift <= 62."""
    value = np.asarray(value, dtype=np.int64)
    multiplier = np.asarray(multiplier, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    req(multiplier.size == 0 or _min_max(multiplier)[0] >= 0, f"{helper}: REQUIRE(multiplier >= 0)")
    smin, smax = _min_max(shift) if shift.size else (2, 62)
    req(smin >= 2 and smax <= 62, f"{helper}: REQUIRE(2 <= shift && shift <= 62)")
    return value, multiplier, shift


class _ValueRange:
    """Bounds on the elements of ``value``: a priori ones if given, else (lazily) the exact ones.

    ``holds(lo, hi)`` is True when every element lies in [lo, hi]. A priori bounds
    (e.g. from the storage dtype) prove it without reading the values; when they
    do not, the exact minimum and maximum decide.
    """

    def __init__(self, value: np.ndarray, a_priori: tuple[int, int] | None):
        self.value = value
        self.exact = a_priori is None
        self.lo, self.hi = a_priori if a_priori is not None else self._scan()

    def _scan(self) -> tuple[int, int]:
        return _min_max(self.value) if self.value.size else (0, 0)  # empty: any range holds

    def holds(self, lo: int, hi: int) -> bool:
        if lo <= self.lo and self.hi <= hi:
            return True
        if not self.exact:
            self.lo, self.hi = self._scan()
            self.exact = True
            return lo <= self.lo and self.hi <= hi
        return False


def apply_scale_32(value: np.ndarray, multiplier: np.ndarray, shift: np.ndarray,
                   double_round: bool = False, require: Require | None = None,
                   value_range: tuple[int, int] | None = None) -> np.ndarray:
    """The spec's ``apply_scale_32`` on arrays (broadcast together); returns int32.

    REQUIREs: multiplier >= 0, 2 <= shift <= 62, value in [-(1 << (shift-1)), 1 << (shift-1))
    and value representable as int32_t (the helper's parameter type).
    ``value_range``: optional (lo, hi) known to bound every element of ``value`` (say, from
    its storage type); the REQUIREs are then proven from it when they can be, without
    reading the values, and checked on the values when they cannot.
    """
    req = _requirer("apply_scale_32", require)
    value = np.asarray(value, dtype=np.int64)
    uniform = uniform_scale(value.ndim, np.asarray(multiplier), np.asarray(shift))
    if uniform is None:
        return _apply_scale_32_arrays(req, value, multiplier, shift, double_round, value_range)
    return apply_scale_32_uniform(value, uniform[0], uniform[1], double_round, req, value_range)


def apply_scale_32_uniform(value: np.ndarray, m: int, s: int, double_round: bool, req: Require,
                           value_range: tuple[int, int] | None) -> np.ndarray:
    """:func:`apply_scale_32` of an int64 ``value`` with one multiplier and shift for every
    element: the REQUIREs and the rounding term are Python ints."""
    helper = "apply_scale_32"
    req(m >= 0, f"{helper}: REQUIRE(multiplier >= 0)")
    req(2 <= s <= 62, f"{helper}: REQUIRE(2 <= shift && shift <= 62)")
    bounds = _ValueRange(value, value_range)
    req(bounds.holds(_INT32_MIN, _INT32_MAX), "apply_scale_32: value must fit int32_t")
    limit = 1 << (s - 1)
    req(bounds.holds(-limit, limit - 1),
        "apply_scale_32: REQUIRE(value >= (-1 << (shift - 1)) && value < (1 << (shift - 1)))")
    round_: int | np.ndarray = limit
    straddles = double_round and s > 31 and bounds.lo < 0 <= bounds.hi
    if double_round and s > 31 and not straddles:
        round_ = limit + (_ROUND_30 if bounds.lo >= 0 else -_ROUND_30)
    if max(-bounds.lo, bounds.hi) * m + limit + _ROUND_30 < _INT64_LIMIT:  # no int64 overflow
        # (value * m + round) >> s, in place; a DOUBLE_ROUND over both signs rounds by
        # limit + (1 << 30) where value >= 0, 1 << 31 less where it is negative
        acc = value * m
        if straddles:
            acc += limit + _ROUND_30
            negative = value >> 63   # -1 where value < 0, else 0
            negative <<= 31
            acc += negative
        else:
            acc += round_
        acc >>= s
        return acc.astype(np.int32)
    if straddles:
        round_ = np.where(value >= 0, limit + _ROUND_30, limit - _ROUND_30)  # int64
    result = mul_add_shift(value, m, round_, s)
    return np.asarray(result).astype(np.int64).astype(np.int32)


def _broadcasts_into(shape: tuple[int, ...], part: tuple[int, ...]) -> bool:
    """True when an array of shape ``part`` broadcasts to ``shape`` (so in-place updates work)."""
    return len(part) <= len(shape) and all(p == 1 or p == d for p, d in zip(reversed(part), reversed(shape)))


#: Indexed by a (REQUIRE-checked) shift in [2, 62]: the rounding term 1 << (shift - 1); for
#: DOUBLE_ROUND its value for value >= 0, (1 << (shift - 1)) + (shift > 31 ? 1 << 30 : 0), and
#: the mask (all ones or zero) of the shifts where negative values take 1 << 31 less.
_ROUND_BY_SHIFT = np.array([(1 << (s - 1)) if s else 0 for s in range(63)], dtype=np.int64)
_DOUBLE_ROUND_BY_SHIFT = np.array(
    [((1 << (s - 1)) if s else 0) + (_ROUND_30 if s > 31 else 0) for s in range(63)], dtype=np.int64)
_DOUBLE_ROUND_MASK_BY_SHIFT = np.array([-1 if s > 31 else 0 for s in range(63)], dtype=np.int64)


def _apply_scale_32_arrays(req: Require, value: np.ndarray, multiplier: np.ndarray, shift: np.ndarray,
                           double_round: bool, value_range: tuple[int, int] | None) -> np.ndarray:
    """apply_scale_32 with per-element (e.g. per-channel) multipliers and shifts."""
    helper = "apply_scale_32"
    multiplier = np.asarray(multiplier)
    if multiplier.dtype.kind != "i":
        multiplier = multiplier.astype(np.int64)
    shift = np.asarray(shift)
    if shift.dtype.kind != "i":
        shift = shift.astype(np.int64)
    mmin, mmax = _min_max(multiplier) if multiplier.size else (0, 0)
    req(mmin >= 0, f"{helper}: REQUIRE(multiplier >= 0)")
    smin, smax = _min_max(shift) if shift.size else (2, 62)
    req(smin >= 2 and smax <= 62, f"{helper}: REQUIRE(2 <= shift && shift <= 62)")
    bounds = _ValueRange(value, value_range)
    req(bounds.holds(_INT32_MIN, _INT32_MAX), "apply_scale_32: value must fit int32_t")
    # value within the smallest limit proves the elementwise REQUIRE; otherwise test each element
    smallest = 1 << (smin - 1) if shift.size else 0
    if not bounds.holds(-smallest, smallest - 1):
        limit = _ROUND_BY_SHIFT[shift]
        req(bool(np.all((value >= -limit) & (value < limit))),
            "apply_scale_32: REQUIRE(value >= (-1 << (shift - 1)) && value < (1 << (shift - 1)))")
    dround = double_round and shift.size > 0 and smax > 31
    acc = value * multiplier  # int64 (value is)
    if (max(-bounds.lo, bounds.hi) * mmax + (1 << (smax - 1)) + _ROUND_30 < _INT64_LIMIT
            and _broadcasts_into(acc.shape, shift.shape)):
        # No int64 overflow: (value * multiplier + round) >> shift, updated in place.
        if dround:  # round = limit + (value >= 0 ? 1 << 30 : -(1 << 30)) where shift > 31
            acc += _DOUBLE_ROUND_BY_SHIFT[shift]
            negative = value >> 63            # -1 where value < 0, else 0
            negative <<= 31                   # -(1 << 31) where value < 0
            if smin <= 31:  # only where shift > 31 (may broadcast beyond value's shape)
                negative = negative & _DOUBLE_ROUND_MASK_BY_SHIFT[shift]
            acc += negative
        else:
            acc += _ROUND_BY_SHIFT[shift]
        acc >>= shift
        return acc.astype(np.int32)
    round_ = np.left_shift(np.int64(1), shift.astype(np.int64) - 1)
    if dround:
        adjust = np.where(value >= 0, _ROUND_30, -_ROUND_30)
        round_ = round_ + np.where(shift > 31, adjust, 0)
    result = mul_add_shift(value, multiplier, round_, shift)
    return np.asarray(result).astype(np.int64).astype(np.int32)


def apply_scale_16(value: np.ndarray, multiplier: np.ndarray, shift: np.ndarray,
                   require: Require | None = None) -> np.ndarray:
    """The spec's ``apply_scale_16`` (int48 value, int16 multiplier); returns int32.

    REQUIREs: multiplier >= 0, 2 <= shift <= 62, result in the int32 range.
    """
    helper = "apply_scale_16"
    req = _requirer(helper, require)
    value = np.asarray(value, dtype=np.int64)
    uniform = uniform_scale(value.ndim, np.asarray(multiplier), np.asarray(shift))
    if uniform is not None:
        m, s = uniform
        req(m >= 0, f"{helper}: REQUIRE(multiplier >= 0)")
        req(2 <= s <= 62, f"{helper}: REQUIRE(2 <= shift && shift <= 62)")
        limit = 1 << (s - 1)
        if _max_abs(value) * m + limit < _INT64_LIMIT:
            result = (value * m + limit) >> s
        else:
            result = np.asarray(mul_add_shift(value, m, limit, s))
    else:
        value, multiplier, shift = _scale_operands(helper, req, value, multiplier, shift)
        round_ = np.left_shift(np.int64(1), shift - 1)
        result = np.asarray(mul_add_shift(value, multiplier, round_, shift))
    req(all_in_range(result, _INT32_MIN, _INT32_MAX),
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
    with np.errstate(over="ignore", invalid="ignore"):
        return round_to_float_quietly(x, dtype)


def round_to_float_quietly(values: np.ndarray, dtype: DType) -> np.ndarray:
    """:func:`round_to_float` for callers that have switched numpy's floating-point warnings
    off (overflow to infinity is the rounding's result, not an event)."""
    x = np.asarray(values)
    if x.dtype == dtype.numpy_dtype:
        return x
    if x.dtype in _EXACT_IN_FP32:
        # Exact in fp32, then one rounding (numpy and ml_dtypes round to nearest even).
        return x.astype(np.float32).astype(dtype.numpy_dtype)
    if x.dtype != np.float64:
        x = x.astype(np.float64)
    if dtype is DType.FP32:
        return x.astype(np.float32)
    if dtype is DType.FP16:
        return x.astype(np.float16)
    if dtype in (DType.BF16, DType.FP8E4M3, DType.FP8E5M2):
        return _round_to_odd_fp32(x).astype(dtype.numpy_dtype)
    raise ValueError(f"{dtype.name} is not a TOSA floating-point type")


# --------------------------------------------------------------------------- attributes
def decode_scalar(raw: bytes, dtype: DType) -> Any:
    """One value of ``dtype`` from its little-endian attribute bytes (CLAMP min/max): a numpy
    scalar of the storage type (typed Any: which one depends on ``dtype``)."""
    need = dtype.nbytes(1)
    if len(raw) < need:
        raise TosaRuntimeError("decode_scalar", f"{dtype.name} attribute needs {need} bytes, got {len(raw)}")
    return decode(bytes(raw[:need]), dtype, (1,))[0]


__all__ = [
    "FLOAT_TYPES", "Require", "all_in_range", "apply_scale_16", "apply_scale_32", "clip_int",
    "count_leading_zeros_32", "decode_scalar", "int_bounds", "is_float",
    "mul_add_shift", "round_to_float", "round_to_float_quietly", "rounding_right_shift", "saturate",
    "signed_range", "to_signed", "unsigned_range", "wrap",
]
