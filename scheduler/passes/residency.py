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

An operation whose plan fits may still ask for room: when spilling a value (one it does
not use, or one of its own, which it then streams) lets the tiler find a plan faster by
more than the spill's DDR time (its bytes written once and read by each later user),
that value is evicted the same way.

If nothing is left to evict, the operation cannot run: ScheduleError naming it
and the sizes. Where the config's memory roles allow no spill (``memory_roles.spills: none``,
:mod:`scheduler.memory.roles`) nothing is evicted: an operation that would need it is a
ScheduleError naming it, the largest tensor live there and the TCM.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from npu_sim.errors import ScheduleError
from scheduler.ir.npu_ops import NpuOp, OpKind
from scheduler.memory.roles import may_spill, no_spill_error
from scheduler.passes.tiling import TilePlan, Tiler, too_big_error


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
    state = _Residency(ops, groups, root_of, capacity_bytes, tiler, fixed_tcm, copy_need)
    pending = list(range(len(ops)))   # a heap: the lowest pending operation first
    queued = set(pending)
    while pending:
        i = heapq.heappop(pending)
        queued.discard(i)
        victim = state.settle(i)
        if victim is not None:
            for j in state.evict(victim, i) - queued:
                heapq.heappush(pending, j)
                queued.add(j)
    return ResidencyResult(state.resident, state.plans, state.live, state.evictions)


class _Residency:
    """The walk of :func:`decide`: resident groups, the bytes they keep live at each operation,
    and the plans found so far."""

    def __init__(self, ops: list[NpuOp], groups: dict[str, Group], root_of: Callable[[str], str | None],
                 capacity_bytes: int, tiler: Tiler, fixed_tcm: Callable[[str], bool],
                 copy_need: Callable[[int, Callable[[str], bool]], int]):
        self.ops, self.groups, self.root_of = ops, groups, root_of
        self.capacity, self.tiler, self.fixed_tcm, self.copy_need = capacity_bytes, tiler, fixed_tcm, copy_need
        self.resident = set(groups)
        self.live = [0] * len(ops)
        self.spanning: list[list[str]] = [[] for _ in ops]   # per operation, the groups live across it
        for root, g in groups.items():
            for i in range(g.start, g.end + 1):
                self.live[i] += g.size_bytes
                self.spanning[i].append(root)
        self.plans: dict[int, TilePlan] = {}
        self.evictions: list[str] = []
        self.peak_live = max(self.live, default=0)   # the most resident bytes live at one operation

    def live_here(self, i: int) -> list[str]:
        """The resident groups live across operation ``i``."""
        return [root for root in self.spanning[i] if root in self.resident]

    def in_tcm(self, key: str) -> bool:
        root = self.root_of(key)
        if root is not None:
            return root in self.resident
        return self.fixed_tcm(key)

    def settle(self, i: int) -> str | None:
        """Plan operation ``i`` beside the residents; the group to evict first, or None when it fits."""
        op = self.ops[i]
        budget = self.capacity - self.live[i]
        plan, need = self._plan(i, op, budget)
        if need is None:
            victim = None if plan is None or not may_spill(self.tiler.hw) else _worth_spilling(
                i, op, plan, budget, self.groups, self.live_here(i), self.root_of, self.tiler, self.in_tcm)
            if victim is None and plan is not None:
                self.plans[i] = plan
            return victim
        victim = _victim(op, self.groups, self.live_here(i), need - budget, self.root_of)
        if victim is not None and not may_spill(self.tiler.hw):
            raise no_spill_error(self.tiler.hw, f"{op.name}: its tiles need {need:,} bytes of TCM beside the "
                                 f"{self.live[i]:,} bytes of tensors live there (the largest, {victim!r}, "
                                 f"{self.groups[victim].size_bytes:,} bytes), of the {self.capacity:,} they may use")
        if victim is None:
            if op.kind is OpKind.COMPUTE:
                raise too_big_error(op, self.tiler.smallest(op, self.in_tcm), budget, self.capacity)
            raise ScheduleError(f"{op.name}: needs {need} bytes of TCM, only {budget} of {self.capacity} available")
        return victim

    def _plan(self, i: int, op: NpuOp, budget: int) -> tuple[TilePlan | None, int | None]:
        """``(plan, None)`` if operation ``i`` fits in ``budget`` bytes, else ``(None, bytes it needs)``."""
        if op.kind is OpKind.COMPUTE:
            # streamed constants go in narrow stripes only where whole ones would raise the peak
            plan = self.tiler.plan(op, self.in_tcm, budget, narrow_above_bytes=self.peak_live - self.live[i]) \
                if budget >= 0 else None
            return plan, (None if plan is not None else self.tiler.smallest(op, self.in_tcm).working_set_bytes)
        if op.kind is OpKind.COPY:
            need_bytes = self.copy_need(i, self.in_tcm)
            return None, (None if budget >= need_bytes else need_bytes)
        return None, (None if budget >= 0 else 0)

    def evict(self, victim: str, i: int) -> set[int]:
        """Spill group ``victim``; the operations to plan again (``i`` and the group's users)."""
        self.resident.discard(victim)
        self.evictions.append(victim)
        g = self.groups[victim]
        for j in range(g.start, g.end + 1):
            self.live[j] -= g.size_bytes
        self.peak_live = max(self.live, default=0)
        for u in g.users:
            self.plans.pop(u, None)
        return {i, *g.users}


