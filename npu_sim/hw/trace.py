"""What a simulation recorded: every command, every allocation's use, and counters.

The simulator's hot path only appends ``(command, invocation, start, end, busy_end)``
tuples (:class:`TraceRecorder`; ``busy_end``: when the unit was free again, before
``end`` for a pipelined DMA whose data was still in flight); :class:`Trace` turns
them into the typed records below when they are first asked for. Reports read only
these.

When an allocation is in use: over ``[first_cycle, last_cycle)``, from the start of
the first command touching it to the end of the last one, half open. The simulator
moves bytes when a command ends (a DMA copies, a compute command reads its operands
and writes its results at its end cycle), so the last reader of a buffer ending at
cycle ``c`` and a new writer starting at ``c`` never hold the bytes at the same
time: at ``c`` the old buffer is free. Counting from the *start* of the first
command keeps the bytes reserved while the command that fills them runs (as the
hardware's transfer would occupy them). :func:`usage_steps` is the one
implementation of this convention; the reports build on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from operator import attrgetter
from typing import Any, NamedTuple

import numpy as np

from npu_sim.program import Allocation, Command, DmaCommand, MemorySpace, View, command_views
from npu_sim.tosa.dtype import DType


class CommandRecord(NamedTuple):
    """One executed command (a command inside a loop appears once per iteration)."""

    id: int
    name: str
    kind: str  # dma | compute | cond | loop
    unit: str  # dma0, dma1, ..., mac_array, vector, lut, sequencer
    op: str  # "CONV2D+RESCALE" for compute, "copy" for DMA, "if"/"while" for control flow
    invocation: int
    start_cycle: int
    end_cycle: int
    bytes: int  # payload bytes moved (DMA) or read + written in the TCM (compute)
    macs: int
    ddr_read_bytes: int  # payload
    ddr_write_bytes: int
    #: when the unit was free again; a DMA frees its engine when its last burst is issued
    #: and is done (``end_cycle``) when the data has landed. None: at ``end_cycle``.
    busy_end_cycle: int | None = None

    @property
    def cycles(self) -> int:
        """From start to done."""
        return self.end_cycle - self.start_cycle

    @property
    def busy_cycles(self) -> int:
        """Cycles the command occupied its unit."""
        end = self.end_cycle if self.busy_end_cycle is None else self.busy_end_cycle
        return end - self.start_cycle


class AllocationRecord(NamedTuple):
    """When an allocation was used in one invocation (first/last are None if no command touched it)."""

    name: str
    memory: str
    offset_bytes: int
    size_bytes: int
    kind: str
    invocation: int
    first_cycle: int | None
    last_cycle: int | None


class InvocationRecord(NamedTuple):
    index: int  # type: ignore[assignment]  # a field named like tuple.index, read as one
    start_cycle: int
    end_cycle: int

    @property
    def cycles(self) -> int:
        return self.end_cycle - self.start_cycle


@dataclass
class Counters:
    """Totals over the whole run."""

    ddr_read_bytes: int = 0  # payload bytes DMAs read from DDR
    ddr_write_bytes: int = 0
    ddr_read_burst_bytes: int = 0  # bytes the DDR actually moved (whole bursts)
    ddr_write_burst_bytes: int = 0
    macs: int = 0
    #: PE-cycles the MAC array's MACs take at their dtype's peak (see hw.cost.command_mac_pe_cycles)
    mac_pe_cycles: int = 0
    busy_cycles: dict[str, int] = field(default_factory=dict)  # per unit (DMAs: until issued)
    command_counts: dict[str, int] = field(default_factory=dict)  # per unit

    def utilization(self, total_cycles: int) -> dict[str, float]:
        """Busy fraction of each unit over ``total_cycles``."""
        return {unit: (busy / total_cycles if total_cycles else 0.0)
                for unit, busy in self.busy_cycles.items()}


class Trace:
    """The record of a run. The hot path stores raw ``(command, invocation, start, end,
    busy_end)`` tuples; the typed tables below are built from them on first access."""

    def __init__(self, raw: list[tuple[Any, int, int, int, int]], invocations: list[InvocationRecord],
                 static_info: Callable[[Any], StaticInfo], allocations: list[Allocation],
                 units: list[str], repeats: dict[int, tuple[int, int]] | None = None):
        self._raw = raw
        self.invocations = invocations
        self.units = units  # every unit of the machine, DMA engines first
        self._static_info = static_info
        self._program_allocations = allocations
        #: invocation -> (the earlier invocation it repeats, cycles later): its records are that
        #: one's, moved in time (a replay, :mod:`npu_sim.hw.replay`); what a report computes of
        #: that one it may move instead of computing again
        self.repeats: dict[int, tuple[int, int]] = repeats or {}

    @cached_property
    def _tables(self) -> tuple[list[CommandRecord], list[AllocationRecord], Counters]:
        return build_tables(self._raw, self.invocations, self._static_info,
                            self._program_allocations, self.units, self.repeats)

    @property
    def commands(self) -> list[CommandRecord]:
        """Every executed command, sorted by start cycle (then end cycle, id)."""
        return self._tables[0]

    @property
    def allocations(self) -> list[AllocationRecord]:
        """Each allocation's first and last cycle of use, per invocation."""
        return self._tables[1]

    @property
    def counters(self) -> Counters:
        return self._tables[2]

    def head(self, invocations: int) -> Trace:
        """The record of the first ``invocations`` invocations (and the preamble before them):
        what the drawn reports of a long stream show (they summarise instead of drawing
        thousands of identical invocations)."""
        if invocations >= len(self.invocations):
            return self
        raw = [r for r in self._raw if r[1] < invocations]
        return Trace(raw, self.invocations[:invocations], self._static_info, self._program_allocations, self.units,
                     {k: repeat for k, repeat in self.repeats.items() if k < invocations})

    def peak_live_bytes(self, memory: MemorySpace | str, invocation: int | None = None) -> int:
        """Most bytes of ``memory`` allocations in use at one cycle (see :func:`peak_live_bytes`)."""
        return peak_live_bytes(self.allocations, memory, invocation)


