"""Activation functions: CLAMP, ERF, SIGMOID, TANH and the TABLE lookup (TOSA 1.0).

FP activations are computed in fp64 and rounded once to the output type, well
inside the spec's error bounds. TABLE implements the spec's int8 lookup and the
int16 9.7 fixed-point lookup with linear interpolation (``apply_lookup_s``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from npu_sim.reference.elementwise import (
    FP_TYPES,
    check_same_shape,
    check_types,
    nan_mode_of,
    same_window,
    unary_checks,
)
from npu_sim.reference.kernel_api import BoundKernel, KernelArgs, Region, register
from npu_sim.reference.kernel_util import as_output, bind_values, checked_once, int8_table, int16_table
from npu_sim.reference.numerics import Require, clip_int, decode_scalar, round_to_float, round_to_float_quietly
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, NanPropagationMode, Op

_TWO_OVER_SQRT_PI = 1.1283791670955126
_ERF_SERIES_TERMS = 50  # at |x| = 3 the terms fall below 1e-16 of the sum by n = 50
_ERFC_FRACTION_TERMS = 50


# --------------------------------------------------------------------------- CLAMP
_CLAMP_TYPES = frozenset({DType.INT8, DType.INT16}) | FP_TYPES
#: (type, nan_mode, min_val, max_val) of a CLAMP whose ERROR_IFs have passed
ClampChecks = tuple[DType, NanPropagationMode, Any, Any]


@checked_once
def _clamp_checks(args: KernelArgs) -> ClampChecks:
    """Every ERROR_IF of CLAMP (none reads the data; memoized per signature) and its bounds."""
    dtype = check_types(args, _CLAMP_TYPES, 1)
    check_same_shape(args)
    mode = nan_mode_of(args)
    try:
        lo = decode_scalar(args.attribute.min_val, dtype)
        hi = decode_scalar(args.attribute.max_val, dtype)
    except Exception as exc:  # too few bytes
        raise args.fail(f"min_val/max_val do not hold a {dtype.name} value ({exc})") from None
    if dtype in FP_TYPES:
        lo32, hi32 = np.float32(lo), np.float32(hi)
        args.require(not (np.isnan(lo32) or np.isnan(hi32)), "ERROR_IF(isNaN(min_val) || isNaN(max_val))")
        args.require(not hi32 < lo32, "ERROR_IF(max_val < min_val)")
        return dtype, mode, lo32, hi32
    args.require(int(hi) >= int(lo), "ERROR_IF(max_val < min_val)")
    return dtype, mode, lo, hi


def _clamp_values(args: KernelArgs, checked: ClampChecks, operands: list[np.ndarray]) -> np.ndarray:
    """CLAMP of a checked operand: a fresh array."""
    dtype, mode, lo, hi = checked  # float32 bounds for the float types
    x = operands[0]
    if dtype in FP_TYPES:
        x32 = np.asarray(x).astype(np.float32)
        out = np.clip(x32, lo, hi)  # exact; NaN propagates
        if mode == NanPropagationMode.IGNORE:
            out = np.where(np.isnan(x32), lo, out)  # max(NaN, min) -> min, then min(min, max)
        return round_to_float(out, dtype)
    return np.clip(x, lo, hi)


def _bind_clamp(args: KernelArgs, const_inputs: Sequence[np.ndarray | None]) -> BoundKernel | None:
    return int8_table(args, const_inputs) or bind_values(_clamp_checks, _clamp_values)(args, const_inputs)


@register(Op.CLAMP, window=same_window, bind=_bind_clamp)
def clamp(args: KernelArgs) -> list[np.ndarray]:
    """Clip to [min_val, max_val] (attribute bytes in the input type); NaN per nan_mode."""
    return [as_output(args, _clamp_values(args, _clamp_checks(args), args.inputs))]


# --------------------------------------------------------------------------- FP activations
def erf64(x: np.ndarray) -> np.ndarray:
    """The error function in fp64 (vectorized), relative error below 1e-14.

    |x| < 3: erf(x) = 2/sqrt(pi) * exp(-x^2) * sum_n (2x^2)^n x / (1*3*...*(2n+1)), a series
    of positive terms (no cancellation). 3 <= |x| < 6: erf = 1 - erfc with erfc's continued
    fraction exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))).
    |x| >= 6: +-1 (erfc(6) < 2**-55).
    """
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    result = np.where(np.isnan(x), np.nan, np.sign(x))  # NaN, and +-1 for |x| >= 6
    small = ax < 3.0
    if np.any(small):
        xs = x[small]
        x2 = xs * xs
        term, total = xs.copy(), xs.copy()
        for n in range(_ERF_SERIES_TERMS):
            term *= (2.0 * x2) / (2 * n + 3)
            total += term
        result[small] = _TWO_OVER_SQRT_PI * np.exp(-x2) * total
    mid = (ax >= 3.0) & (ax < 6.0)
    if np.any(mid):
        xm = ax[mid]
        frac = xm.copy()
        for k in range(_ERFC_FRACTION_TERMS, 0, -1):
            frac = xm + (0.5 * k) / frac
        erfc = np.exp(-xm * xm) / (np.sqrt(np.pi) * frac)
        result[mid] = np.sign(x[mid]) * (1.0 - erfc)
    return result


def _sigmoid64(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


_FP_ACTIVATIONS: dict[Op, Callable[[np.ndarray], np.ndarray]] = {
    Op.ERF: erf64, Op.SIGMOID: _sigmoid64, Op.TANH: np.tanh}


def _fp_activation_checks(args: KernelArgs) -> DType:
    return unary_checks(args, FP_TYPES)


def _fp_activation_values(args: KernelArgs, dtype: DType, operands: list[np.ndarray]) -> np.ndarray:
    """ERF / SIGMOID / TANH in fp64, rounded once (fp warnings to be switched off by the caller)."""
    return round_to_float_quietly(_FP_ACTIVATIONS[args.op](np.asarray(operands[0]).astype(np.float64)), dtype)


@register(*_FP_ACTIVATIONS, window=same_window, bind=bind_values(_fp_activation_checks, _fp_activation_values))
def fp_activation(args: KernelArgs) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        return [as_output(args, _fp_activation_values(args, _fp_activation_checks(args), args.inputs))]


# --------------------------------------------------------------------------- TABLE
def table_window(attribute: Attribute, input_types: Sequence[TensorType],
                 output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    """The input region equals the output region; the table is always read whole."""
    return [tuple(out_region), tuple((0, d) for d in input_types[1].shape)]


def apply_lookup_s(table: np.ndarray, value: np.ndarray, require: Require | None = None) -> np.ndarray:
    """The spec's 513-entry int16 lookup with 7-bit interpolation: int32 (16.7) results."""
    v = clip_int(np.asarray(value).astype(np.int64), -32768, 32767)
    index = (v + 32768) >> 7
    fraction = v & 0x7F
    t = np.asarray(table).astype(np.int64)
    base = t[index]
    slope = t[index + 1] - base
    if require is not None:
        require(bool(np.all((slope >= -32768) & (slope <= 32767))),
                "REQUIRE(slope >= minimum<int16_t> && slope <= maximum<int16_t>)")
    return ((base << 7) + slope * fraction).astype(np.int32)