def _worth_spilling(i: int, op: NpuOp, plan: TilePlan, budget: int, groups: dict[str, Group],
                    live: list[str], root_of: Callable[[str], str | None], tiler: Tiler,
                    in_tcm: Callable[[str], bool]) -> str | None:
    """A resident value (of those ``live`` across operation ``i``) to spill so that ``op`` gets a
    faster plan, or None.

    Resident values live across ``op`` take TCM its tiles could use: with their room the
    tiler may find a plan with bigger tiles (fewer weight reloads, a fuller array).
    Spilling costs DDR time, the value's bytes written once and read by each later user:
    worth it when the estimated gain is larger. Two kinds of candidates:

    * the values ``op`` does not use, together (the cheapest that pays for the room goes
      first, see :func:`_room_makers`);
    * each of ``op``'s own operands and results, alone (``op`` then streams it).

    The caller evicts the best one, re-plans and asks again. Only a plan of several tiles
    can gain from room.
    """
    if plan.tile_count < 2:
        return None
    own = {root_of(k) for k in (*op.inputs, *op.outputs)}
    bandwidth = tiler.hw.ddr.bandwidth_bytes_per_cycle

    def spill_cycles(roots: list[str]) -> float:
        return sum(groups[r].size_bytes * len(groups[r].users) for r in roots) / bandwidth

    best, best_net = None, 0.0
    others = [r for r in live if r not in own]
    if others:
        roomier = tiler.plan(op, in_tcm, budget + sum(groups[r].size_bytes for r in others))
        if roomier is not None and roomier.working_set_bytes > budget:
            chosen = _room_makers(others, groups, roomier.working_set_bytes - budget)
            net = plan.est_cycles - roomier.est_cycles - spill_cycles(chosen)
            if net > best_net:
                best, best_net = chosen[0], net
    own_live = sorted((r for r in live if r in own), key=lambda r: (-groups[r].size_bytes, r))
    return _best_own_spill(op, plan, budget, own_live, best, best_net, groups, root_of, tiler, in_tcm,
                           spill_cycles)


def _best_own_spill(op: NpuOp, plan: TilePlan, budget: int, own_live: list[str], best: str | None,
                    best_net: float, groups: dict[str, Group], root_of: Callable[[str], str | None],
                    tiler: Tiler, in_tcm: Callable[[str], bool],
                    spill_cycles: Callable[[list[str]], float]) -> str | None:
    """``best``, or one of ``op``'s own resident values (largest first) that gains more when
    ``op`` streams it instead."""
    # streaming an own value never computes faster than the best plan with it resident
    unbounded = tiler.best_estimate(op, in_tcm)
    for r in own_live:
        if plan.est_cycles - unbounded - spill_cycles([r]) <= best_net:
            continue
        roomier = tiler.plan(op, _streaming(r, root_of, in_tcm), budget + groups[r].size_bytes)
        if roomier is not None:
            net = plan.est_cycles - roomier.est_cycles - spill_cycles([r])
            if net > best_net:
                best, best_net = r, net
    return best


def _streaming(root: str, root_of: Callable[[str], str | None], in_tcm: Callable[[str], bool]
               ) -> Callable[[str], bool]:
    """``in_tcm`` with the group ``root`` spilled."""
    def resident(key: str) -> bool:
        return root_of(key) != root and in_tcm(key)
    return resident


def _victim(op: NpuOp, groups: dict[str, Group], live_here: list[str], deficit: int,
            root_of: Callable[[str], str | None]) -> str | None:
    """The resident value ``live_here`` (across ``op``) to evict for ``deficit`` bytes, or None."""
    if not live_here:
        return None
    own = {root_of(k) for k in (*op.inputs, *op.outputs)}
    others = [r for r in live_here if r not in own]
    if others:
        return _room_makers(others, groups, deficit)[0]
    return max(live_here, key=lambda r: (groups[r].size_bytes, r))


def _room_makers(candidates: list[str], groups: dict[str, Group], deficit: int) -> list[str]:
    """Values to evict for ``deficit`` bytes, cheapest first: the smallest that frees enough
    alone, else the largest ones (what waits longest first) until enough."""
    enough = [r for r in candidates if groups[r].size_bytes >= deficit]
    if enough:
        return [min(enough, key=lambda r: (groups[r].size_bytes, -groups[r].end, r))]
    chosen, freed = [], 0
    for r in sorted(candidates, key=lambda r: (groups[r].size_bytes, groups[r].end, r), reverse=True):
        if freed >= deficit:
            break
        chosen.append(r)
        freed += groups[r].size_bytes
    return chosen
