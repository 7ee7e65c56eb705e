"""Elementwise TOSA operators: binary, unary, ternary (SELECT) and comparisons.

Written from the TOSA 1.0 pseudocode (pseudocode/operators/*.tosac). Integer
operators compute in int64 and wrap or REQUIRE exactly where the spec does;
floating-point operators compute in fp32 (for +, -, *, /: correctly rounded for
fp16/bf16 too, as fp32 has more than twice their precision) or in fp64 for
transcendental functions, then round once to the output type.

Broadcasting follows TOSA: ranks must match and size-1 dimensions broadcast.
Tiling windows map an output region to the same region of each input, except
broadcast (size-1) dimensions which map to ``(0, 1)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from npu_sim.reference.kernel_api import BoundKernel, KernelArgs, Region, register
from npu_sim.reference.kernel_util import as_output, bind_values, checked_once, require_shape_one
from npu_sim.reference.numerics import (
    all_in_range,
    clip_int,
    count_leading_zeros_32,
    round_to_float,
    round_to_float_quietly,
    signed_range,
    wrap,
)
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, NanPropagationMode, Op

INT_TYPES = frozenset({DType.INT8, DType.INT16, DType.INT32})
FP_TYPES = frozenset({DType.FP16, DType.BF16, DType.FP32})
I32 = frozenset({DType.INT32})
BOOL = frozenset({DType.BOOL})
_I32_FP = I32 | FP_TYPES
_INT_FP = INT_TYPES | FP_TYPES
_ANY = BOOL | INT_TYPES | FP_TYPES


# --------------------------------------------------------------------------- tiling windows
def broadcast_window(attribute: Attribute, input_types: Sequence[TensorType],
                     output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    """Each input's region for ``out_region``: the same, or (0, 1) on broadcast dimensions."""
    return [_broadcast_region(t.shape, out_region) for t in input_types]


def _broadcast_region(shape: Sequence[int], out_region: Region) -> Region:
    return tuple((0, 1) if dim == 1 else _pair(out_region[axis]) for axis, dim in enumerate(shape))


def _pair(bounds: Sequence[int]) -> tuple[int, int]:
    start, stop = bounds
    return start, stop


def scalar_params_window(n_tensor_inputs: int) -> Callable[..., list[Region]]:
    """Window for ops whose first inputs broadcast and whose remaining inputs are [1] tensors."""

    def window(attribute: Attribute, input_types: Sequence[TensorType],
               output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
        regions = [_broadcast_region(t.shape, out_region) for t in input_types[:n_tensor_inputs]]
        regions += [tuple((0, 1) for _ in t.shape) for t in input_types[n_tensor_inputs:]]
        return regions

    return window


# --------------------------------------------------------------------------- checks
def check_types(args: KernelArgs, allowed: frozenset[DType], n_data: int,
                out_dtype: DType | None = None) -> DType:
    """The common dtype of the first ``n_data`` inputs; ERROR unless allowed for the op."""
    dtype = args.input_types[0].dtype
    args.require(dtype in allowed, f"{dtype.name} is not a supported input type")
    for t in args.input_types[1:n_data]:
        args.require(t.dtype is dtype, f"input types differ ({dtype.name} vs {t.dtype.name})")
    want = dtype if out_dtype is None else out_dtype
    args.require(args.output_types[0].dtype is want,
                 f"output type {args.output_types[0].dtype.name} must be {want.name}")
    return dtype


def check_broadcast(args: KernelArgs, n_inputs: int) -> None:
    """ERROR_IF(shape != broadcast_shape(shape1, shape2, ...)) with equal ranks."""
    out = tuple(args.output_types[0].shape)
    shapes = [tuple(t.shape) for t in args.input_types[:n_inputs]]
    for shape in shapes:
        args.require(len(shape) == len(out), "rank(shape1) != rank(shape2)")
    result = list(shapes[0])
    for shape in shapes[1:]:
        for axis, dim in enumerate(shape):
            if result[axis] == 1:
                result[axis] = dim
            else:
                args.require(dim in (1, result[axis]), "shape2[i] != 1 && shape2[i] != shape[i]")
    args.require(tuple(result) == out, "shape != broadcast_shape(shape1, shape2)")


def check_same_shape(args: KernelArgs) -> None:
    args.require(tuple(args.input_types[0].shape) == tuple(args.output_types[0].shape),
                 "output shape must equal input shape")


def _i64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.int64)


