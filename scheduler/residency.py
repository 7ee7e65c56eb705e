"""Residency: which intermediates stay in TCM, and each operation's tile plan.

An intermediate (with the values aliasing it) is *resident* when it lives in
TCM from its producer to its last consumer; otherwise it is spilled to DDR
(written by its producer's tile stores, read by its consumers' tile loads).
Start with every eligible intermediate resident; walk the operations; where an
operation's smallest tile plan does not fit beside the resident values live at
that point, evict one and re-plan the operations it touches:

* prefer values the operation does not use: the smallest one that frees
  enough, else the largest (Belady-like: what waits longest gives up its room);
* only then the operation's own operands, largest first.

If nothing is left to evict, the operation cannot run: ScheduleError naming it
and the sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from npu_sim.errors import ScheduleError
from scheduler.npu_ops import NpuOp, OpKind
from scheduler.tiling import TilePlan, Tiler, too_big_error


@dataclass
class Group:
    """A set of values sharing one buffer (an intermediate and its aliases)."""

    root: str
    size_bytes: int
    users: set[int] = field(default_factory=set)   # op indices reading or writing it

    @property
    def start(self) -> int:
        return min(self.users)

    @property
    def end(self) -> int:
        return max(self.users)


@dataclass
class ResidencyResult:
    resident: set[str]                 # roots of groups living in TCM
    plans: dict[int, TilePlan]         # op index -> tile plan (compute operations)
    live_bytes: list[int]              # resident bytes live at each op index
    evictions: list[str]


def decide(ops: list[NpuOp], groups: dict[str, Group], root_of: Callable[[str], str | None],
           capacity_bytes: int, tiler: Tiler, fixed_tcm: Callable[[str], bool],
           copy_need: Callable[[int, Callable[[str], bool]], int]) -> ResidencyResult:
    """Choose resident groups and tile plans for ``ops`` within ``capacity_bytes`` of TCM.

    ``root_of(key)``: the group of a value (None for values not planned here);
    ``fixed_tcm(key)``: values in TCM regardless (the constant pool);
    ``copy_need(i, in_tcm)``: TCM bytes COPY operation ``i`` needs beside the residents.
    """
    resident = set(groups)
    live = [0] * len(ops)
    for g in groups.values():
        for i in range(g.start, g.end + 1):
            live[i] += g.size_bytes

    def in_tcm(key: str) -> bool:
        root = root_of(key)
        if root is not None:
            return root in resident
        return fixed_tcm(key)

    plans: dict[int, TilePlan] = {}
    evictions: list[str] = []
    pending = set(range(len(ops)))
    while pending:
        i = min(pending)
        pending.discard(i)
        op = ops[i]
        budget = capacity_bytes - live[i]
        if op.kind is OpKind.COMPUTE:
            plan = tiler.plan(op, in_tcm, budget) if budget >= 0 else None
            need = None if plan is not None else tiler.smallest(op, in_tcm).working_set_bytes
        elif op.kind is OpKind.COPY:
            need_bytes = copy_need(i, in_tcm)
            plan, need = None, (None if budget >= need_bytes else need_bytes)
        else:
            plan, need = None, (None if budget >= 0 else 0)
        if need is None:
            if plan is not None:
                plans[i] = plan
            continue
        victim = _victim(i, op, groups, resident, need - budget, root_of)
        if victim is None:
            if op.kind is OpKind.COMPUTE:
                raise too_big_error(op, tiler.smallest(op, in_tcm), budget, capacity_bytes)
            raise ScheduleError(f"{op.name}: needs {need} bytes of TCM, only {budget} of {capacity_bytes} available")
        resident.discard(victim)
        evictions.append(victim)
        g = groups[victim]
        for j in range(g.start, g.end + 1):
            live[j] -= g.size_bytes
        pending.update(u for u in g.users if u <= i or u in plans)
        for u in g.users:
            plans.pop(u, None)
        pending.add(i)
        pending.update(u for u in g.users)
    return ResidencyResult(resident, plans, live, evictions)


def _victim(i: int, op: NpuOp, groups: dict[str, Group], resident: set[str], deficit: int,
            root_of: Callable[[str], str | None]) -> str | None:
    live_here = [r for r in resident if groups[r].start <= i <= groups[r].end]
    if not live_here:
        return None
    own = {root_of(k) for k in (*op.inputs, *op.outputs)}
    others = [r for r in live_here if r not in own]
    if others:
        enough = [r for r in others if groups[r].size_bytes >= deficit]
        if enough:
            return min(enough, key=lambda r: (groups[r].size_bytes, -groups[r].end, r))
        return max(others, key=lambda r: (groups[r].size_bytes, groups[r].end, r))
    return max(live_here, key=lambda r: (groups[r].size_bytes, r))
