"""The per-operation Gantt: one lane per compute unit and DMA engine, each operation drawn
where its commands kept that lane busy, coloured by what bounds the operation.

Reads summary.json's ``ops`` rows with their ``busy_intervals`` (unit -> ``[start, end]``
cycles), so an operation that waits between its commands shows its gaps. The chart is an
inline SVG whose marks are placed in percent of its width: the page's script widens it to
zoom (buttons, or Ctrl + wheel) and its box scrolls; lane names stay put beside it. A
mark's tooltip names the operation; a click scrolls to its row in the table. Long streams
draw their first invocations (``report_invocations_drawn``), as the memory timeline does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reports.human_units import cycles, duration
from reports.svg import BOUND_COLOURS, BOUND_LABELS, OTHER_COLOUR, esc, linear_ticks, title
from reports.table import op_cycles
from reports.time_chart import bound_legend, op_row_id

LANE_PX = 24
AXIS_PX = 22
#: Invocations drawn when the summary does not say.
DEFAULT_INVOCATIONS_DRAWN = 16
#: A mark is at least this wide (percent of the chart), so that a short command stays visible.
MIN_MARK_PERCENT = 0.02


def lanes(summary: Mapping[str, Any]) -> list[str]:
    """The units in the trace's order (``busy_cycles``), then any other an operation used."""
    names = list(summary.get("busy_cycles", {}))
    for op in summary.get("ops", []):
        names += [u for u in op.get("busy_intervals", {}) if u not in names]
    return names


def drawn_ops(summary: Mapping[str, Any]) -> list[int]:
    """Indices of the operations drawn: those of the first invocations."""
    drawn = summary.get("report_invocations_drawn") or DEFAULT_INVOCATIONS_DRAWN
    return [i for i, op in enumerate(summary.get("ops", [])) if op.get("invocation", 0) < drawn]


def gantt(summary: Mapping[str, Any], row_id: Callable[[int], str] = op_row_id) -> str:
    """The Gantt section's HTML: zoom buttons, lane names, the chart and the bound legend
    (``row_id``: the table row an operation's marks link to, by its index in ``ops``)."""
    ops = summary.get("ops", [])
    shown = drawn_ops(summary)
    names = lanes(summary)
    if not shown or not names:
        return '<p class="note">No operations to draw.</p>'
    start = min(ops[i]["start_cycle"] for i in shown)
    end = max(ops[i]["end_cycle"] for i in shown)
    span = max(1, end - start)
    row = {name: k for k, name in enumerate(names)}
    marks = [_axis(start, span, summary.get("clock_hz", 1), len(names))]
    for i in shown:
        marks.append(_marks(row_id(i), ops[i], row, start, span))
    height = len(names) * LANE_PX + AXIS_PX
    chart = (f'<svg class="gantt-chart" height="{height}" role="img" aria-label="per-operation Gantt" '
             f'xmlns="http://www.w3.org/2000/svg">{"".join(marks)}</svg>')
    lane_names = "".join(f"<div>{esc(n)}</div>" for n in names)
    drawn = summary.get("report_invocations_drawn")
    note = (f'<p class="note">First {drawn} of {summary.get("invocations")} invocations drawn.</p>'
            if drawn and drawn < summary.get("invocations", 1) else "")
    return ('<div class="zoomable"><div class="tools"><button data-zoom="2">zoom in</button>'
            '<button data-zoom="0.5">zoom out</button><button data-zoom="fit">fit</button>'
            '<span class="zoom-level note">1.0x</span><span class="note">(or Ctrl + wheel; scroll sideways; '
            'click a mark for its row)</span></div>'
            f'<div class="gantt"><div class="lanes">{lane_names}</div><div class="scroll">{chart}</div></div>'
            f"{bound_legend()}{note}</div>")


def _marks(link: str, op: Mapping[str, Any], row: Mapping[str, int], start: int, span: int) -> str:
    bound = op.get("bound", "")
    colour = BOUND_COLOURS.get(bound, OTHER_COLOUR)
    tip = title(f"{op.get('name', '')} ({op.get('op', '')}), invocation {op.get('invocation', 0)}: "
                f"{cycles(op_cycles(op))} busy cycles over a span of "
                f"{cycles(op['end_cycle'] - op['start_cycle'])}, {BOUND_LABELS.get(bound, bound)}-bound")
    rects = []
    busy = op.get("busy_intervals")
    if busy is None:   # a summary.json from before busy intervals: the span on its unit
        busy = {op["unit"]: [[op["start_cycle"], op["end_cycle"]]]} if op.get("unit") in row else {}
    for unit, intervals in busy.items():
        y = row[unit] * LANE_PX + 3
        for a, b in intervals:
            x = 100 * (a - start) / span
            w = max(MIN_MARK_PERCENT, 100 * (b - a) / span)
            rects.append(f'<rect x="{x:.4f}%" y="{y}" width="{w:.4f}%" height="{LANE_PX - 6}"/>')
    return (f'<g fill="{colour}" stroke="#fff" stroke-width="0.5" data-row="{esc(link)}">{tip}'
            f'{"".join(rects)}</g>')


def _axis(start: int, span: int, clock_hz: int, lane_count: int) -> str:
    """Lane separators and time ticks along the bottom (cycles from the first drawn start)."""
    parts = [f'<line x1="0" x2="100%" y1="{k * LANE_PX}" y2="{k * LANE_PX}" class="grid"/>'
             for k in range(1, lane_count + 1)]
    base = lane_count * LANE_PX
    for tick in linear_ticks(span, 10):
        x = 100 * tick / span
        anchor = "start" if tick == 0 else "end" if x > 97 else "middle"
        parts.append(f'<line x1="{x:.4f}%" x2="{x:.4f}%" y1="0" y2="{base + 4}" class="grid"/>'
                     f'<text x="{x:.4f}%" y="{base + 16}" text-anchor="{anchor}" font-size="11" class="muted">'
                     f"{esc(duration(tick / clock_hz))}</text>")
    return "".join(parts)
