"""The contract between TOSA kernels and their callers (executor and simulated NPU).

A kernel is a pure function ``kernel(args: KernelArgs) -> list[np.ndarray]``
registered for one or more operators. Whole-tensor calls leave ``out_region``
and ``input_offsets`` as ``None``.

Tiled calls (the simulated compute units run kernels on tiles) ask for a
sub-region of the output: ``out_region`` gives ``(start, stop)`` per output
dimension (the same region for every output of a multi-output op), and each
``inputs[i]`` is then only the window of input ``i`` that
``input_window(...)`` said was needed, located at ``input_offsets[i]`` within
the full tensor whose type is ``input_types[i]``. Padding outside the full
tensor is the kernel's business, so tile-by-tile execution gives exactly the
bits of whole-tensor execution.

A kernel may also register a *binder* (``register(..., bind=...)``): given a whole-tensor
call that succeeded and which operands are graph constants, it returns a
:data:`BoundKernel` for later calls of that operator, with everything that does not
depend on the data done once. Kernels never mutate their inputs, and neither do bound
ones; an output may be shared with later calls only as a graph constant (never written).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from npu_sim.errors import TosaRuntimeError, UnsupportedFeatureError
from npu_sim.reference.unpredictable import active_log, is_require
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op

Region = tuple[tuple[int, int], ...]


@dataclass
class KernelArgs:
    """Everything a kernel may read. ``name`` identifies the operator in error messages."""

    op: Op
    attribute: Attribute
    inputs: list[np.ndarray]
    input_types: list[TensorType]
    output_types: list[TensorType]
    name: str = ""
    out_region: Region | None = None
    input_offsets: list[tuple[int, ...]] | None = None
    #: results of static checks for this operator (see kernel_util.checked_once), kept by
    #: whoever calls it repeatedly with one signature (the executor); None: none kept
    memo: dict[object, Any] | None = None
    #: with ``memo``: the inputs that hold the same values in every call (graph constants)
    constant_inputs: frozenset[int] = frozenset()

    def fail(self, condition: str) -> TosaRuntimeError:
        """The exception for a violated ERROR_IF/REQUIRE (``raise args.fail("...")``)."""
        return TosaRuntimeError(self.name or self.op.name, condition)

    def require(self, ok: bool, condition: str) -> None:
        """Raise ``TosaRuntimeError`` naming ``condition`` unless ``ok`` (a REQUIRE is only
        recorded in a run that goes on past them: :mod:`npu_sim.reference.unpredictable`)."""
        if not ok:
            log = active_log()
            if log is not None and is_require(condition):
                log.record(self.name or self.op.name, condition)
                return
            raise self.fail(condition)

    @property
    def out_shape(self) -> tuple[int, ...]:
        """Shape of the (region of the) output being computed."""
        if self.out_region is None:
            return self.output_types[0].shape
        return tuple(stop - start for start, stop in self.out_region)


    def static(self) -> KernelArgs:
        """These arguments without operand values: what a bound kernel keeps of its first call."""
        return KernelArgs(self.op, self.attribute, [], self.input_types, self.output_types, self.name,
                          memo=self.memo)


Kernel = Callable[[KernelArgs], list[np.ndarray]]
#: A kernel bound to one operator of a graph: operand values in, outputs out (whole tensors).
BoundKernel = Callable[[list[np.ndarray]], list[np.ndarray]]
#: (a whole-tensor call that has just succeeded, the operands that are graph constants or None)
#: -> a BoundKernel for later calls with the same attribute and operand types, or None.
Binder = Callable[[KernelArgs, Sequence["np.ndarray | None"]], "BoundKernel | None"]
#: (attribute, input_types, output_types, out_region) -> region of each input needed.
#: A window function may also take a keyword ``const_inputs`` (the operand arrays known at
#: compile time, e.g. SHAPE parameters; None where unknown) to give exact windows.
InputWindow = Callable[..., list[Region]]

KERNELS: dict[Op, Kernel] = {}
INPUT_WINDOWS: dict[Op, InputWindow] = {}
BINDERS: dict[Op, Binder] = {}


def register(*ops: Op, window: InputWindow | None = None,
             bind: Binder | None = None) -> Callable[[Kernel], Kernel]:
    """Decorator registering a kernel (and optionally its tiling window and binder) for ``ops``."""

    def wrap(fn: Kernel) -> Kernel:
        for op in ops:
            if op in KERNELS:
                raise RuntimeError(f"kernel for {op.name} registered twice")
            KERNELS[op] = fn
            if window is not None:
                INPUT_WINDOWS[op] = window
            if bind is not None:
                BINDERS[op] = bind
        return fn

    return wrap


def run_kernel(args: KernelArgs) -> list[np.ndarray]:
    """Run the kernel of ``args.op``; outputs are arrays of the output storage dtypes."""
    try:
        kernel = KERNELS[args.op]
    except KeyError:
        raise UnsupportedFeatureError(f"{args.name or args.op.name}: no kernel for {args.op.name}") from None
    if active_log() is not None:
        return _going_on(kernel, args)
    return kernel(args)


def _going_on(kernel: Kernel, args: KernelArgs) -> list[np.ndarray]:
    """``kernel(args)`` in a run that goes on past REQUIREs: one it cannot go on from gives zeros."""
    log = active_log()
    assert log is not None
    before = log.count
    try:
        return kernel(args)
    except TosaRuntimeError as exc:
        if not is_require(exc.condition):
            raise
        log.record(exc.operator, exc.condition)
    except (ArithmeticError, ValueError, IndexError, OverflowError):
        if log.count == before:   # not after a broken REQUIRE: a real failure
            raise
    return [np.zeros(t.shape, t.dtype.numpy_dtype) for t in args.output_types]


def bind_kernel(args: KernelArgs, const_inputs: Sequence[np.ndarray | None]) -> BoundKernel:
    """The kernel of ``args.op`` bound to ``args``' attribute and operand types.

    ``args`` is a whole-tensor call that has just succeeded, so every ERROR_IF that reads
    only the attribute and the types has passed; ``const_inputs[i]`` is operand ``i``'s value
    when the graph fixes it (a constant), else None. The result computes, for operands of
    those types (the constants unchanged), the bits ``run_kernel`` would, and raises the
    errors that depend on operand values as it would. The executor binds each operator
    once per graph, so invoking a graph repeats no static work; a kernel without a binder
    is simply called. A bound kernel runs with numpy's floating-point warnings off (the
    executor's ``np.errstate(all="ignore")``), and an exception in a binder means "no
    binding": the plain kernel is used.
    """
    binder = BINDERS.get(args.op) if active_log() is None else None   # bound kernels check REQUIREs their way
    try:
        bound = binder(args, const_inputs) if binder is not None else None
    except Exception:  # a binder is an optimization: the plain kernel is always right
        bound = None
    if bound is not None:
        return bound
    kernel = KERNELS.get(args.op)
    if kernel is None:
        raise UnsupportedFeatureError(f"{args.name or args.op.name}: no kernel for {args.op.name}")
    op, attribute, input_types, output_types, name = (args.op, args.attribute, args.input_types,
                                                      args.output_types, args.name)
    memo: dict[object, Any] = {}
    constant = frozenset(i for i, value in enumerate(const_inputs) if value is not None)

    def call(inputs: list[np.ndarray]) -> list[np.ndarray]:
        call_args = KernelArgs(op, attribute, inputs, input_types, output_types, name, memo=memo,
                               constant_inputs=constant)
        return kernel(call_args) if active_log() is None else _going_on(kernel, call_args)

    return call


def input_window(args_like: KernelArgs, out_region: Region) -> list[Region]:
    """Regions of each input needed to compute ``out_region`` of the output(s).

    ``args_like.inputs`` holds the operands known at compile time (constants, SHAPE
    parameters) and None for the others; windows use them to be exact.
    """
    try:
        window = INPUT_WINDOWS[args_like.op]
    except KeyError:
        raise UnsupportedFeatureError(f"{args_like.op.name} cannot be tiled") from None
    if _accepts_const_inputs(window):
        return window(args_like.attribute, args_like.input_types, args_like.output_types,
                      out_region, const_inputs=args_like.inputs)
    return window(args_like.attribute, args_like.input_types, args_like.output_types, out_region)


@functools.cache
def _accepts_const_inputs(window: InputWindow) -> bool:
    return "const_inputs" in inspect.signature(window).parameters


def full_region(shape: Sequence[int]) -> Region:
    return tuple((0, int(d)) for d in shape)