def _f32(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float32)


def _f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def _fp_result(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Round computed values (fp32 or fp64) once to ``dtype``."""
    with np.errstate(all="ignore"):
        return round_to_float(values, dtype)


def _require_range(args: KernelArgs, values: np.ndarray, dtype: DType, helper: str) -> None:
    lo, hi = signed_range(dtype)
    args.require(all_in_range(values, lo, hi),
                 f"{helper}: REQUIRE(c >= minimum_s<in_t>() && c <= maximum_s<in_t>())")


def nan_mode_of(args: KernelArgs) -> NanPropagationMode:
    """The nan_mode attribute; ERROR unless PROPAGATE or IGNORE."""
    mode = args.attribute.nan_mode
    args.require(mode in (NanPropagationMode.PROPAGATE, NanPropagationMode.IGNORE),
                 "nan_mode must be PROPAGATE or IGNORE")
    return NanPropagationMode(mode)


# --------------------------------------------------------------------------- binary
@checked_once
def _binary_checks(args: KernelArgs, allowed: frozenset[DType], out_dtype: DType | None) -> DType:
    """Types and broadcast shapes of a binary operator (memoized per signature)."""
    dtype = check_types(args, allowed, 2, out_dtype)
    check_broadcast(args, 2)
    return dtype


def _binary(args: KernelArgs, allowed: frozenset[DType], out_dtype: DType | None = None
            ) -> tuple[DType, np.ndarray, np.ndarray]:
    return _binary_checks(args, allowed, out_dtype), args.inputs[0], args.inputs[1]


def _as_f32(a: np.ndarray) -> np.ndarray:
    """``a`` in fp32 (itself if it is already: callers only read it)."""
    a = np.asarray(a)
    return a if a.dtype == np.float32 else a.astype(np.float32)


def _add_sub_checks(args: KernelArgs) -> DType:
    return _binary_checks(args, _I32_FP, None)


def _add_sub_values(args: KernelArgs, dtype: DType, operands: list[np.ndarray]) -> np.ndarray:
    """ADD / SUB of checked operands: a fresh array (fp warnings to be switched off by the caller)."""
    a, b = operands[0], operands[1]
    add = args.op == Op.ADD
    if dtype is DType.INT32:
        c = _i64(a) + _i64(b) if add else _i64(a) - _i64(b)
        _require_range(args, c, dtype, "apply_add_s" if add else "apply_sub_s")
        return c
    c = np.add(_as_f32(a), _as_f32(b)) if add else np.subtract(_as_f32(a), _as_f32(b))
    return round_to_float_quietly(c, dtype)


_bind_add_sub_values = bind_values(_add_sub_checks, _add_sub_values)


def _bind_add_sub(args: KernelArgs, const_inputs: Sequence[np.ndarray | None]) -> BoundKernel | None:
    """ADD / SUB with the checks done; int32 ones add in int64 and check the range by the
    result's extremes, the kernel running only to raise the REQUIRE an overflow breaks (a
    recurrent cell's quantize steps and a loop's counter run them at every step)."""
    dtype = _add_sub_checks(args)
    if dtype is not DType.INT32:
        return _bind_add_sub_values(args, const_inputs)
    return Int32AddSub(args.static(), tuple(args.output_types[0].shape))


class Int32AddSub:
    """A bound int32 ADD / SUB's kernel (``[a, b] -> [c]``); :meth:`int64` gives its values
    before the cast (None where one breaks the REQUIRE: then the kernel runs and raises), for a
    long stream's plan to hand to the RESCALE after it (:mod:`npu_sim.hw.int_pipelines`)."""

    __slots__ = ("static", "shape", "ufunc")

    LO, HI = signed_range(DType.INT32)

    def __init__(self, static: KernelArgs, shape: tuple[int, ...]):
        self.static, self.shape = static, shape
        self.ufunc = np.add if static.op is Op.ADD else np.subtract

    def int64(self, operands: list[np.ndarray]) -> np.ndarray | None:
        """``a + b`` (``a - b``) in int64, None if some value leaves the int32 range."""
        c = self.ufunc(np.asarray(operands[0]).astype(np.int64), operands[1])
        if c.size and (c.min() < self.LO or c.max() > self.HI):
            return None
        return c

    def kernel(self, operands: list[np.ndarray]) -> list[np.ndarray]:
        """The kernel itself (raises the REQUIRE an overflow breaks)."""
        static = self.static
        return add_sub(KernelArgs(static.op, static.attribute, list(operands), static.input_types,
                                  static.output_types, static.name))

    def __call__(self, operands: list[np.ndarray]) -> list[np.ndarray]:
        c = self.int64(operands)
        if c is None:
            return self.kernel(operands)
        out = c.astype(np.int32)
        shape = self.shape
        return [out if type(out) is np.ndarray and out.shape == shape else np.asarray(out).reshape(shape)]


