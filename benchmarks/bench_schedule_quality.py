#!/usr/bin/env python3
"""Schedule quality: simulated cycles, TCM footprint and DDR traffic against their lower bounds.

For every benchmark graph (benchmarks/graphs.py: the examples and the conv-heavy
int8 CNN) on every preset (tiny, edge, server) this compiles and simulates the
graph once (``npu_sim.simulate``, seeded random inputs, one invocation) and checks
the outputs against ``npu_sim.execute`` (so a fast wrong schedule cannot look
good). Three ratios, each with its goal:

1. ``cycles / roofline`` (goal <= 1.2), ``roofline = max(compute, ddr)`` cycles:

   * ``compute = sum over the graph's MAC operators of macs / macs_per_cycle[dtype]``,
     ``macs`` counted from the graph's shapes (CONV2D ``N*OH*OW*OC*KH*KW*IC``,
     DEPTHWISE_CONV2D ``N*OH*OW*C*M*KH*KW``, CONV3D, TRANSPOSE_CONV2D
     ``N*IH*IW*OC*KH*KW*IC``, MATMUL ``N*H*W*C``), ``dtype`` the operator's input
     dtype and ``macs_per_cycle`` the config's ``mac_array.macs_per_cycle`` (the
     peak rate; int8 = rows*cols);
   * ``ddr = compulsory_ddr_bytes / ddr.bandwidth_bytes_per_cycle``, with
     ``compulsory_ddr_bytes`` from ``Program.stats``: the graph inputs and the
     constants some DMA reads, read once, plus the outputs written once (constants
     the scheduler folded into others or never moves are not counted).

   Two more columns say where a miss comes from. ``/array`` replaces ``compute`` by
   what the configured systolic array needs at best: ``npu_sim.hw.compute_units.mac_array.mac_array_cycles``
   of each operator untiled, ``ceil(M/rows)*ceil(N/cols)`` blocks of ``K*k_step`` cycles
   (at least ``rows`` each with double-buffered accumulators) plus the array's skew
   (the fill/drain of the hardware model, which no schedule can avoid). ``/+lat`` adds one DDR read latency,
   one write latency and two DMA setups to the roofline: the first input byte cannot
   arrive sooner, the last output byte cannot land sooner (every graph here computes
   its outputs from its inputs). Only ``cycles / roofline`` is the goal.
2. ``peak_tcm_bytes / tcm_lower_bound_bytes`` (goal <= 1.05), both from
   ``Program.stats``: the TCM plan's footprint over the most bytes live at once in it
   (both recomputed from the Program's allocations as a check). The ratio of
   ``tcm_compact_bytes`` (the planner's compact placement, before the scheduler spreads
   buffers over spare TCM for parallelism) is shown too, with the same goal.
3. ``(ddr_read_bytes + ddr_write_bytes) / compulsory_ddr_bytes`` (goal <= 1.1) when the
   working set fits: the largest ``live activations + that operator's constants`` over
   the main block's operators in graph order (whole tensors; graph inputs live from
   the start, outputs to the end) is at most the TCM size. Where it does not fit the
   ratio is shown without a goal.

Usage: python benchmarks/bench_schedule_quality.py [--graphs NAME ...] [--hw NAME ...]
Writes benchmarks/results/schedule_quality.json. Exit 0 (goals missed are reported, not errors),
1 if a simulation fails or its outputs differ from the reference executor's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import npu_sim  # noqa: E402
from benchmarks.common import goal_mark, table, write_result  # noqa: E402
from benchmarks.graphs import BenchGraph, benchmark_graphs, random_inputs  # noqa: E402
from npu_sim.errors import ProgramError  # noqa: E402
from npu_sim.hw.compute_units.mac_array import k_step_cycles, mac_array_cycles  # noqa: E402
from npu_sim.hw.config import HwConfig, load_hw_config  # noqa: E402
from npu_sim.program import MemorySpace  # noqa: E402
from npu_sim.tosa.ir import Block, Graph  # noqa: E402
from npu_sim.tosa.ops import Op  # noqa: E402

PRESETS = ("tiny", "edge", "server")
GOALS = {"cycles_over_roofline": 1.2, "peak_tcm_over_lower_bound": 1.05,
         "ddr_over_compulsory_when_fits": 1.1}
CONST_OPS = (Op.CONST, Op.CONST_SHAPE)
EPILOGUE_PRODUCERS = frozenset({Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.TRANSPOSE_CONV2D,
                                Op.MATMUL, Op.RESCALE})
EPILOGUE_OPS = frozenset({Op.RESCALE, Op.CLAMP})


# --- the graph's own figures (independent of the scheduler) -------------------------------

def mac_operations(graph: Graph) -> list[dict[str, Any]]:
    """One entry per MAC operator of every block: ``op``, input ``dtype``, ``macs``, ``m, n, k``."""
    found = []
    for block in graph.blocks():
        for operator in block.operators:
            dims = _mac_dims(block, operator)
            if dims is None:
                continue
            m, n, k = dims
            found.append({"op": operator.op.name, "dtype": block.tensor(operator.inputs[0]).dtype,
                          "macs": m * n * k, "m": m, "n": n, "k": k})
    return found


def _mac_dims(block: Block, operator) -> tuple[int, int, int] | None:
    """``(M, N, K)`` with ``M*N*K`` = the operator's multiply-accumulates, or None."""
    op = operator.op
    shape = lambda name: block.tensor(name).shape  # noqa: E731
    if op is Op.CONV2D:
        out, (_, kh, kw, ic) = shape(operator.outputs[0]), shape(operator.inputs[1])
        return out[0] * out[1] * out[2], out[3], kh * kw * ic
    if op is Op.CONV3D:
        out, (_, kd, kh, kw, ic) = shape(operator.outputs[0]), shape(operator.inputs[1])
        return out[0] * out[1] * out[2] * out[3], out[4], kd * kh * kw * ic
    if op is Op.DEPTHWISE_CONV2D:
        out, (kh, kw, _, _) = shape(operator.outputs[0]), shape(operator.inputs[1])
        return out[0] * out[1] * out[2], out[3], kh * kw
    if op is Op.TRANSPOSE_CONV2D:   # every input pixel meets every weight once
        inp, (oc, kh, kw, ic) = shape(operator.inputs[0]), shape(operator.inputs[1])
        return inp[0] * inp[1] * inp[2], oc, kh * kw * ic
    if op is Op.MATMUL:
        (n, h, c), w = shape(operator.inputs[0]), shape(operator.inputs[1])[2]
        return n * h, w, c
    return None


