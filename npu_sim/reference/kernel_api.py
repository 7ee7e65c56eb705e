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
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from npu_sim.errors import TosaRuntimeError, UnsupportedFeatureError
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

    def fail(self, condition: str) -> TosaRuntimeError:
        """The exception for a violated ERROR_IF/REQUIRE (``raise args.fail("...")``)."""
        return TosaRuntimeError(self.name or self.op.name, condition)

    def require(self, ok: bool, condition: str) -> None:
        """Raise ``TosaRuntimeError`` naming ``condition`` unless ``ok``."""
        if not ok:
            raise self.fail(condition)

    @property
    def out_shape(self) -> tuple[int, ...]:
        """Shape of the (region of the) output being computed."""
        if self.out_region is None:
            return self.output_types[0].shape
        return tuple(stop - start for start, stop in self.out_region)


Kernel = Callable[[KernelArgs], list[np.ndarray]]
#: (attribute, input_types, output_types, out_region) -> region of each input needed.
#: A window function may also take a keyword ``const_inputs`` (the operand arrays known at
#: compile time, e.g. SHAPE parameters; None where unknown) to give exact windows.
InputWindow = Callable[..., list[Region]]

KERNELS: dict[Op, Kernel] = {}
INPUT_WINDOWS: dict[Op, InputWindow] = {}


def register(*ops: Op, window: InputWindow | None = None) -> Callable[[Kernel], Kernel]:
    """Decorator registering a kernel (and optionally its tiling window) for ``ops``."""

    def wrap(fn: Kernel) -> Kernel:
        for op in ops:
            if op in KERNELS:
                raise RuntimeError(f"kernel for {op.name} registered twice")
            KERNELS[op] = fn
            if window is not None:
                INPUT_WINDOWS[op] = window
        return fn

    return wrap


def run_kernel(args: KernelArgs) -> list[np.ndarray]:
    """Run the kernel of ``args.op``; outputs are arrays of the output storage dtypes."""
    try:
        kernel = KERNELS[args.op]
    except KeyError:
        raise UnsupportedFeatureError(f"{args.name or args.op.name}: no kernel for {args.op.name}") from None
    return kernel(args)


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
