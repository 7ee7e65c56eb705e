"""What a sweep writes: results.csv, the Pareto front of cycles, energy and area, pareto.png
and a self-contained report.html (images embedded, a sortable table, axis sensitivity)."""

from __future__ import annotations

import csv
import html
import io
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reports.html_page import html_page, html_table, png_data_uri

#: the objectives, all minimised
OBJECTIVES = ("total_cycles", "energy_pj", "area_mm2")


def pareto_flags(rows: Sequence[dict[str, Any]], objectives: Sequence[str] = OBJECTIVES) -> list[bool]:
    """True for each ok row no other ok row dominates (no worse in every objective, better in one)."""
    points = [tuple(float(r[o]) for o in objectives) if r.get("status") == "ok" else None for r in rows]
    flags = []
    for p in points:
        flags.append(p is not None and not any(
            q is not None and q != p and all(a <= b for a, b in zip(q, p)) for q in points))
    return flags


def write_results_csv(path: Path, rows: Sequence[dict[str, Any]], axes: Sequence[str],
                      figures: Sequence[str]) -> bool:
    """One row per point: point, the axes by dotted path, status, error, figures, pareto.
    Returns False if the file already held exactly these rows (nothing to redraw)."""
    columns = ["point", *axes, "status", "error", *figures, "pareto"]
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: _csv_value(row.get(c, "")) for c in columns})
    data = buffer.getvalue().encode()
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.write_bytes(data)
    return True


def _csv_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return value


def plot_pareto(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Cycles vs energy coloured by area, and cycles vs area; the front circled."""
    # matplotlib (0.2 s to import) only when a plot is drawn: a fully cached rerun skips it
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ok = [r for r in rows if r.get("status") == "ok"]
    fig, panels = plt.subplots(1, 2, figsize=(11, 4.5))
    pairs = (("total_cycles", "energy_pj"), ("total_cycles", "area_mm2"))
    for ax, (x, y) in zip(panels, pairs):
        if ok:
            scatter = ax.scatter([r[x] for r in ok], [r[y] for r in ok], c=[r["area_mm2"] for r in ok],
                                 cmap="viridis", s=18)
            front = sorted((r for r in ok if r["pareto"]), key=lambda r: r[x])
            ax.scatter([r[x] for r in front], [r[y] for r in front], s=70, facecolors="none",
                       edgecolors="red", label="Pareto front (cycles, energy, area)")
            ax.legend(loc="upper right", fontsize=8)
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.grid(alpha=0.3)
    if ok:
        fig.colorbar(scatter, ax=panels, label="area_mm2")
    fig.suptitle(f"{len(ok)} valid points of {len(rows)}")
    fig.savefig(path, dpi=90)
    plt.close(fig)


def sensitivity(rows: Sequence[dict[str, Any]], axes: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per axis and objective: the spread of the objective's mean over the axis's values,
    as a fraction of the overall mean (0: the axis does not matter)."""
    ok = [r for r in rows if r.get("status") == "ok"]
    result: dict[str, dict[str, float]] = {}
    for axis in axes:
        result[axis] = {}
        for objective in OBJECTIVES:
            groups: dict[str, list[float]] = {}
            for r in ok:
                groups.setdefault(str(r[axis]), []).append(float(r[objective]))
            means = [statistics.fmean(v) for v in groups.values()]
            overall = statistics.fmean(float(r[objective]) for r in ok) if ok else 0.0
            result[axis][objective] = (max(means) - min(means)) / overall if len(means) > 1 and overall else 0.0
    return result


def write_sweep_report(path: Path, spec: dict[str, Any], rows: Sequence[dict[str, Any]],
                       axes: Sequence[str], figures: Sequence[str], pareto_png: Path) -> None:
    """report.html: the spec, pareto.png, axis sensitivity and every point (the front first)."""
    ordered = sorted(rows, key=lambda r: (not r.get("pareto"), r["point"]))
    sens = sensitivity(rows, axes)
    sens_rows = [{"axis": a, **{o: round(v, 4) for o, v in sens[a].items()}} for a in axes]
    ok = sum(1 for r in rows if r.get("status") == "ok")
    sections = [
        f"<p>{len(rows)} points, {ok} ok, {len(rows) - ok} error, "
        f"{sum(1 for r in rows if r.get('pareto'))} on the Pareto front (highlighted). "
        "Click a column to sort.</p>",
        f"<h2>Spec</h2><pre>{html.escape(json.dumps(spec, indent=2))}</pre>",
        f"<h2>Pareto front</h2><img src='{png_data_uri(pareto_png)}' alt='pareto'>",
        "<h2>Sensitivity</h2><p>Spread of each objective's mean over an axis's values, relative to "
        "its overall mean.</p>" + html_table(["axis", *OBJECTIVES], sens_rows),
        "<h2>Points</h2>" + html_table(["point", *axes, "status", "error", *figures, "pareto"], ordered, "pareto"),
    ]
    path.write_text(html_page("npu-sim sweep", sections))

