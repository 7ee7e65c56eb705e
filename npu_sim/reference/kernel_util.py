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
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

import numpy as np

from npu_sim.reference.kernel_api import Binder, BoundKernel, KernelArgs, Region, full_region, run_kernel
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType


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


#: Signatures remembered per check before the memo starts afresh (bounds memory).
_MAX_SIGNATURES = 4096
#: ``StaticChecks.lookup``'s result for a signature not seen (or not passed) yet.
MISSING: Any = object()
T = TypeVar("T")


def fresh_output(args: KernelArgs, index: int = 0) -> Callable[[np.ndarray], np.ndarray]:
    """:func:`as_output` for values a kernel has just computed and nothing else holds: returned
    as they are when already a C array of the storage dtype and shape (no copy needed)."""
    storage, shape = args.output_types[index].dtype.numpy_dtype, args.out_shape

    def output(values: np.ndarray) -> np.ndarray:
        if type(values) is np.ndarray and values.dtype == storage and values.shape == shape \
                and values.flags.c_contiguous:
            return values
        return as_output(args, values, index)

    return output


#: The part of an elementwise kernel after its static checks: (arguments without operands,
#: the checks' result, operands) -> the values of the output.
Values = Callable[[KernelArgs, Any, list[np.ndarray]], np.ndarray]


def bind_values(checks: Callable[[KernelArgs], Any], values: Values) -> Binder:
    """Binder of a kernel written ``as_output(args, values(args, checks(args), args.inputs))``
    whose ``values`` returns a fresh array: the checks are done, only ``values`` runs.

    Like every bound kernel it runs with numpy's floating-point warnings off (the executor
    sets that), so ``values`` itself needs no ``np.errstate``.
    """

    def bind(args: KernelArgs, const_inputs: Sequence[np.ndarray | None]) -> BoundKernel:
        static = args.static()
        checked = checks(args)
        output = fresh_output(static)
        return lambda operands: [output(values(static, checked, operands))]

    return bind


# --------------------------------------------------------------------------- tables
#: int8 / int16: (every value in order, the unsigned view of the storage, the width)
_TABLE_TYPES = {DType.INT8: (np.int8, np.uint8, 8), DType.INT16: (np.int16, np.uint16, 16)}


def int8_table(args: KernelArgs, const_inputs: Sequence[np.ndarray | None],
               data_index: int = 0) -> BoundKernel | None:
    """A bound kernel of an operator elementwise in one int8 operand (the others constant):
    the kernel's own results for all 256 values, looked up per element.

    For binders of elementwise operators only (the caller knows the operator is). None
    when the operand is not int8, another operand is not constant, or the kernel rejects
    some int8 value: a REQUIRE that only some data violates stays the plain kernel's to
    report.
    """
    return _value_table(args, const_inputs, data_index, DType.INT8)


def int16_table(args: KernelArgs, const_inputs: Sequence[np.ndarray | None],
                data_index: int = 0) -> BoundKernel | None:
    """:func:`int8_table` for an int16 operand: 65536 results (256 KiB for int32 ones), so
    for operators whose arithmetic is long (TABLE's interpolation), not for every one."""
    return _value_table(args, const_inputs, data_index, DType.INT16)


def _value_table(args: KernelArgs, const_inputs: Sequence[np.ndarray | None], data_index: int,
                 dtype: DType) -> BoundKernel | None:
    data_type, (out_type, *more) = args.input_types[data_index], args.output_types
    if data_type.dtype is not dtype or more or out_type.shape != data_type.shape:
        return None
    if any(value is None for i, value in enumerate(const_inputs) if i != data_index):
        return None
    storage, unsigned, bits = _TABLE_TYPES[dtype]
    count = 1 << bits
    values = np.arange(-(count >> 1), count >> 1, dtype=storage)  # value v at v + count / 2
    inputs = [np.asarray(value) for value in const_inputs[:data_index]] + [values] + \
        [np.asarray(value) for value in const_inputs[data_index + 1:]]
    input_types = list(args.input_types)
    input_types[data_index] = TensorType((count,), dtype)
    table_args = KernelArgs(args.op, args.attribute, inputs, input_types,
                            [TensorType((count,), out_type.dtype)], args.name)
    try:
        table = run_kernel(table_args)[0]
    except Exception:  # whatever fails, the plain kernel runs and reports it
        return None
    if not isinstance(table, np.ndarray) or table.shape != (count,) or table.dtype != out_type.dtype.numpy_dtype:
        return None
    by_bits = table[np.arange(count) ^ (count >> 1)]  # v + count / 2 == (v as unsigned) ^ (count / 2)

    def look_up(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [by_bits.take(operands[data_index].view(unsigned))]

    return look_up


# --------------------------------------------------------------------------- static checks
def signature(args: KernelArgs) -> Hashable:
    """What static checks may read: operator, attribute, input and output types."""
    return (args.op, args.attribute, tuple(args.input_types), tuple(args.output_types))


class StaticChecks:
    """Results of checks that passed, per :func:`signature` (failures are never stored).

    A check stored here must read nothing but the signature, so that passing once
    means passing for every call with that signature. Unhashable signatures (e.g.
    list shapes) are simply not remembered. Calls carrying a ``memo`` (one operator
    called repeatedly: one signature) keep their results there, found without hashing
    the signature.
    """

    def __init__(self) -> None:
        self._passed: dict[Hashable, Any] = {}

    def lookup(self, args: KernelArgs, params: tuple[Hashable, ...] = ()) -> Any:
        """The stored result for ``args``' signature and ``params``, or ``MISSING``.

        ``params``: further hashable inputs of the check (e.g. the dtypes an operator allows).
        """
        if args.memo is not None:
            return args.memo.get((self, params), MISSING)
        try:
            return self._passed.get((signature(args), params), MISSING)
        except TypeError:
            return MISSING

    def remember(self, args: KernelArgs, params: tuple[Hashable, ...], result: Any) -> None:
        if args.memo is not None:
            args.memo[(self, params)] = result
            return
        key = (signature(args), params)
        try:
            hash(key)
        except TypeError:
            return
        if len(self._passed) >= _MAX_SIGNATURES:
            self._passed.clear()
        self._passed[key] = result


def constant_plan(args: KernelArgs, plan: Callable[[KernelArgs], T], inputs: tuple[int, ...] = ()) -> T:
    """``plan(args)``: what a kernel works out from the signature and inputs ``inputs``
    (validation included), remembered in ``args.memo`` when those inputs are constants.

    ``plan`` must read nothing else; it runs in full until it has succeeded once, so its
    errors are raised exactly as without the memo.
    """
    memo = args.memo
    if memo is None or not args.constant_inputs.issuperset(inputs):
        return plan(args)
    result = memo.get(plan, MISSING)
    if result is MISSING:
        result = memo[plan] = plan(args)
    return result


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
        result = memo.lookup(args, params)
        if result is MISSING:
            result = check(args, *params)
            memo.remember(args, params, result)
        return result

    return run


__all__ = ["MISSING", "StaticChecks", "as_output", "bind_values", "check_dtype", "checked_once", "constant_plan",
           "fresh_output",
           "input_offset", "int16_table", "int8_table",
           "output_region", "read_window", "shape_values", "signature"]