def compute_bound_cycles(operations: list[dict[str, Any]], hw: HwConfig) -> float | None:
    """``sum macs / macs_per_cycle[dtype]``; None if the array has no rate for some dtype."""
    total = 0.0
    for entry in operations:
        rate = hw.mac_array.macs_per_cycle.get(entry["dtype"].name.lower())
        if rate is None:
            return None
        total += entry["macs"] / rate
    return total


def array_bound_cycles(operations: list[dict[str, Any]], hw: HwConfig) -> int | None:
    """The systolic array's own cycles for each operator untiled (hardware model's fill/drain)."""
    try:
        return sum(mac_array_cycles(e["m"], e["n"], e["k"], hw.mac_array.rows, hw.mac_array.cols,
                                    k_step_cycles(hw, e["dtype"]), hw.mac_array.accumulator_buffers)
                   for e in operations)
    except ProgramError:   # the array has no rate for this dtype
        return None


def working_set_bytes(graph: Graph) -> int:
    """Most bytes of ``live activations + the operator's constants`` over the main block's operators.

    A MAC or RESCALE result whose only reader is a RESCALE or CLAMP (not a graph
    output) counts 0 bytes: that is the conv + rescale + clamp epilogue every NPU
    (and our scheduler's fusion) keeps inside the MAC pipeline.
    """
    block = graph.main
    ops = block.operators
    const_names = {name for o in ops if o.op in CONST_OPS for name in o.outputs}
    variables = {name for name, t in block.tensors.items() if t.variable}
    producer: dict[str, int] = {}
    readers: dict[str, list[int]] = {}
    for index, o in enumerate(ops):
        for name in o.inputs:
            readers.setdefault(name, []).append(index)
        for name in o.outputs:
            producer[name] = index
    fused = {name for name, index in producer.items()
             if ops[index].op in EPILOGUE_PRODUCERS and name not in block.outputs
             and len(readers.get(name, [])) == 1 and ops[readers[name][0]].op in EPILOGUE_OPS}
    group = list(range(len(ops)))   # a fused reader joins its producer's group
    for index, o in enumerate(ops):
        for name in o.inputs:
            if name in fused:
                group[index] = group[producer[name]]
    last_in_group: dict[int, int] = {}
    for index, g in enumerate(group):
        last_in_group[g] = index
    step = [last_in_group[g] for g in group]   # a group happens at its last operator
    activations = [name for name in list(block.inputs) + list(producer)
                   if name not in const_names and name not in variables and name not in fused]
    span: dict[str, tuple[int, int]] = {}
    for name in activations:
        start = step[producer[name]] if name in producer else -1
        end = max([step[i] for i in readers.get(name, [])] + [start])
        span[name] = (start, len(ops) if name in block.outputs else end)
    peak = 0
    for g, at in last_in_group.items():
        if ops[g].op in CONST_OPS:
            continue
        live = sum(block.tensor(n).size_bytes for n, (lo, hi) in span.items() if lo <= at <= hi)
        constants = {n for i, gi in enumerate(group) if gi == g for n in ops[i].inputs if n in const_names}
        peak = max(peak, live + sum(block.tensor(n).size_bytes for n in constants))
    return peak


