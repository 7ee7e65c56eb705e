"""Inline SVG for the HTML pages: a chart is a string of SVG elements, drawn by the browser,
with no script, font or stylesheet from elsewhere (the pages must open offline).

What the charts share: escaping, the colour of each bound, axis ticks (linear and
logarithmic) and a horizontal bar chart (:func:`bar_chart`). Hovering a mark shows its
``<title>``: the exact figures behind it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

#: The colour of what bounds an operation (summary.json ``bound``), used by every chart.
BOUND_COLOURS = {"compute": "#3a7d44", "memory": "#2f6db5", "setup_latency": "#e08a1e"}
BOUND_LABELS = {"compute": "compute", "memory": "memory", "setup_latency": "setup/latency"}
OTHER_COLOUR = "#9a9a9a"
#: Colours told apart at a glance (the two runs of a comparison, units, ...).
PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c",
           "#ccb974", "#64b5cd")


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def title(text: str) -> str:
    """A hover tooltip for the element it is put in."""
    return f"<title>{esc(text)}</title>"


def svg(width: float, height: float, body: str, *, label: str, cls: str = "chart") -> str:
    """An SVG drawn at ``width`` x ``height`` pixels that shrinks (keeping its aspect) to fit a
    narrower box."""
    return (f'<svg class="{cls}" width="{width:g}" height="{height:g}" viewBox="0 0 {width:g} {height:g}" '
            f'role="img" aria-label="{esc(label)}" xmlns="http://www.w3.org/2000/svg">{body}</svg>')


def text(x: float, y: float, content: str, *, anchor: str = "start", size: int = 12, cls: str = "") -> str:
    klass = f' class="{cls}"' if cls else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}"{klass}>'
            f"{esc(content)}</text>")


def nice_step(span: float, max_ticks: int = 8) -> float:
    """A 1, 2 or 5 times a power of ten step giving at most ``max_ticks`` ticks over ``span``."""
    if span <= 0:
        return 1.0
    raw = span / max_ticks
    power = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 5, 10):
        if mult * power >= raw:
            return float(mult * power)
    return float(10 * power)  # pragma: no cover


def linear_ticks(hi: float, max_ticks: int = 8) -> list[float]:
    """Ticks from 0 to ``hi`` (inclusive where one falls on it)."""
    step = nice_step(hi, max_ticks)
    return [i * step for i in range(int(hi / step + 1e-9) + 1)]


def log_ticks(lo: float, hi: float) -> list[float]:
    """The powers of ten from below ``lo`` to above ``hi`` (both > 0)."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return [10.0 ** e for e in range(first, max(last, first + 1) + 1)]


def tick_label(value: float) -> str:
    """``0.001``, ``0.1``, ``1``, ``1k``, ``10M``: short labels of a logarithmic axis."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


@dataclass
class Bar:
    """One row of a bar chart: its label, its segments (fraction of the full width, colour,
    tooltip), the text after it, and the table row it links to (``data-row``)."""

    label: str
    segments: list[tuple[float, str, str]] = field(default_factory=list)
    note: str = ""
    row: str = ""


def bar_chart(bars: Sequence[Bar], *, label: str, label_width: float = 190, note_width: float = 170,
              bar_width: float = 420, row_height: float = 22) -> str:
    """Horizontal bars, one per row, each of stacked segments (fractions of ``bar_width``)."""
    parts = []
    for i, bar in enumerate(bars):
        y = i * row_height
        link = f' data-row="{esc(bar.row)}" class="link"' if bar.row else ""
        parts.append(f"<g{link}>" + text(label_width - 8, y + row_height * 0.68, _clip(bar.label, 30), anchor="end"))
        parts.append(f'<rect x="{label_width}" y="{y + 3:.1f}" width="{bar_width}" height="{row_height - 6}" '
                     'class="track"/>')
        x = label_width
        for fraction, colour, tip in bar.segments:
            width = max(0.0, min(fraction, 1.0)) * bar_width
            parts.append(f'<rect x="{x:.2f}" y="{y + 3:.1f}" width="{width:.2f}" height="{row_height - 6}" '
                         f'fill="{colour}">{title(tip)}</rect>')
            x += width
        parts.append(text(label_width + bar_width + 8, y + row_height * 0.68, bar.note) + "</g>")
    height = max(1, len(bars)) * row_height
    return svg(label_width + bar_width + note_width, height, "".join(parts), label=label)


def legend(items: Sequence[tuple[str, str]]) -> str:
    """An HTML legend: coloured swatches with their names."""
    return '<div class="legend">' + "".join(
        f'<span><i style="background:{colour}"></i>{esc(name)}</span>' for name, colour in items) + "</div>"


def _clip(label: str, limit: int) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"
