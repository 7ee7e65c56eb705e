"""Self-contained HTML pages (inline style and script, images as data URIs) with sortable tables,
shared by the sweep report and the run report."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_SORT_JS = """
document.querySelectorAll('th').forEach((th, col) => th.addEventListener('click', () => {
  const body = th.closest('table').tBodies[0];
  const asc = th.dataset.asc !== 'true'; th.dataset.asc = asc;
  const key = r => { const t = r.cells[col].textContent; const n = parseFloat(t); return isNaN(n) ? t : n; };
  [...body.rows].sort((a, b) => (key(a) > key(b) ? 1 : key(a) < key(b) ? -1 : 0) * (asc ? 1 : -1))
    .forEach(r => body.appendChild(r));
}));
"""
_STYLE = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:13px}"
          "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{cursor:pointer;background:#eee}"
          "tr.front{background:#fff3d6}pre{background:#f6f6f6;padding:1em}")


def png_data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def html_table(columns: Sequence[str], rows: Sequence[dict[str, Any]], highlight: str = "") -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for r in rows:
        cls = ' class="front"' if highlight and r.get(highlight) else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(_cell(r.get(c, '')))}</td>" for c in columns)
                    + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def html_page(title: str, sections: Sequence[str]) -> str:
    """A self-contained page: inline style and script, images as data URIs."""
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>{''.join(sections)}"
            f"<script>{_SORT_JS}</script></body></html>\n")
