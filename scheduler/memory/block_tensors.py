"""Block tensors: TCM buffers stored as fixed-size blocks in the holes fragmentation leaves.

Seed 002 (Relax ``alloc_discontiguous_tensor``): a tensor's bytes lie in blocks of
``block_bytes`` anywhere in the TCM, reached through a pointer table kept in a second
memory (here the variable SRAM bank). When the TCM planner's placement of the exact live
ranges overflows the TCM, the buffers it placed beyond the capacity need not spill: if
every byte live at once still fits, each of them can be cut into blocks placed in the
holes the others leave while it lives.

Contract: :func:`place_blocks` takes the live ranges, the planner's offsets, the capacity,
the alignment, which buffers may become block tensors and the block size; it gives a
:class:`BlockPlacement` (the offsets of the buffers kept whole, below the capacity, and the
block offsets of each block tensor) or None when the overflowing buffers cannot all be
stored so (then the scheduler spills, as without block tensors). The buffers the planner
placed within the TCM keep their offsets, unless they too must become blocks to make room
(the largest live with a tensor whose blocks found none); a plan that fits is never
touched. :func:`fixed_first` gives other offsets to start from (the whole-program buffers,
which cannot be blocks, in a row first), for when those of the planner gave no placement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from npu_sim.memory_layout import align_up
from scheduler.memory.liveness import LiveRange

#: The Allocation kind of a pointer table.
POINTER_TABLE_KIND = "pointer_table"


@dataclass(frozen=True)
class BlockPlacement:
    """Offsets of the whole buffers and, per block tensor (by key), its blocks' offsets."""

    offsets: dict[int, int]
    blocks: dict[int, tuple[int, ...]]
    block_bytes: int

    def block_ranges(self, ranges: list[LiveRange]) -> list[tuple[LiveRange, int]]:
        """Each block of each block tensor as a live range of its bytes (:func:`block_sizes`),
        with its offset."""
        out = []
        for r in ranges:
            offsets = self.blocks.get(r.key, ())
            for offset, size in zip(offsets, block_sizes(r.size_bytes, self.block_bytes) if offsets else ()):
                out.append((LiveRange(r.key, size, r.start, r.end), offset))
        return out

    def footprint_bytes(self, ranges: list[LiveRange]) -> int:
        """The highest byte the placement occupies (whole buffers and blocks)."""
        whole = [offset + r.size_bytes for r in ranges if r.key not in self.blocks
                 for offset in (self.offsets[r.key],)]
        blocks = [offset + r.size_bytes for r, offset in self.block_ranges(ranges)]
        return max(whole + blocks, default=0)


