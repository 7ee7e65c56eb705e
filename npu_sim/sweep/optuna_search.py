"""``search: {method: optuna, points: N, seed: S}``: a multi-objective optuna study (NSGA-II,
minimising cycles, energy and area) chooses the points, in rounds of a few per worker; each
round runs like a grid sweep (same workers, same cache), so results.csv has the same columns.
optuna is an optional extra (``pip install 'npu-sim[optuna]'``)."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from npu_sim.sweep.points import PlannedPoint, SweepContext, plan_point
from npu_sim.sweep.runner import Row, run_points, worker_pool
from npu_sim.sweep.spec import SweepSpec, SweepSpecError, Value

OBJECTIVES = ("total_cycles", "energy_pj", "area_mm2")


def optuna_search(ctx: SweepContext, spec: SweepSpec, out_dir: Path, *, workers: int,
                  scheduler: str | None) -> tuple[list[PlannedPoint], dict[int, Row], int]:
    """The points the study tried (a point it proposes twice runs once), their figures, and
    how many ran now."""
    try:
        import optuna
    except ImportError:
        raise SweepSpecError("search.method optuna needs optuna: pip install 'npu-sim[optuna]'") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=["minimize"] * len(OBJECTIVES),
                                sampler=optuna.samplers.NSGAIISampler(seed=spec.search.seed))
    planned: list[PlannedPoint] = []
    rows: dict[int, Row] = {}
    round_size = max(1, workers) * 4
    pool = None if scheduler else worker_pool(ctx, workers)
    try:
        computed = _rounds(study, optuna, ctx, spec, out_dir, workers, scheduler, pool, planned, rows, round_size)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return planned, rows, computed


def _rounds(study: Any, optuna: Any, ctx: SweepContext, spec: SweepSpec, out_dir: Path, workers: int,
            scheduler: str | None, pool: ProcessPoolExecutor | None, planned: list[PlannedPoint],
            rows: dict[int, Row], round_size: int) -> int:
    """Ask, run and tell rounds of trials until the budget is spent or the space exhausted."""
    budget = spec.search.points or 1
    seen: dict[tuple[Any, ...], int] = {}
    computed = 0
    while len(planned) < budget:
        trials = [study.ask() for _ in range(min(round_size, budget - len(planned)))]
        fresh: list[PlannedPoint] = []
        trial_points = []
        for trial in trials:
            values: dict[str, Value] = {axis: _suggest(trial, axis, choices) for axis, choices in spec.axes.items()}
            key = tuple(values.values())
            if key not in seen:
                seen[key] = len(planned)
                point = plan_point(ctx, len(planned), values)
                planned.append(point)
                fresh.append(point)
            trial_points.append((trial, seen[key]))
        figures, ran = run_points(ctx, fresh, out_dir, workers=workers, scheduler=scheduler, progress=False,
                                  pool=pool)
        rows.update(figures)
        computed += ran
        for trial, index in trial_points:
            row = rows[index]
            if row["status"] == "ok":
                study.tell(trial, [float(row[o]) for o in OBJECTIVES])
            else:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
        if not fresh and len(seen) >= _space_size(spec):
            break   # every point of the space has been tried
    return computed


def _suggest(trial: Any, axis: str, choices: list[Value]) -> Value:
    value: Value = trial.suggest_categorical(axis, choices)
    return value


def _space_size(spec: SweepSpec) -> int:
    size = 1
    for values in spec.axes.values():
        size *= len(set(map(repr, values)))
    return size
