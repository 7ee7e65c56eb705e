import itertools
import math
import random

import numpy as np
import pytest

from npu_sim.memory_layout import align_up, element_size_bytes
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from scheduler.ir.npu_ops import ValueKind
from scheduler.passes.lowering import lower
from scheduler.passes.tiling import (
    TilePlan,
    Tiler,
    TilingProblem,
    _evaluate,
    _loop_order,
    burst_bytes,
    exact_working_set,
    too_big_error,
)
from scheduler.passes.windows import chain_tile, region_size
from tests.scheduler.graphs import conv_block, machine


@pytest.fixture(scope="module")
def conv():
    """CONV2D 3x3 pad 1 (1x16x16x4 -> 8 channels) + RESCALE + CLAMP, everything streamed."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 16, 4), DType.INT8)
    b.output(conv_block(b, x, 8, seed=1))
    lowered = lower(b.build())
    values = lowered.values
    tiler = Tiler(machine("tiny"), lambda k: values[k].data if values[k].kind is ValueKind.CONSTANT else None)
    return lowered.main.ops[0], tiler


def test_chain_windows_walk_backwards(conv):
    op, tiler = conv
    tiles = chain_tile(op.steps, ((0, 1), (2, 4), (0, 16), (0, 8)), tiler.const_lookup)
    conv_tile, rescale_tile, clamp_tile = tiles
    assert clamp_tile.out_region == rescale_tile.out_region == conv_tile.out_region
    assert conv_tile.windows[0] == ((0, 1), (1, 5), (0, 16), (0, 4))     # one row of halo each side
    assert conv_tile.windows[1] == ((0, 8), (0, 3), (0, 3), (0, 4))      # all weights


def test_plan_under_a_small_budget(conv):
    op, tiler = conv
    plan = tiler.plan(op, lambda key: False, 700)
    assert plan.tile_shape == (1, 2, 3, 8) and plan.grid == (1, 8, 6, 1) and plan.tile_count == 48
    # input window 4x5x4 bytes, ping-pong; weights 288 and the small constants loaded once;
    # output tile 2x3x8 bytes, ping-pong
    assert plan.slot_bytes[(0, 0)] == 80 and plan.slot_buffers[(0, 0)] == 2
    assert plan.slot_bytes[(0, 1)] == 288 and plan.slot_buffers[(0, 1)] == 1
    assert plan.output_bytes == {0: 48} and plan.output_buffers == 2
    assert plan.working_set_bytes == 2 * 80 + 288 + 32 + 16 + 16 + 32 + 16 + 16 + 16 + 2 * 48 == 688
    regions = list(plan.tiles())
    assert len(regions) == 48 and regions[0] == ((0, 1), (0, 2), (0, 3), (0, 8))
    assert regions[1] == ((0, 1), (0, 2), (3, 6), (0, 8))              # width is the inner loop
    assert regions[-1] == ((0, 1), (14, 16), (15, 16), (0, 8))


def test_resident_input_needs_no_buffer(conv):
    op, tiler = conv
    plan = tiler.plan(op, lambda key: key == "x", 1500)
    assert (0, 0) not in plan.slot_bytes
    assert plan.working_set_bytes == sum(plan.slot_bytes.values()) + 2 * plan.output_bytes[0]


def test_no_plan_below_the_smallest_tile(conv):
    op, tiler = conv
    smallest = tiler.smallest(op, lambda key: False)
    assert smallest.tile_shape == (1, 1, 1, 1)
    assert tiler.plan(op, lambda key: False, smallest.working_set_bytes - 1) is None
    err = too_big_error(op, smallest, 100, 4096)
    assert "CONV2D" in str(err) and "[1, 1, 1, 1]" in str(err) and "100 of 4096" in str(err)


def test_burst_bytes():
    # rows of 3x8 bytes inside 16x8 rows: each run costs a whole 128-byte burst
    assert burst_bytes((2, 3, 8), (16, 16, 8), 1, 128) == 2 * 128
    assert burst_bytes((2, 16, 8), (16, 16, 8), 1, 128) == 256       # one contiguous run
    assert burst_bytes((0, 4), (4, 4), 4, 64) == 0


def _first_cheapest_order(grid, split, slots):
    """The loop-order rule spelled out: try every permutation of the split dimensions; each
    slot (dims its window moves along, bytes per fetch) is fetched once per iteration of the
    loops down to its innermost moving dimension; keep the first with the fewest bytes."""
    best = None
    for order in itertools.permutations(split):
        load = count = 0
        for dims, traffic in slots:
            fetches = math.prod(grid[d] for d in order[:max(order.index(d) for d in dims) + 1])
            load += fetches * traffic
            count += fetches
        if best is None or load < best[0]:
            best = (load, count, order)
    return best


def test_loop_order_is_the_first_cheapest_permutation():
    rng = random.Random(3)
    for _ in range(300):
        rank = rng.randint(1, 4)
        grid = tuple(rng.choice([1, 2, 3, 7]) for _ in range(rank))
        split = [d for d in range(rank) if grid[d] > 1]
        if not split:
            continue
        slots = [(tuple(sorted(rng.sample(split, rng.randint(1, len(split))))), rng.choice([0, 64, 128, 384]))
                 for _ in range(rng.randint(1, 4))]
        grouped = {}
        for dims, traffic in slots:
            group = grouped.setdefault(dims, [0, 0])
            group[0] += traffic
            group[1] += 1
        assert _loop_order(grid, split, grouped) == _first_cheapest_order(grid, split, slots)
    assert _loop_order((1, 4, 3), [1, 2], {}) == (0, 0, (1, 2))   # nothing re-fetched: the given order


def test_tiles_follow_the_loop_order():
    def plan(tile_shape, loop_order):
        return TilePlan((5, 4), tile_shape, loop_order, {}, {}, {}, 1, 0, 0.0, 0)

    assert list(plan((2, 3), (1, 0)).tiles()) == [
        ((0, 2), (0, 3)), ((2, 4), (0, 3)), ((4, 5), (0, 3)),
        ((0, 2), (3, 4)), ((2, 4), (3, 4)), ((4, 5), (3, 4))]
    # a dimension outside the loop order stays at its first tile
    assert list(plan((2, 3), (0,)).tiles()) == [((0, 2), (0, 3)), ((2, 4), (0, 3)), ((4, 5), (0, 3))]
    assert list(plan(None, (0, 1)).tiles()) == [((0, 5), (0, 4))]


def test_estimate_measures_a_full_tile_and_exact_working_set_the_largest_window(conv):
    """Rows in tiles of 10 of 16: two tiles, the second a ragged one of 6 rows (7 with the
    halo). The estimate measures the full first tile (11 rows with the halo), never the
    remainder, and the exact working set (the largest window of every tile) agrees."""
    op, tiler = conv
    tiling = tiler.tiling(op)
    problem = TilingProblem(op, lambda key: False, tiler.const_lookup, tiler.hw, tiler.alignment)
    plan = _evaluate(problem, tiling, (1, 10, 16, 8))
    assert plan.slot_bytes[(0, 0)] == 11 * 16 * 4
    exact = exact_working_set(problem, tiling, plan)
    assert exact.slot_bytes[(0, 0)] == 11 * 16 * 4
    assert exact.working_set_bytes == plan.working_set_bytes
    for slot in plan.slot_bytes:
        largest = max(region_size(tiling.windows(r)[slot[0]].windows[slot[1]]) for r in plan.tiles())
        elem_bytes = element_size_bytes(op.steps[slot[0]].input_types[slot[1]].dtype)
        assert exact.slot_bytes[slot] == align_up(largest * elem_bytes, tiler.alignment)


def test_compute_estimate_is_the_simulators_charge_when_the_tcm_ports_bound_it():
    """A depthwise conv reads and writes many bytes per MAC: behind 2 B/cycle of TCM ports it
    is port-bound, and the tiler's estimate of its one-tile command must be exactly what the
    simulator charges (without the setup), not the array's shorter body."""
    from npu_sim.hw.config import deep_merge, hw_config_from_dict
    from npu_sim.simulation import simulate
    from scheduler import cost_model

    slow = machine("tiny").model_dump(mode="json")
    hw = hw_config_from_dict(deep_merge(slow, {"tcm": {"port_count": 2, "port_bytes_per_cycle": 1}}), "slow")
    b = GraphBuilder()
    x = b.input("x", (1, 16, 16, 4), DType.INT8)
    b.output(conv_block(b, x, 4, depthwise=True, seed=3))
    graph = b.build()
    lowered = lower(graph)
    values = lowered.values
    tiler = Tiler(hw, lambda k: values[k].data if values[k].kind is ValueKind.CONSTANT else None)
    op = lowered.main.ops[0]
    tiling = tiler.tiling(op)
    whole = tuple((0, n) for n in tiling.out_shape)
    estimate = tiling.compute_cycles(hw, whole)
    body = cost_model.command_cycles(hw, op.unit, op.steps, [t.out_region for t in tiling.windows(whole)])
    assert estimate > body   # port-bound
    result = simulate(graph, hw, {"x": np.zeros((1, 16, 16, 4), np.int8)})
    charged = [r.end_cycle - r.start_cycle - hw.mac_array.setup_cycles
               for r in result.trace.commands if r.unit == "mac_array"]
    assert charged == [estimate]