def plan_tcm_check(program) -> tuple[int, int]:
    """``(footprint, most bytes live at one command)`` of the TCM, recomputed from the allocations.

    A cross-check of the scheduler's ``peak_tcm_bytes`` / ``tcm_lower_bound_bytes``
    plan stats; an allocation without first/last use lives over the whole program.
    """
    tcm = [a for a in program.allocations if a.memory is MemorySpace.TCM]
    footprint = max((a.offset_bytes + a.size_bytes for a in tcm), default=0)
    position = {cmd.id: i for i, cmd in enumerate(program.walk())}
    live = [0] * (len(position) + 1)
    for a in tcm:
        if a.first_use is None or a.last_use is None:
            first, last = 0, len(position) - 1
        else:
            first, last = sorted((position[a.first_use], position[a.last_use]))
        for i in range(first, last + 1):
            live[i] += a.size_bytes
    return footprint, max(live, default=0)


# --- one measurement ------------------------------------------------------------------------

def measure(bench: BenchGraph, graph: Graph, hw: HwConfig, inputs: dict[str, np.ndarray],
            expected: dict[str, np.ndarray]) -> dict[str, Any]:
    """Simulate ``graph`` on ``hw`` and compute the three ratios (see the module doc)."""
    start = time.perf_counter()
    result = npu_sim.simulate(graph, hw, inputs)
    wall = time.perf_counter() - start
    stats, summary = result.program.stats, result.summary
    outputs_match = all(np.array_equal(result.outputs[name], expected[name], equal_nan=True)
                        if result.outputs[name].dtype.kind == "f"
                        else np.array_equal(result.outputs[name], expected[name]) for name in expected)
    operations = mac_operations(graph)
    graph_macs = sum(e["macs"] for e in operations)
    compute = compute_bound_cycles(operations, hw)
    array = array_bound_cycles(operations, hw)
    compulsory = stats.compulsory_ddr_bytes
    ddr_cycles = compulsory / hw.ddr.bandwidth_bytes_per_cycle
    roofline = max(compute or 0.0, ddr_cycles)
    cycles = int(summary["total_cycles"])
    latency = hw.ddr.read_latency_cycles + hw.ddr.write_latency_cycles + 2 * hw.dma.setup_cycles
    ddr_bytes = int(summary["ddr_read_bytes"]) + int(summary["ddr_write_bytes"])
    working_set = working_set_bytes(graph)
    fits = working_set <= hw.tcm.size_bytes
    peak, bound = stats.peak_tcm_bytes, stats.tcm_lower_bound_bytes
    check_footprint, check_bound = plan_tcm_check(result.program)
    compact = stats.tcm_compact_bytes
    return {
        "graph": bench.name, "hw": hw.name, "outputs_match": outputs_match,
        "total_cycles": cycles, "graph_macs": graph_macs, "scheduled_macs": stats.macs,
        "simulated_macs": int(summary["macs"]),
        "compute_bound_cycles": compute, "array_bound_cycles": array,
        "ddr_bound_cycles": ddr_cycles, "roofline_cycles": roofline,
        "cycles_over_roofline": cycles / roofline if roofline else None,
        "cycles_over_array_roofline": cycles / max(array or 0, ddr_cycles) if roofline else None,
        "cycles_over_roofline_plus_latency": cycles / (roofline + latency),
        "bound": "compute" if (compute or 0) >= ddr_cycles else "ddr",
        "peak_tcm_bytes": peak, "tcm_lower_bound_bytes": bound,
        "peak_tcm_over_lower_bound": peak / bound if bound else None,
        "tcm_compact_bytes": compact,
        "compact_tcm_over_lower_bound": compact / bound if bound and compact is not None else None,
        "peak_live_tcm_bytes": int(summary["peak_live_tcm_bytes"]), "tcm_size_bytes": hw.tcm.size_bytes,
        "check_tcm_footprint_bytes": check_footprint, "check_tcm_live_bound_bytes": check_bound,
        "ddr_bytes": ddr_bytes, "ddr_read_bytes": int(summary["ddr_read_bytes"]),
        "ddr_write_bytes": int(summary["ddr_write_bytes"]),
        "compulsory_ddr_bytes": compulsory,
        "compulsory_ddr_read_bytes": stats.compulsory_ddr_read_bytes,
        "compulsory_ddr_write_bytes": stats.compulsory_ddr_write_bytes,
        "ddr_over_compulsory": ddr_bytes / compulsory if compulsory else None,
        "working_set_bytes": working_set, "fits": fits,
        "spilled_values": list(stats.spilled_values),
        "utilization": summary.get("utilization", {}),
        "busy_cycles": summary.get("busy_cycles", {}),
        "command_count": stats.command_count,
        "wall_seconds": wall,
    }


