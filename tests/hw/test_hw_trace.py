"""The trace's allocation-use convention: in use over [first_cycle, last_cycle)."""

from __future__ import annotations

from npu_sim.hw.trace import AllocationRecord, peak_live_bytes, usage_steps
from reports.occupancy import occupancy_steps


def _record(name: str, size: int, first: int | None, last: int | None, invocation: int = 0,
            memory: str = "tcm", offset: int = 0) -> AllocationRecord:
    return AllocationRecord(name, memory, offset, size, "tile", invocation, first, last)


def test_back_to_back_uses_do_not_coexist():
    # a's last command ends at 10, b's first starts at 10: the bytes change hands at 10
    records = [_record("a", 100, 0, 10), _record("b", 60, 10, 20)]
    assert peak_live_bytes(records, "tcm") == 100
    assert usage_steps([(0, 10, 0, 100), (10, 20, 0, 60)]) == ([0, 10, 20], [100, 60, 0])


def test_overlapping_uses_add_up_and_filters_apply():
    records = [_record("a", 100, 0, 11), _record("b", 60, 10, 20, offset=100),
               _record("c", 1000, 30, 35, invocation=1),
               _record("d", 7, 0, 30, memory="ddr"), _record("never", 500, None, None)]
    assert peak_live_bytes(records, "tcm", invocation=0) == 160
    assert peak_live_bytes(records, "tcm") == 1000
    assert peak_live_bytes(records, "ddr") == 7


def test_bytes_two_allocations_share_at_once_count_once():
    """An aliased slice [40, 60) of a whole [0, 100), and a buffer [100, 132) that takes over
    [116, 132) from one at [116, 148) a cycle before that one's last reader ends."""
    records = [_record("whole", 100, 0, 30), _record("slice", 20, 5, 40, offset=40),
               _record("old", 32, 0, 21, offset=116), _record("new", 16, 20, 50, offset=100)]
    assert usage_steps((r.first_cycle, r.last_cycle, r.offset_bytes, r.size_bytes) for r in records) == (
        [0, 5, 20, 21, 30, 40, 50], [132, 132, 148, 116, 36, 16, 0])
    assert peak_live_bytes(records, "tcm") == 148
    assert occupancy_steps(records, "tcm") == ([0, 5, 20, 21, 30, 40, 50], [132, 132, 148, 116, 36, 16, 0])


def test_zero_cycle_uses_are_left_out_and_reports_agree():
    records = [_record("a", 100, 5, 5), _record("b", 40, 0, 8), _record("c", 8, 8, 9)]
    assert peak_live_bytes(records, "tcm") == 40
    cycles, values = occupancy_steps(records, "tcm")
    assert (cycles, values) == ([0, 8, 9], [40, 8, 0])
    assert max(values) == peak_live_bytes(records, "tcm")


def test_allocation_index_matches_the_definition():
    """touched(): allocations overlapping a view's bytes whose [first_use, last_use] covers the id."""
    import random

    from npu_sim.hw.trace import AllocationIndex
    from npu_sim.program import Allocation, DmaCommand, MemorySpace, View
    from npu_sim.tosa.dtype import DType

    rng = random.Random(7)
    spaces = list(MemorySpace)
    for _ in range(150):
        allocations = [Allocation(f"a{i}", rng.choice(spaces), rng.randint(0, 200),
                                  rng.choice([0, 1, 4, 16, 40, 100]), "tile",
                                  rng.choice([None, rng.randint(0, 50)]),
                                  rng.choice([None, rng.randint(0, 50)]))
                       for i in range(rng.randint(0, 30))]
        index = AllocationIndex(allocations)

        def overlapping(view: View, allocations: list[Allocation] = allocations) -> list[int]:
            lo, hi = view.span
            if lo == hi and any(x == lo for a in allocations if a.memory is view.memory and a.size_bytes > 0
                                for x in (a.offset_bytes, a.end_bytes)):
                return []   # an empty view at a bound
            return [i for i, a in enumerate(allocations) if a.memory is view.memory and a.size_bytes > 0
                    and a.offset_bytes < hi and a.end_bytes > lo]

        commands, expected = [], {}
        for cid in range(40):
            src, dst = (View(rng.choice(spaces), rng.randint(0, 260), (rng.choice([0, 1, 3, 8, 20]),),
                             DType.INT8) for _ in range(2))
            alive = [i for i, a in enumerate(allocations)
                     if (a.first_use is None or a.first_use <= cid)
                     and (a.last_use is None or cid <= a.last_use)]
            expected[cid] = tuple(sorted(set(overlapping(src) + overlapping(dst)) & set(alive)))
            commands.append(DmaCommand(cid, 0, src, dst))
            assert index.touched(commands[-1]) == expected[cid]
        assert index.touched_all(commands) == expected


def test_usage_steps_count_the_bytes_some_use_covers_at_each_change():
    import random

    rng = random.Random(8)
    for _ in range(300):
        uses = []
        for _ in range(rng.randint(0, 20)):
            first = rng.randint(0, 40)
            uses.append((first, first + rng.choice((0, rng.randint(1, 25))), rng.choice((0, 32, rng.randint(0, 90))),
                         rng.choice((0, 32, rng.randint(1, 50)))))
        live = [u for u in uses if u[1] > u[0] and u[3] > 0]
        cycles = sorted({c for u in live for c in u[:2]})
        expected = [len({b for first, last, offset, size in live if first <= c < last
                         for b in range(offset, offset + size)}) for c in cycles]
        assert usage_steps(uses) == (cycles, expected)
