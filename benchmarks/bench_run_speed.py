#!/usr/bin/env python3
"""Speed of ``npu-sim run`` against Arm's TOSA reference model on the same graph and inputs.

For every benchmark graph (benchmarks/graphs.py) the graph's .tosa file (the example
file, or the conv CNN written by our flatbuffer writer) and seeded random inputs
(saved as .npy files, as a user would pass them with ``-i``) are given to both:

* the reference: ``tosa_reference_model.run(file bytes, inputs)`` (it parses the
  flatbuffer and runs the whole graph on every call);
* ours, ``run`` = the work of ``npu-sim run`` (:func:`npu_sim.commands.run_cmd.run_simulation`
  and the table it prints), stage by stage:
  ``load`` (hw config, graph file, input .npy files), ``schedule`` (compile to a Program),
  ``simulate`` (the event-driven simulation, real bytes), ``summary`` (summary dict),
  ``write`` (outputs/*.npy and summary.json), ``table`` (the per-operation table, printed
  into a string), then ``png`` (memory_timeline.png) and ``trace`` (trace.json).
  ``core`` = load + schedule + simulate + summary + write + table; ``full`` = core + png + trace.

Times are wall-clock seconds, the best of ``--repeats`` rounds (the machine may be
shared; the least disturbed round is the fairest figure for both sides; medians are in
the JSON), in this one process after a warm-up round (imports and caches excluded);
``core`` and ``full`` are the best per-round sums.
The outputs of both sides must agree exactly (a fast wrong answer cannot look good).
Goal: ``core / reference <= 1.0`` (``full`` is reported beside it). A second table
times one cold process each on the edge preset: ``npu-sim run`` (with its imports) and
a ``python -c`` that imports tosa_reference_model and runs the same file and inputs.

Usage: python benchmarks/bench_run_speed.py [--graphs NAME ...] [--hw NAME ...] [--repeats N]
       [--no-cold]. Needs tosa-tools (the test extra). Writes benchmarks/results/run_speed.json.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

try:
    import tosa_reference_model as trm
except ImportError as exc:  # pragma: no cover
    raise SystemExit(f"error: bench_run_speed needs tosa-tools (pip install -e '.[test]'): {exc}") from exc

from benchmarks.common import ROOT, goal_mark, reference_outputs, table, write_result  # noqa: E402
from benchmarks.graphs import BenchGraph, benchmark_graphs, random_inputs, tosa_file  # noqa: E402
from npu_sim.api import load_graph, load_hw_config  # noqa: E402
from npu_sim.inputs import load_inputs, output_file_names  # noqa: E402
from npu_sim.reference.executor import check_inputs  # noqa: E402
from npu_sim.simulation import compile_graph  # noqa: E402
from npu_sim.simulator import simulate_program  # noqa: E402
from npu_sim.tosa.ir import Graph  # noqa: E402
from reports.memory_timeline import plot_memory_timeline  # noqa: E402
from reports.perfetto import write_trace  # noqa: E402
from reports.summary import build_summary  # noqa: E402
from reports.table import print_report  # noqa: E402

PRESETS = ("tiny", "edge", "server")
GOAL = 1.0
CORE_STAGES = ("load", "schedule", "simulate", "summary", "write", "table")
REPORT_STAGES = ("png", "trace")


@contextlib.contextmanager
def quiet_fds() -> Iterator[None]:
    """Silence file descriptors 1 and 2 (the reference model warns about file versions on stdout)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)


