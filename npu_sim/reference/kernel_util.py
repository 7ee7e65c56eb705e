"""Helpers the kernels share to honour the tiled-call contract of :mod:`kernel_api`.

A kernel computes ``output_region(args)`` of its output(s) from input windows that
sit at ``input_offset(args, i)`` in the full tensors; ``read_window`` cuts a region
(in full-tensor coordinates) out of such a window; ``as_output`` turns computed
values into the output array (storage dtype, region shape, rank 0 kept).

``checked_once`` memoizes a kernel's static validation (the ERROR_IFs that depend
only on the operator's attribute and tensor types), so the many calls of one
operator (tiles, invocations) check them once.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

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


def require_shape_one(args: KernelArgs, index: int, name: str) -> None:
    """ERROR_IF unless input ``index`` (a zero point, MUL's shift, PAD's pad_const) has the
    shape [1] tosa.xml gives it: a rank-0 or longer tensor is malformed, not a scalar."""
    shape = tuple(args.input_types[index].shape)
    args.require(shape == (1,), f"{name} must have shape [1], got {list(shape)}")


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
        values = values.astype(storage, order="C")  # a new C array: no second copy needed
        if values.shape == shape:
            return values
        if values.size == math.prod(shape):
            return values.reshape(shape)
    elif values.shape == shape:
        return values.copy(order="C")
    elif values.size == math.prod(shape):
        return np.array(values.reshape(shape), order="C")
    return np.broadcast_to(values, shape).copy()


# --------------------------------------------------------------------------- static checks
#: Signatures remembered per check before the memo starts afresh (bounds memory).
_MAX_SIGNATURES = 4096
#: ``StaticChecks.lookup``'s result for a signature not seen (or not passed) yet.
MISSING: Any = object()
T = TypeVar("T")


def signature(args: KernelArgs) -> Hashable:
    """What static checks may read: operator, attribute, input and output types."""
    return (args.op, args.attribute, tuple(args.input_types), tuple(args.output_types))


class StaticChecks:
    """Results of checks that passed, per :func:`signature` (failures are never stored).

    A check stored here must read nothing but the signature, so that passing once
    means passing for every call with that signature. Unhashable signatures (e.g.
    list shapes) are simply not remembered.
    """

    def __init__(self) -> None:
        self._passed: dict[Hashable, Any] = {}

    def lookup(self, args: KernelArgs, params: tuple = ()) -> tuple[Hashable | None, Any]:
        """(key, stored result), the result being ``MISSING`` when not stored; key None if unhashable.

        ``params``: further hashable inputs of the check (e.g. the dtypes an operator allows).
        """
        key = (signature(args), params)
        try:
            return key, self._passed.get(key, MISSING)
        except TypeError:
            return None, MISSING

    def remember(self, key: Hashable | None, result: Any) -> None:
        if key is None:
            return
        if len(self._passed) >= _MAX_SIGNATURES:
            self._passed.clear()
        self._passed[key] = result


def checked_once(check: Callable[..., T]) -> Callable[..., T]:
    """Memoize ``check(args, *params)``, a static validation that raises on a violated ERROR_IF.

    ``check`` must read only the :func:`signature` of ``args`` and its hashable
    ``params``, and return an immutable result. It runs in full whenever that
    signature has not passed before, so errors (never memoized) are raised exactly
    as without the memo.
    """
    memo = StaticChecks()

    @functools.wraps(check)
    def run(args: KernelArgs, *params: Hashable) -> T:
        key, result = memo.lookup(args, params)
        if result is MISSING:
            result = check(args, *params)
            memo.remember(key, result)
        return result

    return run


__all__ = ["MISSING", "StaticChecks", "as_output", "check_dtype", "checked_once", "input_offset",
           "output_region", "read_window", "shape_values", "signature"]
