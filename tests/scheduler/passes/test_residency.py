import pytest

from npu_sim.errors import ScheduleError
from npu_sim.hw.config import load_hw_config
from scheduler.ir.npu_ops import NpuOp, OpKind
from scheduler.passes.residency import Group, decide
from scheduler.passes.tiling import TilePlan


class StubTiler:
    """Each operation needs 100 bytes, plus 50 per operand or result not in TCM (on an NPU that
    may spill to its DDR)."""

    hw = load_hw_config("edge")

    def _need(self, op, in_tcm):
        return 100 + 50 * sum(not in_tcm(k) for k in (*op.inputs, *op.outputs))

    def _plan(self, need):
        return TilePlan((1,), (1,), (0,), {}, {}, {}, 1, need, 0.0, 0)

    def plan(self, op, in_tcm, budget, narrow_above_bytes=0):
        need = self._need(op, in_tcm)
        return self._plan(need) if need <= budget else None

    def smallest(self, op, in_tcm):
        return self._plan(self._need(op, in_tcm))


def _chain():
    def op(name, ins, outs):
        return NpuOp(name, OpKind.COMPUTE, sources=tuple(ins), outputs=tuple(outs))
    ops = [op("p0", [], ["A"]), op("p1", ["A"], ["B"]), op("p2", ["B"], ["C"]), op("p3", ["A", "C"], ["D"])]
    groups = {"A": Group("A", 400, {0, 1, 3}), "B": Group("B", 300, {1, 2}), "C": Group("C", 200, {2, 3})}
    return ops, groups


def _decide(capacity):
    ops, groups = _chain()
    return decide(ops, groups, lambda k: k if k in groups else None, capacity, StubTiler(),
                  lambda k: False, lambda i, f: 0)


def test_everything_resident_when_it_fits():
    res = _decide(1000)
    assert res.resident == {"A", "B", "C"} and res.evictions == []
    assert res.live_bytes == [400, 700, 900, 600]
    # p3's result D is not a planned group: streamed
    assert [res.plans[i].working_set_bytes for i in range(4)] == [100, 100, 100, 150]


def test_evicts_a_value_the_operation_does_not_use():
    res = _decide(950)
    # p2 (live A+B+C = 900) has 50 bytes left; A waits longest and frees enough
    assert res.evictions == ["A"] and res.resident == {"B", "C"}
    assert res.live_bytes == [0, 300, 500, 200]
    assert res.plans[1].working_set_bytes == 150      # p1 now streams A


def test_evicts_own_operands_last_then_fails():
    res = _decide(340)
    # p0 alone would need A (400): evicted though p0 writes it; then B and C in turn
    assert res.evictions == ["A", "B", "C"] and res.resident == set()
    assert [res.plans[i].working_set_bytes for i in range(4)] == [150, 200, 200, 250]
    with pytest.raises(ScheduleError,
                       match=r"p3: smallest tile \[1\] of output \[1\] needs 250 bytes of TCM, only 200 of 200"):
        _decide(200)


def test_spilling_a_value_for_bigger_tiles_when_that_pays():
    """misc_int8 (a converted encoder/decoder) on a 2 KiB TCM: some operations' results, kept
    in the TCM, leave their tiles too little room. Spilling them costs less DDR time than
    the small tiles do: the run is much faster, with the same bits."""
    from pathlib import Path

    import scheduler.passes.residency as residency
    from npu_sim.tosa.loader import load_graph
    from tests.scheduler.graphs import check_end_to_end, machine

    graph = load_graph(Path(__file__).resolve().parents[2] / "data" / "converted" / "misc_int8.tosa")
    hw = machine("tiny", tcm_bytes=2048)
    traded, with_trades = check_end_to_end(graph, hw)
    original = residency._worth_spilling
    residency._worth_spilling = lambda *args: None
    try:
        kept, without = check_end_to_end(graph, hw)
    finally:
        residency._worth_spilling = original
    assert len(traded.stats.spilled_values) > len(kept.stats.spilled_values)
    assert with_trades.trace.invocations[0].cycles < 0.8 * without.trace.invocations[0].cycles
