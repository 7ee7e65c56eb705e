"""Input windows of NPU operations: which part of each operand a tile reads.

Asks the kernels' window functions (as :func:`kernel_api.input_window` does),
with the values of constant operands in ``args_like.inputs`` (None for the
others): windows that accept ``const_inputs`` use them to be exact (PAD and
SLICE know their SHAPE operands). Walks a fused chain backwards: the last step
computes the tile, each earlier step computes the window its consumer reads.
:class:`Chain` binds each step's window function once; the tiler calls it for
thousands of regions.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import NamedTuple, cast

import numpy as np

from npu_sim.reference.kernel_api import INPUT_WINDOWS, KernelArgs, Region, full_region, input_window
from npu_sim.tosa.ops import Op
from scheduler.ir.npu_ops import Step


class StepTile(NamedTuple):
    """One step's part of a tile: the output region it computes and each operand's window.
    (A NamedTuple: the tiler makes one per step of every tile shape it tries.)"""

    out_region: Region
    windows: tuple[Region, ...]


def can_tile(steps: Sequence[Step]) -> bool:
    """True if every step has a window function (the operation can be split into tiles)."""
    return all(step.op in INPUT_WINDOWS for step in steps)


def window_reads_constants(op: Op) -> bool:
    """True if ``op``'s window function reads the values of constant operands (``const_inputs``)."""
    window = INPUT_WINDOWS.get(op)
    return window is not None and _takes_constants(window)


@functools.cache
def _takes_constants(window: Callable[..., object]) -> bool:
    return "const_inputs" in inspect.signature(window).parameters


def step_windows(step: Step, out_region: Region,
                 const_values: Sequence[np.ndarray | None]) -> tuple[Region, ...]:
    """Window of each operand of ``step`` for ``out_region`` of its output(s)."""
    args_like = KernelArgs(step.op, step.attribute, _window_inputs(const_values), list(step.input_types),
                           list(step.output_types), step.name)
    return _as_regions(input_window(args_like, out_region))


def _window_inputs(const_values: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """The inputs a window function sees: the values of the constant operands, None for the others
    (window functions read constants only)."""
    return cast(list[np.ndarray], list(const_values))


def _as_regions(regions: Sequence[Sequence[Sequence[int]]]) -> tuple[Region, ...]:
    """Window functions' regions as tuples of ``(int, int)`` (they may give lists or numpy ints)."""
    out = []
    for r in regions:
        if type(r) is tuple:
            for pair in r:
                if type(pair) is not tuple or type(pair[0]) is not int or type(pair[1]) is not int:
                    break
            else:
                out.append(r)
                continue
        out.append(tuple([(int(a), int(b)) for a, b in r]))
    return tuple(out)


class Chain:
    """Windows of a fused chain's tiles; what each step's window function needs is gathered once.

    ``chain(out_region)`` gives every step's :class:`StepTile` for ``out_region`` of the
    last output: the last step computes the tile, each earlier step the window its
    consumer reads (an ``int`` operand's window is the output region of the step it names).
    """

    def __init__(self, steps: Sequence[Step], const_lookup: Callable[[str], np.ndarray | None]):
        self.steps = list(steps)
        self._calls = []
        for step in self.steps:
            consts = [const_lookup(o) if isinstance(o, str) else None for o in step.operands]
            args_like = KernelArgs(step.op, step.attribute, _window_inputs(consts), list(step.input_types),
                                   list(step.output_types), step.name)
            feeds = tuple((operand, j) for j, operand in enumerate(step.operands) if isinstance(operand, int))
            window = INPUT_WINDOWS.get(step.op)
            call: Callable[[Region], Sequence[Sequence[Sequence[int]]]]
            if window is None:   # input_window raises the error naming the operator
                call = functools.partial(input_window, args_like)
            elif _takes_constants(window):
                call = functools.partial(_call_with_consts, window, args_like)
            else:
                call = functools.partial(window, args_like.attribute, args_like.input_types,
                                         args_like.output_types)
            self._calls.append((call, feeds))

    def __call__(self, out_region: Region) -> list[StepTile]:
        count = len(self.steps)
        regions: list[Region | None] = [None] * count
        regions[-1] = tuple(out_region)
        tiles: list[StepTile | None] = [None] * count
        for index in range(count - 1, -1, -1):
            region = regions[index]
            if region is None:  # a step nobody reads (cannot happen for chains built by fusion)
                region = full_region(self.steps[index].output_types[0].shape)
            call, feeds = self._calls[index]
            windows = _as_regions(call(region))
            for producer, j in feeds:
                if j < len(windows):
                    regions[producer] = windows[j]
            tiles[index] = StepTile(region, windows)
        return tiles  # type: ignore[return-value]


def _call_with_consts(window: Callable[..., Sequence[Sequence[Sequence[int]]]], args_like: KernelArgs,
                      region: Region) -> Sequence[Sequence[Sequence[int]]]:
    return window(args_like.attribute, args_like.input_types, args_like.output_types, region,
                  const_inputs=args_like.inputs)


def chain_tile(steps: Sequence[Step], out_region: Region,
               const_lookup: Callable[[str], np.ndarray | None]) -> list[StepTile]:
    """Regions of every step of a fused chain computing ``out_region`` of the last output
    (see :class:`Chain`, which keeps the per-step facts for many regions)."""
    return Chain(steps, const_lookup)(out_region)


def whole_tile(steps: Sequence[Step]) -> list[StepTile]:
    """The untiled call: every step computes its whole output from whole operands."""
    return [StepTile(full_region(s.output_types[0].shape), tuple(full_region(t.shape) for t in s.input_types))
            for s in steps]


def region_size(region: Region) -> int:
    size = 1
    for a, b in region:
        size *= b - a if b > a else 0
    return size


def region_shape(region: Region) -> tuple[int, ...]:
    return tuple([b - a if b > a else 0 for a, b in region])
