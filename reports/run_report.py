"""``report.html`` of one run (``npu-sim report RUN_DIR``, ``npu-sim run --html``): the page an
architect opens first. It leads with the answer (latency, what bounds the time, the busiest
unit), then the headline figures in human units, where the time goes, the per-operation
Gantt and sortable table, the roofline, the memory timeline with the tensors live at the
TCM peak, and energy and area.

Reads only what ``npu-sim run`` wrote (summary.json, memory_timeline.png): a page can be
made again from a saved run folder. Self-contained (:mod:`reports.html_page`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from npu_sim.errors import InputError
from reports.gantt import gantt
from reports.html_page import Column, html_page, png_data_uri, sortable_table
from reports.human_units import cycles, energy, human_bytes, percent
from reports.roofline import roofline, roofs
from reports.run_figures import Figure, answer, headline_figures
from reports.svg import BOUND_LABELS, PALETTE, Bar, bar_chart, esc
from reports.table import op_cycles
from reports.time_chart import bound_chart, bound_legend, op_row_id, top_operations_chart, unit_chart

#: How the table names the bounds (short: the table is wide).
TABLE_BOUNDS = {"compute": "compute", "memory": "memory", "setup_latency": "setup/lat."}
#: Rows of the per-operation table (a stream of many invocations: the first ones).
MAX_TABLE_ROWS = 20_000


def read_summary(run_dir: Path) -> dict[str, Any]:
    """The summary.json of a run folder; :class:`InputError` when it is not one."""
    path = run_dir / "summary.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        raise InputError(f"{run_dir}: not an npu-sim run folder (no readable summary.json)") from None
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(data, dict) and data.get("command") == "exec":
        raise InputError(f"{path}: the summary of npu-sim exec, which times nothing; the page needs npu-sim run")
    if not isinstance(data, dict) or not isinstance(data.get("total_cycles"), int):
        raise InputError(f"{path}: not the summary of npu-sim run (no total_cycles)")
    _check_ops(path, data.get("ops", []))
    return data


def _check_ops(path: Path, ops: Any) -> None:
    if not isinstance(ops, list):
        raise InputError(f"{path}: ops is not a list")
    for i, op in enumerate(ops):
        if not isinstance(op, dict) or not all(isinstance(op.get(k), int) for k in ("start_cycle", "end_cycle")):
            raise InputError(f"{path}: ops[{i}] is not an operation row (name, start_cycle, end_cycle, ...)")


def figure_cards(figures: list[Figure]) -> str:
    return '<div class="cards">' + "".join(
        f'<div class="card{" warn" if f.warn else ""}"><div class="label">{esc(f.label)}</div>'
        f'<div class="value">{esc(f.value)}</div><div class="detail">{esc(f.detail)}</div></div>'
        for f in figures) + "</div>"


def time_section(summary: Mapping[str, Any]) -> str:
    """Where the time goes: by bound, by unit, the longest operations."""
    by_bound = summary.get("time_breakdown", {}).get("by_bound", {})
    shares = ", ".join(f"{BOUND_LABELS.get(b, b)}-bound {percent(info.get('share', 0.0))}"
                       for b, info in by_bound.items())
    return ("<h2>Where the time goes</h2><div class='grid2'><div><h3>Operation cycles by what bounds them</h3>"
            f"{bound_chart(summary)}<p class='note'>Share of cycles by bound: {esc(shares)}. Each operation's "
            "busy cycles split into compute bodies, DMA data phases (memory) and command setups plus DMA "
            "latency; shares of their sum.</p></div>"
            f"<div><h3>Busy share of the run by unit</h3>{unit_chart(summary)}</div></div>"
            f"<h3>Longest operations (click one for its row)</h3>{top_operations_chart(summary)}{bound_legend()}")


def _mac_peak(summary: Mapping[str, Any]) -> float:
    found = roofs(summary.get("hw") or {})
    return found.compute[0].macs_per_cycle if found else 0.0


def op_rows(summary: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The table rows of ``ops`` (with share, bytes and utilisation) and their CSS classes."""
    per = summary.get("per_invocation_cycles") or [summary.get("total_cycles", 0)]
    peak = _mac_peak(summary)
    composite = {name: c.get("kind", "composite") for c in summary.get("fused_composites") or []
                 if isinstance(c, dict) for name in c.get("operations", [])}
    cpu = {str(c.get("name")) for c in summary.get("cpu_ops") or [] if isinstance(c, dict)}
    rows, classes = [], []
    for i, op in enumerate(summary.get("ops", [])[:MAX_TABLE_ROWS]):
        kind = composite.get(op.get("name", ""))
        on_cpu = op.get("unit") == "cpu" or op.get("name") in cpu
        rows.append(_op_row(i, op, per, peak, (kind, len(op.get("graph_ops", [])), on_cpu)))
        classes.append("composite" if kind else "cpu" if on_cpu else "")
    return rows, classes


