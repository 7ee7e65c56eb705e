"""Dependencies from memory accesses: every command waits for the commands it conflicts with.

Walking the stream in order, a command depends on the earlier commands that
wrote bytes it reads (read after write), and, if it writes, on the earlier
readers and writers of those bytes (write after read / write). Accesses are
exact byte ranges in the planned memories, so reusing a TCM address for
another buffer orders the new writer after the old buffer's last reader.

A record loses the bytes a later write covers (the whole record is dropped when
nothing is left): that write waits for the record's commands, and whoever later
conflicts on those bytes conflicts with the write and so waits for it; a direct
wait would be implied by that one (the same start and end cycles, fewer entries).
Reads of DDR inputs and constants are not recorded: nothing writes them.

Control flow is a barrier: a CondCommand/LoopCommand waits for every command
with a live record, its nested lists start from a clean slate (they run after
it starts), and every later command of the enclosing list waits for it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import Generic, TypeVar

from scheduler.memory.byte_ranges import ByteSet, Ranges, many_runs_overlap, set_difference, set_union

PAGE_BYTES = 1024
#: An address space whose accesses a tracker orders: a memory, or a buffer (by serial).
SpaceT = TypeVar("SpaceT", bound=Hashable)


class _Record:
    """Accesses to some bytes of one memory: the command that wrote them, or the commands that
    read them (reads of the very same byte set share a record), and the index pages it is on
    (every page it has a byte on; after a write took some of its bytes, maybe a few more)."""

    __slots__ = ("cmds", "bytes", "write", "alive", "lo", "hi", "starts", "ends", "single", "pages")

    def __init__(self, cmd: int, byte_set: ByteSet, write: bool, pages: set[int]):
        self.cmds = [cmd]
        self.write = write
        self.alive = True
        self.hold(byte_set, pages)

    def hold(self, byte_set: ByteSet, pages: set[int]) -> None:
        """Record ``byte_set`` (on ``pages``), with copies of its fields the scans read often."""
        self.bytes = byte_set
        self.lo, self.hi = byte_set.lo, byte_set.hi
        self.starts, self.ends = byte_set.starts, byte_set.ends
        self.single = len(byte_set.starts) == 1  # one contiguous run: its bounding box is exact
        self.pages = pages


def _as_set(ranges: ByteSet | Ranges) -> ByteSet | None:
    return ranges if isinstance(ranges, ByteSet) else ByteSet.of(ranges)


def _candidates(index: dict[int, dict[_Record, None]] | None, page_set: set[int]) -> Collection[_Record]:
    """The records of one memory's ``index`` on the pages ``page_set``, each once (in no
    particular order: callers only collect commands and drop records)."""
    if not index:
        return ()
    if len(page_set) == 1:
        for page in page_set:
            return index.get(page, ())
    return set().union(*[recs for page in page_set if (recs := index.get(page))])


def _meeting(found: Iterable[_Record], byte_set: ByteSet) -> list[_Record]:
    """The records of ``found`` having a byte in ``byte_set``: bounding boxes first, then the
    runs (one run against many: a bisection; many against many: :func:`many_runs_overlap`)."""
    if not found:
        return []
    lo, hi, starts, ends = byte_set.lo, byte_set.hi, byte_set.starts, byte_set.ends
    single = len(starts) == 1
    lattice = None if single else byte_set.lattice()
    out = []
    for rec in found:
        if rec.lo >= hi or lo >= rec.hi:
            continue
        if rec.single:
            if single:
                out.append(rec)
            else:
                j = bisect_left(starts, rec.hi) - 1   # the last run starting before the record ends
                if ends[j] > rec.lo:
                    out.append(rec)
        elif single:
            j = bisect_left(rec.starts, hi) - 1
            if rec.ends[j] > lo:
                out.append(rec)
        elif many_runs_overlap(rec.bytes, byte_set, lattice):
            out.append(rec)
    return out


class AccessTracker(Generic[SpaceT]):
    """Live access records of one scope, indexed by memory page (writes and reads apart:
    a read only looks for earlier writes, a write for both).

    Accesses are :class:`~scheduler.memory.byte_ranges.ByteSet` s (or ``Ranges`` arrays) of
    address spaces ``SpaceT`` (the memories, or buffers). ``page_bytes``: the index's page size
    per space, ``default_page_bytes`` for the others (the pages decide only which records an
    access compares bytes with, never the dependencies found).
    """

    def __init__(self, page_bytes: Mapping[SpaceT, int] | None = None, default_page_bytes: int = PAGE_BYTES) -> None:
        self.page_bytes = page_bytes or {}
        self.default_page_bytes = default_page_bytes
        # memory -> page -> live records filed there (a dict: dropping one is O(1))
        self.writes: dict[SpaceT, dict[int, dict[_Record, None]]] = {}
        self.reads: dict[SpaceT, dict[int, dict[_Record, None]]] = {}
        # memory -> byte set -> its live read record (weights and constants are read by every tile)
        self.shared_reads: dict[SpaceT, dict[ByteSet, _Record]] = {}
        self.records: list[_Record] = []

    def access(self, cmd: int, reads: Sequence[tuple[SpaceT, ByteSet | Ranges]],
               writes: Sequence[tuple[SpaceT, ByteSet | Ranges]]) -> set[int]:
        """Record ``cmd``'s accesses; return the commands it must wait for."""
        deps: set[int] = set()
        read_sets = self._wait_to_read(reads, deps)
        write_sets = self._wait_to_write(writes, deps)
        deps.discard(cmd)
        for memory, rs, page_set in read_sets:
            shared = self.shared_reads.setdefault(memory, {})
            rec = shared.get(rs)
            if rec is None:
                rec = shared[rs] = _Record(cmd, rs, False, page_set)
                self._add(self.reads, memory, rec)
            elif rec.cmds[-1] != cmd:
                rec.cmds.append(cmd)
        for memory, ws, page_set in write_sets:
            self._add(self.writes, memory, _Record(cmd, ws, True, page_set))
        return deps

    def _wait_to_read(self, reads: Sequence[tuple[SpaceT, ByteSet | Ranges]], deps: set[int]
                      ) -> list[tuple[SpaceT, ByteSet, set[int]]]:
        """Add to ``deps`` the writers of the bytes read; the reads' byte sets and pages."""
        read_sets = []
        page_bytes, default_page_bytes, writes = self.page_bytes, self.default_page_bytes, self.writes
        for memory, r in reads:
            rs = r if type(r) is ByteSet else _as_set(r)
            if rs is None:
                continue
            page_set = rs.pages(page_bytes.get(memory, default_page_bytes))
            read_sets.append((memory, rs, page_set))
            index = writes.get(memory)
            if index:
                for rec in _meeting(_candidates(index, page_set), rs):
                    deps.update(rec.cmds)
        return read_sets

    def _wait_to_write(self, writes: Sequence[tuple[SpaceT, ByteSet | Ranges]], deps: set[int]
                       ) -> list[tuple[SpaceT, ByteSet, set[int]]]:
        """Add to ``deps`` the earlier readers and writers of the bytes written, and take those
        bytes out of their records; the writes' byte sets (one per memory) and pages."""
        write_sets = []
        for memory, ws in _written_sets(writes):
            page_size = self.page_bytes.get(memory, self.default_page_bytes)
            page_set = ws.pages(page_size)
            write_sets.append((memory, ws, page_set))
            for index in (self.writes.get(memory), self.reads.get(memory)):
                if not index:
                    continue
                met = _meeting(_candidates(index, page_set), ws)
                if not met:
                    continue
                shared = None
                for rec in met:
                    deps.update(rec.cmds)
                    if not rec.write and shared is None:
                        shared = self.shared_reads.get(memory, {})
                for rec in met:
                    _overwrite(index, rec, ws, page_size, None if rec.write else shared)
        return write_sets

    def _add(self, index: dict[SpaceT, dict[int, dict[_Record, None]]], memory: SpaceT, rec: _Record) -> None:
        self.records.append(rec)
        pages = index.get(memory)
        if pages is None:
            pages = index[memory] = {}
        for page in rec.pages:
            recs = pages.get(page)
            if recs is None:
                pages[page] = {rec: None}
            else:
                recs[rec] = None

    def live_commands(self) -> set[int]:
        return {cmd for rec in self.records if rec.alive for cmd in rec.cmds}


