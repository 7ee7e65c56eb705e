"""ByteSet (plain-int byte runs for dependency tracking) against the numpy Ranges functions."""

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_sim.program import MemorySpace, View
from npu_sim.tosa.dtype import DType
from scheduler.memory.byte_ranges import (
    ByteSet,
    covered,
    difference,
    many_runs_overlap,
    normalize,
    overlaps,
    pages,
    set_covered,
    set_difference,
    set_overlaps,
    set_union,
    union,
    view_byte_set,
    view_ranges,
)

TCM = MemorySpace.TCM


def _random_ranges(rng: random.Random, most: int) -> np.ndarray:
    k = rng.randint(1, most)
    points = sorted(rng.sample(range(0, 12 * most), 2 * k))
    return normalize(np.array(points, dtype=np.int64).reshape(-1, 2))


def test_view_byte_set_matches_view_ranges():
    rng = random.Random(1)
    dtypes = [DType.INT8, DType.INT16, DType.INT32]
    for _ in range(3000):
        rank = rng.randint(1, 4)
        shape = tuple(rng.randint(0, 5) for _ in range(rank))
        # positive, zero (broadcast), negative and overlapping strides
        strides = tuple(rng.choice([0, 1, 2, 4, 8, 16, 48, -4, -16]) for _ in range(rank))
        view = View(TCM, 2000, shape, rng.choice(dtypes), strides)
        expected = view_ranges(view)
        got = view_byte_set(view)
        if len(expected) == 0:
            assert got is None
        else:
            assert (list(got.starts), list(got.ends)) == (expected[:, 0].tolist(), expected[:, 1].tolist())


def test_many_runs_go_through_numpy_with_the_same_result():
    view = View(TCM, 0, (40, 20, 3), DType.INT8, (256, 8, 1))  # 800 runs of 3 bytes
    expected = view_ranges(view)
    got = view_byte_set(view)
    assert len(got) == 800
    assert (got.starts, got.ends) == (tuple(expected[:, 0].tolist()), tuple(expected[:, 1].tolist()))


def test_contiguous_view_is_one_run():
    s = view_byte_set(View(TCM, 96, (2, 3), DType.INT16))
    assert (s.starts, s.ends, s.lo, s.hi) == ((96,), (108,), 96, 108)
    assert view_byte_set(View(TCM, 0, (0, 4), DType.INT8)) is None


def test_set_algebra_matches_numpy():
    rng = random.Random(2)
    for _ in range(3000):
        most = rng.choice([1, 3, 40, 200])     # single runs, few runs, numpy-sized sets
        a, b = _random_ranges(rng, most), _random_ranges(rng, rng.choice([1, 3, 40, 200]))
        sa, sb = ByteSet.of(a), ByteSet.of(b)
        assert set_overlaps(sa, sb) == overlaps(a, b) == set_overlaps(sb, sa)
        if len(sa) > 1 and len(sb) > 1 and sa.lo < sb.hi and sb.lo < sa.hi:
            assert many_runs_overlap(sa, sb, sb.lattice()) == overlaps(a, b)
        assert set_covered(sa, sb) == covered(a, b)
        subset = a[sorted(rng.sample(range(len(a)), rng.randint(1, len(a))))]
        assert set_covered(ByteSet.of(subset), sa)
        assert sa.pages(16) == pages(a, 16)
        assert set_union(sa, sb).array().tolist() == union(a, b).tolist()
        rest = set_difference(sa, sb)
        expected = _bytes(a) - _bytes(b)
        assert (rest is None) == (not expected)
        if rest is not None:   # sorted, disjoint, non-adjacent runs of exactly those bytes
            assert _bytes(rest.array()) == expected
            assert rest.array().tolist() == normalize(rest.array()).tolist()
        # the numpy form (set_difference's path for many runs) gives the same runs
        assert difference(a, b).tolist() == (rest.array().tolist() if rest is not None else [])


def _bytes(ranges: np.ndarray) -> set[int]:
    return {x for s, e in ranges.tolist() for x in range(s, e)}


def test_small_examples():
    def s(*pairs):
        return ByteSet(tuple(p[0] for p in pairs), tuple(p[1] for p in pairs))
    assert set_overlaps(s((0, 4), (10, 12)), s((4, 10))) is False      # touching is not overlapping
    assert set_overlaps(s((0, 4), (10, 12)), s((11, 30))) is True
    assert set_covered(s((1, 2), (5, 6)), s((0, 3), (4, 8))) is True
    assert set_covered(s((1, 2), (5, 9)), s((0, 3), (4, 8))) is False
    assert set_covered(s((2, 5)), s((0, 3), (4, 8))) is False
    assert s((0, 10), (4096, 4100)).pages(1024) == {0, 4}
    assert ByteSet.of(np.zeros((0, 2), dtype=np.int64)) is None
    rest = set_difference(s((0, 10), (20, 30)), s((5, 25)))
    assert (rest.starts, rest.ends) == ((0, 25), (5, 30))
    assert set_difference(s((2, 5)), s((0, 3), (4, 8))).starts == (3,)
    assert set_difference(s((2, 5)), s((0, 8))) is None


