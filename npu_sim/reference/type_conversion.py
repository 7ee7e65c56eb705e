"""Type conversion: CAST and RESCALE (TOSA 1.0 pseudocode/operators/{CAST,RESCALE}.tosac).

CAST rounds float -> int to nearest-even and saturates; int -> float and
float -> float round to nearest-even once (overflow to infinity, or NaN for
fp8e4m3 which has no infinity: the OCP non-saturating mode); int -> int
sign-extends or truncates.

RESCALE applies ``apply_scale_32``/``apply_scale_16`` per tensor or per channel
(last axis) with the zero-point, signedness and rounding-mode rules of the spec.
INEXACT_ROUND is computed exactly (SINGLE_ROUND), which meets its error bound.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from npu_sim.reference.elementwise import check_same_shape, same_window
from npu_sim.reference.kernel_api import KernelArgs, Region, register
from npu_sim.reference.kernel_util import MISSING, StaticChecks, as_output, require_shape_one
from npu_sim.reference.numerics import (
    apply_scale_16,
    apply_scale_32,
    clip_int,
    int_bounds,
    is_float,
    round_to_float,
    signed_range,
    unsigned_range,
    wrap,
)
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op, RoundingMode

_I8, _I16, _I32, _I48 = DType.INT8, DType.INT16, DType.INT32, DType.INT48
_F16, _BF16, _F32 = DType.FP16, DType.BF16, DType.FP32
_E4M3, _E5M2 = DType.FP8E4M3, DType.FP8E5M2

#: CAST (in_t, out_t) pairs of PRO-INT, PRO-FP, EXT-BF16, EXT-FP8E4M3, EXT-FP8E5M2 (tosa.xml)
CAST_TYPES: frozenset[tuple[DType, DType]] = frozenset(
    [(DType.BOOL, t) for t in (_I8, _I16, _I32)]
    + [(_I8, t) for t in (DType.BOOL, _I16, _I32, _F16, _BF16, _F32)]
    + [(_I16, t) for t in (DType.BOOL, _I8, _I32, _F16, _BF16, _F32)]
    + [(_I32, t) for t in (DType.BOOL, _I8, _I16, _F16, _BF16, _F32)]
    + [(_BF16, t) for t in (_I8, _I16, _I32, _E4M3, _E5M2, _F32)]
    + [(f8, t) for f8 in (_E4M3, _E5M2) for t in (_F16, _BF16, _F32)]
    + [(_F16, t) for t in (_I8, _I16, _I32, _E4M3, _E5M2, _F32)]
    + [(_F32, t) for t in (_I8, _I16, _I32, _E4M3, _E5M2, _BF16, _F16)]
)


# --------------------------------------------------------------------------- CAST
@register(Op.CAST, window=same_window)
def cast(args: KernelArgs) -> list[np.ndarray]:
    in_t, out_t = args.input_types[0].dtype, args.output_types[0].dtype
    args.require((in_t, out_t) in CAST_TYPES, f"CAST from {in_t.name} to {out_t.name} is not supported")
    check_same_shape(args)
    x = np.asarray(args.inputs[0])
    if out_t is DType.BOOL:
        return [as_output(args, x != 0)]
    if is_float(out_t):
        if is_float(in_t):
            return [as_output(args, round_to_float(x, out_t))]
        return [as_output(args, round_to_float(x.astype(np.float64), out_t))]  # ints are exact in fp64
    if in_t is DType.BOOL:
        return [as_output(args, x.astype(np.int64))]
    if is_float(in_t):
        # round_to_nearest_int (ties to even), clip to out_t; NaN is unpredictable (we give 0).
        lo, hi = signed_range(out_t)
        with np.errstate(invalid="ignore"):
            r = np.rint(x.astype(np.float64))
            r = np.where(np.isnan(r), 0.0, np.clip(r, lo, hi))
        return [as_output(args, r.astype(np.int64))]
    return [as_output(args, wrap(x.astype(np.int64), out_t.bits))]  # sign_extend or truncate


# --------------------------------------------------------------------------- RESCALE
_RESCALE_IN = (_I8, _I16, _I32, _I48)
_RESCALE_OUT = (_I8, _I16, _I32)


def rescale_window(attribute: Attribute, input_types: Sequence[TensorType],
                   output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    """Input: the output region. Per-channel multiplier/shift: the region of the last axis."""
    channel = (out_region[-1][0], out_region[-1][1]) if attribute.per_channel and out_region else (0, 1)
    one: Region = tuple((0, 1) for _ in input_types[3].shape)
    return [tuple(out_region), (channel,), (channel,), one,
            tuple((0, 1) for _ in input_types[4].shape)]


def _check_rescale(args: KernelArgs, in_zp: int, out_zp: int) -> tuple[bool, bool, bool, RoundingMode]:
    """Every ERROR_IF of RESCALE; returns (scale32, input_unsigned, output_unsigned, mode)."""
    a = args.attribute
    in_t, out_t = args.input_types[0].dtype, args.output_types[0].dtype
    scale32, per_channel = bool(a.scale32), bool(a.per_channel)
    in_u, out_u = bool(a.input_unsigned), bool(a.output_unsigned)
    req = args.require
    req(in_t in _RESCALE_IN, f"{in_t.name} is not a supported input type")
    req(out_t in _RESCALE_OUT, f"{out_t.name} is not a supported output type")
    check_same_shape(args)
    mul_t = _I32 if scale32 else _I16
    req(args.input_types[1].dtype is mul_t, f"multiplier must be {mul_t.name} when scale32 is {scale32}")
    req(args.input_types[2].dtype is _I8, "shift must be INT8")
    req(args.input_types[3].dtype is in_t, "input_zp must have the input type")
    req(args.input_types[4].dtype is out_t, "output_zp must have the output type")
    req(a.rounding_mode in (RoundingMode.SINGLE_ROUND, RoundingMode.INEXACT_ROUND, RoundingMode.DOUBLE_ROUND),
        "rounding_mode must be SINGLE_ROUND, INEXACT_ROUND or DOUBLE_ROUND")
    mode = RoundingMode(a.rounding_mode)
    shape = args.input_types[0].shape
    req(not (per_channel and len(shape) < 1), "ERROR_IF(per_channel && rank(input) < 1)")
    nc = shape[-1] if per_channel else 1
    req(tuple(args.input_types[1].shape) == (nc,), f"multiplier shape must be [{nc}]")
    req(tuple(args.input_types[2].shape) == (nc,), f"shift shape must be [{nc}]")
    _check_zero_points(args, in_zp, out_zp)
    req(not (scale32 and in_t is _I48), "ERROR_IF(scale32 && is_same<in_t,i48_t>())")
    req(not (not scale32 and mode == RoundingMode.DOUBLE_ROUND),
        "ERROR_IF(!scale32 && (rounding_mode == DOUBLE_ROUND))")
    req(not (in_u and out_u), "ERROR_IF(input_unsigned && output_unsigned)")
    req(not (out_t is _I32 and in_u), "ERROR_IF(is_same<out_t,i32_t>() && input_unsigned)")
    req(not (in_t is _I32 and out_u), "ERROR_IF(is_same<in_t,i32_t>() && output_unsigned)")
    req(not (in_t is _I48 and out_u), "ERROR_IF(is_same<in_t,i48_t>() && output_unsigned)")
    req(not (in_t is _I48 and in_u), "ERROR_IF(is_same<in_t, i48_t> && input_unsigned)")
    req(not (in_t is _I32 and in_u), "ERROR_IF(is_same<in_t, i32_t> && input_unsigned)")
    req(not (out_t is _I32 and out_u), "ERROR_IF(is_same<out_t, i32_t> && output_unsigned)")
    return scale32, in_u, out_u, mode


def _check_zero_points(args: KernelArgs, in_zp: int, out_zp: int) -> None:
    """The ERROR_IFs of RESCALE that read the zero-point values (the only data-dependent ones)."""
    a = args.attribute
    in_t, out_t = args.input_types[0].dtype, args.output_types[0].dtype
    in_u, out_u = bool(a.input_unsigned), bool(a.output_unsigned)
    req = args.require
    req(in_t is _I8 or (in_t is _I16 and in_u) or in_zp == 0,
        "ERROR_IF(!is_same<in_t,i8_t>() && (!is_same<in_t,i16_t>() || input_unsigned == false) && input_zp != 0)")
    req(out_t is _I8 or (out_t is _I16 and out_u) or out_zp == 0,
        "ERROR_IF(!is_same<out_t,i8_t>() && (!is_same<out_t,i16_t>() || output_unsigned == false) && output_zp != 0)")
    req(not (in_t is _I16 and in_u and in_zp not in (0, 32768)),
        "ERROR_IF(is_same<in_t,i16_t>() && input_unsigned == true && input_zp != 0 && input_zp != 32768)")
    req(not (out_t is _I16 and out_u and out_zp not in (0, 32768)),
        "ERROR_IF(is_same<out_t,i16_t>() && output_unsigned == true && output_zp != 0 && output_zp != 32768)")


#: Signatures whose zero-point-independent ERROR_IFs have passed (they only read types and attributes).
_RESCALE_CHECKED = StaticChecks()


def _zero_point(raw: np.ndarray, dtype: DType, unsigned: bool) -> int:
    """The [1] zero point, zero-extended when the operand is unsigned."""
    value = int(np.asarray(raw).item(0))
    return value & ((1 << dtype.bits) - 1) if unsigned else value


@register(Op.RESCALE, window=rescale_window)
def rescale(args: KernelArgs) -> list[np.ndarray]:
    in_t, out_t = args.input_types[0].dtype, args.output_types[0].dtype
    in_u = bool(args.attribute.input_unsigned)
    out_u = bool(args.attribute.output_unsigned)
    for index, name in ((3, "input_zp"), (4, "output_zp")):
        require_shape_one(args, index, name)
    in_zp = _zero_point(args.inputs[3], in_t, in_u)
    out_zp = _zero_point(args.inputs[4], out_t, out_u)
    key, checked = _RESCALE_CHECKED.lookup(args)
    if checked is MISSING:  # every ERROR_IF, in the spec's order
        checked = _check_rescale(args, in_zp, out_zp)
        _RESCALE_CHECKED.remember(key, checked)
    else:  # the other ERROR_IFs passed for this signature already
        _check_zero_points(args, in_zp, out_zp)
    scale32, in_u, out_u, mode = checked

    raw = np.asarray(args.inputs[0])
    value = raw.astype(np.int64)
    known: tuple[int, int] | None
    if in_u:
        value &= (1 << in_t.bits) - 1  # zero_extend
        known = (0, (1 << in_t.bits) - 1)
    else:
        known = int_bounds(raw.dtype)  # what the storage type can hold
    if in_zp:
        value -= in_zp
    value_range = None if known is None else (known[0] - in_zp, known[1] - in_zp)
    multiplier = np.asarray(args.inputs[1]).reshape(-1)
    shift = np.asarray(args.inputs[2]).reshape(-1)
    if not args.attribute.per_channel:  # one scale for every element
        multiplier, shift = multiplier[:1].reshape(()), shift[:1].reshape(())
    if scale32:
        result = apply_scale_32(value, multiplier, shift, mode == RoundingMode.DOUBLE_ROUND, args.require,
                                value_range)
    else:
        result = apply_scale_16(value, multiplier, shift, args.require)
    # result is int32; apply_add_s REQUIREs result + output_zp to stay in int32 too
    ok = True
    if out_zp and result.size:
        edge = int(result.max()) if out_zp > 0 else int(result.min())
        ok = -(1 << 31) <= edge + out_zp < (1 << 31)
    args.require(ok, "apply_add_s: REQUIRE(c >= minimum_s<in_t>() && c <= maximum_s<in_t>())")
    if out_zp:
        result += out_zp  # exact in int32: just checked (result is a fresh array)
    lo, hi = unsigned_range(out_t) if out_u else signed_range(out_t)
    if out_t is not _I32:  # clipping to the int32 range changes nothing
        result = clip_int(result, lo, hi)
    # static_cast<out_t>: unsigned results above the signed maximum wrap into the storage type
    return [as_output(args, wrap(result, out_t.bits) if out_u else result)]


__all__ = ["CAST_TYPES", "rescale_window"]
