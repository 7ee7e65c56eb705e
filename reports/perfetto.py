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

The file is written as it is made, track by track (:func:`write_trace`): a command is one
line of formatted text, no event object in between, so a trace of a hundred thousand
commands costs a fraction of a second and little memory. :func:`trace_events` reads the
same text back as a dict, for tests and callers that want the events.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator
from functools import lru_cache
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from npu_sim.hw.trace import CommandRecord, Trace
from npu_sim.program import MemorySpace, Program
from reports.occupancy import trace_occupancy_steps
from reports.operations import OperationSpan, bound_of, operation_spans

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
    (touching ends, ``end == start``, do not overlap). The lanes busy are kept in a heap by
    the end of their last interval, the free ones in a heap by number.
    """
    spans = list(spans)
    order = sorted(range(len(spans)), key=lambda i: (spans[i][0], spans[i][1], i))
    busy: list[tuple[int, int]] = []   # (end of its last interval, lane)
    free: list[int] = []
    count = 0
    lanes = [0] * len(spans)
    for i in order:
        start, end = spans[i]
        while busy and busy[0][0] <= start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, count = count, count + 1
        heapq.heappush(busy, (end, lane))
        lanes[i] = lane
    return lanes


def trace_events(trace: Trace, clock_hz: int, program: Program | None = None, *,
                 title: str = "npu-sim") -> dict[str, Any]:
    """The trace-event JSON object of a simulation (what :func:`write_trace` writes, read back)."""
    return json.loads("".join(_document(trace, clock_hz, program, title)))


def write_trace(path: str | Path, trace: Trace, clock_hz: int, program: Program | None = None, *,
                title: str = "npu-sim") -> Path:
    """Write ``trace.json`` as it is made; returns its path."""
    path = Path(path)
    with open(path, "w", encoding="utf-8") as handle:
        for chunk in _document(trace, clock_hz, program, title):
            handle.write(chunk)
    return path


def _document(trace: Trace, clock_hz: int, program: Program | None, title: str) -> Iterator[str]:
    """The text of the document, in pieces: the metadata events, then the slices track by
    track (each in time order, longer first at one start), then the counters."""
    if clock_hz <= 0:
        raise ValueError(f"clock_hz must be > 0, got {clock_hz}")
    units = list(trace.units)
    for record in trace.commands:  # e.g. the sequencer running control flow
        if record.unit not in units:
            units.append(record.unit)
    tails = [(r, r.busy_end_cycle) for r in trace.commands
             if r.busy_end_cycle is not None and r.end_cycle > r.busy_end_cycle]
    tail_lanes = pack_lanes((busy_end, r.end_cycle) for r, busy_end in tails)
    spans = operation_spans(trace.commands, program)
    span_lanes = pack_lanes((s.start_cycle, s.end_cycle) for s in spans)
    meta = _metadata("process", UNITS_PID, None, f"{title}: units", 0)
    meta += _metadata("process", OPERATIONS_PID, None, f"{title}: operations", 1)
    for tid, unit in enumerate(units, 1):
        meta += _metadata("thread", UNITS_PID, tid, unit, tid)
    first_tail_tid = len(units) + 1
    for lane in range(max(tail_lanes, default=-1) + 1):
        meta += _metadata("thread", UNITS_PID, first_tail_tid + lane, f"DMA data in flight {lane}",
                          first_tail_tid + lane)
    meta += _metadata("thread", OPERATIONS_PID, INVOCATIONS_TID, "invocations", 0)
    for lane in range(max(span_lanes, default=-1) + 1):
        tid = INVOCATIONS_TID + 1 + lane
        meta += _metadata("thread", OPERATIONS_PID, tid, f"operations {lane}", tid)
    yield '{"traceEvents":[' + json.dumps(meta, separators=(",", ":"))[1:-1]
    for track in _unit_slices(trace, units, clock_hz):
        yield from _joined(track)
    for track in _tail_slices(tails, tail_lanes, first_tail_tid, clock_hz):
        yield from _joined(track)
    for track in _operation_slices(trace, spans, span_lanes, clock_hz):
        yield from _joined(track)
    yield from _joined(_counters(trace, clock_hz))
    other = {"generator": "npu-sim", "title": title, "clock_hz": clock_hz,
             "time_unit": "microseconds of simulated time (cycles / clock_hz)"}
    yield '],"displayTimeUnit":"ns","otherData":' + json.dumps(other, separators=(",", ":")) + "}"


#: ``json.dumps(value, separators=(",", ":"))`` without a new encoder per call (``json.dumps``
#: reuses one only with the default options): an operation's args are encoded per operation.
_compact = json.JSONEncoder(separators=(",", ":")).encode


def _joined(events: list[str]) -> Iterator[str]:
    if events:
        yield "," + ",".join(events)


@lru_cache(maxsize=4096)
def _quoted(text: str) -> str:
    """``text`` as a JSON string (names repeat tile after tile: each is quoted once)."""
    return json.dumps(text)


@lru_cache(maxsize=4096)
def _head(category: str, pid: int, tid: int) -> str:
    """The text of a complete event between its name and its start (one per track and category)."""
    return f',"cat":{_quoted(category)},"ph":"X","pid":{pid},"tid":{tid},"ts":'


def _slice(name: str, head: str, start_ns: int, end_ns: int, args: str) -> str:
    """A complete event ("X") over ``[start_ns, end_ns)``; ``head``: :func:`_head` of its track;
    ``args``: its args object, as JSON."""
    duration = end_ns - start_ns
    return (f'{{"name":{_quoted(name)}{head}{start_ns / 1000!r},"dur":{(duration if duration > 0 else 0) / 1000!r},'
            f'"args":{args}}}')


def _in_order(slices: list[tuple[int, int, str]]) -> list[str]:
    """The events of one track, each ``(start, -duration, text)``, by start, the longer first at
    one start (then as made)."""
    slices.sort(key=_START_LONGER_FIRST)
    return [text for _, _, text in slices]


_START_LONGER_FIRST = itemgetter(0, 1)


def _unit_slices(trace: Trace, units: list[str], clock_hz: int) -> Iterator[list[str]]:
    """A track per unit with its commands, a DMA until it leaves its engine."""
    tracks: dict[str, list[tuple[int, int, str]]] = {unit: [] for unit in units}
    tid_of = {unit: tid for tid, unit in enumerate(units, 1)}
    scale, denominator = 2 * 10**9, 2 * clock_hz   # (_ns, inline: two calls a command)
    for r in trace.commands:
        cid, name, kind, unit, op, invocation, start, end, size, macs, ddr_read, ddr_write, busy_end = r
        if busy_end is None:
            busy_end = end
        start_ns, end_ns = (scale * start + clock_hz) // denominator, (scale * busy_end + clock_hz) // denominator
        args = (f'{{"id":{cid},"op":{_quoted(op)},"kind":{_quoted(kind)},"invocation":{invocation},'
                f'"start_cycle":{start},"end_cycle":{end},"cycles":{end - start},'
                f'"busy_cycles":{busy_end - start},"bytes":{size}')
        if macs:
            args += f',"macs":{macs}'
        if ddr_read or ddr_write:
            args += f',"ddr_read_bytes":{ddr_read},"ddr_write_bytes":{ddr_write}'
        text = _slice(name or op, _head(kind, UNITS_PID, tid_of[unit]), start_ns, end_ns, args + "}")
        tracks[unit].append((start_ns, start_ns - end_ns, text))
    for unit in units:
        yield _in_order(tracks[unit])


def _tail_slices(tails: list[tuple[CommandRecord, int]], lanes: list[int], first_tid: int,
                 clock_hz: int) -> Iterator[list[str]]:
    """Lanes of the DMA data still in flight after its DMA left the engine."""
    tracks: list[list[tuple[int, int, str]]] = [[] for _ in range(max(lanes, default=-1) + 1)]
    for (r, busy_end), lane in zip(tails, lanes):
        start_ns, end_ns = _ns(busy_end, clock_hz), _ns(r.end_cycle, clock_hz)
        args = f'{{"id":{r.id},"unit":{_quoted(r.unit)},"latency_cycles":{r.end_cycle - busy_end}}}'
        tracks[lane].append((start_ns, start_ns - end_ns,
                             _slice(r.name or r.op, _head("latency", UNITS_PID, first_tid + lane), start_ns, end_ns,
                                    args)))
    for track in tracks:
        yield _in_order(track)


def _operation_slices(trace: Trace, spans: list[OperationSpan], lanes: list[int],
                      clock_hz: int) -> Iterator[list[str]]:
    """The invocations on one track, the NPU operations on as many lanes as overlap."""
    invocations = []
    for inv in trace.invocations:
        start_ns, end_ns = _ns(inv.start_cycle, clock_hz), _ns(inv.end_cycle, clock_hz)
        invocations.append((start_ns, start_ns - end_ns,
                            _slice(f"invocation {inv.index}", _head("invocation", OPERATIONS_PID, INVOCATIONS_TID),
                                   start_ns, end_ns, f'{{"cycles":{inv.cycles}}}')))
    yield _in_order(invocations)
    tracks: list[list[tuple[int, int, str]]] = [[] for _ in range(max(lanes, default=-1) + 1)]
    for span, lane in zip(spans, lanes):
        start_ns, end_ns = _ns(span.start_cycle, clock_hz), _ns(span.end_cycle, clock_hz)
        tracks[lane].append((start_ns, start_ns - end_ns,
                             _slice(span.name, _head("operation", OPERATIONS_PID, INVOCATIONS_TID + 1 + lane),
                                    start_ns, end_ns, _span_args_text(span))))
    for track in tracks:
        yield _in_order(track)


def _span_args(span: OperationSpan) -> dict[str, Any]:
    """An operation's args: its summary row without its name."""
    args = span.as_dict()
    del args["name"]
    return args


