import numpy as np

from scheduler.memory.allocators import BumpAllocator, GreedyBySize, footprint
from scheduler.memory.liveness import LiveRange, live_at, max_live_bytes


def _ranges():
    # key, size, live start..end (command ids)
    return [LiveRange(0, 100, 0, 3), LiveRange(1, 60, 2, 5), LiveRange(2, 40, 4, 7),
            LiveRange(3, 100, 6, 9), LiveRange(4, 30, 0, 9)]


def test_max_live_bytes_is_the_lower_bound():
    r = _ranges()
    # live at 2..3: 100 + 60 + 30 = 190; at 4..5: 60 + 40 + 30; at 6..7: 40 + 100 + 30 = 170
    assert max_live_bytes(r) == 190
    assert [x.key for x in live_at(r, 4)] == [1, 2, 4]
    assert max_live_bytes([LiveRange(0, 8, 0, 0), LiveRange(1, 8, 1, 1)]) == 8   # end is inclusive


def test_greedy_by_size_offsets():
    r = _ranges()
    offsets = GreedyBySize().place(r, alignment=16)
    # largest first: 0 -> 0; 3 (100, no overlap with 0) -> 0; 1 (60) overlaps both -> 112;
    # 2 (40) overlaps 1 and 3 -> 176; 4 (30, always live) -> 224
    assert offsets == {0: 0, 3: 0, 1: 112, 2: 176, 4: 224}
    assert footprint(r, offsets) == 254
    for a in r:
        for b in r:
            if a.key < b.key and a.overlaps(b):
                assert offsets[a.key] + a.size_bytes <= offsets[b.key] or \
                    offsets[b.key] + b.size_bytes <= offsets[a.key]


def test_greedy_reuses_freed_space():
    r = [LiveRange(0, 64, 0, 1), LiveRange(1, 64, 2, 3), LiveRange(2, 32, 1, 2)]
    offsets = GreedyBySize().place(r, alignment=1)
    assert offsets == {0: 0, 1: 0, 2: 64}
    assert footprint(r, offsets) == max_live_bytes(r) == 96


def test_bump_never_reuses():
    r = [LiveRange(0, 10, 0, 0), LiveRange(1, 20, 5, 5), LiveRange(2, 1, 9, 9)]
    assert BumpAllocator().place(r, alignment=64) == {0: 0, 1: 64, 2: 128}


def test_best_of_greedy_never_worse_than_greedy_by_size():
    from scheduler.memory.allocators import BestOfGreedy
    # size-first leaves a hole that start order avoids: 3 buffers in sequence beside a long one
    r = [LiveRange(0, 50, 0, 1), LiveRange(1, 60, 2, 3), LiveRange(2, 40, 0, 3), LiveRange(3, 55, 4, 5),
         LiveRange(4, 45, 4, 5)]
    greedy = footprint(r, GreedyBySize().place(r, 1))
    planner = BestOfGreedy()
    best = footprint(r, planner.place(r, 1))
    assert best <= greedy and best == max_live_bytes(r) == 100
    assert planner.last


# --- BestOfGreedy's order search ---------------------------------------------------------

import random  # noqa: E402

from scheduler.memory.allocators import (  # noqa: E402
    SEARCH_PLACEMENTS_MAX,
    SEARCH_WORK,
    BestOfGreedy,
    _first_fit,
    search_order,
)


def _no_overlap(ranges, offsets, alignment):
    """Every offset aligned; ranges live at the same time never share a byte."""
    assert sorted(offsets) == sorted(r.key for r in ranges)
    assert all(offsets[r.key] % alignment == 0 for r in ranges)
    for i, a in enumerate(ranges):
        for b in ranges[i + 1:]:
            if a.overlaps(b):
                assert offsets[a.key] + a.size_bytes <= offsets[b.key] or \
                    offsets[b.key] + b.size_bytes <= offsets[a.key], (a, b)


def _best_greedy(ranges, alignment):
    return min(footprint(ranges, _first_fit(sorted(ranges, key=key), alignment, fit))
               for key in BestOfGreedy.ORDERS.values() for fit in (False, True))


def _five_ranges(unit=1):
    # t=0: a+b+c = 14, t=1..2: a+c+d = 14, t=3: d+e = 14. Optimal: d where b was, e where a and c
    # were (so a and c side by side). Every greedy order puts e (or d) on top: 18.
    return [LiveRange(0, 5 * unit, 0, 2), LiveRange(1, 5 * unit, 0, 0), LiveRange(2, 4 * unit, 0, 2),
            LiveRange(3, 5 * unit, 1, 3), LiveRange(4, 9 * unit, 3, 3)]


