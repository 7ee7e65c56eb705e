"""Cascading: an operation on another unit starts on its producer's first tiles.

The tiler plans each operation alone, and an operation whose operands and results
all live in the TCM runs as one tile. When it reads the result of the operation
just before it, which runs on *another* unit (a REDUCE_SUM on the vector unit after
a convolution on the MAC array), one tile means it waits for the producer's last
tile. Split along an output dimension instead, its first tiles read only what the
producer's first tiles wrote, and run on their own unit while the producer
finishes: the two units overlap. (Vela calls this cascading.) The stream
interleaves them, each consumer tile right after the last producer tile it needs,
so the buffers of both operations are live together, as they are in time.

Where the compute units share one pipeline (``shared_compute_pipeline``, the Ethos-U presets: one
compute command at a time) nothing would overlap, and the interleaved tiles would only keep both
operations' buffers live together (a DenseNet concatenation's result beside the convolution before
it: 203,040 bytes of TCM on ethos-u55-256, 196,000 without): no pair cascades there.

For each such pair this pass estimates, from the cost model's cycles per tile, when
the consumer would finish under each one-dimension split of its output, and for
each split of the producer in at most :data:`MAX_PRODUCER_TILES` tiles that fits
its TCM budget (besides its own plan). A producer split costs its extra setups and
array fills, which delay whatever that unit runs next, so the choice minimises the
consumer's finish plus the producer's extra time; ties keep the plans as they
were. Dependencies come out of the byte ranges each tile touches
(:mod:`scheduler.codegen.deps`). The consumer's working set is zero either way:
everything it touches is already in the TCM.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from npu_sim.reference.kernel_api import Region
from scheduler import cost_model
from scheduler.ir.npu_ops import NpuOp, OpKind
from scheduler.passes.tiling import OpTiling, TilePlan, Tiler

#: most tiles a producer is split into for a consumer to follow
MAX_PRODUCER_TILES = 4

Slot = tuple[int, int]


def follow_producers(ops: Sequence[NpuOp], plans: dict[int, TilePlan], tiler: Tiler,
                     in_tcm: Callable[[str], bool], budgets: Sequence[int]) -> dict[int, list[int]]:
    """Re-plan, in ``plans``, every producer/consumer pair that gains by cascading.

    ``budgets[i]``: the TCM bytes operation ``i``'s working set may use. Returns, for each
    consumer ``i`` that now follows its producer, the index of the last producer tile each
    of its tiles needs (in tile order): the stream interleaves the two there.
    """
    cascades: dict[int, list[int]] = {}
    if tiler.hw.shared_compute_pipeline:
        return cascades   # one compute command at a time: nothing overlaps, both keep their buffers live
    for i in range(1, len(ops)):
        consumer, producer = ops[i], ops[i - 1]
        if not _may_follow(i, consumer, producer, plans, tiler, in_tcm):
            continue
        slots = [(s, j) for s, step in enumerate(consumer.steps) for j, operand in enumerate(step.operands)
                 if isinstance(operand, str) and operand in producer.outputs]
        if not slots:
            continue
        # a producer that follows its own producer keeps its tiles: their interleaving is fixed
        waits = _cascade(i, consumer, producer, slots, plans, tiler, in_tcm,
                         budgets[i - 1] if i - 1 not in cascades else None)
        if waits is not None:
            cascades[i] = waits
    return cascades


def _may_follow(i: int, consumer: NpuOp, producer: NpuOp, plans: dict[int, TilePlan], tiler: Tiler,
                in_tcm: Callable[[str], bool]) -> bool:
    """Two compute operations on different units, the consumer planned as one tile with all
    it touches in the TCM, and tileable."""
    plan, producer_plan = plans.get(i), plans.get(i - 1)
    return not (plan is None or producer_plan is None or plan.tile_count != 1
                or consumer.kind is not OpKind.COMPUTE or producer.kind is not OpKind.COMPUTE
                or consumer.unit == producer.unit or not _all_in_tcm(consumer, in_tcm)
                or not tiler.tiling(consumer).tileable)


def _all_in_tcm(op: NpuOp, in_tcm: Callable[[str], bool]) -> bool:
    return all(in_tcm(key) for key in (*op.inputs, *op.outputs))


#: A consumer split: its plan and, per tile, the windows it reads of the producer's result
#: and its cycles.
ConsumerSplit = tuple[TilePlan, list[tuple[list[Region], float]]]


def _cascade(i: int, consumer: NpuOp, producer: NpuOp, slots: list[Slot], plans: dict[int, TilePlan],
             tiler: Tiler, in_tcm: Callable[[str], bool], producer_budget: int | None) -> list[int] | None:
    """Choose the pair's plans (the producer re-split only with a ``producer_budget``)."""
    hw = tiler.hw
    tiling = tiler.tiling(consumer)
    setup = cost_model.unit_setup_cycles(hw, consumer.unit)
    whole_cycles = tiling.compute_cycles(hw, tuple((0, n) for n in tiling.out_shape))
    if whole_cycles <= setup:
        return None   # a second tile's setup would cost more than the whole operation saves
    current = plans[i - 1]
    base_end = _tile_ends(tiler, producer, current)[-1][1]
    # each consumer split: its tiles' windows of the producer's result and their cycles
    consumers: list[ConsumerSplit] = [
        (candidate, [([windows[s].windows[j] for s, j in slots], tiling.compute_cycles(hw, region) + setup)
                     for region in candidate.tiles()
                     for windows in (tiling.windows(region, keep=False),)])
        for candidate in _consumer_splits(tiler, consumer, in_tcm)]
    # the producer's dimensions some consumer tile reads only part of: splits along the others
    # leave every consumer tile waiting for the last producer tile
    shape = tiler.tiling(producer).out_shape
    dims = {d for _, tiles in consumers for reads, _ in tiles for w in reads
            for d, (lo, hi) in enumerate(w) if hi - lo < shape[d]}
    if not dims:
        return None
    producer_plans = [current]
    if producer_budget is not None:
        producer_plans += _producer_splits(tiler, producer, current, in_tcm, producer_budget, dims)
    best = _best_pair(tiler, producer, producer_plans, consumers, base_end, base_end + whole_cycles + setup,
                      in_tcm, producer_budget)
    if best is None:
        return None
    plans[i - 1], plans[i], waits = best
    return waits