def _op_row(index: int, op: Mapping[str, Any], per_invocation: list[int], mac_peak: float,
            tags: tuple[str | None, int, bool]) -> dict[str, Any]:
    work = op_cycles(op)
    inv = op.get("invocation", 0)
    inference = per_invocation[inv] if 0 <= inv < len(per_invocation) else 0   # the preamble (-1): none
    macs = op.get("macs", 0)
    return {**op, "index": index, "cycles": work, "share": work / inference if inference else "",
            "span_cycles": op["end_cycle"] - op["start_cycle"],
            "ddr_bytes": op.get("ddr_read_bytes", 0) + op.get("ddr_write_bytes", 0),
            "mac_utilization": macs / (work * mac_peak) if macs and work and mac_peak else "",
            "label": (op.get("name", ""), tags)}


def _invocation(index: int) -> str:
    return "preamble" if index < 0 else str(index)


def _label(label: tuple[str, tuple[str | None, int, bool]]) -> str:
    """An operation's name with its marks: a fused composite, operators fused, on the host CPU."""
    name, (kind, fused, on_cpu) = label
    out = esc(name) + (f' <span class="tag">composite: {esc(kind)}</span>' if kind else "")
    out += f' <span class="tag">{fused} fused</span>' if fused > 1 and not kind else ""
    return out + (' <span class="tag cpu">CPU</span>' if on_cpu else "")


def ops_section(summary: Mapping[str, Any]) -> str:
    rows, classes = op_rows(summary)
    several = summary.get("invocations", 1) > 1
    columns = [Column("index", "#"), Column("label", "operation", False, _label, markup=True, width_px=210,
                                            sort_key=lambda label: label[0]),
               Column("op", "op", False, width_px=110),
               Column("unit", "unit", False),
               *([Column("invocation", "inv.", show=_invocation)] if several else []),
               Column("start_cycle", "start", show=cycles), Column("cycles", "cycles", show=cycles),
               Column("share", "share", show=percent), Column("span_cycles", "span", show=cycles),
               Column("bound", "bound", False, lambda b: TABLE_BOUNDS.get(b, str(b))),
               Column("macs", "MACs", show=cycles), Column("mac_utilization", "MAC util.", show=percent),
               Column("ddr_read_bytes", "DDR read", show=human_bytes),
               Column("ddr_write_bytes", "DDR write", show=human_bytes),
               Column("dma_cycles", "DMA", show=cycles), Column("compute_cycles", "compute", show=cycles)]
    total = len(summary.get("ops", []))
    cut = (f" The first {MAX_TABLE_ROWS:,} of {total:,} rows; all are in summary.json."
           if total > MAX_TABLE_ROWS else "")
    return ("<h2>Operations</h2><p class='note'>One row per operation"
            + (" and invocation" if several else "") + " in summary.json. <b>cycles</b>: the cycles in which "
            "one of its commands kept a unit busy (its work); <b>share</b>: of its inference; <b>span</b>: first "
            "start to last end, idle gaps included; <b>MAC util.</b>: MACs per busy cycle over the array's "
            "highest rate; <b>DMA</b>, <b>compute</b>: its DMA and compute commands' busy cycles summed. Click a "
            f"header to sort.{cut}</p>"
            + sortable_table(columns, rows, table_id="ops", row_ids=[op_row_id(r["index"]) for r in rows],
                             row_classes=classes))