def test_search_reaches_the_optimum_greedy_misses():
    r = _five_ranges(unit=16)
    assert max_live_bytes(r) == 14 * 16
    assert _best_greedy(r, 16) == 18 * 16
    planner = BestOfGreedy()
    offsets = planner.place(r, alignment=16)
    _no_overlap(r, offsets, 16)
    assert footprint(r, offsets) == 14 * 16
    assert planner.last.endswith("+search")
    assert offsets[1] == offsets[3]                                   # d reuses b's bytes
    assert {offsets[0], offsets[2]} == {offsets[4], offsets[4] + 5 * 16} or \
        {offsets[0], offsets[2]} == {offsets[4], offsets[4] + 4 * 16}  # e over a and c
    # the searched order is kept: placing again like the last gives the same offsets
    assert planner.place_like_last(r, 16) == offsets


def test_search_without_budget_still_returns_a_valid_order():
    r = _five_ranges()
    order = sorted(r, key=BestOfGreedy.ORDERS["size"])
    found, offsets = search_order(order, 1, False, max_live_bytes(r), work=0)
    assert sorted(x.key for x in found) == [0, 1, 2, 3, 4]
    _no_overlap(r, offsets, 1)
    assert max_live_bytes(r) <= footprint(r, offsets) <= 18


def test_conv_cnn_server_ranges_reach_the_lower_bound():
    # the TCM live ranges of benchmarks/graphs.py's conv CNN on the server preset (size, first, last):
    # the best greedy order (lifetime, first fit) needs 561280 bytes, 6.6% above the bound
    spans = [(4224, 0, 21), (100352, 0, 8), (200704, 8, 10), (200704, 10, 12), (100352, 12, 17),
             (100352, 13, 20), (18432, 5, 8), (36864, 7, 10), (73728, 9, 12), (73728, 11, 17),
             (73728, 11, 17), (8192, 16, 21), (25088, 16, 21), (25088, 16, 21)]
    r = [LiveRange(key, size, first, last) for key, (size, first, last) in enumerate(spans)]
    assert max_live_bytes(r) == 526464
    assert _best_greedy(r, 64) == 561280
    planner = BestOfGreedy()
    offsets = planner.place(r, alignment=64)
    _no_overlap(r, offsets, 64)
    assert footprint(r, offsets) == 526464
    # buffers kept longer (the scheduler's spread plan) are placed in the same order, still apart
    spread = [LiveRange(x.key, x.size_bytes, x.start, min(21, x.end + 2)) for x in r]
    _no_overlap(spread, planner.place_like_last(spread, 64), 64)


def _random_ranges(rng, n, commands):
    ranges = []
    for key in range(n):
        start = rng.randrange(commands)
        end = min(commands - 1, start + rng.choice((0, 1, 2, 4, 8, commands)))
        ranges.append(LiveRange(key, rng.choice((16, 48, 64, 100, 256, 1000)) * rng.randint(1, 4), start, end))
    return ranges


def test_random_ranges_never_overlap_and_never_lose_to_greedy():
    rng = random.Random(1234)
    for _ in range(40):
        n = rng.randint(1, 40)
        r = _random_ranges(rng, n, rng.randint(1, 30))
        alignment = rng.choice((1, 16, 64))
        planner = BestOfGreedy()
        offsets = planner.place(r, alignment)
        _no_overlap(r, offsets, alignment)
        assert max_live_bytes(r) <= footprint(r, offsets) <= _best_greedy(r, alignment)
        assert BestOfGreedy().place(r, alignment) == offsets           # deterministic
        longer = [LiveRange(x.key, x.size_bytes, x.start, x.end + rng.randint(0, 3)) for x in r]
        _no_overlap(longer, planner.place_like_last(longer, alignment), alignment)


def test_aligned_lower_bound():
    from scheduler.memory.allocators import aligned_max_live_bytes
    # at t=0: 10 and 20 bytes at 16-byte aligned offsets: the lower one takes 16 (or 32): at least 16 + 20
    r = [LiveRange(0, 10, 0, 1), LiveRange(1, 20, 0, 0), LiveRange(2, 40, 1, 1)]
    assert max_live_bytes(r) == 50
    assert aligned_max_live_bytes(r, 16) == 16 + 40
    assert aligned_max_live_bytes(r, 1) == 50
    offsets = BestOfGreedy().place(r, 16)
    _no_overlap(r, offsets, 16)
    assert footprint(r, offsets) == 56


# --- avoid_false_dependencies: the same footprint, fewer buffers on bytes they would wait for ---

