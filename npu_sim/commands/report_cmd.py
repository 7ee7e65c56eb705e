"""``npu-sim report RUN_DIR`` (one run as a self-contained HTML page) and ``npu-sim compare
DIR_A DIR_B`` (two runs side by side: the figures printed with B/A, and a page)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from npu_sim.errors import PathError
from npu_sim.paths import write_atomically
from reports.compare_report import compare_page, compare_rows
from reports.run_report import read_summary, run_page

#: Where ``npu-sim compare`` writes its page unless told (in the working directory).
COMPARE_PAGE = Path("compare.html")


def write_page(target: Path, page: str, what: str) -> None:
    """Write an HTML page atomically; :class:`PathError` naming ``what`` if it cannot be."""
    if target.is_dir():
        raise PathError(f"{what} {str(target)!r}: is a directory; name the .html file")

    def write(temporary: Path) -> None:
        temporary.write_text(page, encoding="utf-8")

    write_atomically(target, write, what)


def report(run_dir: Path, out: Path | None) -> None:
    """Write the run's HTML page (default RUN_DIR/report.html) and say where."""
    target = out or run_dir / "report.html"
    page = run_page(run_dir)
    write_page(target, page, "-o" if out else "report")
    typer.echo(f"report: {target}")


def compare(dir_a: Path, dir_b: Path, out: Path | None = None) -> None:
    """Print the headline figures of two runs and B/A; write the comparison page."""
    a, b = read_summary(dir_a), read_summary(dir_b)
    target = out or COMPARE_PAGE
    page = compare_page(dir_a, dir_b)
    table = Table("figure", f"A: {dir_a}", f"B: {dir_b}", "B/A")
    for name, x, y, ratio in compare_rows(a, b):
        table.add_row(name, x, y, ratio)
    Console(width=max(100, len(str(dir_a)) + len(str(dir_b)) + 60)).print(table)
    write_page(target, page, "-o")
    typer.echo(f"compare: {target}")
