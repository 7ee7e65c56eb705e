"""``npu-sim compare A B``: two runs side by side, for "what did this change buy me".

The page leads with the answer (B's latency, energy and DDR traffic as multiples of A's),
then the headline figures of both with B/A, where the time goes in each, the per-operation
differences (operations matched by name and invocation; those only one run has are listed
too), both Gantts, both rooflines and both memory timelines. Reads only the two run
folders (:func:`reports.run_report.read_summary`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reports.gantt import gantt
from reports.html_page import Column, html_page, png_data_uri, sortable_table
from reports.human_units import cycles, human_bytes, percent
from reports.roofline import roofline
from reports.run_figures import Figure, headline_figures
from reports.run_report import read_summary
from reports.svg import BOUND_LABELS, esc
from reports.table import op_cycles
from reports.time_chart import bound_chart, bound_legend, unit_chart


def _label(run_dir: Path, summary: Mapping[str, Any]) -> str:
    return f"{Path(str(summary.get('graph', ''))).name} on {summary.get('hw_config', '')} ({run_dir.name})"


def compare_rows(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(figure, A, B, B/A) for each headline figure both runs have, in human units."""
    figures_b = {f.label: f for f in headline_figures(b)}
    return [(fa.label, fa.value, figures_b[fa.label].value, _ratio(fa, figures_b[fa.label]))
            for fa in headline_figures(a) if fa.label in figures_b]


def _ratio(a: Figure, b: Figure) -> str:
    if a.number is None or b.number is None or not a.number:
        return "-"
    return f"{b.number / a.number:.3g}"


def answer(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """One sentence: B's latency, energy and DDR bytes per inference as multiples of A's."""
    rows = {label: (x, y, ratio) for label, x, y, ratio in compare_rows(a, b)}
    parts = []
    for label, what in (("Latency", "latency"), ("Energy per inference", "energy per inference"),
                        ("DDR per inference", "DDR traffic per inference"), ("Peak TCM", "peak TCM")):
        if label in rows and rows[label][2] != "-":
            x, y, ratio = rows[label]
            parts.append(f"{what} {ratio}x ({x} -> {y})")
    return ("B against A: " + ", ".join(parts) + ".") if parts else "No figures in common."


def op_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[int, int],
                                                                         dict[int, int]]:
    """Rows matching the operations of A and B by (name, invocation): A's order, then those
    only B has; and each run's op index -> row index."""
    ops_a, ops_b = a.get("ops", []), b.get("ops", [])
    index_b = {(op.get("name"), op.get("invocation", 0)): j for j, op in enumerate(ops_b)}
    rows: list[dict[str, Any]] = []
    row_a: dict[int, int] = {}
    row_b: dict[int, int] = {}
    for i, op in enumerate(ops_a):
        j = index_b.pop((op.get("name"), op.get("invocation", 0)), None)
        row_a[i] = len(rows)
        if j is not None:
            row_b[j] = len(rows)
        rows.append(_difference(op, ops_b[j] if j is not None else None))
    for j in sorted(index_b.values()):
        row_b[j] = len(rows)
        rows.append(_difference(None, ops_b[j]))
    return rows, row_a, row_b


def _difference(op_a: Mapping[str, Any] | None, op_b: Mapping[str, Any] | None) -> dict[str, Any]:
    some = op_a or op_b
    assert some is not None
    row: dict[str, Any] = {"name": some.get("name", ""), "op": some.get("op", ""),
                           "invocation": some.get("invocation", 0),
                           "where": "both" if op_a and op_b else "A only" if op_a else "B only"}
    for side, op in (("a", op_a), ("b", op_b)):
        if op is not None:
            row[f"cycles_{side}"] = op_cycles(op)
            row[f"bound_{side}"] = BOUND_LABELS.get(op.get("bound", ""), op.get("bound", ""))
            row[f"unit_{side}"] = op.get("unit", "")
            row[f"ddr_{side}"] = op.get("ddr_read_bytes", 0) + op.get("ddr_write_bytes", 0)
    if op_a and op_b:
        row["delta"] = row["cycles_b"] - row["cycles_a"]
        row["ratio"] = row["cycles_b"] / row["cycles_a"] if row["cycles_a"] else ""
    return row


