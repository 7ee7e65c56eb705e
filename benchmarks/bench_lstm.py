#!/usr/bin/env python3
"""LSTM streams on the simulated NPU: fused vs op-by-op cycles, DDR bytes per invocation,
and the wall time each extra invocation adds to ``npu-sim run``.

For every LSTM example (examples/lstm_*.tosa) on the ``edge`` preset:

* ``fused_cycles`` / ``op_by_op_cycles``: ``per_invocation_cycles`` of a steady-state
  invocation (``-n 4``) with the LSTM cells fused, and with ``--no-composite-fusion``;
  ``ratio`` = fused / op by op (goal: at most 0.6);
* ``preamble_cycles`` / ``preamble_ddr_bytes``: the constants loaded once into TCM;
* ``steady_ddr_bytes_per_invocation``: DDR bytes of ``-n 8`` minus those of ``-n 4``, over 4
  (goal: at most 2 KiB, so the weights must stay resident);

and for the one-step int8 example (lstm_step64_int8) the whole-process wall time of
``npu-sim run -n 1000`` minus that of ``-n 1``, per extra invocation, summary and reports
included (goal: at most 1 ms on the 2-core machine). Each run is a subprocess, as a user
runs it. Results: ``results/lstm.json``.

Usage: python benchmarks/bench_lstm.py [--long N] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NPU_SIM = [sys.executable, "-m", "npu_sim.cli"]
STEADY_DDR_GOAL_BYTES = 2048
WALL_GOAL_SECONDS = 1e-3


RATIO_GOAL = 0.6
LONG_RUN_MODEL = "lstm_step64_int8"


def run(graph: Path, invocations: int, out: Path, *extra: str) -> tuple[dict, float]:
    """The summary of ``npu-sim run GRAPH --hw edge -n N --random-inputs 1`` and its wall time."""
    start = time.perf_counter()
    subprocess.run([*NPU_SIM, "run", str(graph), "--hw", "edge", "-n", str(invocations),
                    "--random-inputs", "1", "-o", str(out), *extra], check=True, capture_output=True, cwd=ROOT)
    wall = time.perf_counter() - start
    return json.loads((out / "summary.json").read_text()), wall


def ddr_bytes(summary: dict) -> int:
    return summary["ddr_read_bytes"] + summary["ddr_write_bytes"]


def measure(graph: Path, work: Path) -> dict:
    four, _ = run(graph, 4, work / "n4")
    eight, _ = run(graph, 8, work / "n8")
    op_by_op, _ = run(graph, 4, work / "op", "--no-composite-fusion")
    steady = (ddr_bytes(eight) - ddr_bytes(four)) / 4
    fused_cycles, op_cycles = four["per_invocation_cycles"][-1], op_by_op["per_invocation_cycles"][-1]
    return {"fused_cycles": fused_cycles, "op_by_op_cycles": op_cycles, "ratio": round(fused_cycles / op_cycles, 3),
            "ratio_ok": fused_cycles <= RATIO_GOAL * op_cycles, "cells": len(four["fused_composites"]),
            "preamble_cycles": four["preamble_cycles"], "preamble_ddr_bytes": four["preamble_ddr_bytes"],
            "steady_ddr_bytes_per_invocation": steady, "steady_ddr_ok": steady <= STEADY_DDR_GOAL_BYTES}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--long", type=int, default=1000, help="invocations of the long run")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = ap.parse_args(argv)
    results: dict = {"hw": "edge", "ratio_goal": RATIO_GOAL, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for graph in sorted((ROOT / "examples").glob("lstm_*.tosa")):
            results["models"][graph.stem] = figures = measure(graph, work / graph.stem)
            print(f"{graph.stem}: {figures}")
        graph = ROOT / "examples" / f"{LONG_RUN_MODEL}.tosa"
        _, one = run(graph, 1, work / "n1")
        long_summary, many = run(graph, args.long, work / "long")
        per_extra = (many - one) / (args.long - 1)
        results["wall_per_extra_invocation_seconds"] = per_extra
        results["wall_goal_seconds"] = WALL_GOAL_SECONDS
        results["long_run_wall_seconds"] = long_summary.get("wall_seconds", {})
        print(f"wall per extra invocation ({LONG_RUN_MODEL}, -n {args.long} vs -n 1): {per_extra * 1e3:.2f} ms "
              f"(goal {WALL_GOAL_SECONDS * 1e3:.0f} ms); in-process parts of -n {args.long}: "
              f"{results['long_run_wall_seconds']}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "lstm.json").write_text(json.dumps(results, indent=2) + "\n")
    ok = all(m["steady_ddr_ok"] and m["ratio_ok"] for m in results["models"].values()) \
        and per_extra <= WALL_GOAL_SECONDS
    return 0 if ok else 2


if __name__ == "__main__":
    raise SystemExit(main())