def _span_args_text(span: OperationSpan) -> str:
    """``_compact(_span_args(span))``, written from the span's fields (no row dict and no encoder
    per operation: a trace has thousands)."""
    parts = span.bound_cycles
    total = parts["compute"] + parts["memory"] + parts["setup_latency"]
    bound_shares = ",".join(f'"{key}":{round(value / total, 4) if total else 0.0!r}' for key, value in parts.items())
    plan = span.plan
    graph_ops = ",".join(map(_quoted, plan.graph_ops)) if plan else ""
    busy = ",".join(f"{_quoted(unit)}:{_int(cycles)}" for unit, cycles in span.units.items())
    text = (f'{{"op":{_quoted(span.op)},"unit":{_quoted(span.unit)},"invocation":{_int(span.invocation)},'
            f'"start_cycle":{_int(span.start_cycle)},"end_cycle":{_int(span.end_cycle)},'
            f'"cycles":{_int(span.cycles)},"span_cycles":{_int(span.span_cycles)},"macs":{_int(span.macs)},'
            f'"ddr_read_bytes":{_int(span.ddr_read_bytes)},"ddr_write_bytes":{_int(span.ddr_write_bytes)},'
            f'"compute_cycles":{_int(span.compute_cycles)},"dma_cycles":{_int(span.dma_cycles)},'
            f'"compute_commands":{_int(span.compute_commands)},"dma_commands":{_int(span.dma_commands)},'
            f'"bound":{_quoted(bound_of(parts))},"bound_shares":{{{bound_shares}}},"graph_ops":[{graph_ops}],'
            f'"unit_busy_cycles":{{{busy}}}')
    if plan is None:
        return text + "}"
    shape = "" if plan.tile_shape is None else f',"tile_shape":[{",".join(map(_int, plan.tile_shape))}]'
    return (f'{text},"block":{_quoted(plan.block)}{shape},"tile_count":{_int(plan.tile_count)},'
            f'"working_set_bytes":{_int(plan.working_set_bytes)}}}')