def _ops_section(rows: list[dict[str, Any]]) -> str:
    columns = [Column("name", "operation", False, width_px=220), Column("op", "op", False, width_px=110),
               Column("where", "in", False),
               Column("unit_a", "unit A", False), Column("unit_b", "unit B", False),
               Column("cycles_a", "cycles A", show=cycles), Column("cycles_b", "cycles B", show=cycles),
               Column("ratio", "B/A", show=lambda v: f"{v:.3g}"), Column("delta", "B-A", show=cycles),
               Column("bound_a", "bound A", False), Column("bound_b", "bound B", False),
               Column("ddr_a", "DDR A", show=human_bytes), Column("ddr_b", "DDR B", show=human_bytes)]
    return ("<h2>Operations, A against B</h2><p class='note'>Matched by name and invocation; cycles are each "
            "operation's busy cycles (its work). Click a header to sort (B-A to find what moved most).</p>"
            + sortable_table(columns, rows, table_id="ops", row_ids=[f"op-{r}" for r in range(len(rows))]))


def _figures_section(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    rows = [{"figure": label, "a": x, "b": y, "ratio": ratio} for label, x, y, ratio in compare_rows(a, b)]
    columns = [Column("figure", "figure", False), Column("a", "A", False), Column("b", "B", False),
               Column("ratio", "B/A", False)]
    return "<h2>Figures</h2>" + sortable_table(columns, rows, table_id="figures")


def _pair(title: str, a: str, b: str) -> str:
    return f"<h2>{esc(title)}</h2><div class='grid2'><div><h3>A</h3>{a}</div><div><h3>B</h3>{b}</div></div>"


def _timeline(run_dir: Path) -> str:
    path = run_dir / "memory_timeline.png"
    if not path.is_file():
        return "<p class='note'>No memory_timeline.png.</p>"
    return f"<img class='expandable' src='{png_data_uri(path)}' alt='memory timeline' title='click for full size'>"


def compare_page(dir_a: Path, dir_b: Path) -> str:
    """The HTML page comparing run folder B with run folder A."""
    a, b = read_summary(dir_a), read_summary(dir_b)
    rows, row_a, row_b = op_differences(a, b)

    def link_a(i: int) -> str:
        return f"op-{row_a[i]}"

    def link_b(j: int) -> str:
        return f"op-{row_b[j]}"

    subtitle = (f"A: {esc(_label(dir_a, a))}, {cycles(a['total_cycles'])} cycles; "
                f"B: {esc(_label(dir_b, b))}, {cycles(b['total_cycles'])} cycles.")
    sections = [
        f"<p class='answer'>{esc(answer(a, b))}</p>", _figures_section(a, b),
        _pair("Operation cycles by what bounds them", bound_chart(a), bound_chart(b)) + bound_legend(),
        _pair("Busy share of the run by unit", unit_chart(a), unit_chart(b)),
        _ops_section(rows),
        f"<h2>Timeline</h2><h3>A</h3>{gantt(a, link_a)}<h3>B</h3>{gantt(b, link_b)}",
        _pair("Roofline", roofline(a, link_a), roofline(b, link_b)),
        _pair("Memory timeline", _timeline(dir_a), _timeline(dir_b)),
        f"<p class='note'>MAC utilisation A {percent(a.get('mac_utilization', 0.0))}, "
        f"B {percent(b.get('mac_utilization', 0.0))}. Exact figures: each folder's summary.json.</p>",
    ]
    return html_page(f"Compare: {_label(dir_a, a)} vs {_label(dir_b, b)}", sections, subtitle)