def usage_steps(intervals: Iterable[tuple[int, int, int, int]]) -> tuple[list[int], list[int]]:
    """Step curve ``(cycles, bytes)`` of ``(first_cycle, last_cycle, offset_bytes, size_bytes)`` uses.

    ``bytes[i]`` is in use from ``cycles[i]`` until the next point: the bytes that at least
    one use covers, so two allocations sharing bytes at once (an aliased slice and its
    whole, or a buffer whose bytes are handed on piece by piece) count those bytes once.
    Each use is in use over ``[first_cycle, last_cycle)`` (the convention of the module
    doc); uses of zero cycles are left out. One point per cycle where a use starts or ends.

    In arrays, whatever the number of uses: every use is cut at every use's byte bounds
    into elementary byte segments; per segment the times it is covered merge into
    intervals; each merged interval adds the segment's length while it lasts.
    """
    uses = np.array([(first, last, offset, offset + size) for first, last, offset, size in intervals
                     if last > first and size > 0], dtype=np.int64).reshape(-1, 4)
    if not len(uses):
        return [], []
    bounds = np.unique(uses[:, 2:])
    lo, hi = np.searchsorted(bounds, uses[:, 2]), np.searchsorted(bounds, uses[:, 3])
    counts = hi - lo
    owner = np.repeat(np.arange(len(uses)), counts)
    segment = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts - lo, counts)
    starts, ends = uses[owner, 0], uses[owner, 1]
    order = np.lexsort((starts, segment))
    segment, starts, ends = segment[order], starts[order], ends[order]
    # within a segment (uses sorted by start), a merged interval starts where a use starts after
    # every earlier use of the segment has ended (touching ones merge: the bytes stay in use)
    span = int(ends.max()) + 1
    reach = np.maximum.accumulate(ends + segment * span) - segment * span
    new = np.ones(len(segment), dtype=bool)
    new[1:] = (segment[1:] != segment[:-1]) | (starts[1:] > reach[:-1])
    first = np.flatnonzero(new)
    merged_end = np.maximum.reduceat(ends, first)
    length = bounds[segment[first] + 1] - bounds[segment[first]]
    times, where = np.unique(np.concatenate([starts[first], merged_end]), return_inverse=True)
    in_use = np.cumsum(np.bincount(where, weights=np.concatenate([length, -length]), minlength=len(times)))
    cycles = np.unique(uses[:, :2])
    values = in_use[np.searchsorted(times, cycles, side="right") - 1]
    return cycles.tolist(), np.rint(values).astype(np.int64).tolist()


