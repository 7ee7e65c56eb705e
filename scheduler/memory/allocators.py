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
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Protocol, runtime_checkable

import numpy as np

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
    return _scored_first_fit(order, alignment, best_fit, 0, None, live_together(order))[1]


class Neighbours:
    """Per range, the ranges live at some same command (:func:`live_together`), by dense index
    (the ranges sorted by start): first fit reads their offsets from a list, not a dict."""

    __slots__ = ("keys", "index", "sizes", "near", "_getters")

    def __init__(self, ranges: Sequence[LiveRange]) -> None:
        order = sorted(ranges, key=lambda r: (r.start, r.key))
        self.keys = [r.key for r in order]
        self.index = {key: i for i, key in enumerate(self.keys)}
        self.sizes = [r.size_bytes for r in order]
        self.near = _live_together(order)
        self._getters: list[Callable[[list[int]], tuple[int, ...]]] | None = None

    def keys_near(self, key: int) -> list[int]:
        """The keys of the ranges live with range ``key``."""
        keys = self.keys
        return [keys[j] for j in self.near[self.index[key]]]

    def getters(self) -> list[Callable[[list[int]], tuple[int, ...]]]:
        """Per range, a function picking its neighbours' items out of a list by dense index
        (one C call where a comprehension walks them in Python; built once, kept for the search)."""
        if self._getters is None:
            self._getters = [_picker(near) for near in self.near]
        return self._getters


def _picker(indices: list[int]) -> Callable[[list[int]], tuple[int, ...]]:
    """A function giving the tuple of the items of a list at ``indices``."""
    if len(indices) >= 2:
        return itemgetter(*indices)
    if indices:
        only = indices[0]
        return lambda items: (items[only],)
    return lambda items: ()


def live_together(ranges: Sequence[LiveRange]) -> Neighbours:
    """Per range, every other range live at some same command."""
    return Neighbours(ranges)