def _best_pair(tiler: Tiler, producer: NpuOp, producer_plans: list[TilePlan], consumers: list[ConsumerSplit],
               base_end: float, best_cost: float, in_tcm: Callable[[str], bool], producer_budget: int | None
               ) -> tuple[TilePlan, TilePlan, list[int]] | None:
    """The producer and consumer plans that finish the pair soonest (below ``best_cost``, the
    pair as planned), with the producer tile each consumer tile waits for; None if none does."""
    current = producer_plans[0]
    best: tuple[TilePlan, TilePlan, list[int]] | None = None
    for producer_plan in producer_plans:
        ends = _tile_ends(tiler, producer, producer_plan)
        extra = max(0.0, ends[-1][1] - base_end)
        most_tiles = max(2, producer_plan.tile_count)
        for candidate, tiles in consumers:
            if len(tiles) > most_tiles:
                continue   # more tiles than the producer has only add setups
            finish, waits = _follow(ends, tiles)
            if finish + extra < best_cost:
                if producer_plan is not current:   # the exact working set, only for a winner
                    assert producer_budget is not None and producer_plan.tile_shape is not None
                    fitting = tiler.fitting(producer, in_tcm, producer_plan.tile_shape, producer_budget)
                    if fitting is None:
                        break
                    producer_plan = fitting
                best, best_cost = (producer_plan, candidate, waits), finish + extra
    return best


def _follow(ends: list[tuple[Region, float]], tiles: list[tuple[list[Region], float]]) -> tuple[float, list[int]]:
    """When the consumer's ``tiles`` finish behind producer tiles ending at ``ends``, and the
    index of the last producer tile each waits for."""
    finish, waits = 0.0, []
    for reads, cycles in tiles:
        last = _last_meeting(ends, reads)
        waits.append(max(last, 0))
        finish = max(finish, ends[last][1] if last >= 0 else 0.0) + cycles
    return finish, waits


def _last_meeting(ends: list[tuple[Region, float]], reads: list[Region]) -> int:
    """The index of the last producer tile (of ``ends``) whose region meets one of ``reads``;
    -1 if none does (searched from the last: the pairs are tried for every split of both)."""
    for k in range(len(ends) - 1, -1, -1):
        region = ends[k][0]
        for window in reads:
            if _overlaps(window, region):
                return k
    return -1


def _tile_ends(tiler: Tiler, op: NpuOp, plan: TilePlan) -> list[tuple[Region, float]]:
    """Each tile's output region and estimated completion, the tiles back to back at the end
    of the plan's estimated time (the loads before them)."""
    tiling: OpTiling = tiler.tiling(op)
    setup = cost_model.unit_setup_cycles(tiler.hw, op.unit)
    regions = list(plan.tiles())
    cycles = [tiling.compute_cycles(tiler.hw, r) + setup for r in regions]
    clock = max(plan.est_cycles - sum(cycles), 0.0)
    ends = []
    for region, c in zip(regions, cycles):
        clock += c
        ends.append((region, clock))
    return ends


def _one_dim_tiles(tiling: OpTiling, max_tiles: int, dims: set[int] | None = None) -> Iterator[tuple[int, ...]]:
    """Tile shapes splitting one output dimension (of ``dims``, default any) into 2..``max_tiles`` tiles."""
    for d in tiling.splittable:
        if dims is not None and d not in dims:
            continue
        for size in tiling.sizes[d]:
            if size < tiling.out_shape[d] and -(-tiling.out_shape[d] // size) <= max_tiles:
                yield tuple(size if e == d else n for e, n in enumerate(tiling.out_shape))


def _producer_splits(tiler: Tiler, op: NpuOp, current: TilePlan, in_tcm: Callable[[str], bool],
                     budget: int, dims: set[int]) -> list[TilePlan]:
    """The producer's splits along one of ``dims`` whose estimated working set fits ``budget``."""
    tiling = tiler.tiling(op)
    if not tiling.tileable:
        return []
    plans = (tiler.evaluate(op, in_tcm, tile) for tile in _one_dim_tiles(tiling, MAX_PRODUCER_TILES, dims)
             if tile != current.tile_shape)
    return [plan for plan in plans if plan.working_set_bytes <= budget]


def _consumer_splits(tiler: Tiler, op: NpuOp, in_tcm: Callable[[str], bool]) -> list[TilePlan]:
    return [tiler.evaluate(op, in_tcm, tile) for tile in _one_dim_tiles(tiler.tiling(op), MAX_PRODUCER_TILES)]


def _overlaps(a: Region, b: Region) -> bool:
    for (lo, hi), (other_lo, other_hi) in zip(a, b):
        if not (lo < other_hi and other_lo < hi):
            return False
    return True
