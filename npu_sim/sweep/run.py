"""A whole sweep: check the spec, load the graph and inputs once, run the points, write
results.csv, pareto.png and report.html into the output folder."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npu_sim.errors import NpuSimError
from npu_sim.hw.config import load_hw_config, raw_config_dict
from npu_sim.inputs import load_inputs
from npu_sim.sweep.optuna_search import optuna_search
from npu_sim.sweep.points import FIGURES, SweepContext, plan_point
from npu_sim.sweep.runner import default_workers, run_points
from npu_sim.sweep.spec import SweepSpec, SweepSpecError, grid_points, load_sweep_spec, sample_points
from npu_sim.tosa.loader import load_graph
from reports.sweep_report import pareto_flags, plot_pareto, write_results_csv, write_sweep_report


@dataclass
class SweepOutcome:
    rows: list[dict[str, Any]]
    computed: int    # points run now (the others were invalid configs or cached)
    seconds: float


def prepare(spec: SweepSpec, where: str) -> SweepContext:
    """The shared context; any problem with the graph, inputs or base config is a spec error."""
    try:
        graph = load_graph(spec.graph, level=spec.tosa_level)
        load_hw_config(spec.hw)
        base = raw_config_dict(spec.hw)
        stack = spec.invocations > 1
        specs = [f"{name}={file}" for name, file in spec.inputs.items()]
        loaded = load_inputs(graph, specs, invocations=spec.invocations if stack else None,
                             random_seed=spec.random_inputs)
        graph_bytes = Path(spec.graph).read_bytes()
    except NpuSimError as exc:
        raise SweepSpecError(f"{where}: {exc}") from None
    return SweepContext(graph_bytes, spec.graph, loaded.invocations, stack, base, spec.tosa_level,
                        spec.allow_unpredictable, spec.timing_only)


def choose_points(spec: SweepSpec) -> list[dict[str, Any]]:
    """Grid: the whole product; random: a seeded sample of it."""
    if spec.search.method == "random":
        return sample_points(spec.axes, spec.search.points or 1, spec.search.seed)
    return grid_points(spec.axes)


def run_sweep(spec_path: str | Path, out_dir: Path, *, workers: int | None = None,
              scheduler: str | None = None, progress: bool = True,
              allow_unpredictable: bool = False) -> SweepOutcome:
    """Run the sweep of ``spec_path`` into ``out_dir``; a bad spec raises before any point runs."""
    start = time.perf_counter()
    spec = load_sweep_spec(spec_path)
    spec.allow_unpredictable = spec.allow_unpredictable or allow_unpredictable
    if workers is not None and workers < 1:
        raise SweepSpecError(f"--workers must be at least 1, got {workers}")
    ctx = prepare(spec, str(spec_path))
    out_dir.mkdir(parents=True, exist_ok=True)
    if spec.search.method == "optuna":
        planned, figures, computed = optuna_search(ctx, spec, out_dir, workers=workers or default_workers(),
                                                   scheduler=scheduler)
    else:
        planned = [plan_point(ctx, i, v) for i, v in enumerate(choose_points(spec))]
        figures, computed = run_points(ctx, planned, out_dir, workers=workers or default_workers(),
                                       scheduler=scheduler, progress=progress)
    rows = [{"point": p.index, **p.values, **figures[p.index]} for p in planned]
    for row, flag in zip(rows, pareto_flags(rows)):
        row["pareto"] = flag
    axes = list(spec.axes)
    changed = write_results_csv(out_dir / "results.csv", rows, axes, FIGURES)
    if changed or not (out_dir / "pareto.png").is_file() or not (out_dir / "report.html").is_file():
        plot_pareto(out_dir / "pareto.png", rows)
        write_sweep_report(out_dir / "report.html", spec.model_dump(mode="json"), rows, axes, FIGURES,
                           out_dir / "pareto.png")
    return SweepOutcome(rows, computed, time.perf_counter() - start)