@checked_once
def _table_checks(args: KernelArgs) -> DType:
    """TABLE's ERROR_IFs/REQUIREs on types and shapes (memoized per signature)."""
    dtype = args.input_types[0].dtype
    args.require(dtype in (DType.INT8, DType.INT16), f"{dtype.name} is not a supported input type")
    size, out_dtype = (256, DType.INT8) if dtype is DType.INT8 else (513, DType.INT32)
    args.require(args.input_types[1].dtype is dtype, "table type must equal the input type")
    args.require(args.output_types[0].dtype is out_dtype, f"output type must be {out_dtype.name}")
    check_same_shape(args)
    args.require(tuple(args.input_types[1].shape) == (size,), f"REQUIRE(length(table) == {size})")
    return dtype


def _bind_table(args: KernelArgs, const_inputs: Sequence[np.ndarray | None]) -> BoundKernel | None:
    """TABLE with a constant table: all its results, looked up (int16: 65536 of them)."""
    return int8_table(args, const_inputs) or int16_table(args, const_inputs)


@register(Op.TABLE, window=table_window, bind=_bind_table)
def table(args: KernelArgs) -> list[np.ndarray]:
    """TABLE: int8 -> table[value + 128]; int16 -> interpolated 16.7 value in int32."""
    dtype = _table_checks(args)
    x, lut = args.inputs[0], np.asarray(args.inputs[1]).reshape(-1)
    if dtype is DType.INT8:
        return [as_output(args, lut[np.asarray(x).astype(np.int64) + 128])]
    return [as_output(args, apply_lookup_s(lut, x, args.require))]


__all__ = ["apply_lookup_s", "erf64", "table_window"]
