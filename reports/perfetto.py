"""Chrome trace-event JSON (``trace.json``) of a simulation, for https://ui.perfetto.dev.

Layout (trace-event format: a JSON object with ``traceEvents``):

* process 1 "NPU units": one thread (track) per DMA engine and compute unit,
  in the trace's unit order, each command a complete event ("X") over the cycles
  it occupied its unit. A DMA frees its engine when its last burst is issued and
  is done when the data has landed (``end_cycle`` in its args); that latency tail
  is drawn on "DMA data in flight" tracks after the units (tails of pipelined
  DMAs overlap, so they are packed onto as few lanes as needed);
* process 2 "NPU operations": the scheduler's operations (all commands of one
  operation in one invocation: a span); operations overlap when the schedule
  pipelines them, so they are packed onto as few lanes as needed (a lane never
  holds two overlapping slices); plus a track of the invocations;
* counters ("C") in process 1: TCM bytes in use, and DDR traffic in bytes/cycle
  averaged over :data:`BANDWIDTH_BINS` windows of the run.

Time: ``ts``/``dur`` in microseconds of simulated time (cycles / ``clock_hz``, rounded
to whole nanoseconds, Perfetto's resolution); every event's args keep the exact cycles.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from npu_sim.hw.trace import CommandRecord, Trace
from npu_sim.program import MemorySpace, Program
from reports.occupancy import occupancy_steps
from reports.operations import OperationSpan, operation_spans

UNITS_PID = 1
OPERATIONS_PID = 2
INVOCATIONS_TID = 1
#: The DDR bandwidth counter averages over this many equal windows of the run.
BANDWIDTH_BINS = 200


def _ns(cycle: int, clock_hz: int) -> int:
    """Whole nanoseconds of simulated time at ``cycle`` (rounded half up; monotonic in ``cycle``)."""
    return (2 * cycle * 10**9 + clock_hz) // (2 * clock_hz)


def _us(cycle: int, clock_hz: int) -> float:
    """Microseconds (the format's unit) of a cycle count, a whole number of nanoseconds:
    Perfetto stores nanoseconds, so adjacent commands stay exactly adjacent."""
    return _ns(cycle, clock_hz) / 1000


def _complete(name: str, pid: int, tid: int, start: int, end: int, clock_hz: int,
              category: str, args: dict[str, Any]) -> dict[str, Any]:
    start_ns, end_ns = _ns(start, clock_hz), _ns(end, clock_hz)
    return {"name": name, "cat": category, "ph": "X", "pid": pid, "tid": tid,
            "ts": start_ns / 1000, "dur": max(0, end_ns - start_ns) / 1000, "args": args}


def _metadata(kind: str, pid: int, tid: int | None, name: str, sort_index: int | None = None
              ) -> list[dict[str, Any]]:
    base = {"ph": "M", "pid": pid, "ts": 0}
    if tid is not None:
        base["tid"] = tid
    events = [{**base, "name": f"{kind}_name", "args": {"name": name}}]
    if sort_index is not None:
        events.append({**base, "name": f"{kind}_sort_index", "args": {"sort_index": sort_index}})
    return events


def pack_lanes(spans: Iterable[tuple[int, int]]) -> list[int]:
    """Lane per interval ``(start, end)`` so that intervals in one lane do not overlap.

    Greedy in start order: an interval takes the lowest lane free at its start
    (touching ends, ``end == start``, do not overlap).
    """
    spans = list(spans)
    order = sorted(range(len(spans)), key=lambda i: (spans[i][0], spans[i][1], i))
    lane_end: list[int] = []
    lanes = [0] * len(spans)
    for i in order:
        start, end = spans[i]
        lane = next((k for k, busy_until in enumerate(lane_end) if busy_until <= start), len(lane_end))
        if lane == len(lane_end):
            lane_end.append(0)
        lane_end[lane] = end
        lanes[i] = lane
    return lanes


def trace_events(trace: Trace, clock_hz: int, program: Program | None = None, *,
                 title: str = "npu-sim") -> dict[str, Any]:
    """The trace-event JSON object of a simulation."""
    if clock_hz <= 0:
        raise ValueError(f"clock_hz must be > 0, got {clock_hz}")
    events: list[dict[str, Any]] = []
    events += _metadata("process", UNITS_PID, None, f"{title}: units", 0)
    events += _metadata("process", OPERATIONS_PID, None, f"{title}: operations", 1)
    slices: list[dict[str, Any]] = []
    _unit_tracks(trace, clock_hz, events, slices)
    _operation_tracks(trace, program, clock_hz, events, slices)
    slices.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]))
    events += slices
    events += _counters(trace, clock_hz)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"generator": "npu-sim", "title": title, "clock_hz": clock_hz,
                      "time_unit": "microseconds of simulated time (cycles / clock_hz)"},
    }


def _unit_tracks(trace: Trace, clock_hz: int, events: list[dict[str, Any]], slices: list[dict[str, Any]]) -> None:
    """A track per unit with its commands (a DMA until it leaves its engine), then lanes of the
    DMA data still in flight after that."""
    units = list(trace.units)
    for record in trace.commands:  # e.g. the sequencer running control flow
        if record.unit not in units:
            units.append(record.unit)
    unit_tid = {unit: i + 1 for i, unit in enumerate(units)}
    for unit, tid in unit_tid.items():
        events += _metadata("thread", UNITS_PID, tid, unit, tid)
    tails: list[tuple[Any, int]] = []  # (record, busy end) of DMAs done after they left the engine
    for r in trace.commands:
        busy_end = r.end_cycle if r.busy_end_cycle is None else r.busy_end_cycle
        slices.append(_complete(r.name or r.op, UNITS_PID, unit_tid[r.unit], r.start_cycle,
                                busy_end, clock_hz, r.kind, _command_args(r, busy_end)))
        if r.end_cycle > busy_end:
            tails.append((r, busy_end))
    tail_lanes = pack_lanes((busy_end, r.end_cycle) for r, busy_end in tails)
    first_tail_tid = len(units) + 1
    for lane in range(max(tail_lanes, default=-1) + 1):
        events += _metadata("thread", UNITS_PID, first_tail_tid + lane, f"DMA data in flight {lane}",
                            first_tail_tid + lane)
    for (r, busy_end), lane in zip(tails, tail_lanes):
        slices.append(_complete(r.name or r.op, UNITS_PID, first_tail_tid + lane, busy_end, r.end_cycle,
                                clock_hz, "latency", {"id": r.id, "unit": r.unit,
                                                      "latency_cycles": r.end_cycle - busy_end}))


def _command_args(r: CommandRecord, busy_end: int) -> dict[str, Any]:
    args = {"id": r.id, "op": r.op, "kind": r.kind, "invocation": r.invocation,
            "start_cycle": r.start_cycle, "end_cycle": r.end_cycle, "cycles": r.cycles,
            "busy_cycles": busy_end - r.start_cycle, "bytes": r.bytes}
    if r.macs:
        args["macs"] = r.macs
    if r.ddr_read_bytes or r.ddr_write_bytes:
        args["ddr_read_bytes"] = r.ddr_read_bytes
        args["ddr_write_bytes"] = r.ddr_write_bytes
    return args


def _operation_tracks(trace: Trace, program: Program | None, clock_hz: int, events: list[dict[str, Any]],
                      slices: list[dict[str, Any]]) -> None:
    """The invocations on one track, the NPU operations on as many lanes as overlap."""
    events += _metadata("thread", OPERATIONS_PID, INVOCATIONS_TID, "invocations", 0)
    for inv in trace.invocations:
        slices.append(_complete(f"invocation {inv.index}", OPERATIONS_PID, INVOCATIONS_TID,
                                inv.start_cycle, inv.end_cycle, clock_hz, "invocation",
                                {"cycles": inv.cycles}))
    spans = operation_spans(trace.commands, program)
    lanes = pack_lanes((s.start_cycle, s.end_cycle) for s in spans)
    for lane in range(max(lanes, default=-1) + 1):
        tid = INVOCATIONS_TID + 1 + lane
        events += _metadata("thread", OPERATIONS_PID, tid, f"operations {lane}", tid)
    for span, lane in zip(spans, lanes):
        slices.append(_complete(span.name, OPERATIONS_PID, INVOCATIONS_TID + 1 + lane,
                                span.start_cycle, span.end_cycle, clock_hz, "operation",
                                _span_args(span)))


def _span_args(span: OperationSpan) -> dict[str, Any]:
    args = span.as_dict()
    del args["name"]
    return args


def _counters(trace: Trace, clock_hz: int) -> list[dict[str, Any]]:
    events = []
    cycles, values = occupancy_steps(trace.allocations, MemorySpace.TCM)
    for cycle, value in zip(cycles, values):
        events.append({"name": "TCM in use", "ph": "C", "pid": UNITS_PID, "tid": 0,
                       "ts": _us(cycle, clock_hz), "args": {"bytes": value}})
    events += _bandwidth_counter(trace, clock_hz)
    return events


def ddr_bandwidth_bins(trace: Trace, bins: int = BANDWIDTH_BINS) -> tuple[list[int], list[float]]:
    """``(window start cycles, DDR bytes/cycle in each window)``: each DMA's DDR payload
    spread evenly over the cycles it occupied its engine (its bursts cross the bus then)."""
    records = [r for r in trace.commands if r.ddr_read_bytes or r.ddr_write_bytes]
    if not records:
        return [], []
    lo = min(r.start_cycle for r in trace.commands)
    hi = max(r.end_cycle for r in trace.commands)
    width = max(1, -(-(hi - lo) // bins))
    count = -(-(hi - lo) // width) or 1
    totals = [0.0] * count
    for r in records:
        payload = r.ddr_read_bytes + r.ddr_write_bytes
        end = r.end_cycle if r.busy_end_cycle is None else r.busy_end_cycle
        if end == r.start_cycle:
            totals[min(count - 1, (r.start_cycle - lo) // width)] += payload
            continue
        rate = payload / (end - r.start_cycle)
        first = (r.start_cycle - lo) // width
        last = min(count - 1, (end - 1 - lo) // width)
        for b in range(first, last + 1):
            a0 = max(r.start_cycle, lo + b * width)
            a1 = min(end, lo + (b + 1) * width)
            totals[b] += rate * max(0, a1 - a0)
    starts = [lo + b * width for b in range(count)]
    rates = [t / (min(hi, s + width) - s) for t, s in zip(totals, starts)]
    return starts + [hi], rates + [0.0]


def _bandwidth_counter(trace: Trace, clock_hz: int) -> list[dict[str, Any]]:
    starts, rates = ddr_bandwidth_bins(trace)
    return [{"name": "DDR bytes/cycle", "ph": "C", "pid": UNITS_PID, "tid": 0,
             "ts": _us(cycle, clock_hz), "args": {"bytes_per_cycle": round(rate, 4)}}
            for cycle, rate in zip(starts, rates)]


def write_trace(path: str | Path, trace: Trace, clock_hz: int, program: Program | None = None, *,
                title: str = "npu-sim") -> Path:
    """Write ``trace.json``; returns its path."""
    path = Path(path)
    path.write_text(json.dumps(trace_events(trace, clock_hz, program, title=title),
                               separators=(",", ":")))
    return path