from scheduler.memory.allocators import avoid_false_dependencies  # noqa: E402


def _sharing_pairs(ranges, offsets, free=None):
    """Pairs (earlier, later) of buffers live apart on common bytes that ``free`` does not allow."""
    return sorted((a.key, b.key) for a in ranges for b in ranges
                  if a.end < b.start and offsets[a.key] < offsets[b.key] + b.size_bytes
                  and offsets[b.key] < offsets[a.key] + a.size_bytes and not (free and free(a.key, b.key)))


def test_a_buffer_leaves_the_bytes_freed_just_before_it():
    # A (0..1) then B (2..3), 32 bytes each; C (64) and D (32) together at 4..5 set the footprint
    # (96). Greedy by size puts C, A and B all at 0: B's writer would wait for A's last reader.
    r = [LiveRange(0, 32, 0, 1), LiveRange(1, 32, 2, 3), LiveRange(2, 64, 4, 5), LiveRange(3, 32, 4, 5)]
    offsets = GreedyBySize().place(r, alignment=16)
    assert offsets == {2: 0, 0: 0, 1: 0, 3: 64}
    assert _sharing_pairs(r, offsets) == [(0, 1), (0, 2), (1, 2)]
    # C and D's commands wait for everything before them (say they follow a COND_IF)
    free = lambda earlier, later: later in (2, 3)  # noqa: E731
    moved = avoid_false_dependencies(r, offsets, 16, free)
    # in order of first use: A moves off B's bytes onto C's only (C waits anyway), B stays
    assert moved == {2: 0, 0: 32, 1: 0, 3: 64}
    assert _sharing_pairs(r, moved, free) == []
    assert footprint(r, moved) == footprint(r, offsets) == max_live_bytes(r) == 96
    # when every reuse costs a wait, A still leaves B's bytes (on C's only: one pair, not two)
    assert avoid_false_dependencies(r, offsets, 16) == moved
    assert _sharing_pairs(r, moved) == [(0, 2), (1, 2)]


def test_a_buffer_stays_unless_moving_removes_a_wait():
    # B shares bytes with A wherever it goes below the footprint (A is as wide as the footprint)
    r = [LiveRange(0, 64, 0, 1), LiveRange(1, 32, 2, 3)]
    offsets = {0: 0, 1: 0}
    assert avoid_false_dependencies(r, offsets, 16) == offsets
    # the lowest offset of least cost wins: B on C's bytes (free) rather than on A's or D's
    r = [LiveRange(0, 32, 0, 1), LiveRange(1, 32, 3, 4), LiveRange(2, 32, 0, 1), LiveRange(3, 32, 0, 1)]
    offsets = {0: 0, 2: 32, 3: 64, 1: 0}
    assert avoid_false_dependencies(r, offsets, 16, lambda earlier, later: earlier == 2) == {0: 0, 2: 32, 3: 64, 1: 32}


def test_random_placements_keep_their_footprint_and_lose_pairs():
    rng = random.Random(99)
    for _ in range(40):
        r = _random_ranges(rng, rng.randint(1, 40), rng.randint(1, 30))
        alignment = rng.choice((1, 16, 64))
        offsets = BestOfGreedy().place(r, alignment)
        free = lambda earlier, later: (earlier * 7 + later) % 3 == 0  # noqa: E731
        moved = avoid_false_dependencies(r, offsets, alignment, free)
        _no_overlap(r, moved, alignment)
        assert footprint(r, moved) == footprint(r, offsets)
        assert len(_sharing_pairs(r, moved, free)) <= len(_sharing_pairs(r, offsets, free))
        assert avoid_false_dependencies(r, offsets, alignment, free) == moved   # deterministic


# --- the fast paths against the definitions they replace ------------------------------------

from npu_sim.memory_layout import align_up  # noqa: E402
from scheduler.memory import allocators  # noqa: E402


def _reference_first_fit(order, alignment, best_fit):
    """First fit as defined: scan every placed range by offset, skipping those not live together."""
    placed, offsets = [], {}
    for r in order:
        offset, chosen, gap = 0, None, None
        for lo, hi, start, end in sorted(placed):
            if start > r.end or r.start > end:
                continue
            if lo >= offset + r.size_bytes:
                if not best_fit:
                    break
                if gap is None or lo - offset < gap:
                    chosen, gap = offset, lo - offset
            if hi > offset:
                offset = align_up(hi, alignment)
        offsets[r.key] = chosen if best_fit and chosen is not None else offset
        placed.append((offsets[r.key], offsets[r.key] + r.size_bytes, r.start, r.end))
    return offsets


