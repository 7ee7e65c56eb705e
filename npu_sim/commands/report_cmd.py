"""``npu-sim report RUN_DIR`` (one run as a self-contained HTML page) and ``npu-sim compare
DIR_A DIR_B`` (two runs' figures side by side, with ratios)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from reports.run_report import compare_rows, read_summary, run_page


def report(run_dir: Path, out: Path | None) -> None:
    """Write the run's HTML page (default RUN_DIR/report.html) and say where."""
    target = out or run_dir / "report.html"
    target.write_text(run_page(run_dir))
    typer.echo(f"report: {target}")


def compare(dir_a: Path, dir_b: Path) -> None:
    """Print the headline figures of two runs and B/A."""
    a, b = read_summary(dir_a), read_summary(dir_b)
    table = Table("figure", str(dir_a), str(dir_b), "B/A")
    for name, x, y, ratio in compare_rows(a, b):
        table.add_row(name, _fmt(x), _fmt(y), ratio)
    Console(width=max(100, len(str(dir_a)) + len(str(dir_b)) + 50)).print(table)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return f"{value:,}" if isinstance(value, int) else str(value)
