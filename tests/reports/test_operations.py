"""reports.operations: commands grouped into operation spans (op, unit and totals per span)."""

from __future__ import annotations

from npu_sim.hw.trace import CommandRecord
from npu_sim.program import MemorySpace, OperationStats, PlanStats, Program
from reports.operations import operation_spans


def _record(cid, kind, unit, op, start, end, *, inv=0, busy_end=None, macs=0, rd=0, wr=0):
    return CommandRecord(cid, f"c{cid}", kind, unit, op, inv, start, end, 0, macs, rd, wr, busy_end)


def _program(*ops: OperationStats) -> Program:
    return Program({MemorySpace.DDR: 64, MemorySpace.TCM: 64, MemorySpace.VARIABLE_SRAM: 0}, [], [],
                   stats=PlanStats(0, 0, 0, operations=ops))


def test_op_and_unit_are_the_most_frequent_first_seen_on_ties():
    records = [_record(0, "dma", "dma0", "copy", 0, 10, busy_end=6, rd=32),
               _record(1, "compute", "vector", "ADD", 10, 20),
               _record(2, "compute", "lut", "TABLE", 20, 25),
               _record(3, "compute", "lut", "TABLE", 25, 30, macs=7),
               _record(4, "compute", "vector", "ADD", 30, 31),
               _record(5, "dma", "dma1", "copy", 31, 40, wr=8)]
    [span] = operation_spans(records, _program(OperationStats("mixed", "", "", commands=(0, 1, 2, 3, 4, 5))))
    assert (span.op, span.unit) == ("ADD", "vector")            # 2 ADD vs 2 TABLE: ADD came first
    assert (span.start_cycle, span.end_cycle, span.macs) == (0, 40, 7)
    assert (span.ddr_read_bytes, span.ddr_write_bytes) == (32, 8)
    assert (span.compute_commands, span.compute_cycles) == (4, 10 + 5 + 5 + 1)
    assert (span.dma_commands, span.dma_cycles) == (2, 6 + 9)   # a DMA is busy until busy_end
    assert span.units == {"dma0": 6, "vector": 11, "lut": 10, "dma1": 9}
    assert list(span.units) == ["dma0", "vector", "lut", "dma1"]  # first-seen order


def test_without_compute_the_unit_joins_the_busy_units_and_the_plan_wins():
    records = [_record(0, "dma", "dma1", "copy", 0, 4), _record(1, "dma", "dma0", "copy", 0, 5),
               _record(2, "compute", "mac_array", "CONV2D", 5, 9),
               _record(3, "compute", "mac_array", "CONV2D", 5, 9, inv=1)]
    program = _program(OperationStats("copies", "", "", commands=(0, 1)),
                       OperationStats("conv", "CONV2D+CLAMP", "vector", commands=(2, 3), tile_count=2))
    copies, conv0, conv1 = operation_spans(records, program)
    assert (copies.name, copies.op, copies.unit) == ("copies", "copy", "dma0+dma1")
    assert (conv0.op, conv0.unit, conv0.invocation, conv1.invocation) == ("CONV2D+CLAMP", "vector", 0, 1)
    assert conv0.as_dict()["tile_count"] == 2
    unmapped = operation_spans([_record(9, "compute", "lut", "TABLE", 0, 1)], program)
    assert [(s.name, s.op, s.unit) for s in unmapped] == [("c9", "TABLE", "lut")]
