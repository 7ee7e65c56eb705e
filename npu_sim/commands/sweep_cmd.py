"""``npu-sim sweep SPEC.yaml -o DIR [--workers N] [--scheduler ADDRESS]``: a design-space sweep
(:mod:`npu_sim.sweep`) writing DIR/results.csv, DIR/pareto.png and DIR/report.html."""

from __future__ import annotations

from pathlib import Path

import typer

from npu_sim.sweep.run import run_sweep


def sweep(spec: str, out_dir: Path, workers: int | None, scheduler: str | None, progress: bool = True,
          allow_unpredictable: bool = False) -> None:
    """Run the sweep and print where its results are."""
    try:
        outcome = run_sweep(spec, out_dir, workers=workers, scheduler=scheduler, progress=progress,
                            allow_unpredictable=allow_unpredictable)
    except KeyboardInterrupt:
        typer.echo(f"interrupted: finished points are cached in {out_dir / 'cache'}; "
                   "run the same command again to resume", err=True)
        raise typer.Exit(130) from None
    ok = sum(1 for r in outcome.rows if r["status"] == "ok")
    front = sum(1 for r in outcome.rows if r["pareto"])
    rate = outcome.computed / outcome.seconds * 60 if outcome.seconds else 0.0
    typer.echo(f"{len(outcome.rows)} points: {ok} ok, {len(outcome.rows) - ok} error, {front} on the "
               f"Pareto front; {outcome.computed} run now ({rate:,.0f} points/min), the rest cached "
               f"or invalid; {outcome.seconds:.1f} s")
    typer.echo(f"results: {out_dir / 'results.csv'}, {out_dir / 'pareto.png'}, {out_dir / 'report.html'}")
