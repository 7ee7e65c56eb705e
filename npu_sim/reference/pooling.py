"""Pooling and index operators: ARGMAX, AVG_POOL2D, MAX_POOL2D.

Written from the TOSA 1.0 pseudocode (pseudocode/operators/<OP>.tosac). The
pooling kernels are tile-able (input windows with their halo; the kernel knows
where the padding lies from the full input shape), and each output element is
computed by the same sequence of operations wherever the tile boundaries fall,
so tiles give the bits of the whole-tensor call.

Window positions outside the input are skipped, as in the pseudocode: AVG_POOL2D
divides by the number of valid positions, MAX_POOL2D only compares valid values.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from npu_sim.reference.conv import Axis
from npu_sim.reference.kernel_api import KernelArgs, Region, register
from npu_sim.reference.kernel_util import input_offset, output_region, require_shape_one
from npu_sim.reference.numerics import apply_scale_32
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, NanPropagationMode, Op

#: in_out_t -> allowed acc_t of AVG_POOL2D (tosa.xml typesupport)
AVG_POOL_TYPES: dict[DType, tuple[DType, ...]] = {
    DType.INT8: (DType.INT32,), DType.INT16: (DType.INT32,),
    DType.FP8E4M3: (DType.FP16,), DType.FP8E5M2: (DType.FP16,),
    DType.FP16: (DType.FP16, DType.FP32), DType.BF16: (DType.FP32,), DType.FP32: (DType.FP32,),
}
#: element types of MAX_POOL2D and ARGMAX
MAX_TYPES: frozenset[DType] = frozenset({DType.INT8, DType.INT16, DType.FP8E4M3, DType.FP8E5M2,
                                         DType.FP16, DType.BF16, DType.FP32})


# --------------------------------------------------------------------------- shared helpers
def _pool_axes(args: KernelArgs) -> tuple[Axis, Axis]:
    """Validate the pooling attributes and shapes (ERROR_IFs); return the (y, x) axes."""
    in_shape = tuple(args.input_types[0].shape)
    out_shape = tuple(args.output_types[0].shape)
    args.require(len(in_shape) == 4 and len(out_shape) == 4, "input and output must have rank 4")
    kernel, stride, pad = (tuple(getattr(args.attribute, n)) for n in ("kernel", "stride", "pad"))
    args.require(len(kernel) == 2 and len(stride) == 2 and len(pad) == 4,
                 "kernel and stride need 2 values, pad 4")
    args.require(kernel[0] >= 1 and kernel[1] >= 1, "kernel size must be >= 1")
    args.require(stride[0] >= 1 and stride[1] >= 1, "stride must be >= 1")
    args.require(all(p >= 0 for p in pad), "pad values must be >= 0")
    args.require(pad[2] < kernel[1] and pad[3] < kernel[1], "pad_left/right must be < kernel_x")
    args.require(pad[0] < kernel[0] and pad[1] < kernel[0], "pad_top/bottom must be < kernel_y")
    args.require(out_shape[0] == in_shape[0] and out_shape[3] == in_shape[3],
                 "output batch and channels must equal the input's")
    axes = []
    for d in range(2):
        span = in_shape[1 + d] + pad[2 * d] + pad[2 * d + 1] - kernel[d]
        args.require(span % stride[d] == 0,
                     f"idiv_check: (I + pads - kernel) = {span} on spatial axis {d} "
                     f"is not a multiple of stride {stride[d]}")
        args.require(out_shape[1 + d] == span // stride[d] + 1,
                     f"output size {out_shape[1 + d]} on spatial axis {d} must be {span // stride[d] + 1}")
        axes.append(Axis(in_shape[1 + d], kernel[d], stride[d], pad[2 * d]))
    return axes[0], axes[1]


def _pool_window(attribute: Attribute, input_types: Sequence[TensorType],
                 output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    shape = input_types[0].shape
    (n0, n1), (y0, y1), (x0, x1), (c0, c1) = out_region
    rows = Axis(shape[1], attribute.kernel[0], attribute.stride[0], attribute.pad[0])
    cols = Axis(shape[2], attribute.kernel[1], attribute.stride[1], attribute.pad[2])
    windows = [((n0, n1), rows.input_range(y0, y1), cols.input_range(x0, x1), (c0, c1))]
    return windows + [((0, 1),)] * (len(input_types) - 1)


def _window_input(args: KernelArgs, region: Region) -> tuple[np.ndarray, tuple[int, ...]]:
    """The input restricted to the region's batch and channels, and its offsets."""
    offsets = input_offset(args, 0)
    (n0, n1), _, _, (c0, c1) = region
    x = np.asarray(args.inputs[0])[n0 - offsets[0]:n1 - offsets[0], :, :, c0 - offsets[3]:c1 - offsets[3]]
    return x, offsets


