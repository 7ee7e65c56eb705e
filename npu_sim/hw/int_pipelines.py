"""Integer steps handed on to the RESCALE after them in int64 (a long stream's fast path).

A quantized cell's matrix products and gate sums are int32 steps whose only reader is a
RESCALE back to int8: a pointwise CONV2D, or an int32 ADD of a constant (a bias) to what a
table lookup gave (:mod:`npu_sim.hw.table_folding`). Bound, each step casts its int64 values
to int32 and the RESCALE casts them back to int64: numpy calls of microseconds each, on a few
dozen elements. In a plan (``ComputeOp.plan``) such a step and its RESCALE become one entry
that scales the step's int64 values in place. The values are the same: a bound pointwise
CONV2D's fit its output type (its binding proves it), and an ADD's are checked as the bound
ADD checks them (where one leaves the int32 range, the steps run one by one, as before, and
the kernel raises its REQUIRE). Only a RESCALE of a signed int32 input whose scaling is bound
(:class:`~npu_sim.reference.type_conversion.BoundRescaleRun`) takes them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from npu_sim.hw.table_folding import Feed, Lookup, PlanEntry
from npu_sim.reference.conv import PointwiseRun
from npu_sim.reference.elementwise import Int32AddSub
from npu_sim.reference.type_conversion import BoundRescaleRun
from npu_sim.reference.unpredictable import active_log
from npu_sim.tosa.dtype import DType

Run = Callable[[list[np.ndarray]], list[np.ndarray]]


class _ConvRescale:
    """A pointwise CONV2D and the RESCALE of its result."""

    __slots__ = ("conv", "rescale")

    def __init__(self, conv: PointwiseRun, rescale: BoundRescaleRun):
        self.conv, self.rescale = conv, rescale

    def __call__(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [self.rescale.of_int64(self.conv.int64(inputs))]


class _AddRescale:
    """An int32 ADD / SUB (its first operand a table's lookup, if ``lookup``) and the RESCALE of
    its result."""

    __slots__ = ("lookup", "add", "rescale", "table64", "in_range")

    def __init__(self, lookup: Lookup | None, add: Int32AddSub, rescale: BoundRescaleRun,
                 constant: np.ndarray | None = None):
        """``constant``: the ADD's second operand, with a ``lookup`` (its range and the table's
        may prove every sum in range: then none is checked)."""
        self.lookup, self.add, self.rescale = lookup, add, rescale
        self.table64 = None if lookup is None else lookup.table.astype(np.int64)
        self.in_range = False
        if self.table64 is not None and constant is not None and self.table64.size and np.size(constant):
            t_lo, t_hi = int(self.table64.min()), int(self.table64.max())
            c_lo, c_hi = int(np.min(constant)), int(np.max(constant))
            lo, hi = (t_lo + c_lo, t_hi + c_hi) if add.ufunc is np.add else (t_lo - c_hi, t_hi - c_lo)
            self.in_range = add.LO <= lo and hi <= add.HI

    def __call__(self, operands: list[np.ndarray]) -> list[np.ndarray]:
        if self.table64 is not None:   # operands: the lookup's two leaves, then the ADD's other operand
            first = self.table64[operands[0].view(np.uint8), operands[1].view(np.uint8)]
            values = self.add.ufunc(first, operands[2]) if self.in_range else self.add.int64([first, operands[2]])
        else:
            values = self.add.int64(operands)
        if values is None:   # an overflow: the steps one by one (the kernel raises its REQUIRE)
            return self.rescale(self.add.kernel(self._add_operands(operands)))
        if values.shape != self.add.shape:
            values = values.reshape(self.add.shape)
        return [self.rescale.of_int64(values)]

    def _add_operands(self, operands: list[np.ndarray]) -> list[np.ndarray]:
        if self.lookup is None:
            return operands
        return [self.lookup(operands[:2])[0], operands[2]]


def _fusable_rescale(run: BoundRescaleRun, feeds: Sequence[Feed]) -> bool:
    """A bound RESCALE of a signed int32 step result (its scaling operands constants)."""
    return (run.bound.mask is None and feeds[0][0] == 1 and run.static.input_types[0].dtype is DType.INT32
            and all(kind == 2 for kind, _ in feeds[1:]))


def fuse_int_pipelines(plan: list[PlanEntry], outputs: Sequence[int],
                       reshapes: frozenset[int] = frozenset()) -> list[PlanEntry] | None:
    """``plan`` with each integer step whose only reader is a RESCALE it may hand its int64 values
    to (see the module doc) made one entry with it; None if there is none. ``outputs``: the steps
    whose results the command writes (kept); ``reshapes``: the RESHAPE steps (one read only by a
    pointwise CONV2D taken in is left out: the convolution reads its input as rows of channels
    whatever its shape). Nothing fuses in a run that goes on past REQUIREs."""
    if active_log() is not None:
        return None
    entries = {index: (run, feeds) for index, run, feeds in plan}
    readers = Counter(source for _, _, feeds in plan for kind, source in feeds if kind == 1)
    kept = set(outputs)

    def sole(index: int) -> bool:
        return readers[index] == 1 and index not in kept and index in entries

    fused: dict[int, PlanEntry] = {}   # by the RESCALE's index
    gone: set[int] = set()
    for index, run, feeds in plan:
        if not isinstance(run, BoundRescaleRun) or not _fusable_rescale(run, feeds) or not sole(feeds[0][1]):
            continue
        step = feeds[0][1]
        made = _fused(step, entries[step], run, entries, sole, reshapes)
        if made is not None:
            fused[index] = (index, made[0], made[1])
            gone.update(made[2])
    if not fused:
        return None
    return [fused.get(index, (index, run, feeds)) for index, run, feeds in plan if index not in gone]


def _fused(step: int, producer: tuple[Any, tuple[Feed, ...]], rescale: BoundRescaleRun,
           entries: dict[int, tuple[Any, tuple[Feed, ...]]], sole: Callable[[int], bool],
           reshapes: frozenset[int]) -> tuple[Run, tuple[Feed, ...], list[int]] | None:
    """The entry of ``step`` (its run and feeds) and the RESCALE reading it as one: its run, its
    feeds and the steps it takes in; None if they do not fuse."""
    run, feeds = producer
    if isinstance(run, PointwiseRun):
        if rescale.static.input_types[0].shape != run.shape:
            return None
        kind, source = feeds[0]
        if kind == 1 and source in reshapes and sole(source):   # its input's rows whatever their shape
            return _ConvRescale(run, rescale), (entries[source][1][0], *feeds[1:]), [step, source]
        return _ConvRescale(run, rescale), feeds, [step]
    if not isinstance(run, Int32AddSub) or rescale.static.input_types[0].shape != run.shape:
        return None
    (kind, source), other = feeds
    if kind == 1 and other[0] == 2 and sole(source) and isinstance(entries[source][0], Lookup) \
            and entries[source][0].table.dtype == np.int32:
        return _AddRescale(entries[source][0], run, rescale, other[1]), (*entries[source][1], other), [step, source]
    return _AddRescale(None, run, rescale), feeds, [step]
