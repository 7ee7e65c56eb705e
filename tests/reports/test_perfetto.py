"""reports.perfetto: trace-event JSON that Perfetto loads (structure checked by trace_checks)."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from npu_sim.hw.trace import CommandRecord, Counters, InvocationRecord
from reports.operations import operation_spans
from reports.perfetto import _span_args, _span_args_text, ddr_bandwidth_bins, pack_lanes, trace_events, write_trace
from tests.reports.synthetic import UNITS, Trace, many_tiles_case, tiny_case
from tests.reports.trace_checks import check_trace_document


def _x(doc, pid=None):
    return [e for e in doc["traceEvents"] if e["ph"] == "X" and (pid is None or e["pid"] == pid)]


def test_tiny_case_tracks_and_times():
    program, trace = tiny_case()
    doc = trace_events(trace, 10**9, program, title="tiny")
    names = check_trace_document(doc)
    assert [names[(1, tid)] for tid in range(1, 6)] == UNITS  # one track per unit, in unit order
    commands = _x(doc, pid=1)
    assert len(commands) == 6
    tile0 = next(e for e in commands if e["args"]["id"] == 2)
    assert (tile0["ts"], tile0["dur"], names[(1, tile0["tid"])]) == (0.1, 0.2, "mac_array")
    assert tile0["args"]["start_cycle"] == 100 and tile0["args"]["macs"] == 4096
    ops = [e for e in _x(doc, pid=2) if e["cat"] == "operation"]
    assert [(e["name"], e["ts"], e["dur"]) for e in ops] == [("conv", 0.0, 0.5), ("add", 0.5, 0.5)]
    inv = [e for e in _x(doc, pid=2) if e["cat"] == "invocation"]
    assert [(e["name"], e["dur"]) for e in inv] == [("invocation 0", 1.0)]
    tcm = [(e["ts"], e["args"]["bytes"]) for e in doc["traceEvents"]
           if e["ph"] == "C" and e["name"] == "TCM in use"]
    assert tcm == [(0.0, 768), (0.1, 1024), (0.5, 384), (0.7, 128), (1.0, 0)]


def test_times_are_whole_nanoseconds_at_any_clock():
    commands = [CommandRecord(i, f"c{i}", "compute", "vector", "ADD", 0, i, i + 1, 0, 0, 0, 0)
                for i in range(7)]
    trace = Trace(commands, [], [InvocationRecord(0, 0, 7)], Counters(), ["vector"])
    doc = trace_events(trace, 3 * 10**9, None)  # 1 cycle = 1/3 ns
    check_trace_document(doc)
    starts = [e["ts"] for e in _x(doc, pid=1)]
    assert starts == [0.0, 0.0, 0.001, 0.001, 0.001, 0.002, 0.002]
    doc = trace_events(trace, 500 * 10**6, None)  # 1 cycle = 2 ns
    assert [e["ts"] for e in _x(doc, pid=1)] == [0.002 * i for i in range(7)]
    with pytest.raises(ValueError):
        trace_events(trace, 0, None)


def test_pack_lanes():
    assert pack_lanes([(0, 10), (5, 15), (10, 20), (12, 13)]) == [0, 1, 0, 2]
    assert pack_lanes([]) == []
    # the lowest lane free at each start (ends touching starts): as a scan of every lane finds it
    rng = random.Random(0)
    for _ in range(200):
        starts = [rng.randint(0, 20) for _ in range(rng.randint(0, 30))]
        spans = [(start, start + rng.randint(-2, 8)) for start in starts]
        ends: list[int] = []
        expected = [0] * len(spans)
        for i in sorted(range(len(spans)), key=lambda i: (*spans[i], i)):
            lane = next((k for k, end in enumerate(ends) if end <= spans[i][0]), len(ends))
            ends[lane:lane + 1] = [spans[i][1]]
            expected[i] = lane
        assert pack_lanes(spans) == expected


def test_pipelined_operations_overlap_on_separate_lanes_and_the_trace_validates():
    program, trace = many_tiles_case(layers=5, tiles=6, invocations=2)
    # make neighbouring operations overlap, as a pipelining schedule does
    shifted = [r._replace(start_cycle=max(0, r.start_cycle - 300), end_cycle=max(0, r.end_cycle - 300))
               if r.name.endswith("/load0") else r for r in trace.commands]
    trace = Trace(shifted, trace.allocations, trace.invocations, trace.counters, trace.units)
    doc = trace_events(trace, 10**9, program)
    names = check_trace_document(doc)
    assert sum(1 for (pid, _), n in names.items() if pid == 2 and n.startswith("operations")) >= 2
    assert sum(1 for e in _x(doc) if e["cat"] == "operation") == 10


def test_checker_catches_misnested_slices():
    bad = {"traceEvents": [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "p"}},
        {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "t"}},
        {"ph": "X", "pid": 1, "tid": 1, "name": "a", "ts": 0, "dur": 10},
        {"ph": "X", "pid": 1, "tid": 1, "name": "b", "ts": 5, "dur": 10}]}
    with pytest.raises(AssertionError, match="overlaps"):
        check_trace_document(bad)


def test_ddr_bandwidth_bins_conserve_bytes():
    _, trace = tiny_case()
    starts, rates = ddr_bandwidth_bins(trace, bins=10)
    assert starts == [0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]
    # 512 B over [0,100) and 256 B over [0,50): 7.68 B/cycle; 128 B over [700,1000)
    assert rates[0] == pytest.approx(7.68)
    assert rates[7:10] == pytest.approx([128 / 300] * 3)
    assert rates[1:7] == [0.0] * 6 and rates[-1] == 0.0
    assert sum(r * 100 for r in rates) == pytest.approx(768 + 128)


def test_write_trace_file(tmp_path):
    program, trace = tiny_case()
    path = write_trace(tmp_path / "trace.json", trace, 10**9, program)
    doc = json.loads(path.read_text())
    check_trace_document(doc)
    assert doc["otherData"]["clock_hz"] == 10**9


def test_pipelined_dmas_leave_the_engine_track_when_issued_and_their_latency_is_drawn_apart():
    # two DMAs on dma0: each issues for 10 cycles, its data lands 100 cycles later
    commands = [CommandRecord(i, f"load{i}", "dma", "dma0", "copy", 0, 10 * i, 10 * i + 110, 64, 0, 64, 0,
                              busy_end_cycle=10 * i + 10) for i in range(2)]
    trace = Trace(commands, [], [InvocationRecord(0, 0, 120)], Counters(), ["dma0"])
    doc = trace_events(trace, 10**9, None)
    names = check_trace_document(doc)
    engine = [e for e in _x(doc, pid=1) if names[(1, e["tid"])] == "dma0"]
    assert [(e["ts"], e["dur"], e["args"]["end_cycle"]) for e in engine] == [(0.0, 0.01, 110), (0.01, 0.01, 120)]
    tails = [e for e in _x(doc, pid=1) if e["cat"] == "latency"]
    assert sorted(names[(1, e["tid"])] for e in tails) == ["DMA data in flight 0", "DMA data in flight 1"]
    assert [(e["ts"], e["dur"]) for e in sorted(tails, key=lambda e: e["ts"])] == [(0.01, 0.1), (0.02, 0.1)]


def test_operation_args_are_written_as_the_encoder_writes_their_rows():
    """The operations' args are formatted from their spans' fields: the same text as the JSON
    encoder's of their rows, with a plan, without one, tiled or not, repeated invocations moved."""
    program, trace = many_tiles_case(layers=5, tiles=6, invocations=3)
    spans = operation_spans(trace.commands, program)
    spans.append(dataclasses.replace(spans[0], plan=None))
    spans.append(dataclasses.replace(spans[0], plan=dataclasses.replace(spans[0].plan, tile_shape=(1, 2, 3)),
                                     op="Ünïcode \"op\"", units={"vector": 3, "dma0": 0}))
    spans.append(dataclasses.replace(spans[0], plan=dataclasses.replace(spans[0].plan, tile_shape=None)))
    spans.append(spans[1].shifted(7, 1000))
    for span in spans:
        assert _span_args_text(span) == json.dumps(_span_args(span), separators=(",", ":"))