def run_reference(binary: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    with quiet_fds():
        results, status = trm.run(binary, inputs)
    if status != trm.GraphStatus.TOSA_VALID:
        raise RuntimeError(f"reference model status {status.name}")
    return results


def run_stages(graph_path: Path, hw_name: str, specs: list[str], out_dir: Path,
               clock: Callable[[], float] = time.perf_counter) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Do what ``npu-sim run GRAPH --hw HW -i ... -o OUT`` does; seconds per stage and the outputs."""
    times: dict[str, float] = {}
    start = clock()
    hw = load_hw_config(hw_name)
    graph = load_graph(graph_path)
    loaded = load_inputs(graph, specs)
    times["load"] = clock() - start

    start = clock()
    checked = [check_inputs(graph, dict(inputs)) for inputs in loaded.invocations]
    program = compile_graph(graph, hw)
    times["schedule"] = clock() - start

    start = clock()
    result = simulate_program(program, hw, checked)
    times["simulate"] = clock() - start

    start = clock()
    summary = build_summary(result.trace, hw, program, graph=str(graph_path))
    times["summary"] = clock() - start

    start = clock()
    names = list(graph.output_types)
    files = output_file_names(names)
    (out_dir / "outputs").mkdir(parents=True, exist_ok=True)
    for name in names:
        np.save(out_dir / "outputs" / files[name], result.outputs[0][name], allow_pickle=False)
    summary["inputs"] = loaded.sources
    summary["outputs"] = {name: f"outputs/{files[name]}" for name in names}
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    times["write"] = clock() - start

    start = clock()
    from rich.console import Console

    print_report(summary, Console(file=io.StringIO(), width=132))
    times["table"] = clock() - start

    title = f"{graph_path.name} on {hw.name}"
    start = clock()
    plot_memory_timeline(result.trace, out_dir / "memory_timeline.png", tcm_size_bytes=hw.tcm.size_bytes,
                         title=title)
    times["png"] = clock() - start
    start = clock()
    write_trace(out_dir / "trace.json", result.trace, hw.clock_hz, program, title=title)
    times["trace"] = clock() - start
    return times, result.outputs[0]


def sample_times(fn: Callable[[], Any], repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def measure_graph(bench: BenchGraph, graph: Graph, hws: list[str], repeats: int, work: Path
                  ) -> list[dict[str, Any]]:
    """One row per hw config: stage medians, reference median, ratios, output agreement."""
    path = tosa_file(bench, work, graph)
    binary = path.read_bytes()
    inputs = random_inputs(graph, seed=0)
    specs = []
    for name, value in inputs.items():
        file = work / f"{bench.name}.{len(specs)}.npy"
        np.save(file, value, allow_pickle=False)
        specs.append(f"{name}={file}")
    ordered = list(inputs.values())
    types = list(graph.output_types.values())
    expected = reference_outputs(run_reference(binary, ordered), types)   # also the warm-up
    reference = sample_times(lambda: run_reference(binary, ordered), repeats)
    reference_s = min(reference)
    rows = []
    for hw in hws:
        out_dir = work / f"{bench.name}-{hw}"
        _, outputs = run_stages(path, hw, specs, out_dir)                   # warm-up
        match = all(np.array_equal(ours, ref) for ours, ref in zip(outputs.values(), expected))
        rounds = [run_stages(path, hw, specs, out_dir)[0] for _ in range(repeats)]
        stages = {k: min(r[k] for r in rounds) for k in CORE_STAGES + REPORT_STAGES}
        cores = [sum(r[k] for k in CORE_STAGES) for r in rounds]
        fulls = [sum(r.values()) for r in rounds]
        core, full = min(cores), min(fulls)
        rows.append({"graph": bench.name, "hw": hw, "outputs_match_reference": match,
                     "reference_s": reference_s, "stages_s": stages, "core_s": core, "full_s": full,
                     "core_over_reference": core / reference_s, "full_over_reference": full / reference_s,
                     "median": {"reference_s": statistics.median(reference),
                                "stages_s": {k: statistics.median(r[k] for r in rounds)
                                             for k in CORE_STAGES + REPORT_STAGES},
                                "core_s": statistics.median(cores), "full_s": statistics.median(fulls)},
                     "repeats": repeats,
                     "tosa_file": str(path.relative_to(ROOT)) if bench.path else "written by graphs.tosa_file"})
    return rows


def cold_processes(bench: BenchGraph, graph: Graph, work: Path) -> dict[str, Any]:
    """Wall time of one ``npu-sim run`` process and one reference-model process (edge preset)."""
    path = tosa_file(bench, work, graph)
    specs = sorted(work.glob(f"{bench.name}.*.npy"), key=lambda p: int(p.suffixes[-2][1:]))
    names = list(graph.input_types)
    env = dict(os.environ, MPLBACKEND="Agg")
    script = Path(sys.executable).with_name("npu-sim")     # the console script, if installed here
    launcher = [str(script)] if script.is_file() else [sys.executable, "-c", "from npu_sim.cli import run; run()"]
    ours_cmd = launcher + ["run", str(path), "--hw", "edge", "-o", str(work / f"{bench.name}-cold")]
    for name, file in zip(names, specs):
        ours_cmd += ["-i", f"{name}={file}"]
    reference_code = ("import sys, numpy as np, tosa_reference_model as trm; "
                      "r, s = trm.run(open(sys.argv[1], 'rb').read(), [np.load(f) for f in sys.argv[2:]]); "
                      "sys.exit(0 if s == trm.GraphStatus.TOSA_VALID else 3)")
    reference_cmd = [sys.executable, "-c", reference_code, str(path)] + [str(f) for f in specs]
    result: dict[str, Any] = {"graph": bench.name, "hw": "edge"}
    for key, cmd in (("npu_sim_run_s", ours_cmd), ("reference_s", reference_cmd)):
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        result[key] = time.perf_counter() - start
        if done.returncode != 0:
            result[key + "_error"] = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    result["ratio"] = result["npu_sim_run_s"] / result["reference_s"]
    return result


def print_tables(rows: list[dict[str, Any]], cold: list[dict[str, Any]]) -> None:
    def ms(seconds: float) -> float:   # milliseconds, 3 significant digits (at least 0.1 ms steps)
        value = seconds * 1e3
        return round(value, 1) if value >= 1 else float(f"{value:.3g}")

    print("npu-sim run (in process, best-of ms per stage) vs tosa_reference_model.run; goal core/ref <= 1.0")
    headers = ["graph", "hw", "ref"] + list(CORE_STAGES) + ["core", "png", "trace", "full",
                                                           "core/ref", "goal", "full/ref", "same"]
    print(table(headers, [
        [r["graph"], r["hw"], ms(r["reference_s"])] + [ms(r["stages_s"][k]) for k in CORE_STAGES]
        + [ms(r["core_s"]), ms(r["stages_s"]["png"]), ms(r["stages_s"]["trace"]), ms(r["full_s"]),
           r["core_over_reference"], goal_mark(r["core_over_reference"], GOAL), r["full_over_reference"],
           r["outputs_match_reference"]] for r in rows]))
    if cold:
        print()
        print("one cold process each (imports included), edge preset, ms")
        print(table(["graph", "npu-sim run", "reference", "ratio", "note"],
                    [[c["graph"], ms(c["npu_sim_run_s"]), ms(c["reference_s"]), c["ratio"],
                      c.get("npu_sim_run_s_error") or c.get("reference_s_error") or ""] for c in cold]))
    misses = [r for r in rows if r["core_over_reference"] > GOAL]
    print()
    print(f"goal core/ref <= {GOAL}: missed {len(misses)}/{len(rows)}; "
          f"full/ref <= {GOAL}: missed {sum(r['full_over_reference'] > GOAL for r in rows)}/{len(rows)}")
    for r in rows:
        if not r["outputs_match_reference"]:
            print(f"error: {r['graph']} on {r['hw']}: outputs differ from the reference model's")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+", metavar="NAME", help="benchmark graphs (default: all)")
    parser.add_argument("--hw", nargs="+", default=list(PRESETS), metavar="NAME")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-cold", action="store_true", help="skip the cold-process table")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    options = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    cold: list[dict[str, Any]] = []
    errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="npu-sim-bench-") as tmp:
        work = Path(tmp)
        for bench in benchmark_graphs(options.graphs):
            graph = bench.load()
            try:
                rows += measure_graph(bench, graph, options.hw, options.repeats, work)
                if not options.no_cold:
                    cold.append(cold_processes(bench, graph, work))
            except Exception as exc:  # reported; the benchmark fails
                errors.append(f"{bench.name}: {type(exc).__name__}: {exc}")
    print_tables(rows, cold)
    for error in errors:
        print(f"error: {error}")
    path = write_result("run_speed", {"goal": {"core_over_reference": GOAL}, "definitions": __doc__,
                                      "rows": rows, "cold_processes": cold, "errors": errors}, options.out)
    print(f"results: {path}")
    bad = errors or [r for r in rows if not r["outputs_match_reference"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