@register(Op.ADD, Op.SUB, window=broadcast_window, bind=_bind_add_sub)
def add_sub(args: KernelArgs) -> list[np.ndarray]:
    """ADD / SUB: int32 REQUIREs no overflow (apply_add_s/apply_sub_s); FP rounds once."""
    with np.errstate(all="ignore"):
        return [as_output(args, _add_sub_values(args, _add_sub_checks(args), args.inputs))]


@checked_once
def _mul_checks(args: KernelArgs) -> DType:
    """MUL's ERROR_IFs on types and shapes (memoized per signature)."""
    dtype = args.input_types[0].dtype
    out_dtype = DType.INT32 if dtype in INT_TYPES else dtype
    dtype = check_types(args, _INT_FP, 2, out_dtype)
    check_broadcast(args, 2)
    args.require(args.input_types[2].dtype is DType.INT8, "shift must be an int8 tensor")
    require_shape_one(args, 2, "shift")
    return dtype


def _mul_values(args: KernelArgs, dtype: DType, operands: list[np.ndarray]) -> np.ndarray:
    """MUL of checked operands: a fresh array (fp warnings to be switched off by the caller)."""
    shift = int(np.asarray(operands[2]).item(0))
    args.require(0 <= shift <= 63, "REQUIRE(0 <= shift && shift <= 63)")
    args.require(dtype is DType.INT32 or shift == 0, "REQUIRE(is_same<in_t,int32_t>() || shift == 0)")
    a, b = operands[0], operands[1]
    if dtype in FP_TYPES:
        return round_to_float_quietly(np.multiply(_as_f32(a), _as_f32(b)), dtype)
    product = _i64(a) * _i64(b)  # |int32 * int32| < 2**62: exact in int64
    if shift > 0:
        product = (product + (1 << (shift - 1))) >> shift
        args.require(all_in_range(product, -(1 << 31), (1 << 31) - 1),
                     "REQUIRE(product >= minimum_s<i32_t>() && product <= maximum_s<i32_t>())")
        return product
    return wrap(product, 32)  # low 32 bits of the product


@register(Op.MUL, window=scalar_params_window(2), bind=bind_values(_mul_checks, _mul_values))
def mul(args: KernelArgs) -> list[np.ndarray]:
    """MUL with the [1] int8 ``shift`` input: int32 rounds by shift; narrower ints widen."""
    with np.errstate(all="ignore"):
        return [as_output(args, _mul_values(args, _mul_checks(args), args.inputs))]


@register(Op.INTDIV, window=broadcast_window)
def intdiv(args: KernelArgs) -> list[np.ndarray]:
    """INTDIV: integer division truncating toward zero (not Python's floor)."""
    dtype, a, b = _binary(args, I32)
    a64, b64 = _i64(a), _i64(b)
    if a64.shape != b64.shape:
        a64, b64 = np.broadcast_arrays(a64, b64)
    args.require(not np.any(b64 == 0), "REQUIRE(value2 != 0)")
    q = np.abs(a64) // np.abs(b64)
    q = np.where((a64 < 0) != (b64 < 0), -q, q)
    _require_range(args, q, dtype, "apply_intdiv_s")
    return [as_output(args, q)]


def _shift_amounts(args: KernelArgs, dtype: DType, b: np.ndarray) -> np.ndarray:
    bits = dtype.bits
    s = _i64(b)
    args.require(all_in_range(s, 0, bits - 1),
                 f"REQUIRE(0 <= value2 && value2 <= {bits - 1}) for {dtype.name}")
    return s


