"""Cascaded stripes: a chain of spatial operations in horizontal stripes, its intermediates in
rolling buffers, bit for bit the operations run whole."""

import dataclasses
import importlib
from pathlib import Path

import numpy as np
import pytest

from npu_sim.api import load_graph
from npu_sim.errors import ConfigError, ScheduleError
from npu_sim.hw.config import deep_merge, hw_config_from_dict, load_hw_config, with_optimise
from npu_sim.program import ComputeCommand, DmaCommand, MemorySpace
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.codegen import compiler
from scheduler.codegen.compiler import NeedRoom
from scheduler.passes import stripes
from scheduler.passes.stripes import ChainMemo, RollingBuffer, find_chains, halo_chunks
from scheduler.schedule import schedule
from scheduler.verify import PlanError, verify_program
from tests.scheduler.graphs import check_end_to_end, conv_block, machine, random_inputs


def _chain_graph(size: int = 24):
    """conv 3x3 (8 -> 16 channels) -> depthwise 3x3 -> conv 1x1 (16 -> 8) on a size x size map."""
    b = GraphBuilder()
    x = b.input("x", (1, size, size, 8), DType.INT8)
    y = conv_block(b, x, 16, seed=1)
    y = conv_block(b, y, 16, depthwise=True, seed=2)
    b.output(conv_block(b, y, 8, kernel=1, pad=0, seed=3, relu=False))
    return b.build()


def _striping(optimise: str = "size", slack: float | None = None, preset: str = "tiny"):
    base = machine(preset)
    return hw_config_from_dict(deep_merge(base.model_dump(mode="json"),
                                          {"stripes": {"optimise": optimise, "slack_fraction": slack}}), "striping")


def _chains(graph, hw):
    """The striped chains the compiler chose (the main block's), and the Program."""
    found = []
    original = compiler.find_chains

    def spy(*args):
        chains = original(*args)
        found.append(chains)
        return chains

    compiler.find_chains = spy
    try:
        program = schedule(graph, hw)
    finally:
        compiler.find_chains = original
    return found[-1], program


def _tcm(program, kind):
    return sorted((a.name, a.size_bytes) for a in program.allocations
                  if a.memory is MemorySpace.TCM and a.kind == kind)


def test_a_chain_runs_in_stripes_bit_exact_in_a_quarter_of_the_tcm():
    whole, _ = check_end_to_end(_chain_graph(), machine("tiny"))
    striped, _ = check_end_to_end(_chain_graph(), _striping())
    assert (whole.stats.peak_tcm_bytes, whole.stats.tcm_lower_bound_bytes) == (20160, 20160)
    assert _tcm(whole, "activation") == [("clamp_19", 9216), ("clamp_9", 9216), ("x@tcm", 4608)]
    assert whole.stats.striped_chains == () and whole.stats.tcm_lower_bound_unstriped_bytes == 20160
    # the conv's output keeps the 3 rows the depthwise reads, the depthwise's the row the 1x1 reads;
    # the conv reads the input's rows from the DDR, stripe by stripe (no staged copy)
    assert (striped.stats.peak_tcm_bytes, striped.stats.tcm_lower_bound_bytes) == (4800, 4800)
    assert _tcm(striped, "stripe") == [("clamp_19", 384), ("clamp_9", 1152)]
    assert _tcm(striped, "activation") == []
    assert _tcm(striped, "tile")[-1] == ("CONV2D(conv2d_3)+RESCALE(rescale_8)+CLAMP(clamp_9):in0.0/1", 576)
    # the bound of the same schedule with its rolling buffers whole
    assert striped.stats.tcm_lower_bound_unstriped_bytes == 21696
    (chain,) = striped.stats.striped_chains
    assert (chain.stripe_rows, chain.stripe_count, round(chain.est_cycles, 1), chain.whole_est_cycles) == (
        1, 24, 14307.5, 8566.0)
    assert [(b.value, b.rows, b.size_bytes, b.whole_bytes) for b in chain.buffers] == [
        ("clamp_9", 3, 1152, 9216), ("clamp_19", 1, 384, 9216)]


