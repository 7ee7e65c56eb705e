"""Input windows of NPU operations: which part of each operand a tile reads.

Wraps the kernels' window functions (:data:`kernel_api.INPUT_WINDOWS`),
passing the values of constant operands to those that accept ``const_inputs``
(PAD and SLICE give exact windows only when they know their SHAPE operands),
and walks a fused chain backwards: the last step computes the tile, each
earlier step computes the window its consumer reads.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from npu_sim.reference.kernel_api import INPUT_WINDOWS, Region, full_region
from scheduler.npu_ops import Step


@dataclass(frozen=True)
class StepTile:
    """One step's part of a tile: the output region it computes and each operand's window."""

    out_region: Region
    windows: tuple[Region, ...]


def can_tile(steps: Sequence[Step]) -> bool:
    """True if every step has a window function (the operation can be split into tiles)."""
    return all(step.op in INPUT_WINDOWS for step in steps)


_ACCEPTS_CONST: dict[Callable, bool] = {}


def _accepts_const_inputs(fn: Callable) -> bool:
    known = _ACCEPTS_CONST.get(fn)
    if known is None:
        try:
            known = "const_inputs" in inspect.signature(fn).parameters
        except (TypeError, ValueError):
            known = False
        _ACCEPTS_CONST[fn] = known
    return known


def step_windows(step: Step, out_region: Region,
                 const_values: Sequence[np.ndarray | None]) -> tuple[Region, ...]:
    """Window of each operand of ``step`` for ``out_region`` of its output(s)."""
    fn = INPUT_WINDOWS[step.op]
    if _accepts_const_inputs(fn):
        regions = fn(step.attribute, step.input_types, step.output_types, out_region,
                     const_inputs=list(const_values))
    else:
        regions = fn(step.attribute, step.input_types, step.output_types, out_region)
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