@register(Op.ARITHMETIC_RIGHT_SHIFT, window=broadcast_window)
def arithmetic_right_shift(args: KernelArgs) -> list[np.ndarray]:
    """Sign-propagating right shift; with ``round`` adds the last bit shifted out."""
    dtype, a, b = _binary(args, INT_TYPES)
    s = _shift_amounts(args, dtype, b)
    a64 = _i64(a)
    result = a64 >> s
    if args.attribute.round:
        last_out = (a64 >> np.maximum(s - 1, 0)) & 1
        result = result + np.where(s > 0, last_out, 0)
    return [as_output(args, result)]


@register(Op.LOGICAL_LEFT_SHIFT, window=broadcast_window)
def logical_left_shift(args: KernelArgs) -> list[np.ndarray]:
    """value1 << value2, keeping the low bits of the type."""
    dtype, a, b = _binary(args, INT_TYPES)
    s = _shift_amounts(args, dtype, b)
    return [as_output(args, wrap(_i64(a) << s, dtype.bits))]


@register(Op.LOGICAL_RIGHT_SHIFT, window=broadcast_window)
def logical_right_shift(args: KernelArgs) -> list[np.ndarray]:
    """Right shift of the value read as unsigned of its own width."""
    dtype, a, b = _binary(args, INT_TYPES)
    s = _shift_amounts(args, dtype, b)
    unsigned = _i64(a) & ((1 << dtype.bits) - 1)
    return [as_output(args, wrap(unsigned >> s, dtype.bits))]


_BITWISE = {Op.BITWISE_AND: np.bitwise_and, Op.BITWISE_OR: np.bitwise_or,
            Op.BITWISE_XOR: np.bitwise_xor}


@register(*_BITWISE, window=broadcast_window)
def bitwise(args: KernelArgs) -> list[np.ndarray]:
    dtype, a, b = _binary(args, INT_TYPES)
    return [as_output(args, _BITWISE[args.op](a, b))]


_LOGICAL = {Op.LOGICAL_AND: np.logical_and, Op.LOGICAL_OR: np.logical_or,
            Op.LOGICAL_XOR: np.logical_xor}


@register(*_LOGICAL, window=broadcast_window)
def logical(args: KernelArgs) -> list[np.ndarray]:
    _, a, b = _binary(args, BOOL)
    return [as_output(args, _LOGICAL[args.op](np.asarray(a, bool), np.asarray(b, bool)))]


def _extreme_checks(args: KernelArgs) -> DType:
    return _binary_checks(args, _I32_FP, None)


def _extreme_values(args: KernelArgs, dtype: DType, operands: list[np.ndarray]) -> np.ndarray:
    """MAXIMUM / MINIMUM of checked operands: a fresh array."""
    a, b = operands[0], operands[1]
    is_max = args.op == Op.MAXIMUM
    if dtype is DType.INT32:
        return (np.maximum if is_max else np.minimum)(a, b)
    fn: np.ufunc
    if nan_mode_of(args) == NanPropagationMode.PROPAGATE:
        fn = np.maximum if is_max else np.minimum
    else:
        fn = np.fmax if is_max else np.fmin
    return fn(_f32(a), _f32(b))  # exact: fp32 holds fp16/bf16 values


@register(Op.MAXIMUM, Op.MINIMUM, window=broadcast_window, bind=bind_values(_extreme_checks, _extreme_values))
def maximum_minimum(args: KernelArgs) -> list[np.ndarray]:
    """MAXIMUM / MINIMUM; nan_mode PROPAGATE gives NaN, IGNORE the non-NaN operand (bound:
    the checks once; a recurrent cell's saturating quantize runs them at every step)."""
    return [as_output(args, _extreme_values(args, _extreme_checks(args), args.inputs))]