def test_the_chain_its_stripes_and_rolling_buffers():
    (chain,), _ = _chains(_chain_graph(), _striping())
    # (operation 0 copies x into the TCM)
    assert (chain.first, chain.last, chain.stripe_rows, chain.stripe_count) == (1, 3, 1, 24)
    conv, depthwise = chain.rolling["clamp_9"], chain.rolling["clamp_19"]
    assert (conv.rows, conv.row_bytes, conv.whole_bytes) == (3, 384, 9216)
    # stripe s: the depthwise needs rows s-1..s+1 of the conv's output; the first stripe two
    assert conv.bases[:4] == (0, 0, 1, 2) and conv.ends[:4] == (2, 3, 4, 5) and conv.ends[-1] == 24
    assert (depthwise.rows, depthwise.bases[:3], depthwise.ends[:3]) == (1, (0, 1, 2), (1, 2, 3))
    assert chain.regions[1][0] == ((0, 1), (0, 2), (0, 24), (0, 16))
    assert chain.regions[1][1] == ((0, 1), (2, 3), (0, 24), (0, 16))
    assert chain.regions[1][-1] is None   # the conv is done a stripe ahead
    assert chain.regions[3][-1] == ((0, 1), (23, 24), (0, 24), (0, 8))
    assert (chain.peak_bytes, chain.whole_peak_bytes, chain.streamed) == (3072, 18432, ("x@tcm",))
    # the cost model's tile loops, loads and stores included, and the halo copies
    assert (round(chain.est_cycles, 1), chain.whole_cycles) == (14307.5, 8566.0)


def test_stripes_are_off_on_the_generic_presets_and_on_with_optimise_size():
    for preset in ("tiny", "edge", "server"):
        assert not load_hw_config(preset).stripes.enabled
        assert _chains(_chain_graph(), machine(preset))[0] == []
    size = with_optimise(machine("tiny"), "size")
    assert size.stripes.optimise == "size" and size.stripes.enabled
    assert with_optimise(size, None) is size
    assert len(_chains(_chain_graph(), size)[0]) == 1


def test_performance_takes_a_chain_only_within_its_cycle_slack():
    assert _chains(_chain_graph(), _striping("performance", 0.0))[0] == []
    (chain,), program = _chains(_chain_graph(), _striping("performance", 0.25))
    # the fewest bytes within 25% of the operations run whole: 3 rows a stripe, not 1
    assert (chain.stripe_rows, chain.est_cycles, chain.whole_cycles) == (3, 9793.0, 8566.0)
    assert _tcm(program, "stripe") == [("clamp_19", 1152), ("clamp_9", 1920)]


def test_a_strided_chain_on_the_u55_is_bit_exact():
    b = GraphBuilder()
    x = b.input("x", (1, 21, 21, 8), DType.INT8)
    y = conv_block(b, x, 16, stride=2, seed=4)
    y = conv_block(b, y, 16, depthwise=True, seed=5)
    y = conv_block(b, y, 16, kernel=1, pad=0, seed=6)
    b.output(conv_block(b, y, 8, depthwise=True, stride=2, seed=7))
    hw = with_optimise(load_hw_config("ethos-u55-256"), "size")
    program, _ = check_end_to_end(b.build(), hw)
    assert len(_tcm(program, "stripe")) == 3


def test_rows_of_odd_bytes_roll_bit_exact():
    """Rows of 5 x 3 int8 bytes: the rolling buffer's rows are the value's rows, not its aligned
    whole size over its height."""
    b = GraphBuilder()
    x = b.input("x", (1, 9, 5, 3), DType.INT8)
    y = conv_block(b, x, 3, seed=8)
    y = conv_block(b, y, 3, depthwise=True, seed=9)
    b.output(conv_block(b, y, 3, kernel=1, pad=0, seed=10))
    (chain,), _ = _chains(b.build(), _striping())
    assert [(k, r.rows, r.row_bytes, r.whole_bytes) for k, r in chain.rolling.items()] == [
        ("clamp_9", 3, 15, 135), ("clamp_19", 1, 15, 135)]
    check_end_to_end(b.build(), _striping())


