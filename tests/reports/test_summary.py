"""reports.summary: every number of a hand-built trace, worked out by hand (see synthetic.tiny_case)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from npu_sim.hw.config import load_hw_config
from npu_sim.program import OperationStats, PlanStats
from reports.summary import build_summary, total_cycles
from tests.reports.synthetic import Trace, many_tiles_case, tiny_case

REQUIRED = ("graph", "hw_config", "invocations", "total_cycles", "per_invocation_cycles", "clock_hz",
            "ddr_read_bytes", "ddr_write_bytes", "peak_tcm_bytes", "tcm_lower_bound_bytes", "ops",
            "utilization", "outputs")
OP_FIELDS = ("name", "op", "unit", "start_cycle", "end_cycle", "macs", "ddr_read_bytes", "ddr_write_bytes")


@pytest.fixture(scope="module")
def edge():
    return load_hw_config("edge")


def test_tiny_case_totals(edge):
    program, trace = tiny_case()
    s = build_summary(trace, edge, program, graph="tiny.tosa", outputs={"out": "outputs/out.npy"})
    assert all(key in s for key in REQUIRED)
    assert (s["graph"], s["hw_config"], s["invocations"]) == ("tiny.tosa", "edge", 1)
    assert (s["total_cycles"], s["per_invocation_cycles"], s["clock_hz"]) == (1000, [1000], 10**9)
    assert s["seconds"] == pytest.approx(1e-6)
    assert (s["ddr_read_bytes"], s["ddr_write_bytes"], s["macs"]) == (768, 128, 8192)
    assert s["mac_utilization"] == pytest.approx(8192 / (1000 * 256))  # edge: 16x16 int8 MACs/cycle
    assert s["ddr_bandwidth_utilization"] == pytest.approx(896 / (1000 * 16))
    assert s["ddr_bytes_per_cycle"] == pytest.approx(0.896)
    assert s["utilization"] == {"dma0": 0.4, "dma1": 0.05, "mac_array": 0.4, "vector": 0.2, "lut": 0.0}
    # the plan's figures (tiny_case's stats, worked out from its allocations)
    assert (s["peak_tcm_bytes"], s["tcm_lower_bound_bytes"], s["peak_live_tcm_bytes"]) == (1024, 1024, 1024)
    assert s["tcm_size_bytes"] == 512 * 1024
    assert s["outputs"] == {"out": "outputs/out.npy"}
    assert s["hw"]["mac_array"]["rows"] == 16
    json.dumps(s, allow_nan=False)


def test_tiny_case_ops_aggregate_their_commands(edge):
    program, trace = tiny_case()
    conv, add = build_summary(trace, edge, program)["ops"]
    assert {k: conv[k] for k in OP_FIELDS} == {
        "name": "conv", "op": "CONV2D+RESCALE", "unit": "mac_array", "start_cycle": 0, "end_cycle": 500,
        "macs": 8192, "ddr_read_bytes": 768, "ddr_write_bytes": 0}
    assert (conv["compute_cycles"], conv["dma_cycles"], conv["compute_commands"], conv["dma_commands"]) \
        == (400, 150, 2, 2)
    assert conv["graph_ops"] == ["conv2d_0", "rescale_1"]
    assert {k: add[k] for k in OP_FIELDS} == {
        "name": "add", "op": "ADD", "unit": "vector", "start_cycle": 500, "end_cycle": 1000,
        "macs": 0, "ddr_read_bytes": 0, "ddr_write_bytes": 128}


def test_the_scheduler_figures_are_reported_as_they_are(edge):
    program, trace = tiny_case()
    program.stats = dataclasses.replace(program.stats, peak_tcm_bytes=2048, tcm_compact_bytes=1000,
                                        tcm_lower_bound_bytes=900)
    s = build_summary(trace, edge, program)
    assert (s["peak_tcm_bytes"], s["tcm_compact_bytes"], s["tcm_lower_bound_bytes"]) == (2048, 1000, 900)


def test_unmapped_commands_are_their_own_operations(edge):
    program, trace = tiny_case()
    program.stats = None
    s = build_summary(trace, edge, program)
    # without the scheduler's figures: footprint = end of the topmost TCM allocation; lower
    # bound from the plan lifetimes: in_tcm + w_tcm + conv_out are live together at commands 2..3
    assert (s["peak_tcm_bytes"], s["tcm_compact_bytes"], s["tcm_lower_bound_bytes"]) == (1024, 1024, 1024)
    ops = s["ops"]
    assert [(o["name"], o["unit"], o["op"]) for o in ops] == [
        ("conv/load_w", "dma1", "copy"), ("conv/load_in", "dma0", "copy"),  # by start, then end
        ("conv/tile0", "mac_array", "CONV2D+RESCALE"), ("conv/tile1", "mac_array", "CONV2D+RESCALE"),
        ("add", "vector", "ADD"), ("add/store", "dma0", "copy")]


def test_command_op_index_map_and_duplicate_names(edge):
    program, trace = tiny_case()
    program.stats = PlanStats(1024, 1024, 1024, operations=(
        OperationStats("same", "CONV2D", "mac_array", tile_shape=(1, 4), tile_count=2),
        OperationStats("same", "ADD", "vector")), command_operation={0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1})
    ops = build_summary(trace, edge, program)["ops"]
    assert [(o["name"], o["op"], o["macs"]) for o in ops] == [("same#0", "CONV2D", 8192), ("same#1", "ADD", 0)]
    assert (ops[0]["tile_shape"], ops[0]["tile_count"], ops[1]["tile_count"]) == ([1, 4], 2, 1)
    assert "tile_shape" not in ops[1]   # an untiled operation


def test_several_invocations(edge):
    program, trace = many_tiles_case(layers=3, tiles=4, invocations=3)
    s = build_summary(trace, edge, program)
    assert s["invocations"] == 3
    assert s["per_invocation_cycles"] == [i.end_cycle - i.start_cycle for i in trace.invocations]
    assert s["total_cycles"] == trace.invocations[-1].end_cycle - trace.invocations[0].start_cycle
    assert [(o["invocation"], o["name"]) for o in s["ops"]] == [
        (k, f"layer{n}") for k in range(3) for n in range(3)]
    assert sum(o["macs"] for o in s["ops"]) == s["macs"] == sum(r.macs for r in trace.commands)
    assert sum(o["ddr_read_bytes"] + o["ddr_write_bytes"] for o in s["ops"]) \
        == s["ddr_read_bytes"] + s["ddr_write_bytes"]
    assert s["variable_sram_bytes"] == 2048  # the variable persists over the whole run
    assert s["ddr_spill_bytes"] == 0  # spills only every 4th layer


def test_empty_trace(edge):
    from npu_sim.hw.trace import Counters

    s = build_summary(Trace([], [], [], Counters(), []), edge)
    assert (s["total_cycles"], s["ops"], s["utilization"], s["peak_tcm_bytes"]) == (0, [], {}, 0)
    assert s["mac_utilization"] == s["ddr_bandwidth_utilization"] == 0.0
    assert total_cycles(Trace([], [], [], Counters(), [])) == 0


def test_the_time_breakdown_by_unit_and_by_bound(edge):
    """tiny_case on edge: the conv's two tiles (400 busy cycles) against its two loads (150),
    the add's vector pass (200) against its store (300); setups are the units' (edge's figures),
    no DMA latency recorded (busy until done)."""
    program, trace = tiny_case()
    s = build_summary(trace, edge, program)
    conv, add = s["ops"]
    mac, vec, dma = edge.mac_array.setup_cycles, edge.vector.setup_cycles, edge.dma.setup_cycles
    assert conv["bound"] == "compute" and add["bound"] == "memory"
    compute, memory, setup = 400 - 2 * mac + 200 - vec, 150 - 2 * dma + 300 - dma, 2 * mac + vec + 3 * dma
    total = compute + memory + setup
    breakdown = s["time_breakdown"]
    assert breakdown["total_cycles"] == 1000
    assert breakdown["by_unit"]["dma0"] == {"busy_cycles": 400, "share": 0.4}
    assert breakdown["by_unit"]["mac_array"] == {"busy_cycles": 400, "share": 0.4}
    assert breakdown["by_unit"]["lut"] == {"busy_cycles": 0, "share": 0.0}
    assert breakdown["by_bound"] == {
        "compute": {"cycles": compute, "share": round(compute / total, 4), "operations": 1},
        "memory": {"cycles": memory, "share": round(memory / total, 4), "operations": 1},
        "setup_latency": {"cycles": setup, "share": round(setup / total, 4), "operations": 0}}
    assert conv["bound_shares"]["compute"] == round((400 - 2 * mac) / 550, 4)