def _reference_avoid(ranges, offsets, alignment, free):
    """avoid_false_dependencies as defined: every candidate offset costed against every pair."""
    top, offsets = footprint(ranges, offsets), dict(offsets)
    order = sorted(ranges, key=lambda r: (r.start, r.key))
    for r in order:
        near = [u for u in order if u is not r and not u.overlaps(r)
                and not (free and (free(u.key, r.key) if u.end < r.start else free(r.key, u.key)))]

        def cost(x, r=r, near=near):
            return sum(1 for u in near if offsets[u.key] < x + r.size_bytes and x < offsets[u.key] + u.size_bytes)

        busy = sorted((offsets[u.key], offsets[u.key] + u.size_bytes) for u in order if u is not r and u.overlaps(r))
        best, best_cost = offsets[r.key], cost(offsets[r.key])
        low = 0
        for lo, hi in busy + [(top, top)]:
            for x in range(align_up(low, alignment), lo - r.size_bytes + 1, alignment) if lo > low else ():
                if cost(x) < best_cost:
                    best, best_cost = x, cost(x)
            low = max(low, hi)
        offsets[r.key] = best
    return offsets


def _reference_aligned_bound(ranges, alignment):
    best = 0
    for t in {r.start for r in ranges}:
        live = [r for r in ranges if r.start <= t <= r.end]
        pads = [align_up(r.size_bytes, alignment) - r.size_bytes for r in live]
        best = max(best, sum(align_up(r.size_bytes, alignment) for r in live) - max(pads))
    return best


def test_first_fit_sees_only_the_ranges_live_together_and_places_as_defined():
    rng = random.Random(7)
    for _ in range(200):
        r = _random_ranges(rng, rng.randint(1, 40), rng.randint(1, 60))
        order = rng.sample(r, len(r))
        alignment = rng.choice((1, 16, 64))
        for fit in (False, True):
            assert _first_fit(order, alignment, fit) == _reference_first_fit(order, alignment, fit)


def test_false_dependency_avoidance_matches_its_definition():
    # the definition tries every aligned offset; the planner tries only where a lowest best can be
    rng = random.Random(11)
    for case in range(120):
        r = _random_ranges(rng, rng.randint(1, 25), rng.randint(1, 30))
        alignment = rng.choice((1, 16))
        offsets = BestOfGreedy().place(r, alignment)
        free = (lambda earlier, later: (earlier * 5 + later) % 3 == 0) if case % 2 else None  # noqa: E731
        assert avoid_false_dependencies(r, offsets, alignment, free) == _reference_avoid(r, offsets, alignment, free)


def test_aligned_lower_bound_sweeps_to_its_definition():
    rng = random.Random(3)
    for _ in range(300):
        r = _random_ranges(rng, rng.randint(1, 30), rng.randint(1, 40))
        for alignment in (1, 16, 64):
            assert allocators.aligned_max_live_bytes(r, alignment) == _reference_aligned_bound(r, alignment)