def _chain(b, x):
    y = conv_block(b, x, 16, seed=11)
    y = conv_block(b, y, 16, depthwise=True, seed=12)
    return conv_block(b, y, 8, kernel=1, pad=0, seed=13)


def test_chains_in_a_branch_and_a_loop_body_are_bit_exact():
    """A COND_IF branch and a WHILE_LOOP body are blocks like the main one: their chains run in
    stripes too (the loop's rolling buffers live within an iteration)."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 16, 8), DType.INT8)
    c = b.input("c", (1,), DType.BOOL)
    (y,) = b.cond_if(c, [x], lambda bb, v: _chain(bb, v), lambda bb, v: bb.op(Op.IDENTITY, [v]))
    def body(bb, i, v):
        return [bb.op(Op.ADD, [i, bb.const(None, np.array([1], np.int32))]), _chain(bb, v)]

    def cond(bb, i, v):
        return bb.op(Op.GREATER, [bb.const(None, np.array([2], np.int32)), i])

    _, z = b.while_loop([b.const(None, np.array([0], np.int32)), y], cond, body)
    b.output(z)
    graph, hw = b.build(), _striping()
    chains, program = _chains(graph, hw)
    assert len(_tcm(program, "stripe")) == 4   # two in the branch, two in the body
    inputs = [{"x": random_inputs(graph)["x"], "c": np.array([flag])} for flag in (True, False)]
    check_end_to_end(graph, hw, inputs=inputs)


def test_halo_chunks_never_overlap_their_source():
    assert halo_chunks(2, 4) == [(0, 2)]
    assert halo_chunks(5, 2) == [(0, 2), (2, 2), (4, 1)]
    assert halo_chunks(0, 3) == [] and halo_chunks(3, 0) == []
    buffer = RollingBuffer("v", 3, 10, 100, (0, 0, 1, 3), (2, 3, 4, 6))
    assert buffer.size_bytes == 30
    assert [buffer.kept_rows(s) for s in range(4)] == [(0, 0), (0, 0), (2, 1), (1, 2)]


@pytest.fixture(scope="module")
def striped():
    return schedule(_chain_graph(), _striping())


def test_the_verifier_checks_the_rolling_buffers(striped):
    verify_program(striped)
    rolling = next(a for a in striped.allocations if a.kind == "stripe" and a.name == "clamp_9")
    shrunk = dataclasses.replace(rolling, size_bytes=rolling.size_bytes - 384)
    bad = dataclasses.replace(striped, allocations=[shrunk if a is rolling else a for a in striped.allocations])
    with pytest.raises(PlanError, match="lies in no allocation"):
        verify_program(bad)


def test_the_verifier_catches_a_halo_copy_racing_the_previous_stripe(striped):
    copy = next(c for c in striped.commands if isinstance(c, ComputeCommand) and "keep" in c.name and c.deps)
    commands = [dataclasses.replace(c, deps=()) if c.id == copy.id else c for c in striped.commands]
    with pytest.raises(PlanError, match=rf"command {copy.id} .* not ordered after"):
        verify_program(dataclasses.replace(striped, commands=commands))


def test_a_bad_optimise_is_refused(tmp_path):
    (tmp_path / "bad.yaml").write_text("extends: tiny\nstripes: {optimise: speed}\n")
    with pytest.raises(ConfigError, match="stripes.optimise"):
        load_hw_config(tmp_path / "bad.yaml")


def test_the_same_graph_gets_the_same_striped_plan():
    first, second = schedule(_chain_graph(), _striping()), schedule(_chain_graph(), _striping())
    assert first.listing() == second.listing() and first.stats == second.stats


def _search_args(graph, hw):
    """The arguments the compiler gave the main block's stripes search."""
    calls = []
    original = compiler.find_chains

    def spy(*args):
        calls.append(args)
        return original(*args)

    compiler.find_chains = spy
    try:
        schedule(graph, hw)
    finally:
        compiler.find_chains = original
    return calls[-1][:5]


