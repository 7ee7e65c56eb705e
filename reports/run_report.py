"""``npu-sim report RUN_DIR`` and ``npu-sim compare DIR_A DIR_B``: one run as an HTML page, two
runs side by side. Both read only what ``npu-sim run`` wrote (summary.json, memory_timeline.png)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from npu_sim.errors import InputError
from reports.html_page import html_page, html_table, png_data_uri
from reports.table import human_bytes

#: the figures a run page and a comparison show, in order
HEADLINE = ("total_cycles", "seconds", "macs", "mac_utilization", "ddr_read_bytes", "ddr_write_bytes",
            "ddr_bandwidth_utilization", "peak_tcm_bytes", "tcm_size_bytes", "energy_pj", "area_mm2")
OP_COLUMNS = ("name", "op", "unit", "invocation", "start_cycle", "cycles", "bound", "macs", "ddr_read_bytes",
              "ddr_write_bytes", "compute_cycles", "dma_cycles")


def read_summary(run_dir: Path) -> dict[str, Any]:
    """The summary.json of a run folder; a clear error when it is not one."""
    path = run_dir / "summary.json"
    try:
        data = json.loads(path.read_text())
    except OSError:
        raise InputError(f"{run_dir}: not an npu-sim run folder (no readable summary.json)") from None
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or "total_cycles" not in data:
        raise InputError(f"{path}: not an npu-sim run summary")
    return data


def run_page(run_dir: Path) -> str:
    """The HTML page of one run: headline figures, utilisation, energy and area breakdowns,
    the TCM timeline and the per-operation table."""
    s = read_summary(run_dir)
    figures = [{"figure": k, "value": s[k]} for k in HEADLINE if k in s]
    busy = [{"unit": u, "utilization": round(v, 4), "busy_cycles": s.get("busy_cycles", {}).get(u, 0)}
            for u, v in s.get("utilization", {}).items()]
    sections = [f"<p>{html.escape(str(s.get('graph', '')))} on {html.escape(str(s.get('hw_config', '')))}, "
                f"{s.get('invocations', 1)} invocation(s); peak TCM {human_bytes(s['peak_tcm_bytes'])}</p>",
                "<h2>Summary</h2>" + html_table(["figure", "value"], figures),
                "<h2>Utilisation</h2>" + html_table(["unit", "utilization", "busy_cycles"], busy)]
    for key, unit in (("energy_breakdown_pj", "pJ"), ("area_breakdown_mm2", "mm2")):
        if key in s:
            rows = [{"part": k, unit: v} for k, v in s[key].items()]
            sections.append(f"<h2>{key}</h2>" + html_table(["part", unit], rows))
    timeline = run_dir / "memory_timeline.png"
    if timeline.is_file():
        sections.append(f"<h2>TCM timeline</h2><img src='{png_data_uri(timeline)}' alt='memory timeline'>")
    sections.append("<h2>Operations</h2>" + html_table(list(OP_COLUMNS), s.get("ops", [])))
    return html_page(f"npu-sim run: {Path(str(s.get('graph', ''))).name} on {s.get('hw_config', '')}", sections)


def compare_rows(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any, str]]:
    """(figure, A, B, B/A) for each headline figure both runs have."""
    rows = []
    for key in HEADLINE:
        if key in a and key in b:
            ratio = f"{b[key] / a[key]:.3f}" if isinstance(a[key], (int, float)) and a[key] else "-"
            rows.append((key, a[key], b[key], ratio))
    return rows
