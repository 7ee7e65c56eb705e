"""Helpers the kernels share to honour the tiled-call contract of :mod:`kernel_api`.

A kernel computes ``output_region(args)`` of its output(s) from input windows that
sit at ``input_offset(args, i)`` in the full tensors; ``read_window`` cuts a region
(in full-tensor coordinates) out of such a window; ``as_output`` turns computed
values into the output array (storage dtype, region shape, rank 0 kept).
"""

from __future__ import annotations

import math

import numpy as np

from npu_sim.reference.kernel_api import KernelArgs, Region, full_region
from npu_sim.tosa.dtype import DType


def output_region(args: KernelArgs) -> Region:
    """The region of the output this call computes (the whole output if untiled)."""
    if args.out_region is not None:
        return tuple((int(a), int(b)) for a, b in args.out_region)
    return full_region(args.output_types[0].shape)


def input_offset(args: KernelArgs, index: int) -> tuple[int, ...]:
    """Where the window of input ``index`` starts in the full tensor (zeros if untiled)."""
    if args.input_offsets is None:
        return (0,) * len(args.input_types[index].shape)
    return tuple(args.input_offsets[index])


def read_window(args: KernelArgs, index: int, region: Region) -> np.ndarray:
    """Input ``index`` restricted to ``region`` (full-tensor coordinates).

    Raises ``ValueError`` (a caller bug, not a TOSA error) if the window the caller
    supplied does not cover ``region``.
    """
    data = args.inputs[index]
    offsets = (args.input_offsets[index] if args.input_offsets is not None
               else (0,) * data.ndim)
    slices = []
    for (start, stop), offset, size in zip(region, offsets, data.shape):
        lo, hi = start - offset, stop - offset
        if stop > start and (lo < 0 or hi > size):
            raise ValueError(f"input {index} window at {tuple(offsets)} of shape {data.shape} "
                             f"does not cover region {region}")
        slices.append(slice(lo, hi) if stop > start else slice(0, 0))
    return data[tuple(slices)]


def shape_values(args: KernelArgs, index: int, name: str, length: int) -> list[int]:
    """The SHAPE operand ``index`` as ints, with an ERROR_IF on its length."""
    values = np.asarray(args.inputs[index]).reshape(-1)
    args.require(values.size == length, f"{name} has {values.size} values, expected {length}")
    return [int(v) for v in values]


def check_dtype(args: KernelArgs, allowed: frozenset[DType]) -> DType:
    """ERROR_IF the input and output element types differ or are not in ``allowed``."""
    dtype = args.input_types[0].dtype
    args.require(dtype in allowed, f"unsupported element type {dtype.name}")
    args.require(args.output_types[0].dtype == dtype,
                 f"output type {args.output_types[0].dtype.name} differs from input type {dtype.name}")
    return dtype


def as_output(args: KernelArgs, values: np.ndarray, index: int = 0) -> np.ndarray:
    """``values`` as output ``index``: its storage dtype, the (region) shape, a fresh C array.

    Values of the region's size are reshaped, others broadcast. Rank 0 stays rank 0
    (``np.ascontiguousarray`` would make it shape (1,)).
    """
    storage = args.output_types[index].dtype.numpy_dtype
    shape = args.out_shape
    values = np.asarray(values)
    if values.dtype != storage:
        values = values.astype(storage)
    if values.size == math.prod(shape):
        return np.array(values.reshape(shape), order="C")
    return np.broadcast_to(values, shape).copy()


__all__ = ["as_output", "check_dtype", "input_offset", "output_region", "read_window", "shape_values"]
