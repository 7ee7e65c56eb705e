"""Operation order: a list schedule of each block, so that in-order unit queues do not stall.

Every DMA engine and compute unit runs its commands in stream order. In graph
order, an operation that could start early often waits behind one that cannot:
in an unrolled LSTM cell the input projection of step t+1 (it needs only the
input) sits behind the recurrent projection of step t on the MAC array. This
pass reorders the operations of a block by list scheduling on an estimate of
the machine:

* dependencies: a value is read after it is written (values are written once,
  except variables, which also keep their reads and writes in order);
  control-flow operations are barriers (operations never move across them);
* each operation has an estimated duration on its unit (compute units by the
  hardware model's cost functions; copies on the DMA engines, with the DDR
  latency before their result is usable). Loads of graph inputs and constants
  are left out: emission prefetches them, and an estimate of when they arrive
  made ahead of the order they are loaded in misleads more than it helps;
* repeatedly, of the operations whose predecessors are placed, the one with the
  longest estimated path to the end of the block (its *rank*) is placed at the
  earliest time its predecessors allow in a gap of its unit's timeline (an
  operation off the critical path fills the idle time the critical one left);
* the new order is the operations by estimated start (ties: graph order).

The order only changes the stream; whatever order results is a topological one,
so the outputs are the same bits. A reordering that would hold more intermediate
bytes live at once than the graph order, beyond half the TCM, is not taken
(residency could then spill where the graph order would not).

Where the compute units share one pipeline (``shared_compute_pipeline``: the Ethos-U presets, one
NPU operation at a time) a reordering that holds more bytes live than the graph order is never
taken: no two operations run at once there, so its gain is at most some overlap of loads, and it
had kept a stacked Keras LSTM's second layer, computed ahead in pieces while the first ran, in
2.3x (U55) and 1.8x (U85) the SRAM Vela's schedule needs.
"""

from __future__ import annotations

import bisect
import heapq

from npu_sim.errors import NpuSimError
from npu_sim.hw.config import HwConfig
from npu_sim.reference.kernel_api import full_region
from scheduler import cost_model
from scheduler.ir.npu_ops import LoweredGraph, NpuOp, OpKind, Value, ValueKind

#: Operand kinds that live in DDR.
_DDR_KINDS = frozenset({ValueKind.INPUT, ValueKind.CONSTANT})


def operation_timing(op: NpuOp, values: dict[str, Value], hw: HwConfig) -> tuple[float, float]:
    """``(busy, tail)``: estimated cycles the operation occupies its unit, and cycles
    after that until its result is usable (a copy's DDR latency); remembered on the operation
    for its steps and the config (later passes ask again)."""
    memo = op.timing_memo
    if memo is not None and memo[0] is op.steps and memo[1] is op.sources and memo[2] is hw:
        return memo[3]
    timing = _estimate(op, values, hw)
    op.timing_memo = (op.steps, op.sources, hw, timing)
    return timing


def _estimate(op: NpuOp, values: dict[str, Value], hw: HwConfig) -> tuple[float, float]:
    """:func:`operation_timing`, computed."""
    if op.kind is OpKind.COPY:
        size = sum(values[k].size_bytes for k in op.outputs)
        ddr = any(values[k].kind in _DDR_KINDS or values[k].kind is ValueKind.OUTPUT
                  for k in (*op.sources, *op.outputs))
        return cost_model.dma_issue_cycles(hw, size), (hw.ddr.read_latency_cycles if ddr else 0.0)
    if op.kind is not OpKind.COMPUTE:
        return 0.0, 0.0
    busy = float(cost_model.unit_setup_cycles(hw, op.unit))
    regions = [full_region(step.output_types[0].shape) if step.output_types else () for step in op.steps]
    try:
        busy += cost_model.command_cycles(hw, op.unit, op.steps, regions, op.composite.kind if op.composite else "")
    except (NpuSimError, ValueError, IndexError, TypeError):  # the kernel reports it when it runs
        pass
    return busy, 0.0


def _dependencies(ops: list[NpuOp]) -> list[set[int]]:
    """Predecessors of each operation (indices)."""
    preds: list[set[int]] = [set() for _ in ops]
    writer: dict[str, int] = {}
    readers: dict[str, list[int]] = {}
    for i, op in enumerate(ops):
        for key in op.inputs:
            if key in writer:
                preds[i].add(writer[key])
            readers.setdefault(key, []).append(i)
        for key in op.outputs:
            if key in writer:
                preds[i].add(writer[key])
            preds[i].update(r for r in readers.get(key, ()) if r != i)
            writer[key] = i
            readers[key] = []
    return preds


