"""Dependencies from memory accesses: every command waits for the commands it conflicts with.

Walking the stream in order, a command depends on the earlier commands that
wrote bytes it reads (read after write), and, if it writes, on the earlier
readers and writers of those bytes (write after read / write). Accesses are
exact byte ranges in the planned memories, so reusing a TCM address for
another buffer orders the new writer after the old buffer's last reader.

Records fully overwritten by a later ordered write are dropped: whoever
conflicts with them conflicts with the later write and so waits for it too.
Reads of DDR inputs and constants are not recorded: nothing writes them.

Control flow is a barrier: a CondCommand/LoopCommand waits for every command
with a live record, its nested lists start from a clean slate (they run after
it starts), and every later command of the enclosing list waits for it.
"""

from __future__ import annotations

from npu_sim.program import MemorySpace
from scheduler.byte_ranges import ByteSet, Ranges, set_covered, set_overlaps, set_union

PAGE_BYTES = 1024


class _Record:
    """Accesses to some bytes of one memory: the command that wrote them, or the commands that
    read them (reads of the very same byte set share a record), and the index pages it is on."""

    __slots__ = ("cmds", "bytes", "write", "alive", "lo", "hi", "pages", "single", "stamp")

    def __init__(self, cmd: int, byte_set: ByteSet, write: bool, pages: set[int]):
        self.cmds = [cmd]
        self.write = write
        self.bytes = byte_set
        self.alive = True
        self.lo = byte_set.lo
        self.hi = byte_set.hi
        self.pages = pages
        self.single = len(byte_set.starts) == 1  # one contiguous run: its bounding box is exact
        self.stamp = -1   # the last scan that looked at it (records sit on several pages)


def _as_set(ranges: ByteSet | Ranges) -> ByteSet | None:
    return ranges if isinstance(ranges, ByteSet) else ByteSet.of(ranges)


class AccessTracker:
    """Live access records of one scope, indexed by memory page (writes and reads apart:
    a read only looks for earlier writes, a write for both).

    Accesses are :class:`~scheduler.byte_ranges.ByteSet` s (or ``Ranges`` arrays).
    """

    def __init__(self, page_bytes: dict[MemorySpace, int] | None = None) -> None:
        self.page_bytes = page_bytes or {}
        # memory -> page -> live records filed there (a dict: dropping one is O(1))
        self.writes: dict[MemorySpace, dict[int, dict[_Record, None]]] = {}
        self.reads: dict[MemorySpace, dict[int, dict[_Record, None]]] = {}
        # memory -> byte set -> its live read record (weights and constants are read by every tile)
        self.shared_reads: dict[MemorySpace, dict[ByteSet, _Record]] = {}
        self.records: list[_Record] = []
        self.scans = 0

    def _scan(self, index: dict[int, dict[_Record, None]], byte_set: ByteSet, page_set: set[int],
              found: list[_Record]) -> None:
        """Append to ``found`` the records of one memory's ``index`` whose bounding box meets
        ``byte_set`` (each once per scan)."""
        lo, hi = byte_set.lo, byte_set.hi
        self.scans += 1
        stamp = self.scans
        for page in page_set:
            recs = index.get(page)
            if recs:
                for rec in recs:
                    if rec.stamp != stamp and rec.lo < hi and lo < rec.hi:
                        rec.stamp = stamp
                        found.append(rec)

    def access(self, cmd: int, reads: list[tuple[MemorySpace, ByteSet | Ranges]],
               writes: list[tuple[MemorySpace, ByteSet | Ranges]]) -> set[int]:
        """Record ``cmd``'s accesses; return the commands it must wait for."""
        deps: set[int] = set()
        page_bytes = self.page_bytes
        read_sets = []
        for memory, r in reads:
            rs = _as_set(r)
            if rs is None:
                continue
            page_set = rs.pages(page_bytes.get(memory, PAGE_BYTES))
            read_sets.append((memory, rs, page_set))
            found: list[_Record] = []
            self._scan(self.writes.get(memory, {}), rs, page_set, found)
            single = len(rs.starts) == 1
            for rec in found:
                if (single and rec.single) or set_overlaps(rec.bytes, rs):
                    deps.update(rec.cmds)
        written: dict[MemorySpace, ByteSet] = {}
        for memory, w in writes:
            ws = _as_set(w)
            if ws is not None:
                written[memory] = set_union(written[memory], ws) if memory in written else ws
        write_sets = []
        for memory, ws in written.items():
            page_set = ws.pages(page_bytes.get(memory, PAGE_BYTES))
            write_sets.append((memory, ws, page_set))
            windex, rindex = self.writes.get(memory, {}), self.reads.get(memory, {})
            shared = self.shared_reads.get(memory, {})
            found = []
            self._scan(windex, ws, page_set, found)
            self._scan(rindex, ws, page_set, found)
            single = len(ws.starts) == 1
            w_lo, w_hi = ws.lo, ws.hi
            for rec in found:
                both = single and rec.single   # bounding boxes met in _scan: they overlap
                if both or set_overlaps(rec.bytes, ws):
                    deps.update(rec.cmds)
                    if (w_lo <= rec.lo and rec.hi <= w_hi) if both else set_covered(rec.bytes, ws):
                        _drop(windex, rec) if rec.write else _drop(rindex, rec, shared)
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

    def _add(self, index: dict, memory: MemorySpace, rec: _Record) -> None:
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


def _drop(index: dict[int, dict[_Record, None]], rec: _Record,
          shared: dict[ByteSet, _Record] | None = None) -> None:
    """Forget a record fully overwritten by a later write (``shared``: the read records by byte set)."""
    rec.alive = False
    for page in rec.pages:
        del index[page][rec]
    if shared is not None and shared.get(rec.bytes) is rec:
        del shared[rec.bytes]
