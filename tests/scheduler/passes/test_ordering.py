"""Operation order (list scheduling), spread-out TCM placement and outputs read through TCM."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from npu_sim.program import ComputeCommand, DmaCommand, MemorySpace
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op
from scheduler.codegen.materialize import SPREAD_REUSE_DISTANCES
from scheduler.ir.npu_ops import NpuOp, OpKind, Value, ValueKind
from scheduler.passes import ordering
from scheduler.passes.fusion import EpilogueRule
from scheduler.passes.lowering import lower
from scheduler.passes.ordering import reorder_block
from tests.scheduler.graphs import _rescale, check_end_to_end, machine, small_cnn


def _fc(b, x, seed):
    rng = np.random.default_rng(seed)
    w = b.const(None, rng.integers(-8, 8, (16, 1, 1, 16), dtype=np.int8))
    bias = b.const(None, rng.integers(-50, 50, (16,), dtype=np.int32))
    zp = b.const(None, np.array([0], np.int8))
    acc = b.op(Op.CONV2D, [x, w, bias, zp, zp], pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1),
               acc_type=DType.INT32)
    return _rescale(b, acc, channels=16, shift=36)


def two_chains():
    """A recurrent-cell shape: the projection of ``u`` needs only the input, but in graph
    order it sits behind a projection that waits for a vector chain on the MAC array."""
    b = GraphBuilder()
    x = b.input("x", (1, 1, 1, 16), DType.INT8)
    u = b.input("u", (1, 1, 1, 16), DType.INT8)
    h = _fc(b, x, 1)
    for _ in range(12):  # a chain of vector work (the first three fuse into the convolution)
        h = _rescale(b, h, multiplier=1 << 30, shift=30)
    c = _rescale(b, _fc(b, h, 2), out_dtype=DType.INT32, shift=30)
    d = _rescale(b, _fc(b, u, 3), out_dtype=DType.INT32, shift=30)
    b.output(b.op(Op.MAXIMUM, [c, d], nan_mode="PROPAGATE"))
    return b.build()


def _compute_order(program):
    return [c.name for c in program.walk() if isinstance(c, ComputeCommand)]


def test_list_scheduling_moves_independent_work_ahead_and_saves_cycles(monkeypatch):
    hw = machine("edge")
    # with spreading, so that reuse of freed TCM bytes adds no false dependencies of its own;
    # without the elementwise rule, so that the vector chain stays long
    rules = (EpilogueRule(),)
    program, result = check_end_to_end(two_chains(), hw, spread_tcm=True, rules=rules)
    mac = [n for n in _compute_order(program) if n.startswith("CONV2D")]
    assert len(mac) == 3
    graph_order = [o.name for o in lower(two_chains(), rules).main.ops if o.kind is OpKind.COMPUTE
                   and o.steps[0].op is Op.CONV2D]
    # the projection of u (third in graph order) runs second on the MAC array
    assert mac == [graph_order[0], graph_order[2], graph_order[1]]
    monkeypatch.setattr(importlib.import_module("scheduler.passes.ordering"), "reorder_block",
                        lambda ops, *args: list(ops))
    original, slow = check_end_to_end(two_chains(), hw, spread_tcm=True, rules=rules)
    assert [n for n in _compute_order(original) if n.startswith("CONV2D")] == graph_order
    assert result.total_cycles < slow.total_cycles


def _value(key, size=16, kind=ValueKind.INTERMEDIATE):
    return Value(key, TensorType((size,), DType.INT8), kind, None, key)


def _copy(name, src, dst):
    return NpuOp(name, OpKind.COPY, sources=(src,), outputs=(dst,))


def test_variable_reads_and_writes_keep_their_order():
    values = {k: _value(k) for k in ("a", "b", "c")}
    values["var:v"] = _value("var:v", kind=ValueKind.VARIABLE)
    ops = [_copy("read1", "var:v", "a"), _copy("write", "b", "var:v"), _copy("read2", "var:v", "c")]
    preds = ordering._dependencies(ops)
    assert preds == [set(), {0}, {1}]
    order = [o.name for o in reorder_block(ops, values, machine("edge"), 1 << 20)]
    assert order == ["read1", "write", "read2"]


def test_a_reorder_holding_more_bytes_live_is_refused_when_the_tcm_is_tight():
    lowered = lower(two_chains(), (EpilogueRule(),))
    reordered = reorder_block(lowered.main.ops, lowered.values, machine("edge"), 1 << 20)
    assert [o.name for o in reordered] != [o.name for o in lowered.main.ops]
    assert ordering._peak_live_bytes(reordered, lowered.values) > \
        ordering._peak_live_bytes(lowered.main.ops, lowered.values)
    kept = reorder_block(lowered.main.ops, lowered.values, machine("edge"), 0)
    assert [o.name for o in kept] == [o.name for o in lowered.main.ops]


# --- TCM placement: freed bytes are not reused at once when there is room -------------------

def _tcm_reuses(program):
    """(gap in command ids) for every two TCM allocations sharing bytes, the later after the earlier."""
    allocs = [a for a in program.allocations if a.memory is MemorySpace.TCM and a.first_use is not None]
    gaps = []
    for a in allocs:
        for b in allocs:
            if a is not b and a.offset_bytes < b.end_bytes and b.offset_bytes < a.end_bytes \
                    and b.first_use > a.last_use:
                gaps.append(b.first_use - a.last_use)
    return gaps


def test_by_default_the_tcm_plan_is_compact():
    program, _ = check_end_to_end(small_cnn(), machine("edge"))
    stats = program.stats
    assert stats.peak_tcm_bytes == stats.tcm_compact_bytes == stats.tcm_lower_bound_bytes
    assert min(_tcm_reuses(program)) <= SPREAD_REUSE_DISTANCES[-1]


def test_spreading_does_not_reuse_freed_tcm_bytes_soon_when_the_tcm_has_room():
    program, _ = check_end_to_end(small_cnn(), machine("edge"), spread_tcm=True)
    stats = program.stats
    assert min(_tcm_reuses(program), default=10**9) > SPREAD_REUSE_DISTANCES[0]
    assert stats.tcm_compact_bytes < stats.peak_tcm_bytes <= 512 * 1024


def test_spreading_in_a_tight_tcm_gets_the_compact_placement():
    program, _ = check_end_to_end(small_cnn(), machine("tiny", tcm_bytes=2048), spread_tcm=True)
    stats = program.stats
    assert stats.peak_tcm_bytes == stats.tcm_compact_bytes <= 2048
    assert min(_tcm_reuses(program)) <= SPREAD_REUSE_DISTANCES[-1]


# --- a graph output that later operations read ----------------------------------------------

def output_read_later():
    b = GraphBuilder()
    x = b.input("x", (4, 32), DType.INT32)
    y = b.op(Op.ADD, [x, b.const(None, np.arange(32, dtype=np.int32).reshape(1, 32))], name="y")
    z = b.op(Op.MUL, [y, y, b.const(None, np.array([0], np.int8))], name="z")
    b.output(y, z)
    return b.build()


@pytest.mark.parametrize("preset", ["tiny", "edge"])
def test_readers_of_a_graph_output_use_its_tcm_copy(preset):
    program, _ = check_end_to_end(output_read_later(), machine(preset))
    y_ddr = program.outputs["y"]
    stores = [c.id for c in program.walk() if isinstance(c, DmaCommand) and c.dst.memory is MemorySpace.DDR
              and c.dst.offset_bytes == y_ddr.offset_bytes]
    reader = next(c for c in program.walk() if isinstance(c, ComputeCommand) and c.steps[0].op is Op.MUL)
    assert stores and not set(stores) & set(reader.deps)
    assert all(v.memory is MemorySpace.TCM for s in reader.steps for v in s.operands if hasattr(v, "memory"))


def test_the_first_gap_skips_the_intervals_ending_before_by_bisection_and_finds_what_a_scan_finds():
    import random

    from scheduler.passes.ordering import _first_gap

    def scan(intervals, earliest, length):
        t = earliest
        for lo, hi in intervals:
            if hi <= t:
                continue
            if lo >= t + length:
                break
            t = hi
        return t

    rng = random.Random(4)
    for _ in range(300):
        lane, t = [], 0.0
        for _ in range(rng.randint(0, 30)):   # a lane: sorted, never overlapping, some touching
            t += rng.choice((0.0, 0.0, rng.uniform(0, 5)))
            busy = rng.choice((0.0, rng.uniform(0, 6)))
            lane.append((t, t + busy))
            t += busy
        earliest, length = rng.uniform(-1, t + 2), rng.choice((0.0, rng.uniform(0, 4)))
        assert _first_gap(lane, earliest, length) == scan(lane, earliest, length)


def _shared(hw):
    return hw.model_copy(update={"shared_compute_pipeline": True})


def test_on_a_shared_pipeline_a_reorder_holding_more_bytes_live_is_not_taken():
    """One NPU operation at a time (the Ethos-U presets): a reorder that keeps more bytes live than
    the graph order is refused however large the TCM (a stacked Keras LSTM's second layer, computed
    ahead in pieces while the first ran, had held 2.3x Vela's SRAM on the U55)."""
    lowered = lower(two_chains(), (EpilogueRule(),))
    hw = machine("edge")
    assert [o.name for o in reorder_block(lowered.main.ops, lowered.values, hw, 1 << 20)] != \
        [o.name for o in lowered.main.ops]
    kept = reorder_block(lowered.main.ops, lowered.values, _shared(hw), 1 << 20)
    assert [o.name for o in kept] == [o.name for o in lowered.main.ops]