def test_lattices_of_tiles_overlap_as_numpy_says():
    """Strided tiles (runs of one length at a common period: channels or columns of a tensor)
    are told apart by their phases; the answer must stay the exact one."""
    rng = random.Random(3)
    for _ in range(3000):
        sets = []
        for _ in range(2):
            period = rng.choice([8, 12, 16, 24, 48])
            run = rng.randint(1, period - 1)
            count = rng.randint(2, 30)
            start = rng.randint(0, 200)
            step = period * rng.choice([1, 1, 2, 3])
            view = View(TCM, start, (count, run), DType.INT8, (step, 1))
            sets.append((view_byte_set(view), view_ranges(view)))
        (sa, a), (sb, b) = sets
        assert set_overlaps(sa, sb) == overlaps(a, b) == set_overlaps(sb, sa)
        if sa.lo < sb.hi and sb.lo < sa.hi:   # (the tracker's test of a record against a view)
            assert many_runs_overlap(sa, sb, sb.lattice()) == overlaps(a, b) == many_runs_overlap(sb, sa, sa.lattice())
    s = ByteSet((0, 16, 32), (4, 20, 36))
    assert s.lattice() == (16, 0, 4)
    assert set_overlaps(s, ByteSet((4, 20, 36), (8, 24, 40))) is False   # channels 4..8 of the same pixels
    assert set_overlaps(s, ByteSet((3, 35), (5, 37))) is True            # phases meet: the exact test decides
    assert ByteSet((0, 10), (4, 12)).lattice() is None                     # runs of different lengths


def test_a_block_tensor_view_touches_the_bytes_of_its_blocks():
    # logical bytes [8, 40) of 16-byte blocks at 64, 0, 32: [72, 80), [0, 16), [32, 40)
    view = View(MemorySpace.TCM, 8, (32,), DType.INT8, blocks=(64, 0, 32), block_bytes=16)
    assert view_ranges(view).tolist() == [[0, 16], [32, 40], [72, 80]]
    column = View(MemorySpace.TCM, 4, (3,), DType.INT16, strides_bytes=(16,), blocks=(64, 0, 32), block_bytes=16)
    assert view_ranges(column).tolist() == [[4, 6], [36, 38], [68, 70]]


def test_pages_of_a_set_on_the_first_page_and_beyond():
    byte_set = ByteSet((3, 40, 90), (10, 50, 200))
    assert byte_set.pages(1 << 62) == {0}
    assert ByteSet((3, 40, 90), (10, 50, 200)).pages(32) == {0, 1, 2, 3, 4, 5, 6}


def _grid_set(slots: list[int], period: int, phase: int, run: int) -> ByteSet:
    """Runs of ``run`` bytes at ``phase`` in the given slots of a grid of ``period`` bytes."""
    starts = sorted({slot * period + phase for slot in slots})
    return ByteSet(tuple(starts), tuple(s + run for s in starts))


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_difference_of_sets_on_one_grid_is_that_of_their_bytes(data):
    # tiles of channels (runs at some phase of a pixel's period) of some pixels (the slots),
    # runs at times longer than the gcd of their distances, periods that differ
    period = data.draw(st.integers(2, 24))
    slots = st.lists(st.integers(0, 12), min_size=1, max_size=10)
    a_phase, b_phase = data.draw(st.integers(0, period - 1)), data.draw(st.integers(0, period - 1))
    a_run = data.draw(st.integers(1, period - a_phase if data.draw(st.booleans()) else 2 * period))
    b_run = data.draw(st.integers(1, period))
    b_period = period * data.draw(st.sampled_from([1, 1, 2]))
    if data.draw(st.booleans()):
        a = _grid_set(data.draw(slots), period, a_phase, a_run)
    else:   # runs longer than the gcd of their distances (that of slots 0, 3, 5 is one period)
        gaps = data.draw(st.lists(st.integers(a_run // period + 1, a_run // period + 4), min_size=1, max_size=8))
        a = _grid_set([sum(gaps[:k]) for k in range(len(gaps) + 1)], period, a_phase, a_run)
    b = _grid_set(data.draw(st.one_of(slots, st.just(list(range(40))))), b_period, b_phase, b_run)   # (or all)
    a, b = ByteSet.of(normalize(a.array())), ByteSet.of(normalize(b.array()))   # (runs merged if they touch)
    expected = _bytes(a.array()) - _bytes(b.array())
    rest = set_difference(a, b)
    assert (set() if rest is None else _bytes(rest.array())) == expected
    if rest is not None:
        assert rest.array().tolist() == normalize(rest.array()).tolist()


def test_a_tile_of_channels_leaves_the_others_of_every_pixel():
    # the record: channels 32..64 of 4 pixels of 64 bytes; the write: channels 40..48 of them
    record = _grid_set([0, 1, 2, 3], 64, 32, 32)
    rest = set_difference(record, _grid_set([0, 1, 2, 3], 64, 40, 8))
    assert rest is not None and rest.array().tolist() == [[p * 64 + lo, p * 64 + hi] for p in range(4)
                                                          for lo, hi in ((32, 40), (48, 64))]
    assert set_difference(record, _grid_set([0, 1, 2, 3, 4], 64, 32, 8)).array().tolist() == [
        [p * 64 + 40, p * 64 + 64] for p in range(4)]
    # runs longer than their lattice's period (distances 8 and 12: gcd 4) meet several of b's
    long_runs = ByteSet((0, 8, 20), (6, 14, 26))
    assert set_difference(long_runs, _grid_set(list(range(7)), 4, 0, 1)).array().tolist() == [
        [1, 4], [5, 6], [9, 12], [13, 14], [21, 24], [25, 26]]
