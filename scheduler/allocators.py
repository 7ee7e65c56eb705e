"""Static memory planners: offsets for buffers with known live ranges.

Like Relax's ``alloc_storage`` + ``alloc_tensor(offset)``: one storage (the
TCM), every buffer at a fixed offset, buffers whose live ranges overlap never
overlap in bytes. Planners share one interface (:class:`Planner`) so they can
be swapped and compared against the max-live lower bound.

* :class:`GreedyBySize`: biggest buffer first, each at the lowest aligned
  offset free during its whole live range (TFLite's and Vela's greedy).
* :class:`BestOfGreedy`: several greedy orders and fits, keeps the smallest footprint.
* :class:`BumpAllocator`: no reuse at all (DDR and the variable SRAM).
"""

from __future__ import annotations

import bisect
from typing import Protocol

from scheduler.liveness import LiveRange, max_live_bytes


def align_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment if alignment > 1 else value


class Planner(Protocol):
    name: str

    def place(self, ranges: list[LiveRange], alignment: int) -> dict[int, int]:
        """Offset of every range (by key)."""


def footprint(ranges: list[LiveRange], offsets: dict[int, int]) -> int:
    """Bytes the placement occupies: the highest end offset."""
    return max((offsets[r.key] + r.size_bytes for r in ranges), default=0)


def _first_fit(order: list[LiveRange], alignment: int, best_fit: bool = False) -> dict[int, int]:
    """Place ranges in ``order``, each at the lowest (or tightest) aligned gap free for its live range."""
    placed: list[tuple[int, int, int, int]] = []   # (offset, end offset, start, end) sorted by offset
    offsets: dict[int, int] = {}
    for r in order:
        start, end, size = r.start, r.end, r.size_bytes
        offset, chosen, gap_size = 0, None, None
        for lo, hi, other_start, other_end in placed:
            if other_start > end or start > other_end:   # not live at the same time
                continue
            if lo >= offset + size:
                if not best_fit:
                    break
                if gap_size is None or lo - offset < gap_size:
                    chosen, gap_size = offset, lo - offset
            if hi > offset:
                offset = -(-hi // alignment) * alignment if alignment > 1 else hi
        if best_fit and chosen is not None:
            offset = chosen
        offsets[r.key] = offset
        bisect.insort(placed, (offset, offset + size, start, end))
    return offsets


class GreedyBySize:
    """Largest first; each at the lowest offset that is free for its whole live range."""

    name = "greedy_by_size"

    def place(self, ranges: list[LiveRange], alignment: int) -> dict[int, int]:
        order = sorted(ranges, key=lambda r: (-r.size_bytes, -(r.end - r.start), r.start, r.key))
        return _first_fit(order, alignment)


class BestOfGreedy:
    """Several greedy orders (size, size x lifetime, lifetime, start; first and best fit):
    the placement with the smallest footprint wins (``last`` names the winner). A placement
    reaching the max-live lower bound ends the search (nothing can beat it)."""

    name = "best_of_greedy"
    ORDERS = {
        "size": lambda r: (-r.size_bytes, -(r.end - r.start), r.start, r.key),
        "area": lambda r: (-r.size_bytes * (r.end - r.start + 1), -r.size_bytes, r.start, r.key),
        "lifetime": lambda r: (-(r.end - r.start), -r.size_bytes, r.start, r.key),
        "start": lambda r: (r.start, -r.size_bytes, r.key),
    }

    def __init__(self) -> None:
        self.last = ""
        self._winner: tuple[str, bool] | None = None

    def place(self, ranges: list[LiveRange], alignment: int) -> dict[int, int]:
        best: tuple[int, str, dict[int, int], tuple[str, bool]] | None = None
        bound = max_live_bytes(ranges)   # no placement can beat it: stop when one reaches it
        for name, key in self.ORDERS.items():
            order = sorted(ranges, key=key)
            for fit in (False, True):
                offsets = _first_fit(order, alignment, best_fit=fit)
                size = footprint(ranges, offsets)
                label = f"{name}/{'best' if fit else 'first'}_fit"
                if best is None or size < best[0]:
                    best = (size, label, offsets, (name, fit))
                if best[0] <= bound:
                    break
            if best is not None and best[0] <= bound:
                break
        if best is None:
            return {}
        self.last = best[1]
        self._winner = best[3]
        return best[2]

    def place_like_last(self, ranges: list[LiveRange], alignment: int) -> dict[int, int]:
        """Place with the order and fit that won the last :meth:`place` (one greedy run)."""
        if self._winner is None:
            return self.place(ranges, alignment)
        name, fit = self._winner
        return _first_fit(sorted(ranges, key=self.ORDERS[name]), alignment, best_fit=fit)


class BumpAllocator:
    """Every buffer gets its own bytes, in order."""

    name = "bump"

    def place(self, ranges: list[LiveRange], alignment: int) -> dict[int, int]:
        offsets, top = {}, 0
        for r in ranges:
            offsets[r.key] = top
            top = align_up(top + r.size_bytes, alignment)
        return offsets
