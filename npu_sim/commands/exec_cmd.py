"""``npu-sim exec GRAPH [-i NAME=FILE.npy | -i FILE.npy]... [-n N] -o OUTDIR [--random-inputs SEED]``

Runs the graph in the bit-exact reference executor (no hardware model) and
writes ``OUTDIR/outputs/<name>.npy`` per graph output plus
``OUTDIR/summary.json``. With ``-n N`` the graph is invoked N times in one
Session (variables persist), invocation k reading slice k of every input
file; outputs are stacked along a new leading axis the same way.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import typer

from npu_sim.budget import check_host_memory, default_host_budget_bytes, parse_size_bytes
from npu_sim.commands.job_graph import load_job_graph
from npu_sim.commands.tosa_status import tosa_status_figures, warn_if_unpredictable
from npu_sim.errors import InputError
from npu_sim.inputs import load_inputs, output_file_names
from npu_sim.paths import check_output_dir, staged_output
from npu_sim.reference.session import Session
from npu_sim.reference.unpredictable import allowing_unpredictable
from npu_sim.run_limits import DEFAULT_LOOP_WORK_BYTES, DEFAULT_TIMEOUT_SECONDS, job_limits


def run_exec(graph_path: str, input_specs: list[str], out_dir: Path | str, *,
             invocations: int | None = None, random_seed: int | None = None,
             tosa_level: str = "8K", max_memory_bytes: int | None = None,
             input_shapes: list[str] | None = None, allow_unpredictable: bool = False) -> dict[str, Any]:
    """Do what ``npu-sim exec`` does; returns the summary written to ``summary.json``."""
    if invocations is not None and invocations < 1:
        raise InputError(f"-n must be at least 1, got {invocations}")
    check_output_dir(out_dir)
    graph = load_job_graph(graph_path, tosa_level, input_specs, invocations, input_shapes)
    check_host_memory(graph, max_memory_bytes or default_host_budget_bytes(), simulated=False)
    loaded = load_inputs(graph, input_specs, invocations=invocations, random_seed=random_seed)
    session = Session(graph, validate=False)   # load_graph validated it
    start = time.perf_counter()
    with allowing_unpredictable(allow_unpredictable) as log:
        results = [session.invoke(inputs) for inputs in loaded.invocations]
    total_seconds = time.perf_counter() - start

    names = list(graph.output_types)
    if invocations is None:
        outputs = results[0]
    else:
        outputs = {name: np.stack([r[name] for r in results]) for name in names}
    files = output_file_names(names)
    summary: dict[str, Any] = {
        "command": "exec",
        "graph": str(graph_path),
        "invocations": len(results),
        **tosa_status_figures(log),
        "inputs": loaded.sources,
        "outputs": {name: f"outputs/{files[name]}" for name in names},
        "output_types": {name: {"dtype": t.dtype.name, "shape": list(t.shape)}
                         for name, t in graph.output_types.items()},
        "timing": {
            "reference_seconds": total_seconds,
            "per_invocation_seconds": list(session.invocation_seconds),
        },
    }
    with staged_output(out_dir) as staging:
        (staging / "outputs").mkdir()
        for name in names:
            np.save(staging / "outputs" / files[name], outputs[name], allow_pickle=False)
        (staging / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def exec_graph(graph_path: str, input_specs: list[str], out_dir: Path | str, *, invocations: int | None = None,
               random_seed: int | None = None, tosa_level: str = "8K", max_memory: str | None = None,
               timeout_seconds: float | None = DEFAULT_TIMEOUT_SECONDS,
               max_loop_work_bytes: int = DEFAULT_LOOP_WORK_BYTES, input_shapes: list[str] | None = None,
               allow_unpredictable: bool = False) -> None:
    """``npu-sim exec``: run the graph, write its outputs and summary, say where."""
    max_memory_bytes = None if max_memory is None else parse_size_bytes(max_memory)
    with job_limits(timeout_seconds, max_loop_work_bytes):
        summary = run_exec(graph_path, input_specs, out_dir, invocations=invocations, random_seed=random_seed,
                           tosa_level=tosa_level, max_memory_bytes=max_memory_bytes, input_shapes=input_shapes,
                           allow_unpredictable=allow_unpredictable)
    warn_if_unpredictable(summary)
    seconds = summary["timing"]["reference_seconds"]
    out_dir = Path(out_dir)
    typer.echo(f"{summary['invocations']} invocation(s) in {seconds:.3f} s; "
               f"{len(summary['outputs'])} output(s) in {out_dir / 'outputs'}")