def _written_sets(writes: Sequence[tuple[SpaceT, ByteSet | Ranges]]) -> list[tuple[SpaceT, ByteSet]]:
    """The bytes a command writes, one set per memory (several outputs in one memory: their union)."""
    if len(writes) == 1:   # (the usual command: one output)
        memory, w = writes[0]
        ws = w if type(w) is ByteSet else _as_set(w)
        return [] if ws is None else [(memory, ws)]
    written: dict[SpaceT, ByteSet] = {}
    for memory, w in writes:
        ws = w if type(w) is ByteSet else _as_set(w)
        if ws is not None:
            written[memory] = set_union(written[memory], ws) if memory in written else ws
    return list(written.items())


def _overwrite(index: dict[int, dict[_Record, None]], rec: _Record, written: ByteSet, page_bytes: int,
               shared: dict[ByteSet, _Record] | None) -> None:
    """Take the bytes ``written`` by a later write (that waits for it) out of ``rec``; forget the
    record if none are left (``shared``: the read records by byte set, ``rec`` no longer one)."""
    if shared is not None and shared.get(rec.bytes) is rec:
        del shared[rec.bytes]
    if written.lo <= rec.lo and rec.hi <= written.hi and len(written.starts) == 1:
        rest = None   # (the usual case, a run covering the whole record: no difference to take)
    else:
        rest = set_difference(rec.bytes, written)
    if rest is None:
        rec.alive = False
        for page in rec.pages:
            del index[page][rec]
        return
    if len(rest.starts) == 1:
        pages = rest.pages(page_bytes)
    else:   # the record's pages within the rest's span: a few more than it touches, which the
        # scans skip by its bounds and runs, without listing the pages of many runs again
        first, last = rest.lo // page_bytes, (rest.hi - 1) // page_bytes
        pages = {page for page in rec.pages if first <= page <= last}
    for page in rec.pages - pages:
        del index[page][rec]
    rec.hold(rest, pages)