def _failure(bench: BenchGraph, hw: HwConfig, exc: Exception) -> dict[str, Any]:
    return {"graph": bench.name, "hw": hw.name, "error": f"{type(exc).__name__}: {exc}"}


# --- report ---------------------------------------------------------------------------------

def print_tables(rows: list[dict[str, Any]]) -> None:
    ok = [r for r in rows if "error" not in r]
    print("1. simulated cycles / roofline (goal <= 1.2); /array: systolic fill+drain included; "
          "/+lat: DDR latencies added")
    print(table(["graph", "hw", "MACs", "cycles", "compute", "ddr", "bound", "cyc/roof", "goal",
                 "/array", "/+lat"],
                [[r["graph"], r["hw"], r["graph_macs"], r["total_cycles"],
                  None if r["compute_bound_cycles"] is None else round(r["compute_bound_cycles"]),
                  round(r["ddr_bound_cycles"]), r["bound"], r["cycles_over_roofline"],
                  goal_mark(r["cycles_over_roofline"], GOALS["cycles_over_roofline"]),
                  r["cycles_over_array_roofline"], r["cycles_over_roofline_plus_latency"]] for r in ok]))
    print()
    print("2. peak TCM bytes / TCM lower bound (goal <= 1.05); compact: the planner's placement before "
          "the scheduler spreads buffers over spare TCM")
    print(table(["graph", "hw", "peak_tcm", "compact", "lower_bound", "peak/lb", "goal", "compact/lb", "goal",
                 "sim_peak_live", "tcm_size"],
                [[r["graph"], r["hw"], r["peak_tcm_bytes"], r["tcm_compact_bytes"], r["tcm_lower_bound_bytes"],
                  r["peak_tcm_over_lower_bound"],
                  goal_mark(r["peak_tcm_over_lower_bound"], GOALS["peak_tcm_over_lower_bound"]),
                  r["compact_tcm_over_lower_bound"],
                  goal_mark(r["compact_tcm_over_lower_bound"], GOALS["peak_tcm_over_lower_bound"]),
                  r["peak_live_tcm_bytes"], r["tcm_size_bytes"]] for r in ok]))
    print()
    print("3. DDR bytes / compulsory DDR bytes (goal <= 1.1 when the working set fits the TCM)")
    print(table(["graph", "hw", "ddr_bytes", "compulsory", "ratio", "working_set", "fits", "goal", "spilled"],
                [[r["graph"], r["hw"], r["ddr_bytes"], r["compulsory_ddr_bytes"], r["ddr_over_compulsory"],
                  r["working_set_bytes"], r["fits"],
                  goal_mark(r["ddr_over_compulsory"], GOALS["ddr_over_compulsory_when_fits"])
                  if r["fits"] else "n/a", len(r["spilled_values"])] for r in ok]))
    for r in ok:
        if not r["outputs_match"]:
            print(f"error: {r['graph']} on {r['hw']}: outputs differ from npu_sim.execute")
        if r["graph_macs"] != r["scheduled_macs"] or r["scheduled_macs"] != r["simulated_macs"]:
            print(f"warning: {r['graph']} on {r['hw']}: MACs in the graph {r['graph_macs']:,}, "
                  f"scheduled {r['scheduled_macs']:,}, simulated {r['simulated_macs']:,}")
        if (r["check_tcm_footprint_bytes"], r["check_tcm_live_bound_bytes"]) != \
                (r["peak_tcm_bytes"], r["tcm_lower_bound_bytes"]):
            print(f"warning: {r['graph']} on {r['hw']}: TCM footprint/bound from the allocations "
                  f"{r['check_tcm_footprint_bytes']:,}/{r['check_tcm_live_bound_bytes']:,} differ from "
                  f"the plan stats {r['peak_tcm_bytes']:,}/{r['tcm_lower_bound_bytes']:,}")
    for r in rows:
        if "error" in r:
            print(f"error: {r['graph']} on {r['hw']}: {r['error']}")
    misses = {key: sum(1 for r in ok if r.get(key) is not None and r[key] > goal)
              for key, goal in GOALS.items() if key != "ddr_over_compulsory_when_fits"}
    misses["compact_tcm_over_lower_bound"] = sum(
        1 for r in ok if r["compact_tcm_over_lower_bound"] is not None
        and r["compact_tcm_over_lower_bound"] > GOALS["peak_tcm_over_lower_bound"])
    misses["ddr_over_compulsory_when_fits"] = sum(
        1 for r in ok if r["fits"] and r["ddr_over_compulsory"] is not None
        and r["ddr_over_compulsory"] > GOALS["ddr_over_compulsory_when_fits"])
    print()
    print("goals missed: " + ", ".join(f"{k} {v}/{len(ok)}" for k, v in misses.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+", metavar="NAME", help="benchmark graphs (default: all)")
    parser.add_argument("--hw", nargs="+", default=list(PRESETS), metavar="NAME",
                        help="hardware presets or YAML paths (default: tiny edge server)")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    options = parser.parse_args(argv)
    configs = [load_hw_config(name) for name in options.hw]
    rows: list[dict[str, Any]] = []
    for bench in benchmark_graphs(options.graphs):
        graph = bench.load()
        inputs = random_inputs(graph, seed=0)
        expected = npu_sim.execute(graph, inputs)
        for hw in configs:
            try:
                rows.append(measure(bench, graph, hw, inputs, expected))
            except Exception as exc:  # reported, and the benchmark fails
                rows.append(_failure(bench, hw, exc))
    print_tables(rows)
    path = write_result("schedule_quality", {"goals": GOALS, "definitions": __doc__, "rows": rows},
                        options.out)
    print(f"results: {path}")
    failed = [r for r in rows if "error" in r or not r.get("outputs_match", False)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
