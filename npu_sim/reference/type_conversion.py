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

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from npu_sim.reference.elementwise import check_same_shape, same_window
from npu_sim.reference.kernel_api import BoundKernel, KernelArgs, Region, register
from npu_sim.reference.kernel_util import MISSING, StaticChecks, as_output, int8_table, require_shape_one
from npu_sim.reference.numerics import (
    Require,
    apply_scale_16,
    apply_scale_32,
    apply_scale_32_uniform,
    clip_int,
    int_bounds,
    is_float,
    round_to_float,
    signed_range,
    uniform_scale,
    unsigned_range,
    wrap,
)
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op, RoundingMode
from npu_sim.tosa.type_rules import rescale_attribute_errors

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
def _bind_cast(args: KernelArgs, const_inputs: Sequence[np.ndarray | None]) -> BoundKernel | None:
    """CAST to an integer type from an integer or float one: its checks have passed; only the
    rounding (ties to even), saturation and wrapping are left (a recurrent cell's quantize
    chains run it at every time step). Casts to float and from or to BOOL stay unbound."""
    in_t, out_t = args.input_types[0].dtype, args.output_types[0].dtype
    if out_t is DType.BOOL or in_t is DType.BOOL or is_float(out_t):
        return None
    out_type = args.output_types[0]
    shape, storage = tuple(out_type.shape), out_t.numpy_dtype
    if is_float(in_t):
        return _bound_float_to_int(out_t, shape)
    bits = out_t.bits
    return lambda inputs: [wrap(np.asarray(inputs[0]).astype(np.int64), bits).astype(storage).reshape(shape)]


def _bound_float_to_int(out_t: DType, shape: tuple[int, ...]) -> BoundKernel:
    """:func:`_float_to_int` then the storage type, in place on one float64 copy (no NaN: no
    pass to find them; clipped values sum finite, so a NaN sum means a NaN)."""
    lo, hi = signed_range(out_t)
    storage = out_t.numpy_dtype

    def run(inputs: list[np.ndarray]) -> list[np.ndarray]:
        r = np.asarray(inputs[0]).astype(np.float64)
        np.rint(r, out=r)
        np.maximum(r, lo, out=r)
        np.minimum(r, hi, out=r)
        if math.isnan(r.sum()):
            r[np.isnan(r)] = 0.0
        return [r.astype(storage).reshape(shape)]

    return run


def _float_to_int(x: np.ndarray, out_t: DType) -> np.ndarray:
    """round_to_nearest_int (ties to even), clipped to ``out_t``; NaN is unpredictable (we give 0)."""
    lo, hi = signed_range(out_t)
    with np.errstate(invalid="ignore"):
        r = np.rint(np.asarray(x).astype(np.float64))
        return np.where(np.isnan(r), 0.0, np.clip(r, lo, hi))


@register(Op.CAST, window=same_window, bind=_bind_cast)
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
        return [as_output(args, _float_to_int(x, out_t).astype(np.int64))]
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
    for failed in rescale_attribute_errors(a, args.input_types):
        req(False, failed)
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
    req(not (in_u and out_u), "ERROR_IF(input_unsigned && output_unsigned)")
    req(not (out_t is _I32 and in_u), "ERROR_IF(is_same<out_t,i32_t>() && input_unsigned)")
    req(not (in_t is _I32 and out_u), "ERROR_IF(is_same<in_t,i32_t>() && output_unsigned)")
    req(not (in_t is _I48 and out_u), "ERROR_IF(is_same<in_t,i48_t>() && output_unsigned)")
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