def peak_live_bytes(allocations: Iterable[AllocationRecord], memory: MemorySpace | str,
                    invocation: int | None = None) -> int:
    """Most bytes of ``memory`` in use at one cycle, each allocation over ``[first, last)``."""
    name = memory.value if isinstance(memory, MemorySpace) else memory
    intervals = [(a.first_cycle, a.last_cycle, a.offset_bytes, a.size_bytes) for a in allocations
                 if a.memory == name and a.first_cycle is not None and a.last_cycle is not None
                 and (invocation is None or a.invocation == invocation)]
    return max(usage_steps(intervals)[1], default=0)


class StaticInfo(NamedTuple):
    """What the trace needs to know of a compiled command (computed once)."""

    kind: str
    unit: str
    op: str
    bytes: int
    macs: int
    mac_pe_cycles: int
    ddr_read_bytes: int
    ddr_write_bytes: int
    ddr_read_burst_bytes: int
    ddr_write_burst_bytes: int
    allocations: tuple[int, ...]  # indices of the allocations the command touches


class TraceRecorder:
    """Collects raw ``(command, invocation, start, end, busy_end)`` tuples during a run."""

    def __init__(self) -> None:
        self.raw: list[tuple[Any, int, int, int, int]] = []
        self.invocations: list[InvocationRecord] = []
        self.repeats: dict[int, tuple[int, int]] = {}   # see :attr:`Trace.repeats`


def build_tables(raw: list[tuple[Any, int, int, int, int]], invocations: list[InvocationRecord],
                 static_info: Callable[[Any], StaticInfo], allocations: list[Allocation],
                 units: list[str], repeats: dict[int, tuple[int, int]] | None = None
                 ) -> tuple[list[CommandRecord], list[AllocationRecord], Counters]:
    """Typed command records, allocation uses and counters from the raw tuples (``repeats``:
    see :attr:`Trace.repeats`)."""
    repeats = repeats or {}
    starts = {i.index: i.start_cycle for i in invocations}
    commands, info, usage, sources = _command_records(raw, static_info, repeats,
                                                      {source: starts[source] for source, _ in repeats.values()})
    counters, used = _count(usage, info, units)
    _count_repeats(counters, used, usage, info, repeats, sources)
    records = _allocation_records(allocations, invocations, used)
    commands.sort(key=attrgetter("start_cycle", "end_cycle", "id"))
    return commands, records, counters


#: Per command id: its static facts, and its record's prefix and suffix tuples.
_Info = dict[int, tuple[StaticInfo, tuple[Any, ...], tuple[Any, ...]]]


def _command_records(raw: list[tuple[Any, int, int, int, int]], static_info: Callable[[Any], StaticInfo],
                     repeats: dict[int, tuple[int, int]], source_starts: dict[int, int]
                     ) -> tuple[list[CommandRecord], _Info, dict[tuple[int, int], list[int]], dict[int, list[int]]]:
    """One record per execution; per (command, invocation): executions, busy cycles, first
    start and last end (none for an invocation that repeats another: see :func:`_count_repeats`);
    per invocation repeated, the commands it ran from its start (``source_starts``: not a
    preamble's before it)."""
    info: _Info = {}
    usage: dict[tuple[int, int], list[int]] = {}
    new_record = tuple.__new__
    commands: list[CommandRecord] = []
    append = commands.append
    sources: dict[int, list[int]] = {source: [] for source in source_starts}  # their commands
    for command, invocation, start, end, busy_end in raw:
        cid = command.cid
        entry = info.get(cid)
        if entry is None:
            s = static_info(command)
            entry = info[cid] = (s, (cid, command.name, s.kind, s.unit, s.op),
                                 (s.bytes, s.macs, s.ddr_read_bytes, s.ddr_write_bytes))
        append(new_record(CommandRecord, entry[1] + (invocation, start, end) + entry[2] + (busy_end,)))
        if invocation in repeats:
            continue
        use = usage.get((cid, invocation))
        if use is None:
            usage[(cid, invocation)] = [1, busy_end - start, start, end]
            if invocation in sources and start >= source_starts[invocation]:
                sources[invocation].append(cid)
        else:
            use[0] += 1
            use[1] += busy_end - start
            if start < use[2]:
                use[2] = start
            if end > use[3]:
                use[3] = end
    return commands, info, usage, sources


