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
stored so (then the scheduler spills, as without block tensors). Nothing else moves:
buffers the planner placed within the TCM keep their offsets, so a plan that fitted is
untouched.
"""

from __future__ import annotations

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
        """Each block of each block tensor as a live range of ``block_bytes`` with its offset."""
        out = []
        for r in ranges:
            for offset in self.blocks.get(r.key, ()):
                out.append((LiveRange(r.key, self.block_bytes, r.start, r.end), offset))
        return out

    def footprint_bytes(self, ranges: list[LiveRange]) -> int:
        """The highest byte the placement occupies (whole buffers and blocks)."""
        whole = [offset + r.size_bytes for r in ranges if r.key not in self.blocks
                 for offset in (self.offsets[r.key],)]
        blocks = [offset + self.block_bytes for _, offset in self.block_ranges(ranges)]
        return max(whole + blocks, default=0)


def block_count(size_bytes: int, block_bytes: int) -> int:
    """Blocks (and pointer-table entries) a tensor of ``size_bytes`` takes."""
    return -(-size_bytes // block_bytes)


#: At most this many buffers more than the overflowing ones become block tensors in one plan.
MAX_ESCALATIONS = 64


def place_blocks(ranges: list[LiveRange], offsets: dict[int, int], capacity_bytes: int, alignment: int,
                 eligible: set[int], block_bytes: int, max_entries: int) -> BlockPlacement | None:
    """Store every range placed beyond ``capacity_bytes`` as blocks in the holes below it (see
    the module doc); None if one is not ``eligible`` or it cannot be done within ``max_entries``
    pointer-table entries.

    The block tensors are placed in order of first use, each block at the lowest aligned offset
    free over the tensor's live range (blocks are all one size, so this is the greedy colouring
    of an interval graph). Where a tensor's blocks find no room, the largest eligible buffer live
    with it also becomes a block tensor (its bytes then fill holes too), and the blocks are
    placed again: at most :data:`MAX_ESCALATIONS` times."""
    chosen = {r.key for r in ranges if offsets[r.key] + r.size_bytes > capacity_bytes}
    if not chosen or not chosen <= eligible:
        return None
    for _ in range(MAX_ESCALATIONS + 1):
        if sum(block_count(r.size_bytes, block_bytes) for r in ranges if r.key in chosen) > max_entries:
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


def _place_chosen(ranges: list[LiveRange], offsets: dict[int, int], chosen: set[int], capacity_bytes: int,
                  alignment: int, block_bytes: int) -> tuple[dict[int, tuple[int, ...]], LiveRange | None]:
    """The blocks of the ``chosen`` ranges among the others (at ``offsets``), in order of first
    use; and the first range whose blocks found no room (None if all did)."""
    occupied = [(r, offsets[r.key], offsets[r.key] + r.size_bytes) for r in ranges if r.key not in chosen]
    blocks: dict[int, tuple[int, ...]] = {}
    for r in sorted((r for r in ranges if r.key in chosen), key=lambda r: (r.start, -r.size_bytes, r.key)):
        found = _free_slots(r, occupied, capacity_bytes, alignment, block_bytes,
                            block_count(r.size_bytes, block_bytes))
        if found is None:
            return blocks, r
        blocks[r.key] = found
        occupied += [(r, lo, lo + block_bytes) for lo in found]
    return blocks, None


def _free_slots(r: LiveRange, occupied: list[tuple[LiveRange, int, int]], capacity_bytes: int, alignment: int,
                block_bytes: int, count: int) -> tuple[int, ...] | None:
    """The ``count`` lowest aligned offsets of ``block_bytes`` free while ``r`` lives (None if fewer)."""
    busy = sorted((lo, hi) for other, lo, hi in occupied if other.overlaps(r))
    slots: list[int] = []
    cursor = 0
    for lo, hi in busy + [(capacity_bytes, capacity_bytes)]:
        start = align_up(cursor, alignment)
        while start + block_bytes <= min(lo, capacity_bytes) and len(slots) < count:
            slots.append(start)
            start += block_bytes
        if len(slots) == count:
            return tuple(slots)
        cursor = max(cursor, hi)
    return None