def test_the_searches_of_one_placement_share_a_bounded_number_of_placements(monkeypatch):
    placed = []
    real = allocators._scored_first_fit

    def counting(*args):
        out = real(*args)
        placed.append(out[2])
        return out

    monkeypatch.setattr(allocators, "_scored_first_fit", counting)
    r = [LiveRange(k, 16 * (1 + k * 7 % 5), k // 3, k // 3 + 2 + k % 4) for k in range(120)]
    BestOfGreedy().place(r, 16)
    unbounded = sum(placed)
    assert unbounded > 8 * 2 * len(r)    # the searches from several greedy orders ran
    placed.clear()
    monkeypatch.setattr(allocators, "SEARCH_PLACEMENTS_MAX", 3 * len(r))
    BestOfGreedy().place(r, 16)
    # the eight greedy runs, then searches sharing 3n placements (the last run may finish past it)
    assert 8 * len(r) < sum(placed) <= 8 * len(r) + 3 * len(r) + len(r)


def _all_greedy_runs(ranges, alignment):
    """Every greedy order and fit run to the end, best first (ties: the first listed)."""
    bound, near = max_live_bytes(ranges), allocators.live_together(ranges)
    runs = []
    for name, key in BestOfGreedy.ORDERS.items():
        order = sorted(ranges, key=key)
        for fit in (False, True):
            score, offsets, _ = allocators._scored_first_fit(order, alignment, fit, bound, None, near)
            runs.append((score, f"{name}/{'best' if fit else 'first'}_fit", offsets))
    return sorted(runs, key=lambda run: run[0])


def test_with_many_ranges_the_greedy_runs_that_cannot_win_give_up():
    """Many ranges: the search's whole budget goes to the best greedy run, so a run stops as soon
    as it cannot beat the best before it; the best is the one every run to the end finds."""
    r = _random_ranges(random.Random(5), 1600, 400)
    assert allocators.search_placements(len(r), SEARCH_WORK // BestOfGreedy.GREEDY_RUNS) >= SEARCH_PLACEMENTS_MAX
    runs = BestOfGreedy()._greedy_runs(r, 16, max_live_bytes(r), allocators.live_together(r))
    assert [(score, label, offsets) for score, label, _, _, offsets in runs[:1]] == _all_greedy_runs(r, 16)[:1]
    assert len(runs) < BestOfGreedy.GREEDY_RUNS   # (the others gave up)
    # few ranges: searches start from several greedy runs, every run goes to the end
    few = _random_ranges(random.Random(5), 100, 40)
    runs = BestOfGreedy()._greedy_runs(few, 16, max_live_bytes(few), allocators.live_together(few))
    assert [(score, label, offsets) for score, label, _, _, offsets in runs] == _all_greedy_runs(few, 16)


def test_false_dependency_avoidance_by_bins_moves_as_sorting_does(monkeypatch):
    """The aligned-offset bins (few alignment steps in the footprint) pick what sorting each
    buffer's near ranges picks, on placements of hundreds of ranges."""
    rng = random.Random(21)
    cases = []
    for case in range(12):
        r = _random_ranges(rng, rng.randint(50, 300), rng.randint(20, 120))
        alignment = rng.choice((16, 64))
        offsets = BestOfGreedy(search_work=0).place(r, alignment)
        free = (lambda earlier, later: (earlier * 5 + later) % 3 == 0) if case % 2 else None  # noqa: E731
        cases.append((r, offsets, alignment, free, avoid_false_dependencies(r, offsets, alignment, free)))
    assert any(moved != offsets for _, offsets, _, _, moved in cases)
    monkeypatch.setattr(allocators._AlignedBins, "fit", classmethod(lambda cls, *args: None))
    for r, offsets, alignment, free, moved in cases:
        assert avoid_false_dependencies(r, offsets, alignment, free) == moved


def test_greedy_runs_that_cannot_be_searched_from_give_up():
    """The search's budget reaches two runs (800 ranges): the runs that cannot be among the best
    two give up early; the best two are those every run to the end ranks first."""
    r = _random_ranges(random.Random(8), 800, 200)
    per_start = allocators.search_placements(len(r), SEARCH_WORK // BestOfGreedy.GREEDY_RUNS)
    assert -(-SEARCH_PLACEMENTS_MAX // per_start) == 2
    runs = BestOfGreedy()._greedy_runs(r, 16, max_live_bytes(r), allocators.live_together(r))
    assert [(score, label, offsets) for score, label, _, _, offsets in runs[:2]] == _all_greedy_runs(r, 16)[:2]
    assert len(runs) < BestOfGreedy.GREEDY_RUNS   # (the others gave up)


def _random_free_pairs(rng, n):
    """Random :class:`FreePairs` of ``n`` ranges and the matrix they stand for."""
    waits = rng.random((n, 9)) < 0.4
    columns = rng.integers(0, 9, n)
    return allocators.FreePairs(waits, columns), waits[:, columns]


def test_free_pairs_give_the_blocks_of_their_matrix():
    rng = np.random.default_rng(4)
    for _ in range(100):
        n = int(rng.integers(1, 30))
        pairs, dense = _random_free_pairs(rng, n)
        a, b = sorted(rng.integers(0, n + 1, 2).tolist())
        c, d = sorted(rng.integers(0, n + 1, 2).tolist())
        assert pairs.rows((a, b), (c, d)).tolist() == dense[a:b, c:d].tolist()
        assert pairs.columns((a, b), (c, d)).tolist() == dense[c:d, a:b].T.tolist()


def test_costly_pairs_by_blocks_are_those_of_the_whole_matrix():
    # costly[later, earlier]: live apart and not free; each range's list joins its row and column
    rng = np.random.default_rng(8)
    for case in range(150):
        n = int(rng.integers(1, 30))
        starts = np.sort(rng.integers(0, 30, n))
        ends = starts + rng.integers(-4 if case % 3 == 0 else 0, 10, n)   # (some end before they start)
        pairs, free = _random_free_pairs(rng, n)
        costly = (ends[None, :] < starts[:, None]) & ~free
        expected = [np.flatnonzero(row).tolist() for row in costly | costly.T]
        found = allocators._costly_pairs(starts, ends, pairs, block=int(rng.integers(1, 9)))
        assert [near.tolist() for near in found] == expected
