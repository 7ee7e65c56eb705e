"""Reduction kernels (TOSA 1.0 spec, chapter "Reduction Operators"): REDUCE_ALL,
REDUCE_ANY, REDUCE_MAX, REDUCE_MIN, REDUCE_PRODUCT and REDUCE_SUM.

Each call reduces the whole ``axis`` in the pseudocode's order (index 0 upwards), so
a result never depends on how the other dimensions are tiled:

* REDUCE_SUM int32 checks every partial sum (``apply_add_s`` REQUIREs no overflow);
* floating-point sums and products are accumulated sequentially in fp64 (within the
  dot-product / product accuracy bounds of the spec) and rounded once to the output
  type; ``acc = 0`` first, so a sum of negative zeros is +0 as in the pseudocode;
* REDUCE_MAX/MIN follow ``apply_max_s``/``apply_min_s`` including the zero sign they
  imply (max keeps the first of equal zeros, min the last) and ``nan_mode``.

Input window: the whole reduced axis; the other dimensions follow the output region.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from npu_sim.reference.kernel_api import KernelArgs, Region, register
from npu_sim.reference.kernel_util import check_dtype, output_region, read_window
from npu_sim.reference.numerics import round_to_float
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, NanPropagationMode, Op

_FP = (DType.FP16, DType.BF16, DType.FP32)
#: in_out_t per operator (tosa.xml, TOSA 1.0: PRO-INT, PRO-FP, EXT-BF16).
SUPPORTED_DTYPES: dict[Op, frozenset[DType]] = {
    Op.REDUCE_ALL: frozenset({DType.BOOL}),
    Op.REDUCE_ANY: frozenset({DType.BOOL}),
    Op.REDUCE_MAX: frozenset({DType.INT8, DType.INT16, DType.INT32, *_FP}),
    Op.REDUCE_MIN: frozenset({DType.INT8, DType.INT16, DType.INT32, *_FP}),
    Op.REDUCE_PRODUCT: frozenset(_FP),
    Op.REDUCE_SUM: frozenset({DType.INT32, *_FP}),
}
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def _reduce_window(attribute: Attribute, input_types: Sequence[TensorType],
                   output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    in_shape = input_types[0].shape
    axis = attribute.axis
    return [tuple((0, in_shape[d]) if d == axis else r for d, r in enumerate(out_region))]


def _prepare(args: KernelArgs) -> tuple[np.ndarray, int, DType]:
    """Check the ERROR_IFs; return the input rows for the output region, axis and dtype."""
    in_type, out_type = args.input_types[0], args.output_types[0]
    dtype = check_dtype(args, SUPPORTED_DTYPES[args.op])
    rank, axis = len(in_type.shape), args.attribute.axis
    args.require(0 <= axis < rank, f"axis {axis} out of range for rank {rank}")
    args.require(len(out_type.shape) == rank, "output rank differs from input rank")
    args.require(out_type.shape[axis] == 1, f"output dimension {axis} (the axis) is not 1")
    for d in range(rank):
        args.require(d == axis or out_type.shape[d] == in_type.shape[d],
                     f"output dimension {d} differs from the input")
    window = _reduce_window(args.attribute, args.input_types, args.output_types,
                            output_region(args))[0]
    return read_window(args, 0, window), axis, dtype


def _sum_int32(args: KernelArgs, x: np.ndarray, axis: int) -> np.ndarray:
    """Sequential int32 sum; REQUIRE each partial sum to fit (apply_add_s)."""
    if x.shape[axis] == 0:
        return np.zeros(x.shape[:axis] + (1,) + x.shape[axis + 1:], dtype=np.int32)
    partial = np.cumsum(x.astype(np.int64), axis=axis)
    args.require(bool(np.all((partial >= _INT32_MIN) & (partial <= _INT32_MAX))),
                 "int32 accumulator overflow (apply_add_s REQUIRE)")
    return np.take(partial, [-1], axis=axis).astype(np.int32)


def _accumulate(ufunc: np.ufunc, x: np.ndarray, axis: int, identity: float) -> np.ndarray:
    """Sequential fp64 reduction ``identity op x[0] op x[1] ...`` along ``axis`` (keepdims)."""
    if x.shape[axis] == 0:
        return np.full(x.shape[:axis] + (1,) + x.shape[axis + 1:], identity)
    with np.errstate(all="ignore"):
        running = ufunc.accumulate(x.astype(np.float64), axis=axis)
        # Applying the identity last equals applying it first (it only turns -0 into +0
        # for a sum); ufunc.accumulate is strictly sequential.
        return ufunc(np.take(running, [-1], axis=axis), identity)


def _extreme(x: np.ndarray, axis: int, dtype: DType, nan_mode: NanPropagationMode,
             is_max: bool) -> np.ndarray:
    """REDUCE_MAX (``is_max``) or REDUCE_MIN along ``axis`` (keepdims)."""
    pick = np.max if is_max else np.min
    if not dtype.is_float:
        return pick(x, axis=axis, keepdims=True)
    xf = x.astype(np.float32)  # exact for fp16/bf16
    nan = np.isnan(xf)
    fill = np.float32(-np.inf if is_max else np.inf)
    result = pick(np.where(nan, fill, xf), axis=axis, keepdims=True)
    if nan_mode == NanPropagationMode.IGNORE:
        result = np.where(np.all(nan, axis=axis, keepdims=True), np.float32(np.nan), result)
    else:
        result = np.where(np.any(nan, axis=axis, keepdims=True), np.float32(np.nan), result)
    # Equal zeros: apply_max_s keeps the accumulator (the first zero seen), apply_min_s
    # takes the new value (the last zero seen).
    zero = xf == 0
    if np.any(zero):
        n = x.shape[axis]
        position = (np.argmax(zero, axis=axis) if is_max
                    else n - 1 - np.argmax(np.flip(zero, axis=axis), axis=axis))
        chosen = np.take_along_axis(xf, np.expand_dims(position, axis), axis=axis)
        result = np.where(result == 0, chosen, result)
    return result


def _reduce(args: KernelArgs) -> list[np.ndarray]:
    x, axis, dtype = _prepare(args)
    op = args.op
    if op == Op.REDUCE_ALL:
        out = np.all(x, axis=axis, keepdims=True)
    elif op == Op.REDUCE_ANY:
        out = np.any(x, axis=axis, keepdims=True)
    elif op in (Op.REDUCE_MAX, Op.REDUCE_MIN):
        out = _extreme(x, axis, dtype, args.attribute.nan_mode, op == Op.REDUCE_MAX)
    elif op == Op.REDUCE_SUM and dtype is DType.INT32:
        out = _sum_int32(args, x, axis)
    elif op == Op.REDUCE_SUM:
        out = round_to_float(_accumulate(np.add, x, axis, 0.0), dtype)
    else:
        out = round_to_float(_accumulate(np.multiply, x, axis, 1.0), dtype)
    return [np.asarray(out).astype(dtype.numpy_dtype)]


register(*SUPPORTED_DTYPES, window=_reduce_window)(_reduce)

__all__ = ["SUPPORTED_DTYPES"]
