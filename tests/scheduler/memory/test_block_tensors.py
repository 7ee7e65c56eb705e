"""Block tensors: buffers the planner placed beyond the TCM, stored as blocks in its holes."""

from scheduler.memory.block_tensors import (
    BlockPlacement,
    TableRoom,
    block_count,
    block_sizes,
    fixed_first,
    place_blocks,
)
from scheduler.memory.liveness import LiveRange

#: Room for 100 bytes of pointer tables, 4-byte entries, each table 16-byte aligned.
ROOM = TableRoom(100, 4, 16)


def test_block_count_rounds_up() -> None:
    assert block_count(1000, 256) == 4
    assert block_count(1024, 256) == 4
    assert block_count(1, 256) == 1


def test_a_plan_that_fits_gets_no_blocks() -> None:
    ranges = [LiveRange(1, 512, 0, 3), LiveRange(2, 512, 2, 5)]
    assert place_blocks(ranges, {1: 0, 2: 512}, 1024, 16, {1, 2}, 256, ROOM) is None


def test_the_overflowing_buffer_fills_two_holes() -> None:
    # 1024 bytes of TCM: a (256 B at 0) and c (256 B at 512) live throughout, leaving holes
    # [256, 512) and [768, 1024); b (512 B) was placed at 1024, beyond the TCM
    ranges = [LiveRange(1, 256, 0, 9), LiveRange(2, 512, 2, 5), LiveRange(3, 256, 0, 9)]
    placed = place_blocks(ranges, {1: 0, 2: 1024, 3: 512}, 1024, 16, {1, 2, 3}, 256, ROOM)
    assert placed == BlockPlacement({1: 0, 3: 512}, {2: (256, 768)}, 256)
    assert placed.footprint_bytes(ranges) == 1024
    blocks = [(r.key, r.size_bytes, offset) for r, offset in placed.block_ranges(ranges)]
    assert blocks == [(2, 256, 256), (2, 256, 768)]


def test_not_eligible_or_too_many_entries_spills() -> None:
    ranges = [LiveRange(1, 256, 0, 9), LiveRange(2, 512, 2, 5), LiveRange(3, 256, 0, 9)]
    offsets = {1: 0, 2: 1024, 3: 512}
    assert place_blocks(ranges, offsets, 1024, 16, {1, 3}, 256, ROOM) is None
    assert place_blocks(ranges, offsets, 1024, 16, {1, 2, 3}, 256, TableRoom(4, 4, 16)) is None


def test_neighbours_become_blocks_when_the_holes_are_too_small() -> None:
    # a at [128, 384) and c at [640, 896) leave one 256 B hole for b's two blocks; a, then c
    # (live with b) become blocks too, and all fit, placed in order of first use
    ranges = [LiveRange(1, 256, 0, 9), LiveRange(2, 512, 2, 5), LiveRange(3, 256, 0, 9)]
    placed = place_blocks(ranges, {1: 128, 2: 1024, 3: 640}, 1024, 128, {1, 2, 3}, 256, ROOM)
    assert placed == BlockPlacement({}, {1: (0,), 3: (256,), 2: (512, 768)}, 256)
    assert place_blocks(ranges, {1: 128, 2: 1024, 3: 640}, 1024, 128, {1, 2}, 256, ROOM) is None


def test_table_room_counts_aligned_tables() -> None:
    assert ROOM.table_bytes(5) == 32
    assert ROOM.fits([4, 4, 4, 4, 4, 4])            # 6 tables of 16 bytes
    assert not ROOM.fits([4, 4, 4, 4, 4, 4, 1])


def test_a_last_block_is_as_long_as_the_tensor_needs() -> None:
    assert block_sizes(1000, 256) == [256, 256, 256, 232]
    assert block_sizes(512, 256) == [256, 256]
    # b's second block (200 B) fits the 208 B hole at [816, 1024) where a whole one would not
    ranges = [LiveRange(1, 256, 0, 9), LiveRange(2, 456, 2, 5), LiveRange(3, 304, 0, 9)]
    placed = place_blocks(ranges, {1: 0, 2: 1024, 3: 512}, 1024, 16, {1, 2, 3}, 256, ROOM)
    assert placed == BlockPlacement({1: 0, 3: 512}, {2: (256, 816)}, 256)


def test_fixed_first_puts_the_whole_program_buffers_in_a_row() -> None:
    ranges = [LiveRange(1, 100, 0, 9), LiveRange(2, 64, 2, 5), LiveRange(3, 40, 0, 9)]

    def place(rs: list[LiveRange], alignment: int) -> dict[int, int]:
        assert [r.key for r in rs] == [2]
        return {2: 0}

    assert fixed_first(ranges, {2}, place, 16) == {1: 0, 3: 112, 2: 160}