class ImpliedWaits:
    """Drops the waits a command has anyway, from its other waits and from its unit's queue.

    A command that waits for ``b`` starts after whatever ``b`` waited for is done (``b``
    started after it). Each compute unit and DMA engine runs its commands one at a time in
    stream order (:mod:`npu_sim.hw.queues`): a compute command starts after the previous one
    of its unit is done; a DMA after the previous one of its engine started (the engine takes
    the next descriptor once the last bursts are issued, before the data lands), so after
    what that one waited for. A wait implied so never decides when a command starts (the
    one implying it is done later), so the program runs the same, cycle for cycle, with
    fewer dependencies to list and track.

    A command of the preamble (``resident``: a constant-pool load that several invocations run
    once, before the first) implies nothing: in an invocation it is done before the start, so a
    command waiting for it waits for none of what it waited for, and it holds no place in its
    engine's queue (the invocation's next DMA there follows the one before it).

    ``after``: command id -> bit mask (a Python int) of the commands done before it starts.
    """

    def __init__(self) -> None:
        self.after: dict[int, int] = {}
        self.last: dict[object, int] = {}   # queue -> its latest command

    def reduce(self, cmd: int, deps: set[int], queue: object = None, pipelined: bool = False,
               resident: bool = False) -> tuple[int, ...]:
        """``cmd``'s dependencies (commands of this list, numbered in stream order) without the
        implied ones, ascending; records what ``cmd`` starts after. ``queue``: the unit or engine
        running it (None: the sequencer); ``pipelined``: the queue takes a command before the
        previous one is done (DMA engines); ``resident``: ``cmd`` may run in a preamble (it then
        implies nothing, see the class)."""
        after = self.after
        known = 0
        previous = self.last.get(queue) if queue is not None else None
        if previous is not None:
            known = after[previous] if pipelined else after[previous] | 1 << previous
        kept = []
        for dep in sorted(deps, reverse=True):   # a later dependency may imply an earlier one, never the reverse
            if not (known >> dep) & 1:
                kept.append(dep)
                known |= after[dep] | 1 << dep
        if resident:
            after[cmd] = 0
        else:
            after[cmd] = known
            if queue is not None:
                self.last[queue] = cmd
        kept.reverse()
        return tuple(kept)

    def restart_queues(self) -> None:
        """Forget the queues' order (after a control command: later commands wait for it instead)."""
        self.last.clear()
