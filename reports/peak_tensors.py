"""The tensors in the TCM at its busiest moment: what a user must shrink, split or spill to fit
a smaller TCM. The run page lists them beside the memory timeline.

Reads the trace's allocation records with the occupancy convention of :mod:`reports.occupancy`
(an allocation is in use over ``[first_cycle, last_cycle)``) and the step curve that module
computes, so the bytes listed here add up to ``peak_live_tcm_bytes`` (less any bytes two
allocations share).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from npu_sim.hw.trace import AllocationRecord
from npu_sim.program import Allocation, MemorySpace
from reports.occupancy import selected

#: At most this many tensors are listed (the largest); the rest are counted.
MAX_TENSORS = 200


def tcm_peak(allocations: Iterable[AllocationRecord], cycles: list[int], values: list[int]
             ) -> dict[str, Any]:
    """``{cycle, bytes, by_kind, tensors, more}`` at the first cycle the TCM step curve ``(cycles,
    values)`` (:func:`reports.occupancy.occupancy_steps`) reaches its peak: the bytes of each
    allocation kind in use then (activation, tile, constant, input ...: what to shrink, split
    or stream), and the allocations, largest first (name, kind, invocation, offset, size,
    first and last cycle)."""
    if not values:
        return {"cycle": 0, "bytes": 0, "by_kind": {}, "tensors": [], "more": 0}
    top = max(values)
    cycle = cycles[values.index(top)]
    live = [a for a in selected(allocations, MemorySpace.TCM) if a.first_cycle <= cycle < a.last_cycle]
    live.sort(key=lambda a: (-a.size_bytes, a.offset_bytes, a.name))
    by_kind: dict[str, int] = {}
    for a in live:
        by_kind[a.kind] = by_kind.get(a.kind, 0) + a.size_bytes
    tensors = [{"name": a.name, "kind": a.kind, "invocation": a.invocation, "offset_bytes": a.offset_bytes,
                "size_bytes": a.size_bytes, "first_cycle": a.first_cycle, "last_cycle": a.last_cycle}
               for a in live[:MAX_TENSORS]]
    return {"cycle": cycle, "bytes": top, "by_kind": dict(sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0]))),
            "tensors": tensors, "more": max(0, len(live) - MAX_TENSORS)}


def resident_constant_tcm_bytes(allocations: Iterable[Allocation]) -> int:
    """TCM bytes of constants kept for the whole program (a Program's allocations without a
    lifetime: the resident constant pool, constants whose home is the TCM); streamed
    constants, loaded around their readers, are not counted."""
    return sum(a.size_bytes for a in allocations
               if a.memory is MemorySpace.TCM and a.kind == "constant" and a.first_use is None)
