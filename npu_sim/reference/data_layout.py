"""Data layout kernels (TOSA 1.0 spec, chapter "Data Layout"): CONCAT, PAD, RESHAPE,
REVERSE, SLICE, TILE, TRANSPOSE and IDENTITY.

Every kernel only moves values, so results are exact for every dtype. Each kernel
computes the requested ``out_region`` from whatever input window it was given
(``input_offsets`` place the window in the full tensor), so tiled and whole-tensor
execution give the same bits.

Input windows: CONCAT, REVERSE, TILE, TRANSPOSE and IDENTITY windows are exact.
PAD and SLICE take their amounts from SHAPE operands, which the window callback of
:mod:`kernel_api` does not receive; their windows are exact when those values are
passed as ``const_inputs`` and otherwise conservative (a dimension is followed only
where the shapes alone prove its offset is zero). RESHAPE reads its whole input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from npu_sim.reference.kernel_api import BoundKernel, InputWindow, KernelArgs, Region, full_region, register
from npu_sim.reference.kernel_util import check_dtype, output_region, read_window, require_shape_one, shape_values
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op

#: in_out_t of the data layout operators in TOSA 1.0 (PRO-INT, PRO-FP, EXT-INT16,
#: EXT-BF16, EXT-FP8E4M3, EXT-FP8E5M2; tosa.xml).
LAYOUT_DTYPES = frozenset({
    DType.BOOL, DType.INT8, DType.INT16, DType.INT32, DType.FP8E4M3, DType.FP8E5M2,
    DType.FP16, DType.BF16, DType.FP32,
})
#: IDENTITY also passes EXT-INT4 and int48 (EXT-INT16) values.
IDENTITY_DTYPES = LAYOUT_DTYPES | {DType.INT4, DType.INT48}


# --------------------------------------------------------------------------- IDENTITY
def _identity_window(attribute: Attribute, input_types: Sequence[TensorType],
                     output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    return [tuple(out_region)]


def _bind_identity(args: KernelArgs, const_inputs: Sequence[np.ndarray | None]) -> BoundKernel:
    """IDENTITY whose checks have passed: only the copy is left (a WHILE loop carries its state
    with one at every iteration)."""
    storage = args.output_types[0].dtype.numpy_dtype
    return lambda inputs: [np.array(inputs[0], dtype=storage, copy=True)]


@register(Op.IDENTITY, window=_identity_window, bind=_bind_identity)
def identity(args: KernelArgs) -> list[np.ndarray]:
    """output = input1."""
    dtype = check_dtype(args, IDENTITY_DTYPES)
    args.require(args.input_types[0].shape == args.output_types[0].shape,
                 "output shape differs from input shape")
    region = output_region(args)
    return [np.array(read_window(args, 0, region), dtype=dtype.numpy_dtype, copy=True)]


# --------------------------------------------------------------------------- CONCAT
def _concat_spans(input_types: Sequence[TensorType], axis: int) -> list[tuple[int, int]]:
    """(start, stop) of each input along the concatenation axis of the output."""
    spans, start = [], 0
    for t in input_types:
        spans.append((start, start + t.shape[axis]))
        start += t.shape[axis]
    return spans


def _concat_window(attribute: Attribute, input_types: Sequence[TensorType],
                   output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    axis = attribute.axis
    regions = []
    for (lo, hi) in _concat_spans(input_types, axis):
        start, stop = max(out_region[axis][0], lo) - lo, min(out_region[axis][1], hi) - lo
        axis_range = (start, stop) if stop > start else (0, 0)
        regions.append(tuple(axis_range if d == axis else r for d, r in enumerate(out_region)))
    return regions


@register(Op.CONCAT, window=_concat_window)
def concat(args: KernelArgs) -> list[np.ndarray]:
    """Concatenate the inputs along ``axis``."""
    args.require(len(args.inputs) >= 1, "CONCAT needs at least one input")
    dtype = check_dtype(args, LAYOUT_DTYPES)
    shapes = [t.shape for t in args.input_types]
    out_shape = args.output_types[0].shape
    rank = len(shapes[0])
    axis = args.attribute.axis
    args.require(0 <= axis < max(1, rank), f"axis {axis} out of range for rank {rank}")
    for t in args.input_types:
        args.require(t.dtype == dtype, "inputs have different element types")
        args.require(len(t.shape) == rank, "inputs have different ranks")
        for d in range(rank):
            args.require(d == axis or t.shape[d] == shapes[0][d],
                         f"inputs differ in dimension {d}")
    args.require(len(out_shape) == rank, "output rank differs from input rank")
    args.require(sum(s[axis] for s in shapes) == out_shape[axis],
                 "output axis size is not the sum of the input axis sizes")
    for d in range(rank):
        args.require(d == axis or out_shape[d] == shapes[0][d], f"output differs in dimension {d}")

    region = output_region(args)
    out = np.empty(tuple(b - a for a, b in region), dtype=dtype.numpy_dtype)
    axis_start = region[axis][0]
    for index, ((lo, hi), in_region) in enumerate(
            zip(_concat_spans(args.input_types, axis), _concat_window(
                args.attribute, args.input_types, args.output_types, region))):
        start, stop = max(region[axis][0], lo), min(region[axis][1], hi)
        if stop <= start:
            continue
        dest = [slice(None)] * rank
        dest[axis] = slice(start - axis_start, stop - axis_start)
        out[tuple(dest)] = read_window(args, index, in_region)
    return [out]


# --------------------------------------------------------------------------- PAD
def pad_input_region(padding: Sequence[int], input_shape: Sequence[int],
                     out_region: Region) -> Region:
    """Input region that ``out_region`` of a PAD output reads (empty ranges are (0, 0))."""
    region = []
    for d, (start, stop) in enumerate(out_region):
        lo = max(start - padding[2 * d], 0)
        hi = min(stop - padding[2 * d], input_shape[d])
        region.append((lo, hi) if hi > lo else (0, 0))
    return tuple(region)


def _shape_operand_window(exact_region: Callable[[list[int], Sequence[int], Region], Region]) -> InputWindow:
    """Window of PAD/SLICE: the data region from the SHAPE operand (input 1) when it is known
    (``exact_region(values, input_shape, out_region)``); without it only dimensions whose size
    is unchanged (so offset zero) are followed. The other operands are read whole."""

    def window(attribute: Attribute, input_types: Sequence[TensorType],
               output_types: Sequence[TensorType], out_region: Region,
               const_inputs: Sequence[np.ndarray | None] | None = None) -> list[Region]:
        in_shape = input_types[0].shape
        if const_inputs is not None and const_inputs[1] is not None:
            values = [int(v) for v in np.asarray(const_inputs[1]).reshape(-1)]
            data_region = exact_region(values, in_shape, out_region)
        else:
            out_shape = output_types[0].shape
            data_region = tuple(r if in_shape[d] == out_shape[d] else (0, in_shape[d])
                                for d, r in enumerate(out_region))
        return [data_region] + [full_region(t.shape) for t in input_types[1:]]

    return window


_pad_window = _shape_operand_window(pad_input_region)


@register(Op.PAD, window=_pad_window)
def pad(args: KernelArgs) -> list[np.ndarray]:
    """Pad input1 with pad_const: padding[2d] before and padding[2d+1] after dimension d."""
    dtype = check_dtype(args, LAYOUT_DTYPES)
    in_shape, out_shape = args.input_types[0].shape, args.output_types[0].shape
    rank = len(in_shape)
    args.require(len(out_shape) == rank, "output rank differs from input rank")
    padding = shape_values(args, 1, "padding", 2 * rank)
    args.require(args.input_types[2].dtype == dtype, "pad_const type differs from input type")
    require_shape_one(args, 2, "pad_const")
    pad_const = np.asarray(args.inputs[2]).reshape(-1)
    for d in range(rank):
        args.require(padding[2 * d] >= 0 and padding[2 * d + 1] >= 0,
                     f"negative padding in dimension {d}")
        args.require(out_shape[d] == padding[2 * d] + in_shape[d] + padding[2 * d + 1],
                     f"output dimension {d} is not input plus padding")

    region = output_region(args)
    out = np.full(tuple(b - a for a, b in region), pad_const[0], dtype=dtype.numpy_dtype)
    in_region = pad_input_region(padding, in_shape, region)
    if all(hi > lo for lo, hi in in_region):
        dest = tuple(slice(lo + padding[2 * d] - region[d][0], hi + padding[2 * d] - region[d][0])
                     for d, (lo, hi) in enumerate(in_region))
        out[dest] = read_window(args, 0, in_region)
    return [out]


# --------------------------------------------------------------------------- RESHAPE
def _reshape_window(attribute: Attribute, input_types: Sequence[TensorType],
                    output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    # Any output region may read from anywhere in the row-major order: whole input.
    return [full_region(input_types[0].shape), full_region(input_types[1].shape)]


def _bind_reshape(args: KernelArgs, const_inputs: Sequence[np.ndarray | None]) -> BoundKernel | None:
    """RESHAPE with a constant shape operand: its checks have passed; only the copy is left."""
    if const_inputs[1] is None:
        return None
    out_type = args.output_types[0]
    shape, storage = out_type.shape, out_type.dtype.numpy_dtype
    return lambda inputs: [np.array(inputs[0].reshape(shape), dtype=storage)]


@register(Op.RESHAPE, window=_reshape_window, bind=_bind_reshape)
def reshape(args: KernelArgs) -> list[np.ndarray]:
    """Same values in row-major order, new shape (the SHAPE operand, equal to the output's)."""
    dtype = check_dtype(args, LAYOUT_DTYPES)
    in_type, out_type = args.input_types[0], args.output_types[0]
    new_shape = shape_values(args, 1, "shape", len(out_type.shape))
    args.require(tuple(new_shape) == tuple(out_type.shape),
                 f"shape operand {new_shape} differs from the output shape {list(out_type.shape)}")
    args.require(in_type.element_count == out_type.element_count,
                 "input and output element counts differ")
    whole = read_window(args, 0, full_region(in_type.shape)).reshape(out_type.shape)
    region = output_region(args)
    return [np.array(whole[tuple(slice(a, b) for a, b in region)], dtype=dtype.numpy_dtype)]


# --------------------------------------------------------------------------- REVERSE
def _reverse_window(attribute: Attribute, input_types: Sequence[TensorType],
                    output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    axis = attribute.axis
    if not 0 <= axis < len(out_region):
        return [full_region(input_types[0].shape)]  # the kernel reports the ERROR_IF
    size = input_types[0].shape[axis]
    start, stop = out_region[axis]
    return [tuple((size - stop, size - start) if d == axis else r for d, r in enumerate(out_region))]


@register(Op.REVERSE, window=_reverse_window)
def reverse(args: KernelArgs) -> list[np.ndarray]:
    """Reverse the order of the values along ``axis``."""
    dtype = check_dtype(args, LAYOUT_DTYPES)
    shape = args.input_types[0].shape
    axis = args.attribute.axis
    args.require(0 <= axis < len(shape), f"axis {axis} out of range for rank {len(shape)}")
    args.require(args.output_types[0].shape == shape, "output shape differs from input shape")
    region = output_region(args)
    window = read_window(args, 0, _reverse_window(args.attribute, args.input_types,
                                                  args.output_types, region)[0])
    return [np.array(np.flip(window, axis=axis), dtype=dtype.numpy_dtype)]


# --------------------------------------------------------------------------- SLICE
def _slice_input_region(start: Sequence[int], input_shape: Sequence[int], out_region: Region) -> Region:
    return tuple((a + s, b + s) for (a, b), s in zip(out_region, start))


_slice_window = _shape_operand_window(_slice_input_region)


def _bind_slice(args: KernelArgs, const_inputs: Sequence[np.ndarray | None]) -> BoundKernel | None:
    """SLICE with constant start and size: its checks have passed; only the copy is left."""
    start = const_inputs[1]
    if start is None or const_inputs[2] is None:
        return None
    out_type = args.output_types[0]
    begin = [int(v) for v in np.asarray(start).reshape(-1)]
    index = tuple(slice(b, b + size) for b, size in zip(begin, out_type.shape))
    storage = out_type.dtype.numpy_dtype
    return lambda inputs: [np.array(inputs[0][index], dtype=storage)]


@register(Op.SLICE, window=_slice_window, bind=_bind_slice)
def slice_(args: KernelArgs) -> list[np.ndarray]:
    """The block of input1 starting at ``start`` with extent ``size`` (SHAPE operands)."""
    dtype = check_dtype(args, LAYOUT_DTYPES)
    in_shape, out_shape = args.input_types[0].shape, args.output_types[0].shape
    rank = len(in_shape)
    start = shape_values(args, 1, "start", rank)
    size = shape_values(args, 2, "size", rank)
    args.require(len(out_shape) == rank, "output rank differs from input rank")
    for d in range(rank):
        args.require(start[d] >= 0, f"start[{d}] is negative")
        args.require(size[d] > 0, f"size[{d}] is not positive")
        args.require(start[d] + size[d] <= in_shape[d], f"slice exceeds input in dimension {d}")
        args.require(out_shape[d] == size[d], f"output dimension {d} differs from size[{d}]")
    in_region = _slice_input_region(start, in_shape, output_region(args))
    return [np.array(read_window(args, 0, in_region), dtype=dtype.numpy_dtype)]


# --------------------------------------------------------------------------- TILE
def _tile_window(attribute: Attribute, input_types: Sequence[TensorType],
                 output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    in_shape = input_types[0].shape
    region = []
    for d, (start, stop) in enumerate(out_region):
        size = in_shape[d]
        if size <= 0 or stop <= start:
            region.append((0, 0))
        elif start // size == (stop - 1) // size:  # the region lies within one copy
            region.append((start % size, (stop - 1) % size + 1))
        else:
            region.append((0, size))
    return [tuple(region), full_region(input_types[1].shape)]


@register(Op.TILE, window=_tile_window)
def tile(args: KernelArgs) -> list[np.ndarray]:
    """Replicate input1 ``multiples[d]`` times along each dimension d."""
    dtype = check_dtype(args, LAYOUT_DTYPES)
    in_shape, out_shape = args.input_types[0].shape, args.output_types[0].shape
    rank = len(in_shape)
    args.require(len(out_shape) == rank, "output rank differs from input rank")
    multiples = shape_values(args, 1, "multiples", rank)
    for d in range(rank):
        args.require(in_shape[d] * multiples[d] == out_shape[d],
                     f"output dimension {d} is not input times multiples[{d}]")
    region = output_region(args)
    in_region = _tile_window(args.attribute, args.input_types, args.output_types, region)[0]
    window = read_window(args, 0, in_region)
    # out[i] = in[i % size]; index the window with the wrapped coordinates per dimension.
    index = np.ix_(*[(np.arange(a, b) % in_shape[d]) - in_region[d][0]
                     for d, (a, b) in enumerate(region)])
    return [np.array(window[index], dtype=dtype.numpy_dtype)]


# --------------------------------------------------------------------------- TRANSPOSE
def _transpose_window(attribute: Attribute, input_types: Sequence[TensorType],
                      output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    perms = list(attribute.perms)
    rank = len(input_types[0].shape)
    if sorted(perms) != list(range(rank)) or len(out_region) != rank:
        return [full_region(input_types[0].shape)]  # the kernel reports the ERROR_IF
    region: list[tuple[int, int]] = [(0, 0)] * rank
    for i, p in enumerate(perms):
        region[p] = out_region[i]
    return [tuple(region)]


@register(Op.TRANSPOSE, window=_transpose_window)
def transpose(args: KernelArgs) -> list[np.ndarray]:
    """output[index] = input1[index permuted]: output dimension i is input dimension perms[i]."""
    dtype = check_dtype(args, LAYOUT_DTYPES)
    in_shape, out_shape = args.input_types[0].shape, args.output_types[0].shape
    rank = len(in_shape)
    perms = list(args.attribute.perms)
    args.require(len(out_shape) == rank, "output rank differs from input rank")
    args.require(len(perms) == rank, f"perms has {len(perms)} entries, expected {rank}")
    used = [False] * rank
    for p in perms:
        args.require(0 <= p < rank, f"perms value {p} out of range")
        args.require(not used[p], f"perms value {p} repeated")
        used[p] = True
    for i in range(rank):
        args.require(in_shape[perms[i]] == out_shape[i],
                     f"output dimension {i} differs from input dimension {perms[i]}")
    region = output_region(args)
    window = read_window(args, 0, _transpose_window(args.attribute, args.input_types,
                                                    args.output_types, region)[0])
    return [np.array(np.transpose(window, perms), dtype=dtype.numpy_dtype)]


__all__ = [
    "IDENTITY_DTYPES", "LAYOUT_DTYPES", "check_dtype", "concat", "identity", "output_region",
    "pad", "pad_input_region", "read_window", "reshape", "reverse", "shape_values", "slice_",
    "tile", "transpose",
]
