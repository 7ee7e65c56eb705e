"""Memory occupancy: how many bytes of a memory are in use, over simulated time or over the plan.

Two views of the same question:

* :func:`occupancy_steps` reads the trace's :class:`~npu_sim.hw.trace.AllocationRecord` s
  and returns a step curve for plots and counter tracks, with the trace's own
  convention and implementation (:func:`npu_sim.hw.trace.usage_steps`): an
  allocation is in use over ``[first_cycle, last_cycle)``, so a buffer whose last
  use ends at cycle c and one whose first use starts at c do not coexist
  (commands read and write their bytes when they end);
* :func:`planned_live_bytes_bound` reads the Program's allocation lifetimes (in
  command ids) and returns the most bytes live at one command: no placement of
  those allocations can use less of the memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, cast
from weakref import WeakKeyDictionary

from npu_sim.hw.trace import AllocationRecord, Trace, usage_steps
from npu_sim.program import MemorySpace, Program

#: Memories whose allocations persist across invocations (live from the first to the last cycle).
PERSISTENT_MEMORIES = frozenset({MemorySpace.VARIABLE_SRAM.value})


def memory_name(memory: MemorySpace | str) -> str:
    return memory.value if isinstance(memory, MemorySpace) else str(memory)


class UsedAllocation(Protocol):
    """An allocation record some command used: its first and last cycles are known."""

    @property
    def name(self) -> str: ...
    @property
    def memory(self) -> str: ...
    @property
    def offset_bytes(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def invocation(self) -> int: ...
    @property
    def first_cycle(self) -> int: ...
    @property
    def last_cycle(self) -> int: ...


def selected(allocations: Iterable[AllocationRecord], memory: MemorySpace | str,
             kinds: Iterable[str] | None = None) -> list[UsedAllocation]:
    """The records of ``memory`` (optionally only of some ``kinds``) that some command used."""
    name = memory_name(memory)
    wanted = None if kinds is None else set(kinds)
    used = [a for a in allocations if a.memory == name and a.first_cycle is not None
            and (wanted is None or a.kind in wanted)]
    return cast(list[UsedAllocation], used)   # a used allocation has both cycles


def occupancy_steps(allocations: Iterable[AllocationRecord], memory: MemorySpace | str, *,
                    kinds: Iterable[str] | None = None,
                    span: tuple[int, int] | None = None) -> tuple[list[int], list[int]]:
    """Step curve ``(cycles, bytes)`` of the bytes in use (``bytes[i]`` holds from ``cycles[i]`` on).

    Bytes two allocations share at once count once. Allocations of persistent memories
    (variable SRAM) count as in use over the whole ``span`` (default: the records' own
    extent). Allocations are in use over ``[first_cycle, last_cycle)``: one ending at cycle
    c and one starting at c never count together. Allocations used for zero cycles are left
    out.
    """
    records = selected(allocations, memory, kinds)
    persistent = memory_name(memory) in PERSISTENT_MEMORIES
    if persistent:
        unique = {(a.name, a.offset_bytes, a.size_bytes): a for a in records}
        records = list(unique.values())
    if not records:
        return [], []
    lo = min(a.first_cycle for a in records) if span is None else span[0]
    hi = max(a.last_cycle for a in records) if span is None else span[1]
    return usage_steps((lo, hi, a.offset_bytes, a.size_bytes) if persistent
                       else (a.first_cycle, a.last_cycle, a.offset_bytes, a.size_bytes) for a in records)


#: Per trace, the curves :func:`trace_occupancy_steps` computed (by memory, kinds and span).
_TRACE_STEPS: WeakKeyDictionary[Trace, dict[tuple[str, tuple[str, ...] | None, tuple[int, int] | None],
                                        tuple[list[int], list[int]]]] = WeakKeyDictionary()


def trace_occupancy_steps(trace: Trace, memory: MemorySpace | str, *, kinds: Iterable[str] | None = None,
                          span: tuple[int, int] | None = None) -> tuple[list[int], list[int]]:
    """:func:`occupancy_steps` of ``trace.allocations``, computed once per trace (the summary, the
    Perfetto trace and the memory timeline draw the same curves). Read only: the lists are shared."""
    if type(trace) is not Trace:   # (a stand-in, as tests build: not necessarily hashable)
        return occupancy_steps(trace.allocations, memory, kinds=kinds, span=span)
    key = (memory_name(memory), None if kinds is None else tuple(kinds), span)
    memo = _TRACE_STEPS.setdefault(trace, {})
    steps = memo.get(key)
    if steps is None:
        steps = memo[key] = occupancy_steps(trace.allocations, memory, kinds=kinds, span=span)
    return steps


def spilled_bytes(allocations: Iterable[AllocationRecord]) -> int:
    """The bytes the plan spilled to the DDR: each spill buffer's bytes, once per invocation that
    used it (what the spills store; their peak of space is :func:`occupancy_steps`' peak)."""
    return sum(a.size_bytes for a in selected(allocations, MemorySpace.DDR, ("spill",)))


def peak(values: list[int]) -> int:
    return max(values, default=0)


def planned_live_bytes_bound(program: Program, memory: MemorySpace | str = MemorySpace.TCM,
                             include: Callable[[str], bool] | None = None) -> int:
    """Most bytes of ``memory`` allocations live at one command of the stream (by plan lifetimes).

    An allocation with ``first_use``/``last_use`` None lives over the whole program.
    ``include(kind)`` filters allocations by kind.
    """
    name = memory_name(memory)
    order = [cmd.id for cmd in program.walk()]
    if not order:  # a plan without its command stream: command ids are in stream order
        order = sorted({u for a in program.allocations for u in (a.first_use, a.last_use)
                        if u is not None})
    position = {cid: i for i, cid in enumerate(order)}
    count = len(position)
    deltas = [0] * (count + 1)
    always = 0
    for a in program.allocations:
        if a.memory.value != name or (include is not None and not include(a.kind)):
            continue
        if a.first_use is None or a.last_use is None or not count:
            always += a.size_bytes
            continue
        first = position.get(a.first_use, 0)
        last = position.get(a.last_use, count - 1)
        first, last = min(first, last), max(first, last)
        deltas[first] += a.size_bytes
        deltas[last + 1] -= a.size_bytes
    best = live = 0
    for delta in deltas[:count]:
        live += delta
        best = max(best, live)
    return always + best


def footprint_bytes(program: Program, memory: MemorySpace | str = MemorySpace.TCM) -> int:
    """Highest byte a plan uses in ``memory`` (the end of its topmost allocation)."""
    name = memory_name(memory)
    return max((a.end_bytes for a in program.allocations if a.memory.value == name), default=0)


def tcm_plan_figures(program: Program | None) -> tuple[int, int, int]:
    """``(footprint, compact footprint, lower bound)`` of the TCM plan: the scheduler's
    figures, else (a Program built by hand) measured from its allocations."""
    if program is None:
        return 0, 0, 0
    if program.stats is not None:
        stats = program.stats
        return stats.peak_tcm_bytes, stats.tcm_compact_bytes, stats.tcm_lower_bound_bytes
    footprint = footprint_bytes(program, MemorySpace.TCM)
    return footprint, footprint, planned_live_bytes_bound(program, MemorySpace.TCM)