def _count(usage: dict[tuple[int, int], list[int]], info: _Info, units: list[str]
           ) -> tuple[Counters, dict[tuple[int, int], list[int]]]:
    """The run's counters, and per (allocation index, invocation) the first start and last
    end of the commands touching it."""
    counters = Counters(busy_cycles={u: 0 for u in units}, command_counts={u: 0 for u in units})
    busy_cycles, command_counts = counters.busy_cycles, counters.command_counts
    ddr_read = ddr_write = ddr_read_burst = ddr_write_burst = macs = mac_pe_cycles = 0
    used: dict[tuple[int, int], list[int]] = {}
    for (cid, invocation), (runs, busy, start, end) in usage.items():
        s = info[cid][0]
        if s.kind == "dma" or s.kind == "compute":
            unit = s.unit
            busy_cycles[unit] = busy_cycles.get(unit, 0) + busy
            command_counts[unit] = command_counts.get(unit, 0) + runs
            ddr_read += runs * s.ddr_read_bytes
            ddr_write += runs * s.ddr_write_bytes
            ddr_read_burst += runs * s.ddr_read_burst_bytes
            ddr_write_burst += runs * s.ddr_write_burst_bytes
            macs += runs * s.macs
            mac_pe_cycles += runs * s.mac_pe_cycles
        for index in s.allocations:
            key = (index, invocation)
            extent = used.get(key)
            if extent is None:
                used[key] = [start, end]
            else:
                if start < extent[0]:
                    extent[0] = start
                if end > extent[1]:
                    extent[1] = end
    counters.ddr_read_bytes, counters.ddr_write_bytes = ddr_read, ddr_write
    counters.ddr_read_burst_bytes, counters.ddr_write_burst_bytes = ddr_read_burst, ddr_write_burst
    counters.macs, counters.mac_pe_cycles = macs, mac_pe_cycles
    return counters, used


def _count_repeats(counters: Counters, used: dict[tuple[int, int], list[int]],
                   usage: dict[tuple[int, int], list[int]], info: _Info,
                   repeats: dict[int, tuple[int, int]], sources: dict[int, list[int]]) -> None:
    """Add to ``counters`` and ``used`` (see :func:`_count`) the invocations that repeat another:
    that one's counts once more, its allocations' extents moved in time."""
    for source, cids in sources.items():
        once, extents = _count({(cid, source): usage[(cid, source)] for cid in cids}, info, [])
        times = sum(1 for repeated, _ in repeats.values() if repeated == source)
        for unit, busy in once.busy_cycles.items():
            counters.busy_cycles[unit] = counters.busy_cycles.get(unit, 0) + times * busy
            counters.command_counts[unit] = counters.command_counts.get(unit, 0) + times * once.command_counts[unit]
        for name in ("ddr_read_bytes", "ddr_write_bytes", "ddr_read_burst_bytes", "ddr_write_burst_bytes",
                     "macs", "mac_pe_cycles"):
            setattr(counters, name, getattr(counters, name) + times * getattr(once, name))
        for invocation, (repeated, delta) in repeats.items():
            if repeated == source:
                for (index, _), (start, end) in extents.items():
                    used[(index, invocation)] = [start + delta, end + delta]


