"""Input windows of NPU operations: which part of each operand a tile reads.

Asks the kernels' window functions through :func:`kernel_api.input_window`,
with the values of constant operands in ``args_like.inputs`` (None for the
others): windows that accept ``const_inputs`` use them to be exact (PAD and
SLICE know their SHAPE operands). Walks a fused chain backwards: the last step
computes the tile, each earlier step computes the window its consumer reads.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from npu_sim.reference.kernel_api import INPUT_WINDOWS, KernelArgs, Region, full_region, input_window
from scheduler.npu_ops import Step


@dataclass(frozen=True)
class StepTile:
    """One step's part of a tile: the output region it computes and each operand's window."""

    out_region: Region
    windows: tuple[Region, ...]


def can_tile(steps: Sequence[Step]) -> bool:
    """True if every step has a window function (the operation can be split into tiles)."""
    return all(step.op in INPUT_WINDOWS for step in steps)


@functools.lru_cache(maxsize=None)
def window_reads_constants(op) -> bool:
    """True if ``op``'s window function reads the values of constant operands (``const_inputs``)."""
    window = INPUT_WINDOWS.get(op)
    return window is not None and "const_inputs" in inspect.signature(window).parameters


def step_windows(step: Step, out_region: Region,
                 const_values: Sequence[np.ndarray | None]) -> tuple[Region, ...]:
    """Window of each operand of ``step`` for ``out_region`` of its output(s)."""
    args_like = KernelArgs(step.op, step.attribute, list(const_values), list(step.input_types),
                           list(step.output_types), step.name)
    regions = input_window(args_like, out_region)
    return tuple(tuple((int(a), int(b)) for a, b in r) for r in regions)


def chain_tile(steps: Sequence[Step], out_region: Region,
               const_lookup: Callable[[str], np.ndarray | None]) -> list[StepTile]:
    """Regions of every step of a fused chain computing ``out_region`` of the last output.

    An ``int`` operand's window becomes the output region of the step it names.
    """
    regions: list[Region | None] = [None] * len(steps)
    regions[-1] = tuple(out_region)
    tiles: list[StepTile | None] = [None] * len(steps)
    for index in range(len(steps) - 1, -1, -1):
        step = steps[index]
        region = regions[index]
        if region is None:  # a step nobody reads (cannot happen for chains built by fusion)
            region = full_region(step.output_types[0].shape)
        consts = [const_lookup(o) if isinstance(o, str) else None for o in step.operands]
        windows = step_windows(step, region, consts)
        for operand, window in zip(step.operands, windows):
            if isinstance(operand, int):
                regions[operand] = window
        tiles[index] = StepTile(region, windows)
    return tiles  # type: ignore[return-value]


def whole_tile(steps: Sequence[Step]) -> list[StepTile]:
    """The untiled call: every step computes its whole output from whole operands."""
    return [StepTile(full_region(s.output_types[0].shape), tuple(full_region(t.shape) for t in s.input_types))
            for s in steps]


def region_size(region: Region) -> int:
    size = 1
    for a, b in region:
        size *= max(0, b - a)
    return size


def region_shape(region: Region) -> tuple[int, ...]:
    return tuple(max(0, b - a) for a, b in region)
