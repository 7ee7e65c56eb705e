#!/usr/bin/env python3
"""Wall time each extra invocation adds to ``npu-sim run`` on a stream (issue 24, item 7).

For each model, ``npu-sim run MODEL --hw edge -n N -i INPUTS.npy -o OUT`` is run as a user runs
it (a subprocess: imports, conversion of a .tflite, scheduling, reports and summary.json
included), once with ``-n 1`` and once with ``-n --long`` (default 1000), on seeded random
inputs (``npu_sim.inputs``, seed 0) saved as .npy files. The figure is
``(wall(-n long) - wall(-n 1)) / (long - 1)``; each wall time is the best of ``--repeats``
runs (the machine is shared: the least disturbed run is the fairest). The in-process parts
of the long run (``wall_seconds`` of its summary.json: schedule, simulate, summary, reports)
are reported beside it. Goal: at most 1 ms per extra invocation. npu-sim's modules are
byte-compiled first, as an installed package's are (with ``PYTHONDONTWRITEBYTECODE`` every
process would otherwise compile them again: a fifth of a second of noise in each wall time).

Models: the stateful int8 LSTM converted from Keras (tests/data/tflite/lstm_stateful_int8.tflite,
the graph of examples/lstm_stateful_int8.tosa), the same kind of LSTM as TFLite writes it
without unrolling, a WHILE loop over the time steps with its state in resource variables
(tests/data/tflite/lstm_stateful_loop_int8.tflite), and the one-step int8 LSTM example
(examples/lstm_step64_int8.tosa).

Usage: python benchmarks/bench_streaming.py [--long N] [--repeats R] [--graphs NAME ...] [--out DIR].
Writes benchmarks/results/streaming.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_run_vs_vela import byte_compile  # noqa: E402
from benchmarks.common import ROOT, goal_mark, table, write_result  # noqa: E402
from npu_sim.api import load_graph  # noqa: E402
from npu_sim.inputs import load_inputs  # noqa: E402

NPU_SIM = [sys.executable, "-m", "npu_sim.cli"]
GOAL_SECONDS = 1e-3
MODELS = {
    "lstm_stateful_int8": ROOT / "tests" / "data" / "tflite" / "lstm_stateful_int8.tflite",
    "lstm_stateful_loop_int8": ROOT / "tests" / "data" / "tflite" / "lstm_stateful_loop_int8.tflite",
    "lstm_step64_int8": ROOT / "examples" / "lstm_step64_int8.tosa",
}


def input_file(model: Path, invocations: int, work: Path) -> Path:
    """The model's single input for ``invocations`` invocations (seed 0), as an .npy file."""
    graph = load_graph(model)
    loaded = load_inputs(graph, [], invocations=invocations, random_seed=0)
    (name,) = graph.input_types
    path = work / f"{model.stem}_{invocations}.npy"
    np.save(path, np.stack([inputs[name] for inputs in loaded.invocations]))
    return path


def wall(model: Path, invocations: int, inputs: Path, out: Path, repeats: int) -> tuple[float, dict]:
    """Best wall time of ``npu-sim run`` and the summary of its last run."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([*NPU_SIM, "run", str(model), "--hw", "edge", "-n", str(invocations), "-i", str(inputs),
                        "-o", str(out)], check=True, capture_output=True, cwd=ROOT)
        best = min(best, time.perf_counter() - start)
    return best, json.loads((out / "summary.json").read_text())


def measure(name: str, model: Path, long: int, repeats: int, work: Path) -> dict:
    one, _ = wall(model, 1, input_file(model, 1, work), work / f"{name}_1", repeats)
    many, summary = wall(model, long, input_file(model, long, work), work / f"{name}_{long}", repeats)
    per_extra = (many - one) / (long - 1)
    return {"model": str(model.relative_to(ROOT)), "wall_n1_seconds": one, f"wall_n{long}_seconds": many,
            "per_extra_invocation_seconds": per_extra, "goal_seconds": GOAL_SECONDS,
            "ok": per_extra <= GOAL_SECONDS, "long_run_wall_seconds": summary.get("wall_seconds", {}),
            "per_invocation_cycles": summary["per_invocation_cycles"][-1]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long", type=int, default=1000, help="invocations of the long run (default 1000)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per figure, the best kept (default 2)")
    parser.add_argument("--graphs", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--out", type=Path, default=None, help="where streaming.json goes")
    args = parser.parse_args(argv)
    results = {}
    byte_compile()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.graphs:
            results[name] = measure(name, MODELS[name], args.long, args.repeats, Path(tmp))
    rows = [[name, f"{r['wall_n1_seconds']:.2f}", f"{r[f'wall_n{args.long}_seconds']:.2f}",
             f"{r['per_extra_invocation_seconds'] * 1e3:.2f} {goal_mark(r['per_extra_invocation_seconds'] * 1e3, 1.0)}",
             ", ".join(f"{k} {v:.2f}" for k, v in r["long_run_wall_seconds"].items())]
            for name, r in results.items()]
    print(table(["model", "-n 1 (s)", f"-n {args.long} (s)", "ms per extra invocation (goal <= 1)",
                 f"in-process parts of -n {args.long} (s)"], rows))
    path = write_result("streaming", {"hw": "edge", "long": args.long, "repeats": args.repeats,
                                      "models": results}, args.out)
    print(f"wrote {path}")
    return 0 if all(r["ok"] for r in results.values()) else 2


if __name__ == "__main__":
    sys.exit(main())
