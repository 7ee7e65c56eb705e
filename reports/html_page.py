"""Self-contained HTML pages (inline style and script, images as data URIs, charts as inline
SVG), shared by the run page, the comparison page and the sweep report.

Nothing is fetched: the page opens offline and can be mailed as one file. The script is
small and does four things: sorts a table when its header is clicked (by each cell's
``data-v`` when it has one: the exact number behind a formatted cell), zooms and scrolls
the Gantt charts, scrolls to an operation's table row when its mark in a chart is clicked,
and shows the memory timeline at full size on a click.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCRIPT = """
document.querySelectorAll('table th').forEach(th => th.addEventListener('click', () => {
  const table = th.closest('table'), body = table.tBodies[0], col = th.cellIndex;
  const num = th.dataset.type === 'num';
  const dir = th.dataset.dir ? -Number(th.dataset.dir) : (num ? -1 : 1);
  table.querySelectorAll('th').forEach(h => { delete h.dataset.dir; h.removeAttribute('aria-sort'); });
  th.dataset.dir = dir; th.setAttribute('aria-sort', dir > 0 ? 'ascending' : 'descending');
  const key = r => { const c = r.cells[col]; if (!c) return ''; const v = c.dataset.v;
    if (num) { const n = parseFloat(v === undefined ? c.textContent.replace(/,/g, '') : v);
               return isNaN(n) ? -Infinity : n; }
    return v === undefined ? c.textContent : v; };
  const rows = [...body.rows].map((r, i) => [key(r), i, r]);
  rows.sort((a, b) => (a[0] > b[0] ? 1 : a[0] < b[0] ? -1 : 0) * dir || a[1] - b[1]);
  body.append(...rows.map(x => x[2]));
}));
document.querySelectorAll('.zoomable').forEach(box => {
  const svg = box.querySelector('svg'), scroll = box.querySelector('.scroll');
  const level = box.querySelector('.zoom-level'); let zoom = 1;
  const set = z => { const centre = (scroll.scrollLeft + scroll.clientWidth / 2) / scroll.scrollWidth;
    zoom = Math.min(256, Math.max(1, z)); svg.style.width = (100 * zoom) + '%';
    scroll.scrollLeft = centre * scroll.scrollWidth - scroll.clientWidth / 2;
    level.textContent = zoom.toFixed(1) + 'x'; };
  box.querySelectorAll('button[data-zoom]').forEach(b => b.addEventListener('click', () =>
    set(b.dataset.zoom === 'fit' ? 1 : zoom * parseFloat(b.dataset.zoom))));
  scroll.addEventListener('wheel', e => { if (e.ctrlKey || e.metaKey) { e.preventDefault();
    set(zoom * (e.deltaY < 0 ? 1.25 : 0.8)); } }, {passive: false});
});
document.querySelectorAll('[data-row]').forEach(el => el.addEventListener('click', () => {
  const row = document.getElementById(el.dataset.row); if (!row) return;
  row.scrollIntoView({block: 'center'});
  row.classList.remove('flash'); void row.offsetWidth; row.classList.add('flash');
}));
document.querySelectorAll('img.expandable').forEach(img => img.addEventListener('click', () =>
  img.classList.toggle('full')));
