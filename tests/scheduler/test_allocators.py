from scheduler.allocators import BumpAllocator, GreedyBySize, footprint
from scheduler.liveness import LiveRange, live_at, max_live_bytes


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
    from scheduler.allocators import BestOfGreedy
    # size-first leaves a hole that start order avoids: 3 buffers in sequence beside a long one
    r = [LiveRange(0, 50, 0, 1), LiveRange(1, 60, 2, 3), LiveRange(2, 40, 0, 3), LiveRange(3, 55, 4, 5),
         LiveRange(4, 45, 4, 5)]
    greedy = footprint(r, GreedyBySize().place(r, 1))
    planner = BestOfGreedy()
    best = footprint(r, planner.place(r, 1))
    assert best <= greedy and best == max_live_bytes(r) == 100
    assert planner.last