def _allocation_records(allocations: list[Allocation], invocations: list[InvocationRecord],
                        used: dict[tuple[int, int], list[int]]) -> list[AllocationRecord]:
    """One record per allocation and invocation, with its first and last cycle in use (None: unused)."""
    new_record = tuple.__new__
    names = {id(space): space.value for space in MemorySpace}
    prefixes = [(a.name, names.get(id(a.memory)) or a.memory.value, a.offset_bytes, a.size_bytes, a.kind)
                for a in allocations]
    unused = (None, None)
    records = []
    for inv in invocations:
        k = inv.index
        for index, prefix in enumerate(prefixes):
            extent = used.get((index, k))
            records.append(new_record(AllocationRecord,
                                      prefix + (k,) + (unused if extent is None else tuple(extent))))
    return records


def _block_pieces(views: Sequence[View]) -> Sequence[View]:
    """``views`` with each view of a block tensor replaced by the blocks it touches (its span
    is the hull of its blocks, which may hold other tensors' bytes)."""
    if all(view.blocks is None for view in views):
        return views
    out = []
    for view in views:
        if view.blocks is None:
            out.append(view)
        else:
            out += [View(view.memory, lo, (hi - lo,), DType.INT8) for lo, hi in view.block_pieces]
    return out


def _expand(starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ranges ``[starts[i], stops[i])`` of ints: each range's index, and each of its ints."""
    counts = np.maximum(stops - starts, 0)
    owner = np.repeat(np.arange(len(counts)), counts)
    return owner, np.arange(int(counts.sum())) + np.repeat(starts - (np.cumsum(counts) - counts), counts)


def _overlaps(item_lo: np.ndarray, item_hi: np.ndarray, query_lo: np.ndarray, query_hi: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``(query, item)`` (perhaps repeated) of the items ``[lo, hi)`` overlapping each
    query ``[lo, hi)``: ``item_lo < query_hi`` and ``item_hi > query_lo`` (an empty query at
    ``x`` overlaps the items holding ``x`` strictly inside). Their bounds cut the axis into
    segments; each segment lists the items covering it, and a query reads the lists of the
    segments it meets, which lie one after the other."""
    bounds = np.unique(np.concatenate([item_lo, item_hi]))
    segments = max(len(bounds) - 1, 0)
    item, segment = _expand(np.searchsorted(bounds, item_lo), np.searchsorted(bounds, item_hi))
    covering = item[np.argsort(segment, kind="stable")]
    ptr = np.concatenate([[0], np.cumsum(np.bincount(segment, minlength=segments))])
    first = np.clip(np.searchsorted(bounds, query_lo, side="right") - 1, 0, segments)
    last = np.maximum(np.minimum(np.searchsorted(bounds, query_hi), segments), first)
    query, position = _expand(ptr[first], ptr[last])
    return query, covering[position]


def _command_views(commands: list[Command], pieces: bool) -> tuple[list[View], list[int]]:
    """The views of the commands and how many each command has (``pieces``: a view of a block
    tensor replaced by its blocks, :func:`_block_pieces`)."""
    views: list[View] = []
    counts: list[int] = []
    for command in commands:
        found: Sequence[View] = (command.src, command.dst) if type(command) is DmaCommand \
            else command_views(command)
        if pieces:
            found = _block_pieces(found)
        views += found
        counts.append(len(found))
    return views, counts


def _view_table(views: list[View], counts: list[int]) -> np.ndarray:
    """Per view: its command's index, its memory's index in :class:`MemorySpace`, its span."""
    table = np.empty((len(views), 4), dtype=np.int64)
    table[:, 0] = np.repeat(np.arange(len(counts)), counts)
    memories = list(map(_MEMORY, views))
    where = np.fromiter(map(id, memories), dtype=np.int64, count=len(views))
    table[:, 1] = -1
    for k, space in enumerate(MemorySpace):
        table[where == id(space), 1] = k
    for i in np.flatnonzero(table[:, 1] < 0).tolist():   # a plain string naming the memory
        table[i, 1] = list(MemorySpace).index(MemorySpace(memories[i]))
    table[:, 2:] = np.fromiter(chain.from_iterable(map(_SPAN, views)), dtype=np.int64,
                               count=2 * len(views)).reshape(-1, 2)
    return table


_MEMORY, _SPAN = attrgetter("memory"), attrgetter("span")


#: Stands for a missing ``first_use``/``last_use`` (the whole program) among command ids.
_FOREVER = 1 << 60


class AllocationIndex:
    """Which allocations a command's views touch (address overlap, and lifetime covering its id).

    A view spanning ``[lo, hi)`` overlaps the allocations (``size_bytes > 0``) with
    ``offset_bytes < hi`` and ``end_bytes > lo``; an empty view at ``x``, those holding ``x``
    strictly inside, unless ``x`` is the bound of any allocation of its memory. Computed in
    arrays for many commands at once (:meth:`touched_all`): per memory, the allocations live
    for the whole program are found by address, the others (short-lived buffers reusing the
    same bytes) by the command's id first, then checked by address.
    """

    def __init__(self, allocations: list[Allocation]):
        self.allocations = allocations
        spaces = {id(space): k for k, space in enumerate(MemorySpace)}
        columns = [(spaces[id(a.memory)], a.offset_bytes, a.offset_bytes + a.size_bytes,
                    -_FOREVER if a.first_use is None else a.first_use,
                    _FOREVER if a.last_use is None else a.last_use) for a in allocations]
        table = np.array(columns, dtype=np.int64).reshape(-1, 5)
        self._space, self._lo, self._hi, self._first, self._last = table.T
        self._sized = table[:, 2] > table[:, 1]

    def touched(self, command: Command) -> tuple[int, ...]:
        """Allocations the command's views overlap whose lifetime (command ids) covers it."""
        return self.touched_all([command])[command.id]

    def touched_all(self, commands: Iterable[Command]) -> dict[int, tuple[int, ...]]:
        """:meth:`touched` of each command, by id (sorted indices)."""
        commands = list(commands)
        ids = [command.id for command in commands]
        views, counts = _command_views(commands, pieces=False)
        if any(view.blocks is not None for view in views):
            views, counts = _command_views(commands, pieces=True)
        table = _view_table(views, counts)
        command_ids = np.array(ids, dtype=np.int64)
        pairs = [self._pairs(table, command_ids, space) for space in range(len(MemorySpace))]
        count = max(len(self.allocations), 1)
        keys = np.unique(np.concatenate([np.zeros(0, dtype=np.int64)] + pairs))
        owners, hits = keys // count, (keys % count).tolist()
        ends = np.searchsorted(owners, np.arange(len(ids) + 1)).tolist()
        return {cid: tuple(hits[ends[k]:ends[k + 1]]) for k, cid in enumerate(ids)}

    def _pairs(self, views: np.ndarray, command_ids: np.ndarray, space: int) -> np.ndarray:
        """``command index * allocations + allocation`` of the pairs touching in one memory."""
        in_space = views[views[:, 1] == space]
        allocation = np.flatnonzero((self._space == space) & self._sized)
        whole = (self._first[allocation] == -_FOREVER) & (self._last[allocation] == _FOREVER)
        found = []
        lasting = allocation[whole]   # by address alone
        query, item = _overlaps(self._lo[lasting], self._hi[lasting], in_space[:, 2], in_space[:, 3])
        found.append((query, lasting[item]))
        brief = allocation[~whole]   # alive at the command, then overlapping it
        cid = command_ids[in_space[:, 0]]
        query, item = _overlaps(self._first[brief], self._last[brief] + 1, cid, cid + 1)
        item = brief[item]
        near = (self._lo[item] < in_space[query, 3]) & (self._hi[item] > in_space[query, 2])
        found.append((query[near], item[near]))
        query = np.concatenate([q for q, _ in found])
        item = np.concatenate([i for _, i in found])
        # an empty view at an allocation's bound lies in no segment: it touches nothing
        bounds = np.concatenate([self._lo[allocation], self._hi[allocation]])
        empty = (in_space[query, 2] == in_space[query, 3]) & np.isin(in_space[query, 2], bounds)
        return in_space[query[~empty], 0] * max(len(self.allocations), 1) + item[~empty]