def _peak_live_bytes(ops: list[NpuOp], values: dict[str, Value]) -> int:
    """Most bytes of intermediates live at once over the operations in this order."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, op in enumerate(ops):
        for key in (*op.inputs, *op.outputs):
            if values[key].kind is ValueKind.INTERMEDIATE:
                first.setdefault(key, i)
                last[key] = i
    deltas = [0] * (len(ops) + 1)
    for key, start in first.items():
        size = values[key].size_bytes
        deltas[start] += size
        deltas[last[key] + 1] -= size
    live = peak = 0
    for delta in deltas:
        live += delta
        peak = max(peak, live)
    return peak


def list_schedule(ops: list[NpuOp], values: dict[str, Value], hw: HwConfig) -> list[NpuOp]:
    """``ops`` (one segment without control flow) in list-schedule order."""
    n = len(ops)
    if n < 3:
        return list(ops)
    preds = _dependencies(ops)
    succs: list[list[int]] = [[] for _ in ops]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].append(i)
    timing = [operation_timing(op, values, hw) for op in ops]
    rank = [0.0] * n
    for i in range(n - 1, -1, -1):
        rank[i] = sum(timing[i]) + max((rank[s] for s in succs[i]), default=0.0)
    start = _place(ops, preds, succs, timing, rank, max(1, hw.dma.engine_count))
    order = sorted(range(n), key=lambda i: (start[i], i))
    return [ops[i] for i in order]


def _place(ops: list[NpuOp], preds: list[set[int]], succs: list[list[int]], timing: list[tuple[float, float]],
           rank: list[float], engines: int) -> list[float]:
    """Estimated start of each operation: the ready one of highest rank first, at the earliest
    time its predecessors allow, in the first gap of its unit's timeline that holds it."""
    busy_lanes: dict[str, list[list[tuple[float, float]]]] = {}   # unit -> lanes of busy intervals
    finish = [0.0] * len(ops)
    start = [0.0] * len(ops)
    waiting = [len(p) for p in preds]
    ready = [(-rank[i], i) for i in range(len(ops)) if waiting[i] == 0]
    heapq.heapify(ready)
    while ready:
        _, i = heapq.heappop(ready)
        op = ops[i]
        unit = op.unit if op.kind is OpKind.COMPUTE else "dma"
        lanes = busy_lanes.setdefault(unit, [[] for _ in range(engines if unit == "dma" else 1)])
        busy, tail = timing[i]
        earliest = max([finish[p] for p in preds[i]], default=0.0)
        begin, lane = min((_first_gap(intervals, earliest, busy), k) for k, intervals in enumerate(lanes))
        bisect.insort(lanes[lane], (begin, begin + busy))
        start[i] = begin
        finish[i] = begin + busy + tail
        for s in succs[i]:
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(ready, (-rank[s], s))
    return start


def _first_gap(intervals: list[tuple[float, float]], earliest: float, length: float) -> float:
    """The earliest start >= ``earliest`` of ``length`` cycles between sorted busy ``intervals``
    (they never overlap, so their ends are sorted too: those ending by ``earliest`` are skipped
    by bisection)."""
    t = earliest
    for k in range(bisect.bisect_right(intervals, earliest, key=_end), len(intervals)):
        lo, hi = intervals[k]
        if lo >= t + length:
            break
        t = hi
    return t


def _end(interval: tuple[float, float]) -> float:
    return interval[1]


def reorder_block(ops: list[NpuOp], values: dict[str, Value], hw: HwConfig, capacity_bytes: int) -> list[NpuOp]:
    """The block's operations in list-schedule order, segment by segment between control flow."""
    out: list[NpuOp] = []
    segment: list[NpuOp] = []
    for op in ops:
        if op.kind in (OpKind.COND_IF, OpKind.WHILE_LOOP):
            out += list_schedule(segment, values, hw)
            out.append(op)
            segment = []
        else:
            segment.append(op)
    out += list_schedule(segment, values, hw)
    before, after = _peak_live_bytes(ops, values), _peak_live_bytes(out, values)
    if after > before and (after > capacity_bytes // 2 or hw.shared_compute_pipeline):
        return list(ops)
    return out


def order_blocks(lowered: LoweredGraph, hw: HwConfig) -> None:
    """List-schedule the operations of every block (in place)."""
    for block in lowered.main.walk_blocks():
        block.ops = reorder_block(block.ops, lowered.values, hw, hw.tcm.size_bytes)