@register(Op.POW, window=broadcast_window)
def power(args: KernelArgs) -> list[np.ndarray]:
    """POW for x > 0 (or x == 0 with y > 0), finite non-NaN inputs, computed in fp64."""
    dtype, a, b = _binary(args, FP_TYPES)
    x, y = np.broadcast_arrays(_f64(a), _f64(b))
    args.require(not (np.any(np.isnan(x)) or np.any(np.isnan(y))), "REQUIRE(!isNaN(value1) && !isNaN(value2))")
    args.require(bool(np.all(np.isfinite(x)) and np.all(np.isfinite(y))),
                 "REQUIRE(is_finite(value1) && is_finite(value2))")
    args.require(bool(np.all(x >= 0)), "REQUIRE(value1 >= 0)")
    args.require(bool(np.all((x > 0) | (y > 0))), "REQUIRE(value1 > 0 || value2 > 0)")
    with np.errstate(all="ignore"):
        return [as_output(args, _fp_result(np.power(x, y), dtype))]


# --------------------------------------------------------------------------- comparisons
_COMPARE = {Op.EQUAL: np.equal, Op.GREATER: np.greater, Op.GREATER_EQUAL: np.greater_equal}


def _compare_checks(args: KernelArgs) -> DType:
    return _binary_checks(args, _I32_FP, DType.BOOL)


def _compare_values(args: KernelArgs, dtype: DType, operands: list[np.ndarray]) -> np.ndarray:
    """EQUAL / GREATER / GREATER_EQUAL of checked operands: a fresh bool array."""
    a, b = operands[0], operands[1]
    if dtype in FP_TYPES:
        a, b = _f32(a), _f32(b)  # exact; numpy comparisons with NaN are false
    return _COMPARE[args.op](a, b)


@register(*_COMPARE, window=broadcast_window, bind=bind_values(_compare_checks, _compare_values))
def compare(args: KernelArgs) -> list[np.ndarray]:
    """EQUAL / GREATER / GREATER_EQUAL to bool; any NaN operand gives false (bound: the checks
    once; a WHILE loop's condition runs at every iteration)."""
    return [as_output(args, _compare_values(args, _compare_checks(args), args.inputs))]


# --------------------------------------------------------------------------- ternary
@checked_once
def _select_checks(args: KernelArgs) -> None:
    args.require(args.input_types[0].dtype is DType.BOOL, "input1 must be bool")
    dtype = args.input_types[1].dtype
    args.require(dtype in _ANY, f"{dtype.name} is not a supported type")
    args.require(args.input_types[2].dtype is dtype, "input2 and input3 types differ")
    args.require(args.output_types[0].dtype is dtype, "output type must equal input2's type")
    check_broadcast(args, 3)


@register(Op.SELECT, window=broadcast_window)
def select(args: KernelArgs) -> list[np.ndarray]:
    """SELECT(cond, a, b) with three-way broadcasting."""
    _select_checks(args)
    cond, a, b = args.inputs
    return [as_output(args, np.where(np.asarray(cond, bool), a, b))]


# --------------------------------------------------------------------------- unary
@checked_once
def unary_checks(args: KernelArgs, allowed: frozenset[DType]) -> DType:
    """Type (in ``allowed``, output equal) and shape (output equal) of a unary operator; memoized."""
    dtype = check_types(args, allowed, 1)
    check_same_shape(args)
    return dtype


def _unary(args: KernelArgs, allowed: frozenset[DType]) -> tuple[DType, np.ndarray]:
    return unary_checks(args, allowed), args.inputs[0]


