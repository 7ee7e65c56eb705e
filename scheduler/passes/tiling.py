"""Tiling: split a compute operation into output tiles whose working set fits the TCM budget.

Tiles cover the output of the operation's last step in a grid (ragged at the
end); each operand's window per tile comes from the kernels' window functions
(halo included), so tile-by-tile execution computes exactly the whole-tensor
bits. Operands that live in TCM are read in place; the others (DDR, constants,
variables) are streamed into tile buffers, two of them (ping-pong) when the
window changes from tile to tile so the next load overlaps the current compute.
Outputs not resident in TCM are written to ping-pong tile buffers and stored by
DMA. Operations whose kernels have no window function run whole.

The search enumerates tile shapes (a few sizes per output dimension) and loop
orders (which dimension is outermost decides which operand is re-fetched) and
keeps the cheapest plan under the budget, by the cost model's estimate.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from npu_sim.errors import ScheduleError
from npu_sim.hw.config import HwConfig
from npu_sim.hw.cost import origin_classes
from npu_sim.memory_layout import align_up, element_size_bytes
from npu_sim.program import _cached_property
from npu_sim.reference.kernel_api import Region, full_region
from scheduler import cost_model
from scheduler.ir.npu_ops import NpuOp, is_variable_key
from scheduler.passes.windows import Chain, StepTile, can_tile, region_size, whole_tile, window_reads_constants

Slot = tuple[int, int]  # (step index, operand index): one streamed operand of an operation
#: What makes operations tile alike: an interned int, or ``(id(op),)`` for one that cannot be hashed.
Signature = int | tuple[int]

#: At most this many tile shapes are evaluated per operation before the local search.
MAX_CANDIDATES = 48
#: Streamed weights (``tcm.constant_stream_slack_fraction``) go in stripes of at least this many
#: output channels (Vela's ArchitectureFeatures.OFMSplitDepth, its narrowest weight slice).
MIN_STRIPE_CHANNELS = 16
#: Split counts tried per dimension (tile size = ceil(dim / count)).
SPLIT_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512, 1024, 2048, 4096)


@dataclass(frozen=True)
class TilePlan:
    """How one compute operation is split, and the TCM buffers it needs.

    ``tile_shape`` None: the untiled (whole-tensor) kernel call.
    ``slot_bytes``/``slot_buffers``: per streamed operand, bytes of one buffer and
    how many buffers (1: loaded once; 2: ping-pong). ``output_bytes``: per output
    not resident in TCM, bytes of one tile buffer (``output_buffers`` of each).
    """

    out_shape: tuple[int, ...]
    tile_shape: tuple[int, ...] | None
    loop_order: tuple[int, ...]
    slot_bytes: dict[Slot, int]
    slot_buffers: dict[Slot, int]
    output_bytes: dict[int, int]
    output_buffers: int
    working_set_bytes: int
    est_cycles: float
    dma_bytes: int

    @_cached_property
    def grid(self) -> tuple[int, ...]:
        if self.tile_shape is None:
            return tuple(1 for _ in self.out_shape)
        return tuple(-(-d // t) if t else 1 for d, t in zip(self.out_shape, self.tile_shape))

    @_cached_property
    def tile_count(self) -> int:
        """Tiles in the grid (cached: ranking plans asks for it again and again)."""
        return int(math.prod(self.grid))

    def tiles(self) -> Iterator[Region]:
        """Output regions in loop order (outermost dimension first)."""
        if self.tile_shape is None:
            yield full_region(self.out_shape)
            return
        grid = self.grid
        order = self.loop_order
        # each dimension's tile ranges; dimensions outside the loop order stay at their first
        spans = [[(i * t, min(dim, (i + 1) * t)) for i in range(grid[d])]
                 for d, (dim, t) in enumerate(zip(self.out_shape, self.tile_shape))]
        fixed = [None if d in order else (0, min(dim, t))
                 for d, (dim, t) in enumerate(zip(self.out_shape, self.tile_shape))]
        where = [order.index(d) if d in order else 0 for d in range(len(spans))]
        for index in itertools.product(*(spans[d] for d in order)):
            yield tuple([index[w] if f is None else f for w, f in zip(where, fixed)])


@dataclass
class TilingProblem:
    """What the tiler needs to know about one operation and its surroundings."""

    op: NpuOp
    resident: Callable[[str], bool]                 # value key -> lives in TCM (read/written in place)
    const_lookup: Callable[[str], np.ndarray | None]
    hw: HwConfig
    alignment: int = 16

    def __post_init__(self) -> None:
        self._slots: list[tuple[Slot, str]] | None = None
        self._outputs: list[int] | None = None
        self._slot_facts: list[tuple[Slot, int, tuple[int, ...]]] | None = None
        self._moving: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        self._refetch: int | None = None

    def slots(self) -> list[tuple[Slot, str]]:
        """Streamed operands (computed once: residency is fixed for a problem)."""
        if self._slots is None:
            in_place = self.op.composite is not None   # a composite reads its state in place
            self._slots = [((s, j), operand) for s, step in enumerate(self.op.steps)
                           for j, operand in enumerate(step.operands)
                           if isinstance(operand, str) and not self.resident(operand)
                           and not (in_place and is_variable_key(operand))
                           and not (self.op.reads_in_place(s, j) and self.const_lookup(operand) is not None)]
        return self._slots

    def slot_facts(self) -> list[tuple[Slot, int, tuple[int, ...]]]:
        """``(slot, element bytes, full operand shape)`` of each streamed operand."""
        if self._slot_facts is None:
            self._slot_facts = [(slot, _elem_bytes(self.op, slot),
                                 tuple(self.op.steps[slot[0]].input_types[slot[1]].shape))
                                for slot, _ in self.slots()]
        return self._slot_facts

    def moving_dims(self, split: tuple[int, ...], depends: dict[int, set[Slot]]) -> list[tuple[int, ...]]:
        """Per streamed slot, the dimensions of ``split`` its window moves along
        (``depends``: :meth:`OpTiling.depends`)."""
        dims = self._moving.get(split)
        if dims is None:
            dims = self._moving[split] = [tuple([d for d in split if slot in depends.get(d, ())])
                                          for slot, _ in self.slots()]
        return dims

    def refetch_bytes(self) -> int:
        """DDR bytes the streamed inputs' block fetches read beyond one copy
        (:func:`~scheduler.cost_model.ifm_refetch_burst_bytes`; computed once)."""
        if self._refetch is None:
            self._refetch = sum([cost_model.ifm_refetch_burst_bytes(self.hw, self.op.steps, s)
                                 for (s, j), _ in self.slots() if j == 0])
        return self._refetch

    def streamed_outputs(self) -> list[int]:
        if self._outputs is None:
            self._outputs = [k for k, key in enumerate(self.op.outputs) if not self.resident(key)]
        return self._outputs


def _elem_bytes(op: NpuOp, slot: Slot) -> int:
    return element_size_bytes(op.steps[slot[0]].input_types[slot[1]].dtype)


def _out_elem_bytes(op: NpuOp, k: int) -> int:
    return element_size_bytes(op.output_type(k).dtype)


def burst_bytes(window: tuple[int, ...], full: tuple[int, ...], elem_bytes: int, burst: int) -> int:
    """DDR bytes a DMA of ``window`` (a region shape of a ``full`` row-major tensor) moves in whole bursts."""
    elements = math.prod(window)
    if elements == 0:
        return 0
    run = elem_bytes
    for w, f in zip(reversed(window), reversed(full)):
        run *= w
        if w != f:
            break
    runs = elements * elem_bytes // run
    return runs * -(-run // burst) * burst


def _size_candidates(dim: int) -> list[int]:
    sizes = sorted({-(-dim // k) for k in SPLIT_COUNTS if k <= dim} | {1}, reverse=True)
    return sizes


def _thin(lists: list[list[int]], limit: int) -> list[list[int]]:
    lists = [list(x) for x in lists]
    while math.prod(len(x) for x in lists) > limit:
        longest = max(range(len(lists)), key=lambda i: len(lists[i]))
        x = lists[longest]
        if len(x) <= 2:
            break
        lists[longest] = x[::2] + ([x[-1]] if len(x) % 2 == 0 else [])
    return lists


def _compute_cycles(hw: HwConfig, op: NpuOp, tiles: Sequence[StepTile]) -> float:
    """Cycles of one compute command computing ``tiles`` (setup excluded), as the simulator
    charges them: the unit's body, or the time its operands and results take through the
    TCM ports when that is longer (a tiny-K or halo-heavy tile is port-bound)."""
    body = cost_model.command_cycles(hw, op.unit, op.steps, [tile.out_region for tile in tiles],
                                     op.composite.kind if op.composite else "")
    tcm_bytes = sum(region_size(tile.windows[j]) * element_size_bytes(step.input_types[j].dtype)
                    for step, tile in zip(op.steps, tiles)
                    for j, operand in enumerate(step.operands) if isinstance(operand, str))
    out_elements = region_size(tiles[-1].out_region)
    tcm_bytes += sum(out_elements * _out_elem_bytes(op, k) for k in range(len(op.outputs)))
    return max(body, cost_model.tcm_cycles(hw, tcm_bytes))


def whole_plan(problem: TilingProblem) -> TilePlan:
    """The untiled plan: every streamed operand and output in one buffer."""
    op = problem.op
    tiles = whole_tile(op.steps)
    slot_bytes = {}
    loaded: set[str] = set()
    for slot, key in problem.slots():
        if key not in loaded:   # a value read by several steps is loaded once (emission reuses it)
            loaded.add(key)
            slot_bytes[slot] = align_up(region_size(tiles[slot[0]].windows[slot[1]]) * _elem_bytes(op, slot),
                                        problem.alignment)
    out_shape = op.steps[-1].output_types[0].shape
    output_bytes = {k: align_up(op.output_type(k).element_count * _out_elem_bytes(op, k), problem.alignment)
                    for k in problem.streamed_outputs()}
    load = sum(slot_bytes.values())
    store = sum(output_bytes.values())
    hw = problem.hw
    compute = _compute_cycles(hw, op, tiles) + cost_model.unit_setup_cycles(hw, op.unit)
    est = cost_model.tile_loop_cycles(hw, list(slot_bytes.values()), 0, 0, store, len(output_bytes), compute, 1,
                                      problem.refetch_bytes())
    return TilePlan(tuple(out_shape), None, tuple(range(len(out_shape))), slot_bytes,
                    {s: 1 for s in slot_bytes}, output_bytes, 1, load + store, est, load + store)


class OpTiling:
    """Evaluates tile shapes of one operation; caches windows and compute cycles (they do not
    depend on residency). Shared by the operations of one signature, for one machine."""

    def __init__(self, op: NpuOp, const_lookup: Callable[[str], np.ndarray | None]):
        self.op = op
        self.const_lookup = const_lookup
        self.out_shape = tuple(op.steps[-1].output_types[0].shape)
        self.tileable = can_tile(op.steps) and len(self.out_shape) > 0 and op.composite is None
        self._windows: dict[Region, list[StepTile]] = {}
        self._chain: Chain | None = None
        self._cycles: dict[Region, float] = {}
        self._depends: dict[int, set[Slot]] | None = None
        self.splittable = [d for d, n in enumerate(self.out_shape) if n > 1]
        self.sizes = {d: _size_candidates(self.out_shape[d]) for d in self.splittable}

    def windows(self, region: Region, keep: bool = True) -> list[StepTile]:
        """The chain's tiles for ``region`` (cached unless ``keep`` is False: a scan over
        every tile of a candidate plan would fill the cache with tiles nobody asks again)."""
        tiles = self._windows.get(region)
        if tiles is None:
            if self._chain is None:
                self._chain = Chain(self.op.steps, self.const_lookup)
            tiles = self._chain(region)
            if keep:
                self._windows[region] = tiles
        return tiles

    def compute_cycles(self, hw: HwConfig, region: Region) -> float:
        """Cycles of the compute command of ``region`` (setup excluded; cached: tile shapes
        recur when the operands' residency changes)."""
        cycles = self._cycles.get(region)
        if cycles is None:
            cycles = self._cycles[region] = _compute_cycles(hw, self.op, self.windows(region))
        return cycles

    def depends(self) -> dict[int, set[Slot]]:
        """Output dimension -> the operand slots whose window moves along it."""
        if self._depends is None:
            self._depends = {}
            full = full_region(self.out_shape)
            for d in self.splittable:
                half = -(-self.out_shape[d] // 2)
                first = tuple((0, half) if e == d else r for e, r in enumerate(full))
                second = tuple((half, self.out_shape[d]) if e == d else r for e, r in enumerate(full))
                a, b = self.windows(first), self.windows(second)
                self._depends[d] = {(s, j) for s, step in enumerate(self.op.steps)
                                    for j, operand in enumerate(step.operands)
                                    if isinstance(operand, str) and a[s].windows[j] != b[s].windows[j]}
        return self._depends


def _evaluate(problem: TilingProblem, tiling: OpTiling, tile: tuple[int, ...]) -> TilePlan:
    """Working set and estimated cycles of one tile shape (windows of an interior tile)."""
    op, hw = problem.op, problem.hw
    out_shape = tiling.out_shape
    outputs = problem.streamed_outputs()
    grid_list: list[int] = []
    split: list[int] = []
    shape_list: list[int] = []
    # the second tile along a dimension split in three or more (an interior tile, with a halo
    # on both sides), the first elsewhere: always a full tile, never a remainder
    region: list[tuple[int, int]] = []
    for d, (n, t) in enumerate(zip(out_shape, tile)):
        g = -(-n // t)
        grid_list.append(g)
        shape_list.append(max(0, min(n, t)))
        if g > 1:
            split.append(d)
        region.append((t, 2 * t) if g > 2 else (0, min(n, t)))
    grid, tile_shape, interior_region = tuple(grid_list), tuple(shape_list), tuple(region)
    interior = tiling.windows(interior_region)
    tile_count = math.prod(grid)
    burst = hw.ddr.burst_size_bytes
    alignment = problem.alignment
    slot_bytes, slot_buffers = {}, {}
    working_set = 0
    invariant: list[int] = []                           # traffic of slots loaded once, in slot order
    varying: dict[tuple[int, ...], list[int]] = {}     # split dims a slot moves along -> [traffic, slots]
    moving = problem.moving_dims(tuple(split), tiling.depends())
    for (slot, eb, full), dims in zip(problem.slot_facts(), moving):
        shape = tuple([b - a if b > a else 0 for a, b in interior[slot[0]].windows[slot[1]]])
        size = slot_bytes[slot] = align_up(math.prod(shape) * eb, alignment)
        traffic = burst_bytes(shape, full, eb, burst)
        if dims:
            slot_buffers[slot] = 2
            working_set += 2 * size
            group = varying.get(dims)
            if group is None:
                varying[dims] = [traffic, 1]
            else:
                group[0] += traffic
                group[1] += 1
        else:
            slot_buffers[slot] = 1
            working_set += size
            invariant.append(traffic)
    output_buffers = 2 if tile_count > 1 else 1
    output_bytes = {}
    store_bytes = 0
    if outputs:
        tile_elems = math.prod(tile_shape)
        for k in outputs:
            eb = _out_elem_bytes(op, k)
            size = output_bytes[k] = align_up(tile_elems * eb, alignment)
            working_set += size * output_buffers
            store_bytes += burst_bytes(tile_shape, out_shape, eb, burst)
        store_bytes *= tile_count
    varying_bytes, varying_count, order = _loop_order(grid, split, varying)
    compute = tiling.compute_cycles(hw, interior_region) + cost_model.unit_setup_cycles(hw, op.unit)
    est = cost_model.tile_loop_cycles(hw, invariant, varying_bytes, varying_count, store_bytes,
                                      len(outputs) * tile_count, compute, tile_count, problem.refetch_bytes())
    load_bytes = varying_bytes + sum(invariant)
    if len(order) < len(out_shape):
        order += tuple([d for d in range(len(out_shape)) if d not in order])
    return TilePlan(out_shape, tuple(tile), order, slot_bytes, slot_buffers, output_bytes,
                    output_buffers, working_set, est, int(load_bytes + store_bytes))


def _loop_order(grid: tuple[int, ...], split: list[int],
                varying: dict[tuple[int, ...], list[int]]) -> tuple[int, int, tuple[int, ...]]:
    """``(bytes, loads, order)``: the permutation of split dimensions that fetches the fewest
    bytes (the first such in permutation order). A slot is re-fetched once per iteration of
    the loops down to the innermost dimension its window moves along; ``varying`` groups the
    slots by those dimensions (total traffic of one fetch each, slot count)."""
    if not varying:
        return 0, 0, tuple(split)
    if len(split) > 4:
        orders: Iterable[tuple[int, ...]] = [tuple(split)]
    else:
        if len(varying) == 1:
            (dims, (traffic, slots)), = varying.items()
            if traffic > 0:
                # Every split dimension has grid > 1, so the fewest fetches put the group's
                # dimensions outermost; the first such permutation keeps split order in both parts.
                fetches = math.prod([grid[d] for d in dims])
                order = tuple([d for d in split if d in dims] + [d for d in split if d not in dims])
                return fetches * traffic, fetches * slots, order
        orders = itertools.permutations(split)
    groups = list(varying.items())
    best: tuple[int, int, tuple[int, ...]] | None = None
    for order in orders:
        load, loads = _fetched(grid, order, groups)
        if best is None or load < best[0]:
            best = (load, loads, order)
    assert best is not None
    return best


def _fetched(grid: tuple[int, ...], order: tuple[int, ...],
             groups: list[tuple[tuple[int, ...], list[int]]]) -> tuple[int, int]:
    """``(bytes, loads)`` the slot groups fetch with the loops in ``order``."""
    fetched = {}    # dimension -> fetches of a slot whose innermost moving dimension it is
    count = 1
    for d in order:
        count *= grid[d]
        fetched[d] = count
    load = loads = 0
    for dims, (traffic, slots) in groups:
        fetches = max([fetched[d] for d in dims])
        load += fetches * traffic
        loads += fetches * slots
    return load, loads


def exact_working_set(problem: TilingProblem, tiling: OpTiling, plan: TilePlan) -> TilePlan:
    """``plan`` with buffer sizes measured over every tile (windows can vary between tiles)."""
    if plan.tile_shape is None or plan.tile_count == 1:
        return plan
    op = problem.op
    largest = {slot: 0 for slot in plan.slot_bytes}   # elements of the largest window per slot
    for region in plan.tiles():
        tiles = tiling.windows(region, keep=False)
        for slot in largest:
            size = region_size(tiles[slot[0]].windows[slot[1]])
            if size > largest[slot]:
                largest[slot] = size
    slot_bytes = {slot: max(size, align_up(largest[slot] * _elem_bytes(op, slot), problem.alignment))
                  for slot, size in plan.slot_bytes.items()}
    if slot_bytes == plan.slot_bytes:
        return plan
    working_set = sum(slot_bytes[s] * plan.slot_buffers[s] for s in slot_bytes) + \
        sum(plan.output_bytes.values()) * plan.output_buffers
    return TilePlan(plan.out_shape, plan.tile_shape, plan.loop_order, slot_bytes, plan.slot_buffers,
                    plan.output_bytes, plan.output_buffers, working_set, plan.est_cycles, plan.dma_bytes)


def _rank(plan: TilePlan) -> tuple:
    return (plan.est_cycles, plan.tile_count, plan.working_set_bytes)


class Tiler:
    """Chooses tile plans: a coarse grid of tile shapes, then a local search around the best.

    Windows and evaluations are cached per operation *signature* (what each step
    computes on which types, which operands are the same value, and the values of
    constant operands the window functions read) and residency of its operands:
    networks repeat layers, and identical layers get identical plans.
    """

    def __init__(self, hw: HwConfig, const_lookup: Callable[[str], np.ndarray | None], alignment: int = 16,
                 homed_inputs: frozenset[str] = frozenset()):
        self.hw = hw
        self.const_lookup = const_lookup
        self.homed_inputs = homed_inputs   # graph inputs read where they live (tcm.graph_inputs_in_place)
        self.alignment = alignment
        self._signatures: dict[int, Signature] = {}
        self._interned: dict[tuple, int] = {}
        self._tilings: dict[Signature, OpTiling] = {}
        self._evals: dict[tuple, TilePlan] = {}
        self._coarse: dict[tuple, list[TilePlan]] = {}
        self._exact: dict[tuple, TilePlan] = {}

    def signature(self, op: NpuOp) -> Signature:
        """A key equal for operations whose tiling is the same (``(id,)`` if not hashable)."""
        sig = self._signatures.get(id(op))
        if sig is None:
            first: dict[str, int] = {}
            steps = []
            for step in op.steps:
                exact = window_reads_constants(step.op)
                pattern: list[object] = []
                for operand in step.operands:
                    if isinstance(operand, int):
                        pattern.append(operand)
                        continue
                    value = self.const_lookup(operand) if exact else None
                    pattern.append((first.setdefault(operand, len(first)),
                                    None if value is None else (value.dtype.str, value.shape, value.tobytes())))
                steps.append((step.op, step.attribute, step.input_types, step.output_types, tuple(pattern)))
            # (in place: no weight buffers; which steps share a source operator: the vector unit's cost)
            full = (op.unit, op.weights_in_place, tuple(steps), origin_classes([s.origin for s in op.steps]))
            try:   # a small int stands for the (deep, slow to hash) signature in the cache keys
                sig = self._interned.setdefault(full, len(self._interned))
            except TypeError:
                sig = (id(op),)
            self._signatures[id(op)] = sig
        return sig

    def _problem(self, op: NpuOp, resident: Callable[[str], bool]) -> TilingProblem:
        return TilingProblem(op, resident, self.const_lookup, self.hw, self.alignment)

    def tiling(self, op: NpuOp) -> OpTiling:
        sig = self.signature(op)
        t = self._tilings.get(sig)
        if t is None:
            t = self._tilings[sig] = OpTiling(op, self.const_lookup)
        return t

    def _key(self, op: NpuOp, resident: Callable[[str], bool]) -> tuple:
        return (self.signature(op), tuple(resident(k) for k in (*op.inputs, *op.outputs)))

    def _eval(self, problem: TilingProblem, key: tuple, tile: tuple[int, ...]) -> TilePlan:
        plan = self._evals.get(key + (tile,))
        if plan is None:
            plan = self._evals[key + (tile,)] = _evaluate(problem, self.tiling(problem.op), tile)
        return plan

    def _coarse_plans(self, problem: TilingProblem, key: tuple) -> list[TilePlan]:
        plans = self._coarse.get(key)
        if plans is None:
            tiling = self.tiling(problem.op)
            if not tiling.tileable:
                plans = [whole_plan(problem)]
            elif not problem.slots() and not problem.streamed_outputs():
                plans = [self._eval(problem, key, tiling.out_shape)]   # all in TCM: one tile
            else:
                lists = _thin([tiling.sizes[d] for d in tiling.splittable], MAX_CANDIDATES)
                plans = []
                for sizes in itertools.product(*lists):
                    tile = list(tiling.out_shape)
                    for d, size in zip(tiling.splittable, sizes):
                        tile[d] = size
                    plans.append(self._eval(problem, key, tuple(tile)))
                plans.sort(key=_rank)
            self._coarse[key] = plans
        return plans

    def _fits(self, problem: TilingProblem, key: tuple, plan: TilePlan, budget: int) -> TilePlan | None:
        if plan.working_set_bytes > budget:
            return None
        exact = self._exact.get(key + (plan.tile_shape,))
        if exact is None:
            exact = self._exact[key + (plan.tile_shape,)] = exact_working_set(problem, self.tiling(problem.op), plan)
        return exact if exact.working_set_bytes <= budget else None

    def plan(self, op: NpuOp, resident: Callable[[str], bool], budget_bytes: int,
             narrow_above_bytes: int = 0) -> TilePlan | None:
        """The cheapest plan found whose working set fits ``budget_bytes``, or None.

        With ``tcm.constant_stream_slack_fraction`` set, a plan whose working set is above
        ``narrow_above_bytes`` (what the operation may take without raising the peak) streams
        its constants, and the graph inputs it reads where they live (``homed_inputs``), in the
        narrowest tiles within that slack instead."""
        key = self._key(op, resident)
        problem = self._problem(op, resident)
        best = None
        for plan in self._coarse_plans(problem, key):
            best = self._fits(problem, key, plan, budget_bytes)
            if best is not None:
                break
        if best is None or best.tile_shape is None:
            return best
        best = self._refine(problem, key, best, budget_bytes)
        slack = self.hw.tcm.constant_stream_slack_fraction
        if slack is None or best.working_set_bytes <= narrow_above_bytes:
            return best
        return self._narrowest_constants(problem, key, best, budget_bytes, slack)

    def _narrowest_constants(self, problem: TilingProblem, key: tuple, best: TilePlan, budget: int,
                             slack: float) -> TilePlan:
        """The plan whose streamed constants (weights, per-channel parameters) and graph inputs read
        where they live take the fewest TCM bytes among those within ``slack`` of ``best``'s estimated
        cycles (the weights in output-channel stripes just wide enough to hide their loads, Vela's
        weight buffering; an input's tiles as few rows as that allows: Vela's NPU reads a graph input
        in the DRAM through no SRAM buffer at all)."""
        slots = problem.slots()
        constants = [slot for slot, operand in slots if problem.const_lookup(operand) is not None]
        narrowed = constants + [slot for slot, operand in slots if operand in self.homed_inputs]
        if not narrowed:
            return best

        def constant_bytes(plan: TilePlan) -> int:
            return sum(plan.slot_bytes[s] * plan.slot_buffers[s] for s in narrowed if s in plan.slot_bytes)

        bandwidth = self.hw.ddr.bandwidth_bytes_per_cycle

        def cycles(plan: TilePlan) -> float:   # (the DDR moves the plan's bytes no faster than this)
            return max(plan.est_cycles, plan.dma_bytes / bandwidth)

        hw = self.hw
        min_load = hw.dma.setup_cycles * bandwidth
        channels = min(best.out_shape[-1], MIN_STRIPE_CHANNELS) if best.out_shape else 1

        def stripes_ok(plan: TilePlan) -> bool:   # whole channel groups, each load worth its setup
            return plan.tile_shape is not None and plan.tile_shape[-1] >= channels and \
                all(plan.slot_bytes[s] >= min_load for s in constants if plan.slot_buffers.get(s) == 2)

        limit = cycles(best) * (1 + slack)
        chosen, chosen_key = best, (constant_bytes(best), best.working_set_bytes, _rank(best))
        for plan in self._coarse_plans(problem, key) + self._stripes(problem, key, best):
            if cycles(plan) > limit or not stripes_ok(plan):
                continue
            candidate_key = (constant_bytes(plan), plan.working_set_bytes, _rank(plan))
            if candidate_key < chosen_key:
                fitting = self._fits(problem, key, plan, budget)
                if fitting is not None:
                    chosen, chosen_key = fitting, (constant_bytes(fitting), fitting.working_set_bytes, _rank(fitting))
        return chosen

    def _stripes(self, problem: TilingProblem, key: tuple, best: TilePlan) -> list[TilePlan]:
        """``best``'s tile with fewer output channels (every split count; the coarse grid
        thins them)."""
        tiling = self.tiling(problem.op)
        last = len(tiling.out_shape) - 1
        if best.tile_shape is None or last not in tiling.sizes:
            return []
        return [self._eval(problem, key, best.tile_shape[:-1] + (size,)) for size in tiling.sizes[last]
                if size < best.tile_shape[-1]]

    def _refine(self, problem: TilingProblem, key: tuple, best: TilePlan, budget: int) -> TilePlan:
        """Local search: move one dimension one size up or down while the estimate improves."""
        tiling = self.tiling(problem.op)
        for _ in range(32):
            improved = False
            for d in tiling.splittable:
                sizes = tiling.sizes[d]
                shape = best.tile_shape
                assert shape is not None   # (a tiled plan stays tiled)
                pos = sizes.index(shape[d]) if shape[d] in sizes else None
                if pos is None:
                    continue
                for npos in (pos - 1, pos + 1):
                    if not 0 <= npos < len(sizes):
                        continue
                    tile = list(shape)
                    tile[d] = sizes[npos]
                    candidate = self._eval(problem, key, tuple(tile))
                    if _rank(candidate) < _rank(best):
                        fitting = self._fits(problem, key, candidate, budget)
                        if fitting is not None:
                            best, improved = fitting, True
            if not improved:
                break
        return best

    def evaluate(self, op: NpuOp, resident: Callable[[str], bool], tile: tuple[int, ...]) -> TilePlan:
        """The plan of one tile shape (estimated working set and cycles; not checked against a budget)."""
        problem = self._problem(op, resident)
        return self._eval(problem, self._key(op, resident), tile)

    def fitting(self, op: NpuOp, resident: Callable[[str], bool], tile: tuple[int, ...],
                budget_bytes: int) -> TilePlan | None:
        """The plan of one tile shape if its exact working set fits ``budget_bytes``, else None."""
        problem = self._problem(op, resident)
        key = self._key(op, resident)
        return self._fits(problem, key, self._eval(problem, key, tile), budget_bytes)

    def best_estimate(self, op: NpuOp, resident: Callable[[str], bool]) -> float:
        """The lowest estimated cycles of the coarse plans, whatever their working sets."""
        problem = self._problem(op, resident)
        return self._coarse_plans(problem, self._key(op, resident))[0].est_cycles

    def smallest(self, op: NpuOp, resident: Callable[[str], bool]) -> TilePlan:
        """The plan with the smallest working set (for error messages and eviction)."""
        key = self._key(op, resident)
        problem = self._problem(op, resident)
        return min(self._coarse_plans(problem, key), key=lambda p: p.working_set_bytes)


def too_big_error(op: NpuOp, plan: TilePlan, budget_bytes: int, tcm_bytes: int) -> ScheduleError:
    """The error for an operation whose smallest legal tile does not fit."""
    what = "untiled operation" if plan.tile_shape is None else f"smallest tile {list(plan.tile_shape)}"
    return ScheduleError(
        f"{op.name}: {what} of output {list(plan.out_shape)} needs {plan.working_set_bytes} bytes of TCM, "
        f"only {budget_bytes} of {tcm_bytes} available")