def _fc_graph():
    """A 1x1 CONV2D of 2x2x64 int8 to 256 channels (16 KiB of weights) + RESCALE + CLAMP."""
    b = GraphBuilder()
    x = b.input("x", (1, 2, 2, 64), DType.INT8)
    b.output(conv_block(b, x, 256, kernel=1, pad=0, seed=4))
    return b.build()


def _streaming(preset: str, slack: float | None):
    """``preset`` streaming its constants with ``slack``; a product whose weights are read once
    (this 2x2 output) loads them like any other (``tcm.read_once_weights_in_place`` off)."""
    from npu_sim.hw.config import deep_merge, hw_config_from_dict, load_hw_config

    data = deep_merge(load_hw_config(preset).model_dump(mode="json"),
                      {"tcm": {"constant_stream_slack_fraction": slack, "read_once_weights_in_place": False}})
    return hw_config_from_dict(data, f"{preset}-slack-{slack}")


def test_streamed_weights_go_in_stripes_where_whole_ones_raise_the_peak():
    """On the Ethos-U55 (8 MiB of TCM, flash at 1 B/cycle) the fastest plan loads the 16,384
    bytes of weights whole; streamed, they come in two rotating stripes of 16 output channels
    (1,024 bytes: the narrowest allowed, within 2% of the fastest plan's cycles): 5,632 bytes
    of TCM at the peak instead of 19,968, the outputs still the reference executor's."""
    from tests.scheduler.graphs import check_end_to_end

    graph = _fc_graph()
    weights = "CONV2D(conv2d_3)+RESCALE(rescale_8)+CLAMP(clamp_9):in0.1"
    figures = {}
    for slack in (None, 0.02):
        program, _ = check_end_to_end(graph, _streaming("ethos-u55-256", slack))
        tiles = [(a.name, a.size_bytes) for a in program.allocations if a.name.startswith(weights)]
        figures[slack] = (program.stats.peak_tcm_bytes, program.stats.tcm_lower_bound_bytes, tiles)
    assert figures[None] == (19968, 19968, [(weights + "/0", 16384)])
    assert figures[0.02] == (5632, 5632, [(weights + "/0", 1024), (weights + "/1", 1024)])


def test_weights_stay_whole_where_they_do_not_raise_the_peak():
    lowered = lower(_fc_graph())
    values = lowered.values
    tiler = Tiler(_streaming("ethos-u55-256", 0.02),
                  lambda k: values[k].data if values[k].kind is ValueKind.CONSTANT else None)
    op = lowered.main.ops[0]
    weights = op.steps[0].operands[1]

    def resident(key: str) -> bool:   # the weights stream, everything else is in the TCM
        return key != weights

    # room to spare below the peak: the fastest plan, weights whole; none: the narrowest within 2%
    whole = tiler.plan(op, resident, 1 << 20, narrow_above_bytes=1 << 20)
    narrow = tiler.plan(op, resident, 1 << 20)
    assert whole is not None and narrow is not None
    assert (whole.tile_shape, whole.working_set_bytes) == ((1, 2, 2, 256), 16384)
    assert (narrow.tile_shape, narrow.working_set_bytes) == ((1, 2, 2, 16), 2048)   # two stripes of 16 x 64 bytes
