"""The roofline of a run: each operation that multiplies placed by its arithmetic intensity
(MACs per byte of DDR traffic) and the MACs per cycle it achieved, under the hardware's
roofs: the MAC array's peak per data type (flat) and the DDR bandwidth (the slope).

An operation far under its roof is limited by something else than these two (setup,
latency, the TCM, dependencies); one on the slope is bandwidth-bound, one on a flat roof
compute-bound. Achieved MACs per cycle are over the operation's busy cycles (its work).
Operations without DDR traffic have no finite intensity: they are drawn at the right edge,
hollow. Reads summary.json's ``ops`` and ``hw`` (the resolved HwConfig).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reports.human_units import human_bytes, percent, si
from reports.svg import BOUND_COLOURS, OTHER_COLOUR, esc, log_ticks, svg, text, tick_label, title
from reports.table import op_cycles
from reports.time_chart import op_row_id

WIDTH, HEIGHT = 720.0, 420.0
LEFT, RIGHT, TOP, BOTTOM = 64.0, 110.0, 16.0, 46.0


@dataclass(frozen=True)
class Roof:
    """A compute roof: MACs per cycle and the data types (or kinds of work) that reach it."""

    macs_per_cycle: float
    label: str


@dataclass(frozen=True)
class Roofs:
    compute: list[Roof]               # highest first
    ddr_bytes_per_cycle: float


@dataclass(frozen=True)
class Point:
    """One operation on the roofline (``intensity`` None: it moved no DDR bytes)."""

    index: int
    name: str
    intensity: float | None
    macs_per_cycle: float
    bound: str
    macs: int
    ddr_bytes: int


def roofs(hw: Mapping[str, Any]) -> Roofs | None:
    """The roofs of a resolved HwConfig dict; None when it lacks the MAC array or the DDR."""
    mac, ddr = hw.get("mac_array"), hw.get("ddr")
    if not isinstance(mac, dict) or not isinstance(ddr, dict) or not ddr.get("bandwidth_bytes_per_cycle"):
        return None
    by_rate: dict[float, list[str]] = {}
    for dtype, rate in (mac.get("macs_per_cycle") or {}).items():
        by_rate.setdefault(float(rate), []).append(dtype)
    if mac.get("depthwise_macs_per_cycle"):
        by_rate.setdefault(float(mac["depthwise_macs_per_cycle"]), []).append("depthwise")
    compute = [Roof(rate, "/".join(names)) for rate, names in sorted(by_rate.items(), reverse=True) if rate > 0]
    if not compute:
        return None
    return Roofs(compute, float(ddr["bandwidth_bytes_per_cycle"]))


def points(summary: Mapping[str, Any]) -> list[Point]:
    """The first invocation's operations that did MACs and took cycles."""
    out = []
    for i, op in enumerate(summary.get("ops", [])):
        work = op_cycles(op)
        if op.get("invocation", 0) != 0 or not op.get("macs") or work <= 0:
            continue
        ddr = op.get("ddr_read_bytes", 0) + op.get("ddr_write_bytes", 0)
        out.append(Point(i, op.get("name", ""), op["macs"] / ddr if ddr else None, op["macs"] / work,
                         op.get("bound", ""), op["macs"], ddr))
    return out


def roofline(summary: Mapping[str, Any], row_id: Callable[[int], str] = op_row_id) -> str:
    """The roofline chart (SVG), or a note saying why there is none (``row_id``: the table row
    an operation's point links to, by its index in ``ops``)."""
    hw_roofs = roofs(summary.get("hw") or {})
    pts = points(summary)
    if hw_roofs is None:
        return '<p class="note">No roofline: the summary does not hold the hardware config.</p>'
    if not pts:
        return '<p class="note">No roofline: no operation multiplies (no MACs).</p>'
    return _chart(hw_roofs, pts, summary.get("clock_hz", 1), row_id)


class _Axes:
    """Log-log mapping of (MACs/byte, MACs/cycle) to the chart."""

    def __init__(self, x_range: tuple[float, float], y_range: tuple[float, float]):
        self.x0, self.x1 = math.log10(x_range[0]), math.log10(x_range[1])
        self.y0, self.y1 = math.log10(y_range[0]), math.log10(y_range[1])

    def x(self, value: float) -> float:
        return LEFT + (math.log10(value) - self.x0) / (self.x1 - self.x0) * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        return HEIGHT - BOTTOM - (math.log10(value) - self.y0) / (self.y1 - self.y0) * (HEIGHT - TOP - BOTTOM)