def test_a_search_after_the_first_evaluates_only_the_chains_whose_operands_moved(monkeypatch):
    ops, tiler, values, in_tcm, alignment = _search_args(_chain_graph(), _striping())
    monkeypatch.setattr(stripes._ChainPlanner, "least_bytes", lambda self, first, last: 0)   # (every chain)
    memo = ChainMemo()
    first = find_chains(ops, tiler, values, in_tcm, alignment, memo)
    evaluated = memo.evaluations
    assert evaluated > 0 and len(first) == 1
    # the next compile attempt with nothing changed: the same chains, nothing evaluated again
    assert find_chains(ops, tiler, values, in_tcm, alignment, memo) == first
    assert memo.evaluations == evaluated
    # a value out of the TCM: the chains reading it are evaluated again, and the search
    # finds what a search without the memo finds
    spilled = ops[first[0].last].inputs[1]   # (the 1x1 conv's weights: the chains ending before it do not read them)

    def without(key):
        return key != spilled and in_tcm(key)

    again = find_chains(ops, tiler, values, without, alignment, memo)
    assert evaluated < memo.evaluations < 2 * evaluated
    assert again == find_chains(ops, tiler, values, without, alignment, ChainMemo())


def test_the_compile_attempts_of_a_graph_search_the_stripes_once(monkeypatch):
    """A second compile attempt (here forced, with nothing spilled that the chain touches) takes
    every chain from the first attempt's search."""
    schedule_module = importlib.import_module("scheduler.schedule")
    original = schedule_module.compile_block
    seen = []

    def attempt(ctx, *args):
        cmds = original(ctx, *args)
        seen.append((ctx.chain_memo, ctx.chain_memo.evaluations))
        if len(seen) == 1:
            raise NeedRoom({"no such value"}, ScheduleError("forced second attempt"))
        return cmds

    monkeypatch.setattr(schedule_module, "compile_block", attempt)
    program = schedule(_chain_graph(), _striping())
    (memo, evaluated), (again, evaluated_again) = seen
    assert again is memo and evaluated > 0 and evaluated_again == evaluated
    assert len(program.stats.striped_chains) == 1


def test_chains_that_share_an_operation_and_its_stripes_share_its_plan(monkeypatch):
    ops, tiler, values, in_tcm, alignment = _search_args(_chain_graph(), _striping())
    planned = []
    original = stripes.chain_plan

    def spy(op, regions, *args):
        planned.append((op.name, regions))
        return original(op, regions, *args)

    monkeypatch.setattr(stripes, "chain_plan", spy)
    monkeypatch.setattr(stripes._ChainPlanner, "least_bytes", lambda self, first, last: 0)   # (every chain)
    memo = ChainMemo()
    find_chains(ops, tiler, values, in_tcm, alignment, memo)
    # five of the six chains evaluated (1..2, 1..3 and 2..3 in stripes of one and two rows: a
    # height that could not beat the best chain found is not); an operation computes the same
    # stripes in all the chains it is in (the 1x1 conv reads the rows the depthwise writes, which
    # reads its input's halo): six plans
    assert memo.evaluations == 5
    assert len(planned) == len(set(planned)) == 6


def _longer_chain_graph():
    """Seven spatial operations: 3x3 conv, then depthwise and 1x1 convs by turns."""
    b = GraphBuilder()
    y = b.input("x", (1, 24, 24, 8), DType.INT8)
    for seed, (channels, kind) in enumerate([(16, "conv"), (16, "dw"), (32, "1x1"), (32, "dw"), (16, "1x1"),
                                             (16, "dw")], 1):
        y = conv_block(b, y, channels, kernel=1 if kind == "1x1" else 3, pad=0 if kind == "1x1" else 1,
                       depthwise=kind == "dw", seed=seed)
    b.output(conv_block(b, y, 8, kernel=1, pad=0, seed=7, relu=False))
    return b.build()