def same_window(attribute: Attribute, input_types: Sequence[TensorType],
                output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    """Unary ops: the input region is the output region."""
    return [tuple(out_region)]


@register(Op.ABS, window=same_window)
def absolute(args: KernelArgs) -> list[np.ndarray]:
    """ABS: int32 REQUIREs the negation fits (not INT32_MIN); FP -0 and -inf become +."""
    dtype, x = _unary(args, _I32_FP)
    if dtype is DType.INT32:
        x64 = _i64(x)
        args.require(not np.any(x64 == -(1 << 31)),
                     "apply_sub_s: REQUIRE(c >= minimum_s<in_t>() && c <= maximum_s<in_t>())")
        return [as_output(args, np.abs(x64))]
    return [as_output(args, np.abs(x))]


@register(Op.BITWISE_NOT, window=same_window)
def bitwise_not(args: KernelArgs) -> list[np.ndarray]:
    _, x = _unary(args, INT_TYPES)
    return [as_output(args, np.invert(x))]


@register(Op.LOGICAL_NOT, window=same_window)
def logical_not(args: KernelArgs) -> list[np.ndarray]:
    _, x = _unary(args, BOOL)
    return [as_output(args, np.logical_not(np.asarray(x, bool)))]


@register(Op.CLZ, window=same_window)
def clz(args: KernelArgs) -> list[np.ndarray]:
    _, x = _unary(args, I32)
    return [as_output(args, count_leading_zeros_32(x))]


@register(Op.CEIL, Op.FLOOR, window=same_window)
def ceil_floor(args: KernelArgs) -> list[np.ndarray]:
    """CEIL / FLOOR: exact in fp32 for every input type."""
    dtype, x = _unary(args, FP_TYPES)
    fn = np.ceil if args.op == Op.CEIL else np.floor
    return [as_output(args, _fp_result(fn(_f32(x)), dtype))]


def _sigmoid64(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _log64(x: np.ndarray) -> np.ndarray:
    return np.log(x)  # log(+-0) = -inf, log(x < 0) = NaN, as apply_log


def _rsqrt64(x: np.ndarray) -> np.ndarray:
    return np.where(x < 0, np.nan, 1.0 / np.sqrt(x))  # 1/sqrt(-0) = -inf per the table


#: unary functions computed in fp64 and rounded once to the output type
FP64_UNARY: dict[Op, Callable[[np.ndarray], np.ndarray]] = {
    Op.EXP: np.exp, Op.LOG: _log64, Op.SIN: np.sin, Op.COS: np.cos,
    Op.RSQRT: _rsqrt64,
}


@register(*FP64_UNARY, window=same_window)
def fp64_unary(args: KernelArgs) -> list[np.ndarray]:
    dtype, x = _unary(args, FP_TYPES)
    with np.errstate(all="ignore"):
        return [as_output(args, _fp_result(FP64_UNARY[args.op](_f64(x)), dtype))]


@register(Op.RECIPROCAL, window=same_window)
def reciprocal(args: KernelArgs) -> list[np.ndarray]:
    """1.0 / x, correctly rounded (fp32 division; fp32 has > 2p+2 bits for fp16/bf16)."""
    dtype, x = _unary(args, FP_TYPES)
    with np.errstate(all="ignore"):
        return [as_output(args, _fp_result(np.float32(1.0) / _f32(x), dtype))]


@checked_once
def _negate_checks(args: KernelArgs) -> DType:
    dtype = check_types(args, _INT_FP, 1)
    check_same_shape(args)
    for i, name in ((1, "input1_zp"), (2, "output_zp")):
        args.require(args.input_types[i].dtype is dtype, f"{name} must have the input type")
        require_shape_one(args, i, name)
    return dtype


@register(Op.NEGATE, window=scalar_params_window(1))
def negate(args: KernelArgs) -> list[np.ndarray]:
    """NEGATE with input/output zero points (non-zero only for int8), int32 accumulator."""
    dtype = _negate_checks(args)
    x = args.inputs[0]
    in_zp = np.asarray(args.inputs[1]).reshape(-1)[0]
    out_zp = np.asarray(args.inputs[2]).reshape(-1)[0]
    args.require(dtype is DType.INT8 or in_zp == 0, "ERROR_IF(!is_same<in_out_t,i8_t>() && input1_zp != 0)")
    args.require(dtype is DType.INT8 or out_zp == 0, "ERROR_IF(!is_same<in_out_t,i8_t>() && output_zp != 0)")
    if dtype in FP_TYPES:
        return [as_output(args, np.negative(x))]  # exact; -(+0) = -0 as the table says
    value = _i64(x) - int(in_zp)
    _require_range(args, value, DType.INT32, "apply_sub_s")
    value = -value
    _require_range(args, value, DType.INT32, "apply_sub_s")
    value = value + int(out_zp)
    _require_range(args, value, DType.INT32, "apply_add_s")
    lo, hi = signed_range(dtype)
    return [as_output(args, clip_int(value, lo, hi))]


__all__ = [
    "FP_TYPES", "INT_TYPES", "broadcast_window", "check_broadcast", "check_same_shape",
    "check_types", "nan_mode_of", "same_window", "scalar_params_window", "unary_checks",
]
