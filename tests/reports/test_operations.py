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


def test_an_operations_cycles_split_into_compute_memory_and_setup_latency():
    """With each command's setup known (here 2 per compute command, 3 per DMA), a span's busy
    cycles split into compute bodies, DMA data phases and setups plus DMA latency (end minus
    busy end); the largest names its bound."""
    from reports.operations import shares

    records = [_record(0, "dma", "dma0", "copy", 0, 110, busy_end=10, rd=32),   # 10 busy, 100 latency
               _record(1, "compute", "mac_array", "CONV2D", 110, 150),
               _record(2, "compute", "mac_array", "CONV2D", 150, 190)]
    program = _program(OperationStats("conv", "CONV2D", "mac_array", commands=(0, 1, 2)))
    [span] = operation_spans(records, program, lambda r: 2 if r.kind == "compute" else 3)
    assert span.bound_cycles == {"compute": 80 - 4, "memory": 10 - 3, "setup_latency": 4 + 3 + 100}
    assert span.bound == "setup_latency"
    row = span.as_dict()
    assert row["bound"] == "setup_latency"
    assert row["bound_shares"] == shares(span.bound_cycles) == {"compute": round(76 / 190, 4),
                                                                "memory": round(7 / 190, 4),
                                                                "setup_latency": round(107 / 190, 4)}
    [plain] = operation_spans(records[1:], program)   # no setup given: all of it is work
    assert plain.bound_cycles == {"compute": 80, "memory": 0, "setup_latency": 0} and plain.bound == "compute"


def test_the_setup_of_a_command_is_its_units():
    from npu_sim.hw.config import load_hw_config
    from reports.operations import command_setup_cycles

    edge = load_hw_config("edge")
    setup = command_setup_cycles(edge)
    assert setup(_record(0, "dma", "dma1", "copy", 0, 200, busy_end=100)) == edge.dma.setup_cycles
    assert setup(_record(1, "compute", "mac_array", "CONV2D", 0, 500)) == edge.mac_array.setup_cycles
    assert setup(_record(2, "compute", "vector", "ADD", 0, 500)) == edge.vector.setup_cycles
    assert setup(_record(3, "loop", "sequencer", "while", 0, 9)) == 0
    assert setup(_record(4, "compute", "vector", "ADD", 0, 1)) == 1   # never more than it was busy


def test_an_operations_cycles_are_the_cycles_some_command_kept_a_unit_busy():
    """Two DMAs overlapping on two engines (0..10 busy until 6, 4..12), a tile 20..30 and one
    finishing inside it (22..25): busy over 0..12 and 20..30, 22 cycles of work in a 30-cycle
    span; less than the busy cycles summed (6 + 8 + 10 + 3)."""
    records = [_record(0, "dma", "dma0", "copy", 0, 10, busy_end=6), _record(1, "dma", "dma1", "copy", 4, 12),
               _record(2, "compute", "mac_array", "CONV2D", 20, 30),
               _record(3, "compute", "mac_array", "CONV2D", 22, 25)]
    [span] = operation_spans(records, _program(OperationStats("conv", "CONV2D", "mac_array", commands=(0, 1, 2, 3))))
    assert (span.cycles, span.span_cycles, span.compute_cycles + span.dma_cycles) == (22, 30, 27)
    assert span.busy_intervals == {"dma0": [(0, 6)], "dma1": [(4, 12)], "mac_array": [(20, 30)]}
    row = span.as_dict(busy_intervals=True)
    assert (row["cycles"], row["span_cycles"]) == (22, 30)
    assert "busy_intervals" not in span.as_dict()
    assert row["unit_busy_cycles"] == {"dma0": 6, "dma1": 8, "mac_array": 13}
    assert row["busy_intervals"]["mac_array"] == [[20, 30]]


def test_merged_joins_touching_and_overlapping_intervals_and_drops_empty_ones():
    from reports.operations import merged

    assert merged([(5, 9), (0, 2), (2, 4), (7, 8), (10, 10), (12, 15)]) == [(0, 4), (5, 9), (12, 15)]
    assert merged([]) == []


def test_the_preamble_of_a_stream_is_an_operation_of_its_own():
    """Constant loads 0 (a preamble command) and 1 (not one) of one operation, and the same
    commands again inside invocation 0 (from cycle 100): the preamble's run is invocation -1."""
    from dataclasses import replace

    from reports.operations import PREAMBLE

    records = [_record(0, "dma", "dma0", "copy", 0, 40), _record(1, "dma", "dma1", "copy", 150, 160),
               _record(2, "compute", "vector", "ADD", 160, 170)]
    program = replace(_program(OperationStats("constant_pool", "LOAD", "dma", commands=(0, 1)),
                               OperationStats("add", "ADD", "vector", commands=(2,))),
                      preamble_command_ids=frozenset({0}))
    spans = operation_spans(records, program, preamble_end_cycle=100)
    assert [(s.name, s.invocation, s.start_cycle, s.end_cycle) for s in spans] == [
        ("constant_pool", PREAMBLE, 0, 40), ("constant_pool", 0, 150, 160), ("add", 0, 160, 170)]
    assert [s.invocation for s in operation_spans(records, program)] == [0, 0]   # one invocation: in line


def _invocation(inv: int, at: int, add_cycles: int = 10) -> list[CommandRecord]:
    return [_record(0, "dma", "dma0", "copy", at, at + 12, inv=inv, busy_end=at + 8, rd=16),
            _record(1, "compute", "vector", "ADD", at + 12, at + 12 + add_cycles, inv=inv),
            _record(1, "compute", "vector", "ADD", at + 30, at + 30 + add_cycles, inv=inv),
            _record(2, "dma", "dma1", "copy", at + 45, at + 50, inv=inv, wr=4)]


def test_an_invocation_run_again_later_gets_the_same_rows_moved_in_time():
    """Invocations 1 and 3 repeat invocation 0 later (their spans are copied, moved); invocation
    2's ADD takes longer (its spans are its own): every row is what its records alone give."""
    records = [*_invocation(0, 0), *_invocation(1, 100), *_invocation(2, 200, add_cycles=11),
               *_invocation(3, 300)]
    program = _program(OperationStats("load", "LOAD", "dma", commands=(0,)),
                       OperationStats("add", "ADD", "vector", commands=(1,)),
                       OperationStats("store", "STORE", "dma", commands=(2,)))
    spans = operation_spans(records, program, lambda r: 2 if r.kind == "compute" else 1)
    alone = [span for inv in range(4)
             for span in operation_spans([r for r in records if r.invocation == inv], program,
                                         lambda r: 2 if r.kind == "compute" else 1)]
    assert [s.as_dict(busy_intervals=True) for s in spans] == [s.as_dict(busy_intervals=True) for s in alone]
    assert [s.cycles for s in spans] == [s.cycles for s in alone]
    assert [s.moved_from is not None for s in spans] == [False] * 3 + [True] * 3 + [False] * 3 + [True] * 3
    add_rows = [s.as_dict(busy_intervals=True) for s in spans if s.name == "add"]
    assert [(r["invocation"], r["start_cycle"], r["end_cycle"], r["cycles"]) for r in add_rows] == [
        (0, 12, 40, 20), (1, 112, 140, 20), (2, 212, 241, 22), (3, 312, 340, 20)]
    assert add_rows[3]["busy_intervals"] == {"vector": [[312, 322], [330, 340]]}
    add_rows[1]["unit_busy_cycles"]["vector"] = -1   # a row is the caller's: the others keep theirs
    assert spans[4].as_dict()["unit_busy_cycles"] == {"vector": 20}