@dataclass(frozen=True)
class _Rescaling:
    """RESCALE of one operator once its ERROR_IFs have passed: everything but the input values."""

    in_t: DType
    out_t: DType
    in_u: bool
    out_u: bool
    in_zp: int
    out_zp: int
    scale32: bool
    double_round: bool
    #: multiplier and shift, of shape () unless per channel
    multiplier: np.ndarray
    shift: np.ndarray
    #: (multiplier, shift) as ints when one scale applies to every element
    uniform: tuple[int, int] | None

    def apply(self, raw: np.ndarray, require: Require) -> np.ndarray:
        """The rescaled values of ``raw`` (before the cast to the output storage type)."""
        in_t, out_t, in_zp, out_zp = self.in_t, self.out_t, self.in_zp, self.out_zp
        raw = np.asarray(raw)
        value = raw.astype(np.int64)
        known: tuple[int, int] | None
        if self.in_u:
            value &= (1 << in_t.bits) - 1  # zero_extend
            known = (0, (1 << in_t.bits) - 1)
        else:
            known = int_bounds(raw.dtype)  # what the storage type can hold
        if in_zp:
            value -= in_zp
        value_range = None if known is None else (known[0] - in_zp, known[1] - in_zp)
        if not self.scale32:
            result = apply_scale_16(value, self.multiplier, self.shift, require)
        elif self.uniform is not None:
            result = apply_scale_32_uniform(value, *self.uniform, self.double_round, require, value_range)
        else:
            result = apply_scale_32(value, self.multiplier, self.shift, self.double_round, require, value_range)
        # result is int32; apply_add_s REQUIREs result + output_zp to stay in int32 too
        ok = True
        if out_zp and result.size:
            edge = int(result.max()) if out_zp > 0 else int(result.min())
            ok = -(1 << 31) <= edge + out_zp < (1 << 31)
        require(ok, "apply_add_s: REQUIRE(c >= minimum_s<in_t>() && c <= maximum_s<in_t>())")
        if out_zp:
            result += out_zp  # exact in int32: just checked (result is a fresh array)
        if out_t is not _I32:  # clipping to the int32 range changes nothing
            lo, hi = unsigned_range(out_t) if self.out_u else signed_range(out_t)
            result = clip_int(result, lo, hi)
        # static_cast<out_t>: unsigned results above the signed maximum wrap into the storage type
        return wrap(result, out_t.bits) if self.out_u else result


def _rescaling(args: KernelArgs) -> _Rescaling:
    """Every ERROR_IF of RESCALE that does not read the input values, in the spec's order."""
    in_t, out_t = args.input_types[0].dtype, args.output_types[0].dtype
    in_u = bool(args.attribute.input_unsigned)
    out_u = bool(args.attribute.output_unsigned)
    for index, name in ((3, "input_zp"), (4, "output_zp")):
        require_shape_one(args, index, name)
    in_zp = _zero_point(args.inputs[3], in_t, in_u)
    out_zp = _zero_point(args.inputs[4], out_t, out_u)
    checked = _RESCALE_CHECKED.lookup(args)
    if checked is MISSING:  # every ERROR_IF, in the spec's order
        checked = _check_rescale(args, in_zp, out_zp)
        _RESCALE_CHECKED.remember(args, (), checked)
    else:  # the other ERROR_IFs passed for this signature already
        _check_zero_points(args, in_zp, out_zp)
    scale32, in_u, out_u, mode = checked
    multiplier = np.asarray(args.inputs[1]).reshape(-1)
    shift = np.asarray(args.inputs[2]).reshape(-1)
    if not args.attribute.per_channel:  # one scale for every element
        multiplier, shift = multiplier[:1].reshape(()), shift[:1].reshape(())
    uniform = uniform_scale(len(args.input_types[0].shape), multiplier, shift)
    return _Rescaling(in_t, out_t, in_u, out_u, in_zp, out_zp, scale32, mode == RoundingMode.DOUBLE_ROUND,
                      multiplier, shift, uniform)


def _bind_rescale(args: KernelArgs, const_inputs: Sequence[np.ndarray | None]) -> BoundKernel | None:
    """RESCALE with constant multiplier, shift and zero points: int8 inputs through a table of
    all 256 results, others with the scaling worked out once."""
    constants = [value for value in const_inputs[1:5] if value is not None]
    if len(constants) != 4:
        return None
    if not args.attribute.per_channel:
        table = int8_table(args, const_inputs)
        if table is not None:
            return table
    static = args.static()
    rescaling = _rescaling(dataclasses.replace(static, inputs=[args.inputs[0], *constants]))
    bound = _BoundRescale.of(rescaling)
    require = static.require
    if bound is not None:
        return BoundRescaleRun(bound, static)
    return lambda inputs: [as_output(static, rescaling.apply(inputs[0], require))]