def memory_section(run_dir: Path, summary: Mapping[str, Any]) -> str:
    timeline = run_dir / "memory_timeline.png"
    image = (f"<div class='imgbox'><img class='expandable' src='{png_data_uri(timeline)}' alt='memory timeline' "
             "title='click for full size'></div>" if timeline.is_file()
             else "<p class='note'>No memory_timeline.png in this folder.</p>")
    peak = summary.get("tcm_peak") or {}
    tensors = peak.get("tensors", [])
    total = peak.get("bytes", 0)
    rows = [{**t, "share": t["size_bytes"] / total if total else 0.0,
             "live": f"{t['first_cycle']:,} - {t['last_cycle']:,}"} for t in tensors]
    columns = [Column("name", "tensor", False), Column("kind", "kind", False),
               Column("size_bytes", "size", show=human_bytes), Column("share", "of the peak", show=percent),
               Column("offset_bytes", "offset", show=cycles), Column("live", "live (cycles)", False)]
    more = f" and {peak['more']} smaller ones" if peak.get("more") else ""
    kinds = ", ".join(f"{kind} {human_bytes(size)} ({percent(size / total)})"
                      for kind, size in (peak.get("by_kind") or {}).items()) if total else ""
    table = (f"<h3>Tensors in the TCM at its peak: {human_bytes(total)} at cycle {peak.get('cycle', 0):,}{more}</h3>"
             + (f"<p class='note'>By kind: {kinds}.</p>" if kinds else "")
             + sortable_table(columns, rows, table_id="peak-tensors") if tensors else "")
    return ("<h2>Memory timeline</h2><p class='note'>TCM address map over time (top) and bytes in use (bottom); "
            f"click the image for full size.</p>{image}{table}")


def breakdown_section(summary: Mapping[str, Any]) -> str:
    charts = []
    for key, what, show in (("energy_breakdown_pj", "Energy", energy),
                            ("area_breakdown_mm2", "Area", lambda v: f"{v:.3g} mm2")):
        parts = summary.get(key) or {}
        total = sum(parts.values())
        if not total:
            continue
        bars = [Bar(name, [(value / total, PALETTE[i % len(PALETTE)], f"{name}: {value:g}")],
                    f"{show(value)} · {percent(value / total)}") for i, (name, value) in enumerate(parts.items())]
        charts.append(f"<div><h3>{what} by part</h3>{bar_chart(bars, label=what)}</div>")
    return f"<h2>Energy and area</h2><div class='grid2'>{''.join(charts)}</div>" if charts else ""


def cpu_section(summary: Mapping[str, Any]) -> str:
    rows = [r for r in summary.get("cpu_ops") or [] if isinstance(r, dict)]
    if not rows:
        return ""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    columns = [Column(k, k, isinstance(rows[0].get(k), (int, float)),
                      cycles if isinstance(rows[0].get(k), int) else str) for k in keys]
    return ("<h2>Operators on the host CPU</h2><p class='note'>Operators the NPU of this preset cannot run.</p>"
            + sortable_table(columns, [{k: (v if isinstance(v, (int, float, str)) else json.dumps(v))
                                        for k, v in r.items()} for r in rows], table_id="cpu-ops"))


def run_page(run_dir: Path) -> str:
    """The HTML page of one run folder."""
    s = read_summary(run_dir)
    graph = Path(str(s.get("graph", ""))).name or "graph"
    subtitle = (f"{esc(s.get('graph', ''))} on {esc(s.get('hw_config', ''))}, {s.get('invocations', 1)} "
                f"invocation(s), {cycles(s['total_cycles'])} cycles. Exact figures: summary.json; every "
                "command: trace.json (open in ui.perfetto.dev).")
    sections = [f"<p class='answer'>{esc(answer(s))}</p>", figure_cards(headline_figures(s)), time_section(s),
                f"<h2>Timeline</h2>{gantt(s)}", ops_section(s),
                f"<h2>Roofline</h2>{roofline(s)}{bound_legend()}<p class='note'>Operations that multiply, by MACs "
                "per DDR byte against MACs per busy cycle; flat roofs: the MAC array's peak per data type, slope: "
                "the DDR bandwidth. Hollow: no DDR traffic.</p>",
                memory_section(run_dir, s), cpu_section(s), breakdown_section(s)]
    return html_page(f"{graph} on {s.get('hw_config', '')}", sections, subtitle)