def _scored_first_fit(order: list[LiveRange], alignment: int, best_fit: bool, bound: int,
                      limit: tuple[int, int] | None, neighbours: Neighbours
                      ) -> tuple[tuple[int, int], dict[int, int], int]:
    """:func:`_first_fit` with its :func:`_score` against ``bound``; gives up (empty offsets) as
    soon as the score reaches ``limit`` (it only grows). Returns (score, offsets, ranges placed).

    Each range looks only at its ``neighbours`` (:func:`live_together`) placed so far, by
    offset (ranges on the same offset in either order give the same gaps). A placed range is
    one int, ``offset << shift | end`` (-1: not placed yet): sorting ints orders by (offset,
    end) as tuples would, faster."""
    index, sizes, getters = neighbours.index, neighbours.sizes, neighbours.getters()
    # every end stays below the sum of the aligned sizes (first fit never goes above all placed)
    shift = (sum(sizes) + len(sizes) * alignment + 1).bit_length()
    mask = (1 << shift) - 1
    placed_at = [-1] * len(sizes)   # offset << shift | end, by dense index; -1: not placed yet
    offsets: dict[int, int] = {}
    top = excess = 0
    for count, r in enumerate(order, 1):
        size = r.size_bytes
        i = index[r.key]
        # (neighbours on the same bytes give the same gaps: each once, but for best fit of
        # nothing, where a second empty range on an aligned offset is a gap of its own)
        placed = sorted(set(getters[i](placed_at)) if size or not best_fit else getters[i](placed_at))
        if best_fit:
            offset = _best_fit_offset(placed, size, alignment, shift, mask)
        else:
            # the first gap: a range starting at least ``need`` above the highest end so far
            # (offsets are aligned, so the range fits above that end rounded up to the alignment)
            need = -(-size // alignment) * alignment if alignment > 1 else size
            high, threshold = 0, need << shift
            for packed in placed[bisect.bisect_left(placed, 0):]:
                if packed >= threshold:
                    break
                hi = packed & mask
                if hi > high:
                    high, threshold = hi, (hi + need) << shift
            offset = -(-high // alignment) * alignment if alignment > 1 else high
        offsets[r.key] = offset
        placed_at[i] = offset << shift | (offset + size)
        top = max(top, offset + size)
        excess += max(0, offset + size - bound)
        if limit is not None and (top, excess) >= limit:
            return (top, excess), {}, count
    return (top, excess), offsets, len(order)


def _best_fit_offset(placed: list[int], size: int, alignment: int, shift: int, mask: int) -> int:
    """Best fit among the neighbours ``placed`` (packed as in :func:`_scored_first_fit`, sorted):
    the lowest aligned offset of the smallest gap that holds ``size`` bytes, else above them all."""
    offset, chosen, gap_size = 0, None, None
    for packed in placed[bisect.bisect_left(placed, 0):]:
        lo = packed >> shift
        if lo >= offset + size and (gap_size is None or lo - offset < gap_size):
            chosen, gap_size = offset, lo - offset
        hi = packed & mask
        if hi > offset:
            offset = -(-hi // alignment) * alignment if alignment > 1 else hi
    return offset if chosen is None else chosen


#: Work the order search of :class:`BestOfGreedy` may spend per :meth:`BestOfGreedy.place`:
#: one unit per pair of ranges first fit compares (about n/2 per range placed) plus
#: :data:`RANGE_PLACEMENT_WORK` per range placed; some tens of milliseconds at most.
SEARCH_WORK = 250_000
RANGE_PLACEMENT_WORK = 16
#: The ranges the searches of one :meth:`BestOfGreedy.place` may place in all (each search
#: places at least eight orders' worth, which for thousands of ranges would take seconds
#: while the greedy placement is already within a few percent of the bound).
SEARCH_PLACEMENTS_MAX = 12_000
#: Seed of the search's perturbations (the planner is deterministic).
SEARCH_SEED = 0


def aligned_max_live_bytes(ranges: list[LiveRange], alignment: int) -> int:
    """A lower bound at least :func:`max_live_bytes` when sizes are not multiples of ``alignment``.

    At any command the live ranges lie one above the other at aligned offsets, so
    each but the highest takes its size rounded up to ``alignment``.
    """
    by_start = sorted(ranges, key=lambda r: r.start)
    by_end = sorted(ranges, key=lambda r: r.end)
    pads: Counter[int] = Counter()   # alignment padding of each live range (fewer than ``alignment`` values)
    best = aligned = ended = 0
    for i, r in enumerate(by_start):   # the live set only grows at a start
        aligned += align_up(r.size_bytes, alignment)
        pads[align_up(r.size_bytes, alignment) - r.size_bytes] += 1
        if i + 1 < len(by_start) and by_start[i + 1].start == r.start:
            continue
        while by_end[ended].end < r.start:
            gone = by_end[ended]
            ended += 1
            aligned -= align_up(gone.size_bytes, alignment)
            pad = align_up(gone.size_bytes, alignment) - gone.size_bytes
            pads[pad] -= 1
            if not pads[pad]:
                del pads[pad]
        best = max(best, aligned - max(pads))
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


def search_placements(n: int, work: int = SEARCH_WORK) -> int:
    """The ranges a search over ``n`` ranges may place for ``work`` (at least eight first-fit runs)."""
    return max(8 * n, work // (n // 2 + RANGE_PLACEMENT_WORK))


def search_order(order: list[LiveRange], alignment: int, best_fit: bool, bound: int,
                 work: int = SEARCH_WORK, *, placements: int | None = None,
                 neighbours: Neighbours | None = None) -> tuple[list[LiveRange], dict[int, int]]:
    """A better order for first fit than ``order``: iterated local search, within a budget.

    For every placement there is an order for which first fit does at least as well
    (by offset, after pushing every range as low as it goes), so searching orders can
    reach the optimum. Hill climb: move a range that ends above ``bound`` (highest
    first) in front of an earlier range live at the same time (moving it past others
    changes nothing), keep the first move that lowers :func:`_score`. At a local
    optimum: move two random ranges (seeded) in the best order so far and climb
    again. Stops at ``bound`` or when ``placements`` ranges are placed (default
    :func:`search_placements` of ``work``); returns the best order found.
    ``neighbours``: :func:`live_together` of ``order``, if known.
    """
    n = len(order)
    placements_left = search_placements(n, work) if placements is None else placements
    together = live_together(order) if neighbours is None else neighbours
    rng = random.Random(SEARCH_SEED)

    def run(candidate: list[LiveRange], limit: tuple[int, int] | None) -> tuple[tuple[int, int], dict[int, int]]:
        nonlocal placements_left
        score, offsets, placed = _scored_first_fit(candidate, alignment, best_fit, bound, limit, together)
        placements_left -= placed
        return score, offsets

    current = list(order)
    score, offsets = run(current, None)
    best = (score, current, offsets)
    while placements_left > 0 and best[0][0] > bound:
        improved = _climb(current, offsets, score, bound, run, lambda: placements_left, together)
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
           work_left: Callable[[], int], neighbours: Neighbours) -> Scored | None:
    """The first move of a range ending above ``bound`` (highest first) in front of an earlier
    range live at the same time that lowers the score; None if none does (or the work is spent)."""
    ends = {r.key: offsets[r.key] + r.size_bytes for r in current}
    high = sorted((i for i, r in enumerate(current) if ends[r.key] > bound),
                  key=lambda i: (-ends[current[i].key], i))
    position = {r.key: i for i, r in enumerate(current)}
    for i in high:
        for j in sorted(j for key in neighbours.keys_near(current[i].key) if (j := position[key]) < i):
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

    GREEDY_RUNS = 2 * len(ORDERS)   # (each order with first and best fit: all of them unless one reaches the bound)

    def __init__(self, search_work: int = SEARCH_WORK) -> None:
        self.last = ""
        self.search_work = search_work
        self._winner: tuple[str, bool, dict[int, int] | None] | None = None

    def place(self, ranges: list[LiveRange], alignment: int) -> dict[int, int]:
        if not ranges:
            return {}
        bound = max_live_bytes(ranges)   # no placement can beat it: stop when one reaches it
        neighbours = live_together(ranges)
        runs = self._greedy_runs(ranges, alignment, bound, neighbours)
        _, label, _, fit, offsets = runs[0]
        size, rank = footprint(ranges, offsets), None
        if size > bound:
            # search from every greedy order in turn (best first), sharing the budget, until the
            # bound (larger when sizes are not multiples of the alignment) is reached
            bound = aligned_max_live_bytes(ranges, alignment)
            placements_left = SEARCH_PLACEMENTS_MAX
            for _, start_label, start_order, start_fit, _ in runs:
                placements = min(search_placements(len(ranges), self.search_work // self.GREEDY_RUNS),
                                 placements_left)
                if size <= bound or placements <= 0:
                    break
                placements_left -= placements
                found, found_offsets = search_order(start_order, alignment, start_fit, bound,
                                                    placements=placements, neighbours=neighbours)
                if footprint(found, found_offsets) < size:
                    label, fit, offsets = start_label + "+search", start_fit, found_offsets
                    size, rank = footprint(found, offsets), {r.key: i for i, r in enumerate(found)}
        self.last = label
        self._winner = (label.split("/")[0], fit, rank)
        return offsets

    def _greedy_runs(self, ranges: list[LiveRange], alignment: int, bound: int, neighbours: Neighbours
                     ) -> list[tuple[tuple[int, int], str, list[LiveRange], bool, dict[int, int]]]:
        """``(score, label, order, best fit?, offsets)`` of the greedy runs, best first (ties: the
        first listed), until one reaches ``bound``. The search's budget reaches the best few runs
        only (:meth:`place` gives each in turn what :func:`search_placements` allows, the best
        first: one run when that is the whole budget, many ranges): once that many runs are in,
        a run gives up as soon as it cannot beat the last of the best so far (its score only
        grows; a tie ranks it after them) and is left out: nothing would search from it."""
        per_start = search_placements(len(ranges), self.search_work // self.GREEDY_RUNS)
        starts = -(-SEARCH_PLACEMENTS_MAX // per_start)   # the runs a search may start from
        runs: list[tuple[tuple[int, int], str, list[LiveRange], bool, dict[int, int]]] = []
        for name, key in self.ORDERS.items():
            order = sorted(ranges, key=key)
            for fit in (False, True):
                limit = sorted(run[0] for run in runs)[starts - 1] if len(runs) >= starts else None
                score, offsets, _ = _scored_first_fit(order, alignment, fit, bound, limit, neighbours)
                if offsets:
                    runs.append((score, f"{name}/{'best' if fit else 'first'}_fit", order, fit, offsets))
                    if score[0] <= bound:
                        return sorted(runs, key=lambda run: run[0])
        return sorted(runs, key=lambda run: run[0])   # stable: the first listed order wins ties

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


@dataclass(frozen=True)
class FreePairs:
    """Which buffers of an order of ranges may take which one's bytes without a new wait:
    ``free[later, earlier] = waits[later, columns_of[earlier]]``, ``waits`` a boolean row per
    range (the last commands its first one waits for: one column per last command of some
    buffer, and one of zeros) and ``columns_of`` each range's column. Blocks of the n^2
    answers are gathered from these as they are needed, with no n^2 matrix."""

    waits: np.ndarray
    columns_of: np.ndarray

    def rows(self, later: tuple[int, int], earlier: tuple[int, int]) -> np.ndarray:
        """``free[later[0]:later[1], earlier[0]:earlier[1]]``."""
        return self.waits[later[0]:later[1]][:, self.columns_of[earlier[0]:earlier[1]]]

    def columns(self, earlier: tuple[int, int], later: tuple[int, int]) -> np.ndarray:
        """``free[later[0]:later[1], earlier[0]:earlier[1]]`` transposed (rows: the earlier ones)."""
        return self.rows(later, earlier).T


@runtime_checkable
class ReuseOrder(Protocol):
    """Which earlier buffers a buffer may take the bytes of without a new wait, for all pairs
    at once (:class:`scheduler.codegen.implied_order.ImpliedOrder` answers from its wait masks)."""

    def free_pairs(self, order: Sequence[LiveRange]) -> FreePairs:
        """``free[i, j]``: ``order[i]`` may take the bytes of ``order[j]``, live before it,
        without a new wait (asked only of pairs where ``order[j]`` ends before ``order[i]``
        starts)."""


#: ``free(earlier, later)``: buffer ``later`` may take buffer ``earlier``'s bytes without a new wait.
ReuseTest = Callable[[int, int], bool]


class PairwiseReuse:
    """A :class:`ReuseOrder` from a pairwise test (None: no reuse is free), asked of every
    pair of ranges live apart: n^2 calls, for small inputs and tests."""

    def __init__(self, free: ReuseTest | None) -> None:
        self.free = free

    def free_pairs(self, order: Sequence[LiveRange]) -> FreePairs:
        waits = np.array([[earlier.end < later.start and self.free is not None and self.free(earlier.key, later.key)
                           for earlier in order] for later in order], dtype=bool).reshape(len(order), len(order))
        return FreePairs(waits, np.arange(len(order)))


def avoid_false_dependencies(ranges: list[LiveRange], offsets: dict[int, int], alignment: int,
                             reuse: ReuseOrder | ReuseTest | None = None) -> dict[int, int]:
    """``offsets`` with buffers moved, within the placement's footprint, so that fewer
    buffers take bytes of another buffer whose commands they would otherwise not wait for.

    Two buffers on the same bytes are ordered by the memory: the later one's first
    writer waits for the earlier one's last access, a write-after-read dependency the
    graph does not need, which serializes independent work. ``reuse`` says when the
    stream orders the two anyway: a :class:`ReuseOrder` (see
    :mod:`scheduler.codegen.implied_order`), or a pairwise test ``free(earlier, later)``
    of keys; None: never. In order of first use, each buffer moves to the aligned offset,
    free over its live range and below the footprint, that shares bytes with the fewest
    buffers it is not free to share with (the lowest such offset; it stays unless the
    count drops). Each move lowers the number of such pairs, the footprint never grows
    and buffers live at the same time never overlap; deterministic. Pairs live apart
    that are not free can be most pairs (a prefetch waits for little): they are found a
    block of buffers at a time (:func:`_costly_pairs`), and each buffer's costs are counted
    in arrays.
    """
    top = footprint(ranges, offsets)
    order = sorted(ranges, key=lambda r: (r.start, r.key))
    if not isinstance(reuse, ReuseOrder):
        reuse = PairwiseReuse(reuse)
    starts = np.array([r.start for r in order], dtype=np.int64)
    ends = np.array([r.end for r in order], dtype=np.int64)
    nears = _costly_pairs(starts, ends, reuse.free_pairs(order))
    placed = np.array([offsets[r.key] for r in order], dtype=np.int64)
    sizes = np.array([r.size_bytes for r in order], dtype=np.int64)
    live_with = _live_together(order)
    offsets_now, size_list = placed.tolist(), sizes.tolist()   # the same, as ints (read per neighbour)
    bins = _AlignedBins.fit(placed, sizes, top, alignment)
    for i, near in enumerate(nears):
        if not near.size:
            continue
        here, size = offsets_now[i], size_list[i]
        if bins is not None:
            new = bins.least_shared_offset(here, size, near, live_with[i])
            if new != here:
                bins.move(i, new, size)
                placed[i] = offsets_now[i] = new
            continue
        lows = placed[near]
        highs = lows + sizes[near]
        if not np.any((lows < here + size) & (here < highs)):
            continue
        together = np.array(live_with[i], dtype=np.intp)
        busy_lows = placed[together]
        placed[i] = offsets_now[i] = _least_shared_offset(here, size, lows, highs, busy_lows,
                                                          busy_lows + sizes[together], top, alignment)
    out = dict(offsets)
    out.update({r.key: int(x) for r, x in zip(order, placed)})
    return out


class _AlignedBins:
    """The ranges of :func:`avoid_false_dependencies` counted per aligned offset (a bin), when
    every offset is aligned and the footprint spans few alignment steps (a few per range): a
    buffer's cost at every aligned offset is then two running sums, and the offsets its live
    neighbours leave free a third, where :func:`_least_shared_offset` sorts per buffer. It picks
    the same offset (the lowest of least cost among the same free offsets, or ``here``).

    A range's bins: its offset's (``lows``) and its end's rounded up (``highs``). For aligned
    ``x`` and a range of ``span`` bins (its size rounded up), ``[x, x + size)`` meets a range
    exactly when the range's low bin is below ``x``'s plus ``span`` and its high bin above ``x``'s."""

    __slots__ = ("alignment", "lows", "highs", "count", "top", "_spans")

    def __init__(self, placed: np.ndarray, sizes: np.ndarray, top: int, alignment: int) -> None:
        self.alignment, self.top = alignment, top
        self.lows = placed // alignment
        self.highs = -(-(placed + sizes) // alignment)
        self.count = top // alignment + 2   # bins: every offset up to the footprint, one past it
        self._spans: dict[int, np.ndarray] = {}   # span -> per bin, the bin of its last byte (capped)

    @classmethod
    def fit(cls, placed: np.ndarray, sizes: np.ndarray, top: int, alignment: int) -> _AlignedBins | None:
        """Bins for these ranges, or None where sorting per buffer is the cheaper (or the only) way."""
        if (alignment <= 1 or not placed.size or int(sizes.min()) <= 0 or np.any(placed % alignment)
                or top // alignment > 2 * placed.size + 1024):
            return None
        return cls(placed, sizes, top, alignment)

    def move(self, i: int, offset: int, size: int) -> None:
        self.lows[i] = offset // self.alignment
        self.highs[i] = -(-(offset + size) // self.alignment)

    def least_shared_offset(self, here: int, size: int, near: np.ndarray, together: list[int]) -> int:
        """:func:`_least_shared_offset` of a buffer at ``here`` meeting the ranges ``near``, its
        live neighbours ``together`` busy: every aligned offset costed at once."""
        alignment, count = self.alignment, self.count
        span = -(-size // alignment)
        last = self._spans.get(span)
        if last is None:
            last = self._spans[span] = np.minimum(np.arange(count) + span - 1, count - 1)
        low_sums = np.bincount(self.lows[near], minlength=count).cumsum()   # [b]: low bins at most b
        high_sums = np.bincount(self.highs[near], minlength=count).cumsum()
        step = here // alignment
        here_cost = low_sums[last[step]] - high_sums[step]
        if not here_cost:
            return here
        costs = low_sums[last] - high_sums
        # a neighbour [low, high) rules out the bins from low - span + 1 to high - 1
        busy = np.array(together, dtype=np.intp)
        edges = np.bincount(np.maximum(self.lows[busy] - span + 1, 0), minlength=count + 1)
        edges[:count + 1] -= np.bincount(self.highs[busy], minlength=count + 1)[:count + 1]
        costs[edges[:count].cumsum() > 0] = _NEVER
        costs[max(0, (self.top - size) // alignment + 1):] = _NEVER   # (and the footprint)
        best = int(costs.argmin())   # (the lowest of the least)
        return best * alignment if costs[best] < here_cost else here


_NEVER = np.iinfo(np.int64).max


def _costly_pairs(starts: np.ndarray, ends: np.ndarray, free: FreePairs, block: int = 256) -> Iterator[np.ndarray]:
    """Per range (sorted by start), the indices of the ranges live apart from it whose bytes it
    may not share without a new wait: ``costly[i, j] or costly[j, i]``, ``costly[later, earlier]``
    being "live apart and not ``free``". Worked out ``block`` rows at a time (their pairs with
    earlier ranges, then the transposed slab of those with later ones), each row scanned while
    the block is in the cache: no n^2 matrix.
    Where every range ends at or after its start, a row's earlier ranges come before it and
    its later ones after it: each half looks only there."""
    n = len(starts)
    ordered = bool(np.all(starts <= ends))
    for a in range(0, n, block):
        b = min(a + block, n)
        earlier, later = (b, a) if ordered else (n, 0)   # the columns each half can have
        costly = np.zeros((b - a, n), dtype=bool)
        half = costly[:, :earlier]
        np.less(ends[None, :earlier], starts[a:b, None], out=half)
        np.greater(half, free.rows((a, b), (0, earlier)), out=half)
        after = ends[a:b, None] < starts[None, later:]
        np.greater(after, free.columns((a, b), (later, n)), out=after)
        costly[:, later:] |= after
        yield from map(np.flatnonzero, costly)


def _live_together(order: list[LiveRange]) -> list[list[int]]:
    """Per range of ``order`` (sorted by start), the indices of the ranges live with it: those
    before it (ascending), then those after it. The planner and :func:`avoid_false_dependencies`
    ask for the same ranges in a row: the last answer is kept (callers only read it)."""
    bounds = (tuple(r.start for r in order), tuple(r.end for r in order))
    if _LAST_LIVE_TOGETHER and _LAST_LIVE_TOGETHER[0] == bounds:
        return _LAST_LIVE_TOGETHER[1]
    live_with: list[list[int]] = [[] for _ in order]
    starts = bounds[0]
    for i, a in enumerate(order):
        apart = bisect.bisect_right(starts, a.end)   # order[i + 1:apart] start while a is live
        for j in range(i + 1, apart):
            live_with[i].append(j)
            live_with[j].append(i)
    _LAST_LIVE_TOGETHER[:] = [bounds, live_with]
    return live_with


_LAST_LIVE_TOGETHER: list = []   # [bounds, answer] of the last :func:`_live_together`


def _least_shared_offset(here: int, size: int, lows: np.ndarray, highs: np.ndarray, busy_lows: np.ndarray,
                         busy_highs: np.ndarray, top: int, alignment: int) -> int:
    """The lowest aligned offset below ``top``, free of the busy bytes ``[busy_lows, busy_highs)``,
    whose bytes meet the fewest near ranges ``[lows, highs)``; ``here`` unless another meets fewer.

    The lowest such offset is the start of a free stretch of bytes or the first aligned
    offset at or after a near range's end (one aligned step lower meets more ranges, so one
    of them ends in that step): those are the candidates."""
    firsts, lasts = _free_stretches(busy_lows, busy_highs, top, size, alignment)
    if not firsts.size:
        return here
    points = -(-highs // alignment) * alignment if alignment > 1 else highs
    stretch = np.searchsorted(firsts, points, side="right") - 1
    inside = (stretch >= 0) & (points <= lasts[stretch])
    candidates = np.concatenate([firsts, points[inside]])
    costs = _costs(np.append(candidates, here), size, lows, highs)   # (``here`` last)
    least = costs[:-1].min()
    return int(candidates[costs[:-1] == least].min()) if least < costs[-1] else here   # (the lowest of the least)


def _costs(offsets: np.ndarray, size: int, lows: np.ndarray, highs: np.ndarray) -> np.ndarray:
    """How many of the byte ranges ``[lows, highs)`` the bytes ``[x, x + size)`` meet, per
    offset ``x`` (two bisections each: for a positive size, a range ending at or before
    ``x`` starts before ``x + size``)."""
    if size <= 0:
        return ((lows[None, :] < offsets[:, None] + size) & (offsets[:, None] < highs[None, :])).sum(axis=1)
    return (np.searchsorted(np.sort(lows), offsets + size, side="left")
            - np.searchsorted(np.sort(highs), offsets, side="right"))


def _free_stretches(busy_lows: np.ndarray, busy_highs: np.ndarray, top: int, size: int, alignment: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(firsts, lasts)``: the lowest and highest aligned offsets of ``size`` bytes inside each
    stretch below ``top`` that no busy range ``[busy_lows, busy_highs)`` covers, ascending.
    A stretch starts where every busy range before it (by start) has ended, and ends at the
    next one's start (``top`` after the last)."""
    order = np.lexsort((busy_highs, busy_lows))
    starts = np.append(busy_lows[order], top)
    ends = np.append(busy_highs[order], top)
    free_from = np.maximum.accumulate(np.concatenate(([0], ends[:-1])))   # (everything before has ended)
    gap = starts > free_from
    low, high = free_from[gap], starts[gap]
    firsts = -(-low // alignment) * alignment if alignment > 1 else low
    lasts = (high - size) // alignment * alignment
    fits = firsts <= lasts
    return firsts[fits], lasts[fits]