def _int(value: int) -> str:
    """An int as JSON writes it (anything else through the encoder: a bool, a float)."""
    return int.__repr__(value) if type(value) is int else _compact(value)


def _counters(trace: Trace, clock_hz: int) -> list[str]:
    """The TCM bytes in use at each change, then the DDR bandwidth per window, as JSON text."""
    cycles, values = trace_occupancy_steps(trace, MemorySpace.TCM)
    events = [f'{{"name":"TCM in use","ph":"C","pid":{UNITS_PID},"tid":0,"ts":{_us(cycle, clock_hz)!r},'
              f'"args":{{"bytes":{value}}}}}' for cycle, value in zip(cycles, values)]
    starts, rates = ddr_bandwidth_bins(trace)
    events += [f'{{"name":"DDR bytes/cycle","ph":"C","pid":{UNITS_PID},"tid":0,"ts":{_us(cycle, clock_hz)!r},'
               f'"args":{{"bytes_per_cycle":{round(rate, 4)!r}}}}}' for cycle, rate in zip(starts, rates)]
    return events


def ddr_bandwidth_bins(trace: Trace, bins: int = BANDWIDTH_BINS) -> tuple[list[int], list[float]]:
    """``(window start cycles, DDR bytes/cycle in each window)``: each DMA's DDR payload
    spread evenly over the cycles it occupied its engine (its bursts cross the bus then), in
    arrays."""
    uses = [(r.start_cycle, r.end_cycle if r.busy_end_cycle is None else r.busy_end_cycle,
             r.ddr_read_bytes + r.ddr_write_bytes) for r in trace.commands if r.ddr_read_bytes or r.ddr_write_bytes]
    if not uses:
        return [], []
    lo = min(r.start_cycle for r in trace.commands)
    hi = max(r.end_cycle for r in trace.commands)
    width = max(1, -(-(hi - lo) // bins))
    count = -(-(hi - lo) // width) or 1
    start, end, payload = np.array(uses, dtype=np.int64).T
    first = (start - lo) // width
    instant = end == start   # (all its payload in the window of its start)
    first = np.where(instant, np.minimum(count - 1, first), first)
    last = np.where(instant, first, np.minimum(count - 1, (end - 1 - lo) // width))
    # every window each use overlaps, use by use in order (np.add.at adds in that order: the sums
    # are the ones a loop over the uses makes)
    windows = last - first + 1
    owner = np.repeat(np.arange(len(uses)), windows)
    window = np.arange(len(owner)) + np.repeat(first - np.cumsum(windows) + windows, windows)
    overlap = np.minimum(end[owner], lo + (window + 1) * width) - np.maximum(start[owner], lo + window * width)
    rate = payload / np.where(instant, 1, end - start)
    added = np.where(instant[owner], payload[owner], rate[owner] * np.maximum(0, overlap))
    totals = np.zeros(count)
    np.add.at(totals, window, added)
    starts = [lo + b * width for b in range(count)]
    rates = [t / (min(hi, s + width) - s) for t, s in zip(totals.tolist(), starts)]
    return starts + [hi], rates + [0.0]
