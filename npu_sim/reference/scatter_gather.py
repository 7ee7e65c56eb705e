"""Scatter/gather kernels (TOSA 1.0 spec, chapter "Scatter/Gather Operators").

GATHER:  output[n, w, c] = values[n, indices[n, w], c]
SCATTER: values_out = values_in, then values_out[n, indices[n, w], c] = input[n, w, c]

Both REQUIRE ``0 <= index < K``; SCATTER also REQUIREs that no output position is
written twice, i.e. no index repeats within a batch row. Results are exact.

Input windows (exact): GATHER reads, for its (n, w, c) region, the whole K range of
``values`` and the (n, w) block of ``indices``; SCATTER reads, for its (n, k, c) region,
the same block of ``values_in`` and whole batch rows of ``indices`` and ``input`` (any w
may land in the k range), so every tile checks the REQUIREs of its rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from npu_sim.reference.kernel_api import BoundKernel, KernelArgs, Region, register
from npu_sim.reference.kernel_util import output_region, read_window
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op

#: in_out_t of GATHER and SCATTER in TOSA 1.0 (index_t is always int32).
SUPPORTED_DTYPES = frozenset({
    DType.INT8, DType.INT16, DType.INT32, DType.FP8E4M3, DType.FP8E5M2,
    DType.FP16, DType.BF16, DType.FP32,
})


def _check_types(args: KernelArgs, values: TensorType, indices: TensorType,
                 data: TensorType, out: TensorType) -> tuple[int, int, int, int]:
    """Shared ERROR_IFs of GATHER and SCATTER; returns N, K, W, C."""
    dtype = values.dtype
    args.require(dtype in SUPPORTED_DTYPES, f"unsupported element type {dtype.name}")
    args.require(data.dtype == dtype and out.dtype == dtype, "value tensors differ in type")
    args.require(indices.dtype is DType.INT32, f"indices must be INT32, got {indices.dtype.name}")
    args.require(len(values.shape) == 3 and len(data.shape) == 3 and len(out.shape) == 3,
                 "value tensors must have rank 3")
    args.require(len(indices.shape) == 2, "indices must have rank 2")
    n, k, c = values.shape
    w = indices.shape[1]
    args.require(indices.shape[0] == n, "indices batch differs from values batch")
    args.require(tuple(data.shape) == (n, w, c), f"expected a [{n}, {w}, {c}] tensor")
    return n, k, w, c


def _require_in_range(args: KernelArgs, indices: np.ndarray, k: int) -> None:
    args.require(bool(np.all((indices >= 0) & (indices < k))),
                 f"index out of range [0, {k}) (REQUIRE 0 <= k < K)")


# --------------------------------------------------------------------------- GATHER
def _gather_window(attribute: Attribute, input_types: Sequence[TensorType],
                   output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    (n0, n1), (w0, w1), (c0, c1) = out_region
    k = input_types[0].shape[1]
    return [((n0, n1), (0, k), (c0, c1)), ((n0, n1), (w0, w1))]


def _lookup(values: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """output[n, w, c] = values[n, indices[n, w], c] (indices in range)."""
    return np.take_along_axis(values, indices[:, :, None], axis=1)


def _bind_gather(args: KernelArgs, const_inputs: Sequence[np.ndarray | None]) -> BoundKernel | None:
    """GATHER whose type checks have passed: the lookup is left, and the REQUIRE on the index
    values (an index out of range runs the kernel, which raises its error). A loop body's
    GATHER of its time step from the whole sequence runs at every iteration."""
    n, k, _ = args.input_types[0].shape
    storage = args.output_types[0].dtype.numpy_dtype
    rows = np.arange(n).reshape(n, 1)   # values[rows, indices] is _lookup's take_along_axis

    def run(inputs: list[np.ndarray]) -> list[np.ndarray]:
        indices = np.asarray(inputs[1])
        if indices.size == 1 and n == 1:   # (a loop's time step: one row, one index, as an int)
            index = int(indices.item(0))
            if 0 <= index < k:
                return [np.array(np.asarray(inputs[0])[:, index:index + 1], dtype=storage)]
            return gather(dataclasses.replace(args, inputs=list(inputs)))
        if indices.size == 1:
            in_range = 0 <= int(indices.reshape(-1)[0]) < k
        else:
            in_range = bool(indices.size) and k > indices.max() and indices.min() >= 0
        if not in_range:   # (the kernel decides: it raises the REQUIRE, or returns nothing)
            return gather(dataclasses.replace(args, inputs=list(inputs)))
        return [np.asarray(inputs[0])[rows, indices].astype(storage, copy=False)]
    return run


@register(Op.GATHER, window=_gather_window, bind=_bind_gather)
def gather(args: KernelArgs) -> list[np.ndarray]:
    """output[n, w, c] = values[n, indices[n, w], c]."""
    values_t, indices_t = args.input_types
    out_t = args.output_types[0]
    n, k, w, c = _check_types(args, values_t, indices_t, out_t, out_t)
    region = output_region(args)
    values_region, indices_region = _gather_window(args.attribute, args.input_types,
                                                   args.output_types, region)
    values = read_window(args, 0, values_region)
    indices = read_window(args, 1, indices_region).astype(np.int64)
    if c > 0:  # the REQUIRE sits inside the loop over c
        _require_in_range(args, indices, k)
    out = _lookup(values, indices) if indices.size else \
        np.empty(tuple(b - a for a, b in region), dtype=values.dtype)
    return [np.array(out, dtype=out_t.dtype.numpy_dtype)]


# --------------------------------------------------------------------------- SCATTER
def _scatter_window(attribute: Attribute, input_types: Sequence[TensorType],
                    output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    (n0, n1), _, (c0, c1) = out_region
    w = input_types[1].shape[1]
    return [tuple(out_region), ((n0, n1), (0, w)), ((n0, n1), (0, w), (c0, c1))]


@register(Op.SCATTER, window=_scatter_window)
def scatter(args: KernelArgs) -> list[np.ndarray]:
    """values_out = values_in with values_out[n, indices[n, w], c] = input[n, w, c]."""
    values_t, indices_t, input_t = args.input_types
    out_t = args.output_types[0]
    n, k, w, c = _check_types(args, values_t, indices_t, input_t, out_t)
    args.require(tuple(out_t.shape) == tuple(values_t.shape), "values_out shape differs from values_in")
    region = output_region(args)
    values_region, indices_region, input_region = _scatter_window(
        args.attribute, args.input_types, args.output_types, region)
    out = np.array(read_window(args, 0, values_region), dtype=out_t.dtype.numpy_dtype)
    indices = read_window(args, 1, indices_region).astype(np.int64)
    data = read_window(args, 2, input_region)
    if c > 0 and indices.size:  # the REQUIREs sit inside the loop over c
        _require_in_range(args, indices, k)
        ordered = np.sort(indices, axis=1)
        args.require(not bool(np.any(ordered[:, 1:] == ordered[:, :-1])),
                     "an output position is written twice (REQUIRE output_modified == false)")
    (_, _), (k0, k1), _ = region
    batch, position = np.nonzero((indices >= k0) & (indices < k1))
    out[batch, indices[batch, position] - k0, :] = data[batch, position, :]
    return [out]


__all__ = ["SUPPORTED_DTYPES", "gather", "scatter"]
