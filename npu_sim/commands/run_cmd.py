"""``npu-sim run`` (simulate a graph on a hardware config) and ``npu-sim plan`` (show its Program).

``npu-sim run GRAPH --hw CONFIG [-i NAME=FILE.npy | -i FILE.npy]... [-n N] [--random-inputs SEED] -o OUTDIR``
takes its inputs exactly as ``npu-sim exec`` does (:mod:`npu_sim.inputs`), schedules
the graph, simulates it, and writes into OUTDIR:

* ``outputs/<name>.npy``: the graph outputs read back from the simulated memories
  (stacked along a leading axis with ``-n``), named as ``exec`` names them;
* ``summary.json`` (:mod:`reports.summary`), ``memory_timeline.png``
  (:mod:`reports.memory_timeline`), ``trace.json`` for Perfetto (:mod:`reports.perfetto`);
  with ``--html`` also ``report.html`` (:mod:`reports.run_report`).

It prints the per-operation table and where the report is.

``npu-sim plan GRAPH --hw CONFIG`` prints the scheduler's Program (memory plan and
command stream) and the memory-plan statistics, without simulating.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import typer

from npu_sim import progress
from npu_sim.budget import check_host_memory, default_host_budget_bytes, parse_size_bytes
from npu_sim.commands.job_graph import load_job_graph
from npu_sim.commands.tosa_status import tosa_status_figures, warn_if_unpredictable
from npu_sim.errors import InputError
from npu_sim.gc_pause import gc_paused
from npu_sim.hw.config import HwConfig, load_hw_config, with_block_tensors, with_optimise
from npu_sim.inputs import load_inputs, output_file_names
from npu_sim.paths import check_output_dir, staged_output
from npu_sim.reference.unpredictable import allowing_unpredictable
from npu_sim.run_limits import DEFAULT_LOOP_WORK_BYTES, DEFAULT_TIMEOUT_SECONDS, job_limits
from npu_sim.simulation import compiled_program, simulate_invocations, verify_plan
from reports.memory_timeline import plot_memory_timeline
from reports.ops_json import ops_rows_pieces
from reports.perfetto import write_trace
from reports.plan_stats import format_plan_stats, plan_stats
from reports.table import print_report

REPORT_FILES = ("summary.json", "memory_timeline.png", "trace.json")
#: The timeline and the Perfetto trace of a long stream draw its first invocations only
#: (the summary covers all of them): drawing thousands of identical invocations costs
#: milliseconds each and shows nothing the first ones do not.
REPORT_INVOCATIONS_DRAWN = 16


def run_simulation(graph_path: str, hw_config: str, input_specs: list[str], out_dir: Path | str, *,
                   invocations: int | None = None, random_seed: int | None = None,
                   spread_tcm: bool = False, verify: bool = False,
                   tosa_level: str = "8K", max_memory_bytes: int | None = None,
                   input_shapes: list[str] | None = None, allow_unpredictable: bool = False,
                   composite_fusion: bool = True, html: bool = False, strict_npu: bool = False,
                   timing_only: bool = False, block_tensors: bool = True,
                   optimise: str | None = None, use_cache: bool = True) -> dict[str, Any]:
    """Do what ``npu-sim run`` does; returns the summary written to ``summary.json``.

    Everything that can be checked before the work is: ``-o``, the config, the graph, the
    NPU's and the host's memory budgets, the inputs. The files are written all at once.
    ``timing_only`` (``--timing-only``): the same figures without computing a value, so no
    ``outputs/`` (see :func:`npu_sim.simulation.simulate_invocations`); ``optimise``
    (``--optimise``): the config's ``stripes.optimise`` overridden (None: as it says); ``use_cache``
    (off with ``--no-cache``): reuse a cached conversion of a ``.tflite`` and a cached Program
    (:mod:`npu_sim.program_cache`)."""
    if invocations is not None and invocations < 1:
        raise InputError(f"-n must be at least 1, got {invocations}")
    check_output_dir(out_dir)
    hw = with_optimise(with_block_tensors(with_strict_npu(load_hw_config(hw_config), strict_npu), block_tensors),
                       optimise)
    progress.stage("reading the graph")
    graph = load_job_graph(graph_path, tosa_level, input_specs, invocations, input_shapes, use_cache=use_cache)
    budget = max_memory_bytes or default_host_budget_bytes()
    check_host_memory(graph, budget, simulated=True)
    loaded = load_inputs(graph, input_specs, invocations=invocations, random_seed=random_seed)
    with allowing_unpredictable(allow_unpredictable) as log:
        result = simulate_invocations(graph, hw, loaded.invocations, graph_label=str(graph_path),
                                      stack=invocations is not None, spread_tcm=spread_tcm,
                                      verify=verify, validate=False,   # load_graph validated it
                                      max_memory_bytes=budget, host_memory_checked=True,
                                      composite_fusion=composite_fusion, timing_only=timing_only,
                                      use_cache=use_cache)

    start = time.perf_counter()
    progress.stage("writing the outputs and reports")
    names = list(graph.output_types)
    files = output_file_names(names)
    summary = result.summary
    summary.update(tosa_status_figures(log))
    summary["inputs"] = loaded.sources
    summary["outputs"] = {} if result.summary["timing_only"] else \
        {name: f"outputs/{files[name]}" for name in names}
    title = f"{Path(graph_path).name} on {hw.name}"
    drawn = result.trace.head(REPORT_INVOCATIONS_DRAWN)
    if len(drawn.invocations) < len(result.trace.invocations):
        title += f" (first {len(drawn.invocations)} of {len(result.trace.invocations)} invocations)"
    summary["report_invocations_drawn"] = len(drawn.invocations)
    with staged_output(out_dir) as staging:
        if summary["outputs"]:
            (staging / "outputs").mkdir()
        for name in summary["outputs"]:
            np.save(staging / "outputs" / files[name], result.outputs[name], allow_pickle=False)
        plot_memory_timeline(drawn, staging / "memory_timeline.png",
                             tcm_size_bytes=hw.tcm.size_bytes, title=title)
        write_trace(staging / "trace.json", drawn, hw.clock_hz, result.program, title=title)
        summary["wall_seconds"]["reports"] = time.perf_counter() - start
        summary["report_files"] = list(REPORT_FILES) + (["report.html"] if html else [])
        (staging / "summary.json").write_text(summary_json(summary))
        if html:
            (staging / "report.html").write_text(_run_page(staging), encoding="utf-8")
    return summary


def _run_page(run_dir: Path) -> str:
    """The run page (``--html``) of the run folder ``run_dir``. Its modules (charts, HTML) are
    imported only then: a plain ``run`` does not load them."""
    from reports.run_report import run_page

    return run_page(run_dir)


def with_strict_npu(hw: HwConfig, strict: bool) -> HwConfig:
    """``hw``, refusing CPU fallbacks if ``strict`` (``--strict-npu``: an operator the NPU cannot
    run is an error naming it, as ``npu_support.strict`` in the config)."""
    if not strict:
        return hw
    return hw.model_copy(update={"npu_support": hw.npu_support.model_copy(update={"strict": True})})


#: Above this many ``ops`` rows, summary.json writes one row per line (the indented form
#: needs json's pure-Python encoder: seconds for the rows of a long stream).
OPS_ROWS_INDENTED_MAX = 512


def summary_json(summary: dict[str, Any]) -> str:
    """The text of summary.json: indented; a long ``ops`` list one compact row per line."""
    ops = summary.get("ops")
    if not isinstance(ops, list) or len(ops) <= OPS_ROWS_INDENTED_MAX:
        return json.dumps(summary, indent=2) + "\n"
    marker = "\u0000ops\u0000"
    head, tail = json.dumps({**summary, "ops": marker}, indent=2).split(json.dumps(marker), 1)
    return "".join([head, "[\n    ", *ops_rows_pieces(ops), "\n  ]", tail, "\n"])   # (one copy of megabytes)


def plan_text(graph_path: str, hw_config: str, *, spread_tcm: bool = False,
              verify: bool = False, tosa_level: str = "8K",
              input_shapes: list[str] | None = None, composite_fusion: bool = True,
              strict_npu: bool = False, block_tensors: bool = True,
              optimise: str | None = None, use_cache: bool = True) -> tuple[str, dict[str, Any]]:
    """The Program listing and the memory-plan statistics of ``npu-sim plan``."""
    hw = with_optimise(with_block_tensors(with_strict_npu(load_hw_config(hw_config), strict_npu), block_tensors),
                       optimise)
    graph = load_job_graph(graph_path, tosa_level, input_shape_specs=input_shapes, use_cache=use_cache)
    with gc_paused():
        program, _ = compiled_program(graph, hw, use_cache=use_cache, spread_tcm=spread_tcm,
                                      composite_fusion=composite_fusion)
        if verify:
            verify_plan(program)
    stats = plan_stats(program, hw)
    stats["graph"] = str(graph_path)
    return program.listing(), stats


def run_graph(graph_path: str, hw_config: str, input_specs: list[str], out_dir: Path | str, *,
              invocations: int | None = None, random_seed: int | None = None, spread_tcm: bool = False,
              verify: bool = False, tosa_level: str = "8K", max_memory: str | None = None,
              timeout_seconds: float | None = DEFAULT_TIMEOUT_SECONDS,
              max_loop_work_bytes: int = DEFAULT_LOOP_WORK_BYTES, input_shapes: list[str] | None = None,
              allow_unpredictable: bool = False, composite_fusion: bool = True, html: bool = False,
              strict_npu: bool = False, timing_only: bool = False, block_tensors: bool = True,
              optimise: str | None = None, use_cache: bool = True) -> None:
    """``npu-sim run``: simulate, write the outputs and reports, print the per-operation table."""
    max_memory_bytes = None if max_memory is None else parse_size_bytes(max_memory)
    # (the collector stays paused to the end: its first passes after the simulation's pause
    # would scan every object the run made, a second of a large model's run, to find nothing)
    with job_limits(timeout_seconds, max_loop_work_bytes), progress.showing(), gc_paused():
        summary = run_simulation(graph_path, hw_config, input_specs, out_dir, invocations=invocations,
                                 random_seed=random_seed, spread_tcm=spread_tcm, verify=verify,
                                 tosa_level=tosa_level, max_memory_bytes=max_memory_bytes,
                                 input_shapes=input_shapes, allow_unpredictable=allow_unpredictable,
                                 composite_fusion=composite_fusion, html=html, strict_npu=strict_npu,
                                 timing_only=timing_only, block_tensors=block_tensors, optimise=optimise,
                                 use_cache=use_cache)
    warn_if_unpredictable(summary)
    print_report(summary)
    out_dir = Path(out_dir)
    page = f"{out_dir / 'report.html'}, " if html else ""
    typer.echo(f"report: {page}{out_dir / 'summary.json'}, {out_dir / 'memory_timeline.png'}, "
               f"{out_dir / 'trace.json'} (open in https://ui.perfetto.dev); "
               + (f"outputs in {out_dir / 'outputs'}" if summary["outputs"] else
                  "no outputs (timing only: no value was computed)"))


def plan_graph(graph_path: str, hw_config: str, as_json: bool, *, spread_tcm: bool = False,
               verify: bool = False, tosa_level: str = "8K",
               timeout_seconds: float | None = DEFAULT_TIMEOUT_SECONDS,
               input_shapes: list[str] | None = None, composite_fusion: bool = True,
               strict_npu: bool = False, block_tensors: bool = True, optimise: str | None = None,
               use_cache: bool = True) -> None:
    """``npu-sim plan``: print the Program listing and the plan statistics (or only these, as JSON)."""
    with job_limits(timeout_seconds), progress.showing():
        listing, stats = plan_text(graph_path, hw_config, spread_tcm=spread_tcm, verify=verify,
                                   tosa_level=tosa_level, input_shapes=input_shapes,
                                   composite_fusion=composite_fusion, strict_npu=strict_npu,
                                   block_tensors=block_tensors, optimise=optimise, use_cache=use_cache)
    if as_json:
        typer.echo(json.dumps(stats, indent=2))
        return
    typer.echo(listing)
    typer.echo("")
    typer.echo(format_plan_stats(stats))