def _taps(rows: Axis, cols: Axis, region: Region,
          offsets: tuple[int, ...]) -> Iterator[tuple[tuple[slice, slice, slice], tuple[slice, slice, slice]]]:
    """(output index, input index) of each window position, in the spec's (ky, kx) order."""
    (y0, y1), (x0, x1) = region[1], region[2]
    for ky, kx in itertools.product(range(rows.kernel), range(cols.kernel)):
        ty = rows.tap(ky, y0, y1, offsets[1])
        tx = cols.tap(kx, x0, x1, offsets[2])
        if ty is not None and tx is not None:
            yield (slice(None), ty[0], tx[0]), (slice(None), ty[1], tx[1])


def _nan_mode(args: KernelArgs, dtype: DType) -> NanPropagationMode:
    mode = NanPropagationMode(int(args.attribute.nan_mode))
    if dtype.is_float:
        args.require(mode in (NanPropagationMode.PROPAGATE, NanPropagationMode.IGNORE),
                     f"nan_mode must be PROPAGATE or IGNORE, got {mode.name}")
    return mode


def apply_max(a: np.ndarray, b: np.ndarray, mode: NanPropagationMode) -> np.ndarray:
    """The spec's apply_max_s(a, b, nan_mode) elementwise (ties return a)."""
    with np.errstate(invalid="ignore"):
        result = np.where(a >= b, a, b)
    if a.dtype.kind != "f":
        return result
    a_nan, b_nan = np.isnan(a), np.isnan(b)
    if mode is NanPropagationMode.IGNORE:
        return np.where(a_nan, b, np.where(b_nan, a, result))
    return np.where(a_nan | b_nan, np.asarray(np.nan, dtype=a.dtype), result)