def test_the_bytes_live_across_a_chain_bound_its_peak_from_below():
    ops, tiler, values, in_tcm, alignment = _search_args(_longer_chain_graph(), _striping())
    planner = stripes._ChainPlanner(ops, tiler, values, in_tcm, alignment, ChainMemo())
    checked = 0
    for first in range(len(ops)):
        for last in range(first + 1, min(len(ops), first + stripes.MAX_CHAIN_OPS)):
            if not all(planner.ok[j] for j in range(first, last + 1)):
                continue
            for rows in stripes.STRIPE_ROWS[:4]:
                chain = planner.stripes(first, last, rows)
                if chain is not None:
                    assert planner.least_bytes(first, last) <= chain.peak_bytes
                    checked += 1
    assert checked > 20


def test_the_search_skips_the_chains_whose_floor_cannot_win(monkeypatch):
    """Lowest floor first, it stops at the first floor above the best chain found, and a chain's
    heights at the first that cannot beat it; the same chains as evaluating every candidate in turn."""
    args = _search_args(_longer_chain_graph(), _striping())
    memo = ChainMemo()
    chains = find_chains(*args, memo)
    assert [(c.first, c.last, c.stripe_rows) for c in chains] == [(1, 2, 1), (3, 7, 1)]
    monkeypatch.setattr(stripes._ChainPlanner, "least_bytes", lambda self, first, last: 0)
    unbounded = ChainMemo()
    assert find_chains(*args, unbounded) == chains
    assert (memo.evaluations, unbounded.evaluations) == (8, 19)


@pytest.mark.parametrize("model, loads, peak_bytes", [
    # its 96x96x3 input sets the block's peak: the first chain reads its rows where it lives
    ("mobilenet_v3_small_int8.tosa", ["CONV2D(layer_274)+RESCALE(layer_275)+TABLE(layer_276): load TosaInput_0@tcm"],
     27248),
    # streaming would take 368 of its input's 27,648 bytes off the peak: staged whole, as Vela times it
    ("mobilenet_v1_025_96_softmax_int8.tosa", ["stage TosaInput_0"], 47584)])
def test_on_a_shared_pipeline_a_chain_streams_a_staged_input_only_off_the_peak(model, loads, peak_bytes):
    """(The U85 with its graph inputs staged, as it stages none: tcm.graph_inputs_in_place.)"""
    examples = Path(__file__).resolve().parents[3] / "examples"
    hw = load_hw_config("ethos-u85-256")
    hw = hw.model_copy(update={"tcm": hw.tcm.model_copy(update={"graph_inputs_in_place": False})})
    program = schedule(load_graph(examples / model), hw)
    names = sorted({c.name for c in program.walk() if isinstance(c, DmaCommand) and "TosaInput_0" in c.name})
    assert names == loads
    assert program.stats.peak_tcm_bytes == peak_bytes


@pytest.mark.parametrize("model, loads, peak_bytes", [
    ("mobilenet_v3_small_int8.tosa", ["CONV2D(layer_274)+RESCALE(layer_275)+TABLE(layer_276): load TosaInput_0"],
     35808),
    ("mobilenet_v1_025_96_softmax_int8.tosa",
     ["CONV2D(layer_142)+RESCALE(layer_143)+CLAMP(layer_144): load TosaInput_0"], 47584)])
def test_on_the_u85_the_first_convolution_loads_its_tiles_of_the_input_where_it_lives(model, loads, peak_bytes):
    """No copy stages the input (tcm.graph_inputs_in_place): its one reader loads its tiles from the
    DRAM, striped or not. MobileNetV3-Small's first chain then runs in 6-row stripes (3-row ones are
    estimated 9% slower than the convolution run whole from the DRAM, beyond stripes.slack_fraction),
    which hold the block's peak: 35,808 B."""
    examples = Path(__file__).resolve().parents[3] / "examples"
    program = schedule(load_graph(examples / model), load_hw_config("ethos-u85-256"))
    names = sorted({c.name for c in program.walk() if isinstance(c, DmaCommand) and "TosaInput_0" in c.name})
    assert names == loads
    assert program.stats.peak_tcm_bytes == peak_bytes
