"""Static memory planners: offsets for buffers with known live ranges.

Like Relax's ``alloc_storage`` + ``alloc_tensor(offset)``: one storage (the
TCM), every buffer at a fixed offset, buffers whose live ranges overlap never
overlap in bytes. Planners share one interface (:class:`Planner`) so they can
be swapped and compared against the max-live lower bound.

* :class:`GreedyBySize`: biggest buffer first, each at the lowest aligned
  offset free during its whole live range (TFLite's and Vela's greedy).
* :class:`BestOfGreedy`: several greedy orders and fits, keeps the smallest footprint;
  when none reaches the lower bound, a bounded deterministic search over the
  placement order (:func:`search_order`) improves on them.
* :class:`BumpAllocator`: no reuse at all (DDR and the variable SRAM).

:func:`avoid_false_dependencies` then moves buffers within a placement's footprint so
that fewer of them take bytes whose previous owner's commands they would
otherwise not wait for (false write-after-read dependencies).
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable
from typing import Protocol

from npu_sim.memory_layout import align_up
from scheduler.memory.liveness import LiveRange, max_live_bytes


class Planner(Protocol):
    name: str

    def place(self, ranges: list[LiveRange], alignment: int) -> dict[int, int]:
        """Offset of every range (by key)."""


def footprint(ranges: list[LiveRange], offsets: dict[int, int]) -> int:
    """Bytes the placement occupies: the highest end offset."""
    return max((offsets[r.key] + r.size_bytes for r in ranges), default=0)


def _first_fit(order: list[LiveRange], alignment: int, best_fit: bool = False) -> dict[int, int]:
    """Place ranges in ``order``, each at the lowest (or tightest) aligned gap free for its live range."""
    return _scored_first_fit(order, alignment, best_fit, 0, None)[1]


def _scored_first_fit(order: list[LiveRange], alignment: int, best_fit: bool, bound: int,
                      limit: tuple[int, int] | None) -> tuple[tuple[int, int], dict[int, int], int]:
    """:func:`_first_fit` with its :func:`_score` against ``bound``; gives up (empty offsets) as
    soon as the score reaches ``limit`` (it only grows). Returns (score, offsets, ranges placed)."""
    placed: list[tuple[int, int, int, int]] = []   # (offset, end offset, start, end) sorted by offset
    offsets: dict[int, int] = {}
    top = excess = 0
    for count, r in enumerate(order, 1):
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
        top = max(top, offset + size)
        excess += max(0, offset + size - bound)
        if limit is not None and (top, excess) >= limit:
            return (top, excess), {}, count
        bisect.insort(placed, (offset, offset + size, start, end))
    return (top, excess), offsets, len(order)


#: Work the order search of :class:`BestOfGreedy` may spend per :meth:`BestOfGreedy.place`:
#: one unit per pair of ranges first fit compares (about n/2 per range placed) plus
#: :data:`RANGE_PLACEMENT_WORK` per range placed; some tens of milliseconds at most.
SEARCH_WORK = 250_000
RANGE_PLACEMENT_WORK = 16
#: Seed of the search's perturbations (the planner is deterministic).
SEARCH_SEED = 0


def aligned_max_live_bytes(ranges: list[LiveRange], alignment: int) -> int:
    """A lower bound at least :func:`max_live_bytes` when sizes are not multiples of ``alignment``.

    At any command the live ranges lie one above the other at aligned offsets, so
    each but the highest takes its size rounded up to ``alignment``.
    """
    best = 0
    for command in sorted({r.start for r in ranges}):   # the live set only grows at a start
        live = [r for r in ranges if r.start <= command <= r.end]
        aligned = sum(align_up(r.size_bytes, alignment) for r in live)
        best = max(best, aligned - max(align_up(r.size_bytes, alignment) - r.size_bytes for r in live))
    return best


def _score(order: list[LiveRange], offsets: dict[int, int], bound: int) -> tuple[int, int]:
    """``(footprint, bytes above bound summed over ranges)``: the second term ranks
    placements of the same footprint by how far they are from the bound."""
    top = excess = 0
    for r in order:
        end = offsets[r.key] + r.size_bytes
        top = max(top, end)
        excess += max(0, end - bound)
    return top, excess


def search_order(order: list[LiveRange], alignment: int, best_fit: bool, bound: int,
                 work: int = SEARCH_WORK) -> tuple[list[LiveRange], dict[int, int]]:
    """A better order for first fit than ``order``: iterated local search, within a budget.

    For every placement there is an order for which first fit does at least as well
    (by offset, after pushing every range as low as it goes), so searching orders can
    reach the optimum. Hill climb: move a range that ends above ``bound`` (highest
    first) in front of an earlier range live at the same time (moving it past others
    changes nothing), keep the first move that lowers :func:`_score`. At a local
    optimum: move two random ranges (seeded) in the best order so far and climb
    again. Stops at ``bound`` or when ``work`` (see :data:`SEARCH_WORK`; at least eight
    first-fit runs) is spent; returns the best order found.
    """
    n = len(order)
    placement_work = n // 2 + RANGE_PLACEMENT_WORK
    placements_left = max(8 * n, work // placement_work)
    rng = random.Random(SEARCH_SEED)

    def run(candidate: list[LiveRange], limit: tuple[int, int] | None) -> tuple[tuple[int, int], dict[int, int]]:
        nonlocal placements_left
        score, offsets, placed = _scored_first_fit(candidate, alignment, best_fit, bound, limit)
        placements_left -= placed
        return score, offsets

    current = list(order)
    score, offsets = run(current, None)
    best = (score, current, offsets)
    while placements_left > 0 and best[0][0] > bound:
        improved = _climb(current, offsets, score, bound, run, lambda: placements_left)
        if improved is not None:
            score, current, offsets = improved
            if score < best[0]:
                best = improved
            continue
        current = list(best[1])   # a local optimum: perturb the best order and climb again
        for _ in range(2):
            i, j = rng.randrange(n), rng.randrange(n)
            current.insert(j, current.pop(i))
        score, offsets = run(current, None)
    return best[1], best[2]


Scored = tuple[tuple[int, int], list[LiveRange], dict[int, int]]


def _climb(current: list[LiveRange], offsets: dict[int, int], score: tuple[int, int], bound: int,
           run: Callable[[list[LiveRange], tuple[int, int] | None], tuple[tuple[int, int], dict[int, int]]],
           work_left: Callable[[], int]) -> Scored | None:
    """The first move of a range ending above ``bound`` (highest first) in front of an earlier
    range live at the same time that lowers the score; None if none does (or the work is spent)."""
    ends = {r.key: offsets[r.key] + r.size_bytes for r in current}
    high = sorted((i for i, r in enumerate(current) if ends[r.key] > bound),
                  key=lambda i: (-ends[current[i].key], i))
    for i in high:
        for j in range(i):
            if not current[j].overlaps(current[i]):
                continue
            candidate = current[:j] + [current[i]] + current[j:i] + current[i + 1:]
            candidate_score, candidate_offsets = run(candidate, score)
            if candidate_offsets:   # complete, so below ``score``
                return candidate_score, candidate, candidate_offsets
            if work_left() <= 0:
                return None
    return None


class GreedyBySize:
    """Largest first; each at the lowest offset that is free for its whole live range."""

    name = "greedy_by_size"

    def place(self, ranges: list[LiveRange], alignment: int) -> dict[int, int]:
        order = sorted(ranges, key=lambda r: (-r.size_bytes, -(r.end - r.start), r.start, r.key))
        return _first_fit(order, alignment)


class BestOfGreedy:
    """Several greedy orders (size, size x lifetime, lifetime, start; first and best fit);
    if none reaches the max-live lower bound, a bounded search over the order
    (:func:`search_order`) from each of them, best first. The smallest footprint wins
    (``last`` names it, ``+search`` when the search found it). A placement reaching the
    lower bound ends everything (nothing can beat it)."""

    name = "best_of_greedy"
    ORDERS = {
        "size": lambda r: (-r.size_bytes, -(r.end - r.start), r.start, r.key),
        "area": lambda r: (-r.size_bytes * (r.end - r.start + 1), -r.size_bytes, r.start, r.key),
        "lifetime": lambda r: (-(r.end - r.start), -r.size_bytes, r.start, r.key),
        "start": lambda r: (r.start, -r.size_bytes, r.key),
    }

    def __init__(self, search_work: int = SEARCH_WORK) -> None:
        self.last = ""
        self.search_work = search_work
        self._winner: tuple[str, bool, dict[int, int] | None] | None = None

    def place(self, ranges: list[LiveRange], alignment: int) -> dict[int, int]:
        if not ranges:
            return {}
        bound = max_live_bytes(ranges)   # no placement can beat it: stop when one reaches it
        # (score, label, order, best fit?, offsets) of every greedy run, until one reaches the bound
        runs: list[tuple[tuple[int, int], str, list[LiveRange], bool, dict[int, int]]] = []
        for name, key in self.ORDERS.items():
            order = sorted(ranges, key=key)
            for fit in (False, True):
                offsets = _first_fit(order, alignment, best_fit=fit)
                runs.append((_score(order, offsets, bound), f"{name}/{'best' if fit else 'first'}_fit",
                             order, fit, offsets))
                if runs[-1][0][0] <= bound:
                    break
            if runs[-1][0][0] <= bound:
                break
        runs.sort(key=lambda run: run[0])   # stable: the first listed order wins ties
        _, label, _, fit, offsets = runs[0]
        size, rank = footprint(ranges, offsets), None
        if size > bound:
            # search from every greedy order in turn (best first), sharing the budget, until the
            # bound (larger when sizes are not multiples of the alignment) is reached
            bound = aligned_max_live_bytes(ranges, alignment)
            for _, start_label, start_order, start_fit, _ in runs:
                if size <= bound:
                    break
                found, found_offsets = search_order(start_order, alignment, start_fit, bound,
                                                    self.search_work // len(runs))
                if footprint(found, found_offsets) < size:
                    label, fit, offsets = start_label + "+search", start_fit, found_offsets
                    size, rank = footprint(found, offsets), {r.key: i for i, r in enumerate(found)}
        self.last = label
        self._winner = (label.split("/")[0], fit, rank)
        return offsets

    def place_like_last(self, ranges: list[LiveRange], alignment: int) -> dict[int, int]:
        """Place with the order and fit that won the last :meth:`place` (one greedy run):
        the searched order for the keys it knows, the greedy order after them."""
        if self._winner is None:
            return self.place(ranges, alignment)
        name, fit, rank = self._winner
        key = self.ORDERS[name]
        if rank is not None:
            order = sorted(ranges, key=lambda r: (rank.get(r.key, len(rank)),) + key(r))
        else:
            order = sorted(ranges, key=key)
        return _first_fit(order, alignment, best_fit=fit)


class BumpAllocator:
    """Every buffer gets its own bytes, in order."""

    name = "bump"

    def place(self, ranges: list[LiveRange], alignment: int) -> dict[int, int]:
        offsets, top = {}, 0
        for r in ranges:
            offsets[r.key] = top
            top = align_up(top + r.size_bytes, alignment)
        return offsets


def _reuse_cost(x: int, size: int, near: list[tuple[int, int]]) -> int:
    """How many of the ``near`` byte ranges ``(lo, hi)`` the bytes ``[x, x + size)`` meet."""
    end = x + size
    return sum(1 for lo, hi in near if lo < end and x < hi)


def avoid_false_dependencies(ranges: list[LiveRange], offsets: dict[int, int], alignment: int,
                             reuse_is_free: Callable[[int, int], bool] | None = None) -> dict[int, int]:
    """``offsets`` with buffers moved, within the placement's footprint, so that fewer
    buffers take bytes of another buffer whose commands they would otherwise not wait for.

    Two buffers on the same bytes are ordered by the memory: the later one's first
    writer waits for the earlier one's last access, a write-after-read dependency the
    graph does not need, which serializes independent work. ``reuse_is_free(earlier,
    later)`` (keys) says when the stream orders the two anyway (see
    :mod:`scheduler.codegen.implied_order`); None: never. In order of first use, each buffer
    moves to the aligned offset, free over its live range and below the footprint,
    that shares bytes with the fewest buffers it is not free to share with (the
    lowest such offset; it stays unless the count drops). Each move lowers the number
    of such pairs, the footprint never grows and buffers live at the same time never
    overlap; deterministic, one pass of about n^2 comparisons.
    """
    top = footprint(ranges, offsets)
    offsets = dict(offsets)
    order = sorted(ranges, key=lambda r: (r.start, r.key))
    live_with, costly = _neighbours(order, reuse_is_free)
    for i, r in enumerate(order):
        near = [(offsets[u.key], offsets[u.key] + u.size_bytes) for u in costly[i]]
        offsets[r.key] = _least_shared_offset(offsets[r.key], r.size_bytes, near, live_with[i], offsets, top,
                                              alignment)
    return offsets


def _neighbours(order: list[LiveRange], reuse_is_free: Callable[[int, int], bool] | None
                ) -> tuple[list[list[LiveRange]], list[list[LiveRange]]]:
    """Per range of ``order`` (sorted by start): the ranges live with it, and the ranges
    not live with it that it may not share bytes with for free."""
    live_with: list[list[LiveRange]] = [[] for _ in order]
    costly: list[list[LiveRange]] = [[] for _ in order]
    starts = [r.start for r in order]
    for i, a in enumerate(order):
        apart = bisect.bisect_right(starts, a.end)   # order[i + 1:apart] start while a is live
        for j in range(i + 1, apart):
            live_with[i].append(order[j])
            live_with[j].append(a)
        for j in range(apart, len(order)):
            b = order[j]
            if reuse_is_free is None or not reuse_is_free(a.key, b.key):
                costly[i].append(b)
                costly[j].append(a)
    return live_with, costly


def _least_shared_offset(here: int, size: int, near: list[tuple[int, int]], live_with: list[LiveRange],
                         offsets: dict[int, int], top: int, alignment: int) -> int:
    """The lowest aligned offset below ``top``, free of the bytes of the ranges ``live_with``,
    whose bytes meet the fewest ``near`` ranges; ``here`` unless another meets fewer."""
    best_cost = _reuse_cost(here, size, near)
    if not best_cost:
        return here
    busy = sorted((offsets[u.key], offsets[u.key] + u.size_bytes) for u in live_with)
    # candidates: both ends of every free stretch of bytes, and the offsets just clear of a near buffer
    free, low = [], 0
    for lo, hi in busy + [(top, top)]:
        if lo > low:
            free.append((low, lo))
        low = max(low, hi)
    points = set()
    for lo, hi in near:
        points.add(align_up(hi, alignment))
        points.add((lo - size) // alignment * alignment)
    best = here
    for f_lo, f_hi in free:
        first = align_up(f_lo, alignment)
        last = (f_hi - size) // alignment * alignment
        if first > last:
            continue
        for x in sorted({first, last} | {p for p in points if first < p < last}):
            cost = _reuse_cost(x, size, near)
            if cost < best_cost:
                best, best_cost = x, cost
    return best