def _ranges(r: Roofs, pts: list[Point]) -> tuple[tuple[float, float], tuple[float, float]]:
    peak = r.compute[0].macs_per_cycle
    ridge = peak / r.ddr_bytes_per_cycle
    xs = [p.intensity for p in pts if p.intensity] + [ridge]
    ys = [p.macs_per_cycle for p in pts] + [r.compute[-1].macs_per_cycle]
    return _decades(min(xs) / 2, max(xs) * 4), _decades(min(ys) / 2, peak * 2)


def _decades(lo: float, hi: float) -> tuple[float, float]:
    """The powers of ten around ``lo`` and ``hi``."""
    ticks = log_ticks(lo, hi)
    return ticks[0], ticks[-1]


def _chart(r: Roofs, pts: list[Point], clock_hz: int, row_id: Callable[[int], str]) -> str:
    (x_lo, x_hi), (y_lo, y_hi) = _ranges(r, pts)
    ax = _Axes((x_lo, x_hi), (y_lo, y_hi))
    parts = [_grid(ax, (x_lo, x_hi), (y_lo, y_hi))]
    bw = r.ddr_bytes_per_cycle
    for k, roof in enumerate(r.compute):
        ridge = roof.macs_per_cycle / bw
        dash = "" if k == 0 else ' stroke-dasharray="5 4"'
        y = ax.y(roof.macs_per_cycle)
        parts.append(f'<line x1="{ax.x(max(ridge, x_lo)):.1f}" x2="{ax.x(x_hi):.1f}" y1="{y:.1f}" '
                     f'y2="{y:.1f}" stroke="#333" stroke-width="1.6"{dash}>'
                     f"{title(f'{roof.label}: {roof.macs_per_cycle:g} MACs/cycle')}</line>")
        parts.append(text(ax.x(x_hi) + 4, ax.y(roof.macs_per_cycle) + 4,
                          f"{roof.label} {roof.macs_per_cycle:g}", size=11))
    top = r.compute[0].macs_per_cycle
    start = max(x_lo, y_lo / bw)
    parts.append(f'<line x1="{ax.x(start):.1f}" x2="{ax.x(top / bw):.1f}" y1="{ax.y(bw * start):.1f}" '
                 f'y2="{ax.y(top):.1f}" stroke="#333" stroke-width="1.6">'
                 f"{title(f'DDR: {bw:g} bytes/cycle')}</line>")
    parts.append(text(ax.x(start) + 6, ax.y(bw * start) - 8, f"DDR {bw:g} B/cycle", size=11))
    parts += [_point(ax, p, x_hi, top, row_id(p.index)) for p in pts]
    parts.append(text((LEFT + WIDTH - RIGHT) / 2, HEIGHT - 8, "arithmetic intensity: MACs per DDR byte",
                      anchor="middle", size=12))
    parts.append(f'<text transform="translate(16 {(TOP + HEIGHT - BOTTOM) / 2:.1f}) rotate(-90)" '
                 f'text-anchor="middle" font-size="12">MACs per cycle (x {si(clock_hz)}Hz = MAC/s)</text>')
    return svg(WIDTH, HEIGHT, "".join(parts), label="roofline")


def _grid(ax: _Axes, x_range: tuple[float, float], y_range: tuple[float, float]) -> str:
    parts = []
    for value in log_ticks(*x_range):
        x = ax.x(value)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" class="grid"/>'
                     + text(x, HEIGHT - BOTTOM + 15, tick_label(value), anchor="middle", size=11, cls="muted"))
    for value in log_ticks(*y_range):
        y = ax.y(value)
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                     + text(LEFT - 6, y + 4, tick_label(value), anchor="end", size=11, cls="muted"))
    parts.append(f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{HEIGHT - TOP - BOTTOM}" '
                 'fill="none" class="axis"/>')
    return "".join(parts)


def _point(ax: _Axes, p: Point, x_hi: float, peak: float, link: str) -> str:
    colour = BOUND_COLOURS.get(p.bound, OTHER_COLOUR)
    x = ax.x(p.intensity) if p.intensity else ax.x(x_hi) - 6
    fill = f'fill="{colour}"' if p.intensity else f'fill="#fff" stroke="{colour}" stroke-width="2"'
    intensity = f"{p.intensity:.3g} MACs/byte" if p.intensity else "no DDR traffic"
    tip = (f"{p.name}: {si(p.macs)} MACs, {human_bytes(p.ddr_bytes)} DDR, {intensity}; "
           f"{p.macs_per_cycle:.3g} MACs/cycle ({percent(p.macs_per_cycle / peak)} of the peak), {p.bound}-bound")
    return (f'<circle cx="{x:.1f}" cy="{ax.y(p.macs_per_cycle):.1f}" r="4.5" {fill} fill-opacity="0.85" '
            f'data-row="{esc(link)}">{title(tip)}</circle>')
