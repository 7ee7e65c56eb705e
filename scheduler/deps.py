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
from scheduler.byte_ranges import Ranges, covered, overlaps, pages, union

PAGE_BYTES = 1024


class _Record:
    """One command's access to some bytes of one memory (and the index pages it is filed under)."""

    __slots__ = ("cmd", "ranges", "write", "alive", "lo", "hi", "pages", "single")

    def __init__(self, cmd: int, ranges: Ranges, write: bool, pages: set[int]):
        self.cmd = cmd
        self.ranges = ranges
        self.write = write
        self.alive = True
        self.lo = int(ranges[0, 0]) if len(ranges) else 0
        self.hi = int(ranges[-1, 1]) if len(ranges) else 0
        self.pages = pages
        self.single = len(ranges) == 1  # one contiguous range: its bounding box is exact


class AccessTracker:
    """Live access records of one scope, indexed by memory page (writes and reads apart:
    a read only looks for earlier writes, a write for both)."""

    def __init__(self, page_bytes: dict[MemorySpace, int] | None = None) -> None:
        self.page_bytes = page_bytes or {}
        self.writes: dict[tuple[MemorySpace, int], list[_Record]] = {}
        self.reads: dict[tuple[MemorySpace, int], list[_Record]] = {}
        self.dead: dict[tuple[MemorySpace, int], int] = {}
        self.records: list[_Record] = []

    def _pages(self, memory: MemorySpace, ranges: Ranges) -> set[int]:
        return pages(ranges, self.page_bytes.get(memory, PAGE_BYTES))

    def _scan(self, index: dict, memory: MemorySpace, ranges: Ranges, page_set: set[int],
              found: dict[int, _Record]) -> None:
        """Add to ``found`` the live records of ``index`` whose bounding box meets ``ranges``."""
        lo, hi = int(ranges[0, 0]), int(ranges[-1, 1])
        dead = self.dead
        for page in page_set:
            key = (memory, page)
            recs = index.get(key)
            if not recs:
                continue
            if dead.get(key, 0) * 2 > len(recs):
                recs = index[key] = [r for r in recs if r.alive]
                dead[key] = 0
            for rec in recs:
                if rec.alive and rec.lo < hi and lo < rec.hi:
                    found[id(rec)] = rec

    def access(self, cmd: int, reads: list[tuple[MemorySpace, Ranges]],
               writes: list[tuple[MemorySpace, Ranges]]) -> set[int]:
        """Record ``cmd``'s accesses; return the commands it must wait for."""
        deps: set[int] = set()
        read_pages = [self._pages(memory, r) for memory, r in reads]
        for (memory, r), page_set in zip(reads, read_pages):
            found: dict[int, _Record] = {}
            self._scan(self.writes, memory, r, page_set, found)
            single = len(r) == 1
            deps.update(rec.cmd for rec in found.values()
                        if (single and rec.single) or overlaps(rec.ranges, r))
        written: dict[MemorySpace, Ranges] = {}
        for memory, w in writes:
            written[memory] = union(written[memory], w) if memory in written else w
        written_pages = {memory: self._pages(memory, w) for memory, w in written.items()}
        for memory, w in written.items():
            found = {}
            page_set = written_pages[memory]
            self._scan(self.writes, memory, w, page_set, found)
            self._scan(self.reads, memory, w, page_set, found)
            single = len(w) == 1
            w_lo, w_hi = int(w[0, 0]), int(w[-1, 1])
            for rec in found.values():
                both = single and rec.single   # bounding boxes met in _scan: they overlap
                if both or overlaps(rec.ranges, w):
                    deps.add(rec.cmd)
                    if (w_lo <= rec.lo and rec.hi <= w_hi) if both else covered(rec.ranges, w):
                        rec.alive = False
                        for page in rec.pages:
                            self.dead[(memory, page)] = self.dead.get((memory, page), 0) + 1
        deps.discard(cmd)
        for (memory, r), page_set in zip(reads, read_pages):
            self._add(self.reads, memory, _Record(cmd, r, False, page_set))
        for memory, w in written.items():
            self._add(self.writes, memory, _Record(cmd, w, True, written_pages[memory]))
        return deps

    def _add(self, index: dict, memory: MemorySpace, rec: _Record) -> None:
        if len(rec.ranges) == 0:
            return
        self.records.append(rec)
        for page in rec.pages:
            key = (memory, page)
            recs = index.get(key)
            if recs is None:
                index[key] = [rec]
            else:
                recs.append(rec)

    def live_commands(self) -> set[int]:
        return {rec.cmd for rec in self.records if rec.alive}