def block_count(size_bytes: int, block_bytes: int) -> int:
    """Blocks (and pointer-table entries) a tensor of ``size_bytes`` takes."""
    return -(-size_bytes // block_bytes)


def block_sizes(size_bytes: int, block_bytes: int) -> list[int]:
    """The bytes of each block of a tensor of ``size_bytes``: whole blocks, the last one only
    as long as the tensor needs (the planner keeps the offsets after it aligned)."""
    count = block_count(size_bytes, block_bytes)
    return [block_bytes] * (count - 1) + [size_bytes - (count - 1) * block_bytes]


@dataclass(frozen=True)
class TableRoom:
    """Room for pointer tables: ``size_bytes`` of a memory, each table ``alignment``-aligned,
    ``pointer_bytes`` per entry."""

    size_bytes: int
    pointer_bytes: int
    alignment: int

    def table_bytes(self, entries: int) -> int:
        """Bytes a table of ``entries`` takes, with its alignment."""
        return align_up(entries * self.pointer_bytes, self.alignment)

    def fits(self, tables: list[int]) -> bool:
        """True if tables of these entry counts fit."""
        return sum(self.table_bytes(n) for n in tables) <= self.size_bytes


#: At most this many buffers more than the overflowing ones become block tensors in one plan.
MAX_ESCALATIONS = 64


def place_blocks(ranges: list[LiveRange], offsets: dict[int, int], capacity_bytes: int, alignment: int,
                 eligible: set[int], block_bytes: int, table_room: TableRoom) -> BlockPlacement | None:
    """Store every range placed beyond ``capacity_bytes`` as blocks in the holes below it (see
    the module doc); None if one is not ``eligible`` or their pointer tables would not fit in
    ``table_room``.

    The block tensors are placed in order of first use, each block at the lowest aligned offset
    free over the tensor's live range (blocks are all one size, so this is the greedy colouring
    of an interval graph). Where a tensor's blocks find no room, the largest eligible buffer live
    with it also becomes a block tensor (its bytes then fill holes too), and the blocks are
    placed again: at most :data:`MAX_ESCALATIONS` times."""
    chosen = {r.key for r in ranges if offsets[r.key] + r.size_bytes > capacity_bytes}
    if not chosen or not chosen <= eligible:
        return None
    for _ in range(MAX_ESCALATIONS + 1):
        if not table_room.fits([block_count(r.size_bytes, block_bytes) for r in ranges if r.key in chosen]):
            return None
        placed, failed = _place_chosen(ranges, offsets, chosen, capacity_bytes, alignment, block_bytes)
        if failed is None:
            kept = {key: offset for key, offset in offsets.items() if key not in chosen}
            return BlockPlacement(kept, placed, block_bytes)
        more = _largest_live_with(failed, ranges, eligible - chosen)
        if more is None:
            return None
        chosen.add(more)
    return None


def _largest_live_with(r: LiveRange, ranges: list[LiveRange], keys: set[int]) -> int | None:
    """The key of the largest range of ``keys`` live with ``r`` (None if none)."""
    live = [other for other in ranges if other.key in keys and other.overlaps(r)]
    return max(live, key=lambda other: (other.size_bytes, -other.key)).key if live else None


def fixed_first(ranges: list[LiveRange], eligible: set[int],
                place: Callable[[list[LiveRange], int], dict[int, int]], alignment: int) -> dict[int, int]:
    """Offsets with the ranges that cannot become blocks (the whole-program buffers) one after
    another from 0, and the others placed by ``place`` above them: for when one of the former
    overflowed, which :func:`place_blocks` cannot store as blocks."""
    offsets: dict[int, int] = {}
    top = 0
    for r in ranges:
        if r.key not in eligible:
            offsets[r.key] = top
            top = align_up(top + r.size_bytes, alignment)
    placed = place([r for r in ranges if r.key in eligible], alignment)
    offsets.update({key: top + offset for key, offset in placed.items()})
    return offsets


def _place_chosen(ranges: list[LiveRange], offsets: dict[int, int], chosen: set[int], capacity_bytes: int,
                  alignment: int, block_bytes: int) -> tuple[dict[int, tuple[int, ...]], LiveRange | None]:
    """The blocks of the ``chosen`` ranges among the others (at ``offsets``), in order of first
    use; and the first range whose blocks found no room (None if all did)."""
    occupied = [(r, offsets[r.key], offsets[r.key] + r.size_bytes) for r in ranges if r.key not in chosen]
    blocks: dict[int, tuple[int, ...]] = {}
    for r in sorted((r for r in ranges if r.key in chosen), key=lambda r: (r.start, -r.size_bytes, r.key)):
        found = _free_slots(r, occupied, capacity_bytes, alignment, block_bytes)
        if found is None:
            return blocks, r
        blocks[r.key] = found
        occupied += [(r, lo, lo + size) for lo, size in zip(found, block_sizes(r.size_bytes, block_bytes))]
    return blocks, None


def _free_slots(r: LiveRange, occupied: list[tuple[LiveRange, int, int]], capacity_bytes: int, alignment: int,
                block_bytes: int) -> tuple[int, ...] | None:
    """The lowest aligned offsets free while ``r`` lives for its blocks (:func:`block_sizes`):
    the whole blocks first, then its last, shorter one (None if they do not all fit)."""
    busy = sorted((lo, hi) for other, lo, hi in occupied if other.overlaps(r))
    *whole, last = block_sizes(r.size_bytes, block_bytes)
    slots = _slots(busy, capacity_bytes, alignment, block_bytes, len(whole))
    if slots is None:
        return None
    # the last block after the others (a short one may fit a hole too small for a whole one)
    tail = _slots(sorted(busy + [(lo, lo + block_bytes) for lo in slots]), capacity_bytes, alignment, last, 1)
    return None if tail is None else tuple(slots + tail)


def _slots(busy: list[tuple[int, int]], capacity_bytes: int, alignment: int, size_bytes: int,
           count: int) -> list[int] | None:
    """The ``count`` lowest aligned offsets of ``size_bytes`` clear of the sorted ``busy`` runs."""
    slots: list[int] = []
    cursor = 0
    for lo, hi in busy + [(capacity_bytes, capacity_bytes)]:
        start = align_up(cursor, alignment)
        while len(slots) < count and start + size_bytes <= min(lo, capacity_bytes):
            slots.append(start)
            start += align_up(size_bytes, alignment)
        if len(slots) == count:
            return slots
        cursor = max(cursor, hi)
    return None