"""

_STYLE = """
:root{--ink:#1d2329;--muted:#5b6670;--line:#d9dee3;--soft:#f4f6f8;--accent:#2f6db5}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--ink);
  margin:0;background:#fff}
main{max-width:1240px;margin:0 auto;padding:20px 24px 48px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:32px 0 8px;border-bottom:1px solid var(--line);
  padding-bottom:4px}h3{font-size:14px;margin:16px 0 6px;color:var(--muted)}
p.sub{color:var(--muted);margin:0 0 16px}p.answer{font-size:16px;margin:8px 0 18px}
.note{color:var(--muted);font-size:12.5px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(180px,1fr));gap:10px}
.card{border:1px solid var(--line);border-radius:6px;padding:10px 12px;background:var(--soft)}
.card .label{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.03em}
.card .value{font-size:22px;font-weight:600;margin:2px 0}.card .detail{color:var(--muted);font-size:12px}
.card.warn{background:#fff4e0;border-color:#f0c27a}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:24px}
@media (max-width:900px){.grid2{grid-template-columns:1fr}}
svg.chart{max-width:100%;height:auto;display:block}svg text{fill:var(--ink);font-family:inherit}
svg .track{fill:var(--soft)}svg .axis{stroke:#aab2ba;stroke-width:1}svg .grid{stroke:#e6e9ec;stroke-width:1}
svg .muted{fill:var(--muted)}svg .link,[data-row]{cursor:pointer}
.legend{display:flex;flex-wrap:wrap;gap:14px;font-size:12.5px;margin:4px 0 8px}
.legend i{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.zoomable .tools{display:flex;gap:6px;align-items:center;margin:4px 0}
.zoomable button{font:inherit;padding:1px 9px;border:1px solid var(--line);background:#fff;border-radius:4px;
  cursor:pointer}
.gantt{display:grid;grid-template-columns:110px 1fr;border:1px solid var(--line);border-radius:4px}
.gantt .lanes div{height:24px;line-height:24px;padding:0 8px;font-size:12.5px;border-bottom:1px solid var(--soft);
  white-space:nowrap;overflow:hidden}
.gantt .scroll{overflow-x:auto;overflow-y:hidden}.gantt svg{display:block;width:100%}
.tablebox{max-height:640px;overflow:auto;border:1px solid var(--line);border-radius:4px}
table{border-collapse:collapse;font-size:12.5px;width:100%}
td,th{border-bottom:1px solid var(--line);padding:3px 5px;text-align:right;white-space:nowrap}
td.t,th.t{text-align:left}td.w{white-space:normal;max-width:300px;overflow-wrap:anywhere}
th{background:var(--soft);position:sticky;top:0;cursor:pointer;user-select:none}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
tr.front{background:#fff3d6}tr.composite td:first-child{border-left:3px solid #8172b3}
tr.cpu td:first-child{border-left:3px solid #c44e52}
tr.flash{animation:flash 1.6s}@keyframes flash{from{background:#ffe08a}to{background:transparent}}
.tag{display:inline-block;font-size:11px;padding:0 5px;border-radius:3px;margin-left:4px;background:#ece6f7;
  color:#5a3f99}.tag.cpu{background:#fbe3e4;color:#9c2b30}
.b-compute{color:#3a7d44}.b-memory{color:#2f6db5}.b-setup_latency{color:#b86a00}
img.expandable{max-width:100%;height:auto;cursor:zoom-in;border:1px solid var(--line)}
img.expandable.full{max-width:none;cursor:zoom-out}.imgbox{overflow-x:auto}
pre{background:var(--soft);padding:1em;overflow-x:auto}
"""


def png_data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


@dataclass(frozen=True)
class Column:
    """A column of a sortable table: the row key, its header, whether it sorts as a number,
    and how a value is shown (a number's exact value goes in ``data-v``). ``markup``: ``show``
    returns HTML (it escapes what it shows itself), else its text is escaped here."""

    key: str
    header: str
    numeric: bool = True
    show: Callable[[Any], str] = str
    markup: bool = False
    width_px: int = 0   # a text column that wraps its long cells, at least this wide (0: never wraps)
    sort_key: Callable[[Any], str] | None = None   # what a text column sorts by (default: its text)


def sortable_table(columns: Sequence[Column], rows: Sequence[dict[str, Any]], *, table_id: str,
                   row_ids: Sequence[str] = (), row_classes: Sequence[str] = ()) -> str:
    """A table whose header cells sort it; numeric cells carry their exact value."""
    head = "".join(f'<th data-type="{"num" if c.numeric else "text"}"{"" if c.numeric else " class=t"}'
                   f'{f" style=min-width:{c.width_px}px" if c.width_px else ""}>{html.escape(c.header)}</th>'
                   for c in columns)
    body = []
    for i, row in enumerate(rows):
        rid = f' id="{html.escape(row_ids[i])}"' if i < len(row_ids) else ""
        cls = f' class="{row_classes[i]}"' if i < len(row_classes) and row_classes[i] else ""
        cells = "".join(_cell(c, row.get(c.key, "")) for c in columns)
        body.append(f"<tr{rid}{cls}>{cells}</tr>")
    return (f'<div class="tablebox"><table class="sortable" id="{html.escape(table_id)}"><thead><tr>{head}</tr>'
            f"</thead><tbody>{''.join(body)}</tbody></table></div>")


def _cell(column: Column, value: Any) -> str:
    shown = column.show(value) if value != "" else ""
    shown = shown if column.markup else html.escape(shown)
    if not column.numeric:
        key = f' data-v="{html.escape(column.sort_key(value))}"' if column.sort_key and value != "" else ""
        return f'<td class="t{" w" if column.width_px else ""}"{key}>{shown}</td>'
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f'<td data-v="{value!r}">{shown}</td>'
    return f"<td>{shown}</td>"


def html_table(columns: Sequence[str], rows: Sequence[dict[str, Any]], highlight: str = "") -> str:
    """A plain sortable table of raw values (the sweep report's); a column of numbers sorts as numbers."""
    head = "".join(f'<th data-type="num">{html.escape(c)}</th>' if _numeric(r.get(c) for r in rows)
                   else f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for r in rows:
        cls = ' class="front"' if highlight and r.get(highlight) else ""
        body.append(f"<tr{cls}>" + "".join(_raw_cell(r.get(c, "")) for c in columns) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _numeric(values: Iterable[Any]) -> bool:
    found = [v for v in values if v not in ("", None)]
    return bool(found) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in found)


def _raw_cell(value: Any) -> str:
    if isinstance(value, float):
        return f'<td data-v="{value!r}">{value:.6g}</td>'
    if isinstance(value, int) and not isinstance(value, bool):
        return f'<td data-v="{value}">{value}</td>'
    return f"<td>{html.escape(str(value))}</td>"


def html_page(title: str, sections: Sequence[str], subtitle: str = "") -> str:
    """A self-contained page: inline style and script, images as data URIs."""
    sub = f'<p class="sub">{subtitle}</p>' if subtitle else ""
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body><main>"
            f"<h1>{html.escape(title)}</h1>{sub}{''.join(sections)}</main><script>{_SCRIPT}</script></body></html>\n")