class BoundRescaleRun:
    """A bound RESCALE's kernel (``[value] -> [result]``), its scaling in the open: a long
    stream's plan may hand it the int64 values of an integer step before it
    (:mod:`npu_sim.hw.int_pipelines`)."""

    __slots__ = ("bound", "static", "storage", "shape")

    def __init__(self, bound: _BoundRescale, static: KernelArgs):
        self.bound, self.static = bound, static
        self.storage, self.shape = static.output_types[0].dtype.numpy_dtype, tuple(static.output_types[0].shape)

    def __call__(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [self._output(self.bound.apply(inputs[0], self.static.require))]

    def of_int64(self, values: np.ndarray) -> np.ndarray:
        """The result for int64 ``values`` (a fresh array, scaled in place) of a signed input
        type's range (what an integer step computed before the cast to this input)."""
        return self._output(self.bound.scale(values, self.static.require))

    def _output(self, values: np.ndarray) -> np.ndarray:
        """``values`` (one per output element) as the output: :func:`as_output` in fewer steps."""
        out = values.astype(self.storage, order="C")
        return out if out.shape == self.shape else out.reshape(self.shape)


_INT32_MIN, _INT32_MAX, _INT64_LIMIT = -(1 << 31), (1 << 31) - 1, 1 << 63
_SCALE16_RESULT = "apply_scale_16: REQUIRE(result >= minimum<int32_t> && result <= maximum<int32_t>)"
_ADD_OUTPUT_ZP = "apply_add_s: REQUIRE(c >= minimum_s<in_t>() && c <= maximum_s<in_t>())"


@dataclass(frozen=True)
class _BoundRescale:
    """A RESCALE with constant scales and zero points whose static REQUIREs hold and whose
    int64 arithmetic the input's storage range keeps from overflowing (and, with scale32,
    from wrapping the int32 intermediate): :meth:`_Rescaling.apply`'s values in fewer numpy
    operations, in place. The scale16 result range and the output_zp addition are checked
    on the data, as apply checks them, unless the storage range proves them.

    Per element (channel c): ``(v * m[c] + round[c](v)) >> s[c] + output_zp``, clipped to the
    output type, with v the zero-extended (if unsigned) input minus input_zp and round the
    spec's (DOUBLE_ROUND adds 2**30 for v >= 0 and subtracts it for v < 0 where shift > 31).
    """

    mask: int | None
    in_zp: int
    multiplier: int | np.ndarray
    #: the rounding term for v >= 0, and what v < 0 takes off it (None: nothing)
    round_up: int | np.ndarray
    negative_down: int | np.ndarray | None
    shift: int | np.ndarray
    out_zp: int
    #: the output type's range, as int64 scalars (the fast form of ndarray.clip)
    clip: tuple[np.int64, np.int64] | None
    #: whether the data must be checked: the scale16 result range, the output_zp addition
    check_result: bool
    check_out_zp: bool

    @staticmethod
    def of(r: _Rescaling) -> _BoundRescale | None:
        """The bound form of ``r``, or None where the storage range does not allow it."""
        if r.out_u or r.in_t not in (_I8, _I16, _I32, _I48):
            return None
        mask = (1 << r.in_t.bits) - 1 if r.in_u else None
        lo_s, hi_s = (0, mask) if mask is not None else signed_range(r.in_t)
        lo_v, hi_v = lo_s - r.in_zp, hi_s - r.in_zp
        m = [int(v) for v in r.multiplier.reshape(-1)]
        s = [int(v) for v in r.shift.reshape(-1)]
        up, down = _rounding_terms(r, s)
        if not _rescale_bindable(r.scale32, lo_v, hi_v, m, s, up, down):
            return None
        lo, hi = _scaled_range(lo_v, hi_v, m, s, up, down)
        in_int32 = _INT32_MIN <= lo and hi <= _INT32_MAX
        if r.scale32 and not in_int32:
            return None  # the int32 intermediate may wrap: apply does that
        lo, hi = max(lo, _INT32_MIN), min(hi, _INT32_MAX)  # what passes the scale16 check
        check_out_zp = not (_INT32_MIN <= lo + min(r.out_zp, 0) and hi + max(r.out_zp, 0) <= _INT32_MAX)
        pick = _per_channel if r.multiplier.ndim > 0 else _one
        lo_out, hi_out = signed_range(r.out_t)
        clip = None if r.out_t is _I32 else (np.int64(lo_out), np.int64(hi_out))
        return _BoundRescale(mask, r.in_zp, pick(m), pick(up), pick(down) if any(down) else None,
                             pick(s), r.out_zp, clip, not in_int32, check_out_zp)

    def apply(self, raw: np.ndarray, require: Require) -> np.ndarray:
        acc = np.asarray(raw).astype(np.int64)  # v, then the result, in place
        if self.mask is not None:
            acc &= self.mask  # zero_extend
        return self.scale(acc, require)

    def scale(self, acc: np.ndarray, require: Require) -> np.ndarray:
        """The results of the int64 input values ``acc`` (zero extended), computed in ``acc``."""
        if self.in_zp:
            acc -= self.in_zp
        negative = None
        if self.negative_down is not None:
            negative = acc >> 63  # all ones where v < 0
            negative &= self.negative_down
        acc *= self.multiplier
        acc += self.round_up
        if negative is not None:
            acc -= negative
        acc >>= self.shift
        if (self.check_result or self.check_out_zp) and acc.size:
            self._check(acc, require)
        if self.out_zp:
            acc += self.out_zp
        if self.clip is not None:
            acc.clip(self.clip[0], self.clip[1], out=acc)
        return acc

    def _check(self, result: np.ndarray, require: Require) -> None:
        lo, hi = int(result.min()), int(result.max())
        if self.check_result:
            require(_INT32_MIN <= lo and hi <= _INT32_MAX, _SCALE16_RESULT)
        if self.check_out_zp:
            edge = hi if self.out_zp > 0 else lo
            require(_INT32_MIN <= edge + self.out_zp <= _INT32_MAX, _ADD_OUTPUT_ZP)


def _per_channel(values: list[int]) -> int | np.ndarray:
    return np.array(values, dtype=np.int64)


def _one(values: list[int]) -> int | np.ndarray:
    return values[0]


def _scaled_range(lo_v: int, hi_v: int, m: list[int], s: list[int], up: list[int],
                  down: list[int]) -> tuple[int, int]:
    """Least and greatest ``(v * m + round(v)) >> s`` over values in [lo_v, hi_v] and channels.
    It grows with v (round grows at 0), so its extremes are at lo_v and hi_v."""
    results = [(v * mc + uc - (dc if v < 0 else 0)) >> sc for mc, sc, uc, dc in zip(m, s, up, down)
               for v in (lo_v, hi_v)]
    return min(results), max(results)


def _rounding_terms(r: _Rescaling, shifts: list[int]) -> tuple[list[int], list[int]]:
    """Per channel: the rounding term for values >= 0 and what negative values take off it."""
    signed = [r.scale32 and r.double_round and shift > 31 for shift in shifts]
    up = [(1 << (shift - 1)) + (1 << 30 if sign else 0) for shift, sign in zip(shifts, signed)]
    return up, [1 << 31 if sign else 0 for sign in signed]


def _rescale_bindable(scale32: bool, lo_v: int, hi_v: int, m: list[int], s: list[int], up: list[int],
                      down: list[int]) -> bool:
    """Whether input values in [lo_v, hi_v] meet apply_scale_32/16's REQUIREs on the scale
    and (scale32) on the value, with no int64 overflow."""
    if min(m) < 0 or min(s) < 2 or max(s) > 62:
        return False
    if scale32 and (lo_v < _INT32_MIN or hi_v > _INT32_MAX or lo_v < -(1 << (min(s) - 1))
                    or hi_v >= 1 << (min(s) - 1)):
        return False  # REQUIRE(value fits int32_t and lies in [-(1 << (shift - 1)), 1 << (shift - 1)))
    return max(abs(lo_v), abs(hi_v)) * max(m) + max(up) + max(down) < _INT64_LIMIT


@register(Op.RESCALE, window=rescale_window, bind=_bind_rescale)
def rescale(args: KernelArgs) -> list[np.ndarray]:
    return [as_output(args, _rescaling(args).apply(args.inputs[0], args.require))]


__all__ = ["CAST_TYPES", "rescale_window"]