# --------------------------------------------------------------------------- AVG_POOL2D
def _reciprocal_scale(count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """reciprocal_scale(count) elementwise: (multiplier, shift) with count * multiplier ~ 2**shift."""
    counts = np.asarray(count, dtype=np.int64)
    multiplier = np.empty_like(counts)
    shift = np.empty_like(counts)
    for value in np.unique(counts):
        v = int(value)
        k = (v - 1).bit_length()              # 32 - count_leading_zeros(v - 1)
        numerator = ((1 << 30) + 1) << k
        multiplier[counts == v] = numerator // v
        shift[counts == v] = 30 + k
    return multiplier, shift


@register(Op.AVG_POOL2D, window=_pool_window)
def avg_pool2d(args: KernelArgs) -> list[np.ndarray]:
    """AVG_POOL2D: mean of the valid window positions (padding is not counted)."""
    dtype = args.input_types[0].dtype
    acc_t = DType(args.attribute.acc_type)
    args.require(dtype in AVG_POOL_TYPES, f"unsupported input type {dtype.name}")
    args.require(acc_t in AVG_POOL_TYPES[dtype], f"acc_type {acc_t.name} not allowed for {dtype.name}")
    args.require(args.output_types[0].dtype is dtype, "output type must equal the input type")
    args.require(all(t.dtype is dtype for t in args.input_types[1:3]),
                 "input_zp and output_zp must have the input type")
    rows, cols = _pool_axes(args)
    zps = []
    for index, name in ((1, "input_zp"), (2, "output_zp")):
        require_shape_one(args, index, name)
        value = np.asarray(args.inputs[index]).reshape(-1)[0]
        args.require(dtype is DType.INT8 or value == 0,
                     f"{name} must be zero for {dtype.name} (zero point only for int8)")
        zps.append(int(value) if dtype.is_integer else 0)
    input_zp, output_zp = zps
    region = output_region(args)
    x, offsets = _window_input(args, region)
    out_shape = tuple(b - a for a, b in region)
    count = np.zeros(out_shape[1:3], dtype=np.int64)

    if dtype.is_integer:
        values = x.astype(np.int64) - input_zp
        acc = np.zeros(out_shape, dtype=np.int64)
        lo, hi = acc_t.int_range
        max_abs = int(np.abs(values).max()) if values.size else 0
        checked = rows.kernel * cols.kernel * max_abs > hi
        for out_index, in_index in _taps(rows, cols, region, offsets):
            acc[out_index] += values[in_index]
            count[out_index[1:]] += 1
            if checked:
                part = acc[out_index]
                args.require(part.size == 0 or (part.min() >= lo and part.max() <= hi),
                             "accumulator overflow: apply_add_s REQUIRE")
        multiplier, shift = _reciprocal_scale(np.maximum(count, 1))
        scaled = apply_scale_32(acc, multiplier[None, :, :, None], shift[None, :, :, None],
                                False, require=args.require).astype(np.int64)
        tmin, tmax = dtype.int_range
        out = np.clip(scaled + output_zp, tmin, tmax)
        return [out.astype(dtype.numpy_dtype)]

    acc_np = np.float16 if acc_t is DType.FP16 else np.float32
    values = x.astype(np.float32).astype(acc_np)        # exact: acc_t holds every in_out_t value
    acc = np.zeros(out_shape, dtype=acc_np)
    with np.errstate(over="ignore", invalid="ignore"):
        for out_index, in_index in _taps(rows, cols, region, offsets):
            acc[out_index] += values[in_index]
            count[out_index[1:]] += 1
        # Divide by the exact count in acc_t. (The pseudocode's static_cast<in_out_t>(count)
        # would round 9 to 8 in fp8e5m2; the precision rule is a dot product with 1/count.)
        quotient = acc / count[None, :, :, None].astype(acc_np)
        # static_cast<in_out_t>: one rounding (fp16 -> fp32 is exact)
        return [quotient.astype(np.float32).astype(dtype.numpy_dtype)]


# --------------------------------------------------------------------------- MAX_POOL2D
@register(Op.MAX_POOL2D, window=_pool_window)
def max_pool2d(args: KernelArgs) -> list[np.ndarray]:
    """MAX_POOL2D: maximum of the valid window positions, with the spec's NaN modes."""
    dtype = args.input_types[0].dtype
    args.require(dtype in MAX_TYPES, f"unsupported input type {dtype.name}")
    args.require(args.output_types[0].dtype is dtype, "output type must equal the input type")
    mode = _nan_mode(args, dtype)
    rows, cols = _pool_axes(args)
    region = output_region(args)
    x, offsets = _window_input(args, region)
    out_shape = tuple(b - a for a, b in region)
    if dtype.is_float:
        values = x.astype(np.float32)                    # exact for every float type
        start = np.nan if mode is NanPropagationMode.IGNORE else -np.inf
        acc = np.full(out_shape, start, dtype=np.float32)
    else:
        values = x
        acc = np.full(out_shape, dtype.int_range[0], dtype=dtype.numpy_dtype)
    for out_index, in_index in _taps(rows, cols, region, offsets):
        acc[out_index] = apply_max(acc[out_index], values[in_index], mode)
    return [acc.astype(dtype.numpy_dtype)]


# --------------------------------------------------------------------------- ARGMAX
def _argmax_window(attribute: Attribute, input_types: Sequence[TensorType],
                   output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    axis = attribute.axis
    region = list(out_region)
    region.insert(axis, (0, input_types[0].shape[axis]))
    return [tuple(region)]


@register(Op.ARGMAX, window=_argmax_window)
def argmax(args: KernelArgs) -> list[np.ndarray]:
    """ARGMAX: first index of the largest value along ``axis`` (NaN rules per nan_mode)."""
    dtype = args.input_types[0].dtype
    shape = tuple(args.input_types[0].shape)
    axis = int(args.attribute.axis)
    args.require(dtype in MAX_TYPES, f"unsupported input type {dtype.name}")
    args.require(args.output_types[0].dtype is DType.INT32, "output type must be INT32")
    args.require(len(shape) >= 1, "input rank must be >= 1")
    args.require(0 <= axis < len(shape), f"axis {axis} out of range for rank {len(shape)}")
    expected = shape[:axis] + shape[axis + 1:]
    args.require(tuple(args.output_types[0].shape) == expected,
                 f"output shape {list(args.output_types[0].shape)} must be {list(expected)}")
    mode = _nan_mode(args, dtype)
    region = output_region(args)
    offsets = input_offset(args, 0)
    index = [slice(a - o, b - o) for (a, b), o in zip(region, offsets[:axis] + offsets[axis + 1:])]
    index.insert(axis, slice(0 - offsets[axis], shape[axis] - offsets[axis]))
    x = np.asarray(args.inputs[0])[tuple(index)]
    if x.shape[axis] == 0:
        return [np.zeros(tuple(b - a for a, b in region), dtype=np.int32)]
    if not dtype.is_float:
        return [np.asarray(np.argmax(x, axis=axis), dtype=np.int32)]
    values = x.astype(np.float32)
    if mode is NanPropagationMode.PROPAGATE:
        # numpy's argmax returns the first NaN if there is one, else the first maximum
        # (-0.0 == +0.0): exactly the spec's loop.
        return [np.asarray(np.argmax(values, axis=axis), dtype=np.int32)]
    nan = np.isnan(values)
    keys = np.where(nan, -np.inf, values)
    best = np.max(keys, axis=axis, keepdims=True)
    hits = (keys == best) & ~nan
    return [np.asarray(np.argmax(hits, axis=axis), dtype=np.int32)]  # all NaN: index 0


__all__ = ["AVG_POOL_TYPES", "MAX_TYPES", "apply_max", "argmax", "avg_pool2d", "max_pool2d"]
