"""``memory_timeline.png``: where in the TCM each buffer lived, and when; and memory use over time.

Top panel: an address-versus-time map of the TCM. One rectangle per allocation
and invocation: x from the first to the last cycle a command touched it, y from its
offset to offset + size. Colour by kind (input, activation, tile, spill, ...);
only rectangles big enough to hold a label get one, so hundreds of tiles stay
readable. Bottom panel: bytes in use over time in the TCM, the variable SRAM and
the DDR spill space (allocations of kind ``spill`` in DDR).

With many invocations only the first :data:`MAX_INVOCATIONS_SHOWN` are drawn (they
repeat). Reads only the trace's allocation records.

Drawn with matplotlib's object API on an Agg canvas (no pyplot: no global figure registry,
fewer imports; matplotlib itself, 0.4 s to import, only when a figure is drawn), with a
fixed layout that leaves room for the legends (one draw; ``bbox_inches="tight"`` would draw
twice), one PatchCollection for all the rectangles, label widths summed from cached glyph
widths, and fast PNG compression.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from npu_sim.hw.trace import AllocationRecord, InvocationRecord, Trace
from npu_sim.program import MemorySpace
from reports.occupancy import UsedAllocation, occupancy_steps, selected

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.figure import Figure

#: Colour of each allocation kind (Program.Allocation.kind); other kinds are grey.
KIND_COLOURS = {
    "input": "#4c72b0",
    "output": "#dd8452",
    "constant": "#8c8c8c",
    "activation": "#55a868",
    "tile": "#8172b3",
    "spill": "#c44e52",
    "variable": "#da8bc3",
}
OTHER_COLOUR = "#bcbd22"
#: At most this many rectangles get a text label (the largest ones that have room).
MAX_LABELS = 40
DPI = 110
FIGSIZE_INCHES = (15.5, 9.0)
#: Fixed subplot margins (figure fractions): room on the right for the legends.
MARGINS = {"left": 0.06, "right": 0.855, "top": 0.955, "bottom": 0.06}
#: zlib level of the PNG (1: fast; the image is mostly flat colour, so it compresses well anyway).
PNG_COMPRESS_LEVEL = 1
#: Summed glyph widths ignore kerning; a label must fit with this much to spare.
KERNING_MARGIN = 1.05
#: Later invocations repeat the first ones: only this many are drawn (the title says so).
MAX_INVOCATIONS_SHOWN = 4


def _kib(value: float, _pos: object = None) -> str:
    """Bytes in binary units, three significant digits: ``1.5 KiB``."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} B"


def byte_tick_step(top_bytes: float, max_ticks: int = 8) -> int:
    """A tick step for a byte axis: the smallest power of two giving at most ``max_ticks`` ticks."""
    step = 1
    while top_bytes / step > max_ticks:
        step *= 2
    return step


#: Font size of the rectangle labels (points) and the pixels kept free around a label.
LABEL_FONT_SIZE = 7
_MARGIN_PX = 3.0


def label_texts(name: str) -> list[str]:
    """Label candidates, longest first: the name, then its last ``+``-part (a fused
    operation's buffer ``A(x)+B(y):in0`` -> ``B(y):in0``)."""
    texts = [name]
    if "+" in name:
        texts.append(name.rsplit("+", 1)[1])
    return texts


def _labels(records: list[UsedAllocation], px_per_cycle: float, px_per_byte: float,
            measure: Callable[[str], float], text_height_px: float
            ) -> list[tuple[UsedAllocation, str, float]]:
    """``(record, text, rotation)`` for the largest rectangles that can hold a label
    (``measure(text)``: its width in pixels) horizontally, or vertically in tall
    narrow ones; names that do not fit are shortened. At most :data:`MAX_LABELS`."""
    chosen = []
    for a in sorted(records, key=lambda a: -(a.last_cycle - a.first_cycle) * a.size_bytes):
        width = (a.last_cycle - a.first_cycle) * px_per_cycle - 2 * _MARGIN_PX
        height = a.size_bytes * px_per_byte - 2 * _MARGIN_PX
        text = _fitting_label(a.name, width, height, measure, text_height_px)
        if text is not None:
            chosen.append((a, *text))
            if len(chosen) == MAX_LABELS:
                break
    return chosen


def _fitting_label(name: str, width: float, height: float, measure: Callable[[str], float],
                   text_height_px: float) -> tuple[str, float] | None:
    for room, across, rotation in ((width, height, 0.0), (height, width, 90.0)):
        if across < text_height_px:
            continue
        for text in label_texts(name):
            if measure(text) <= room:
                return text, rotation
    if height >= text_height_px:  # shortened, horizontally: at least 6 characters
        text = label_texts(name)[-1]
        for length in range(len(text) - 1, 5, -1):
            short = _short(text, length)
            if measure(short) <= width:
                return short, 0.0
    return None


@dataclass(frozen=True)
class _Shown:
    """What the figure shows: the first invocations, their allocations and the cycles they span."""

    invocations: list[InvocationRecord]
    allocations: list[AllocationRecord]
    tcm: list[UsedAllocation]            # the shown TCM allocations
    all_tcm: list[UsedAllocation]        # every TCM allocation (for the footprint)
    span: tuple[int, int]
    x_range: int
    top: int                             # the TCM footprint: end of the topmost allocation
    y_max: float


def _shown(trace: Trace) -> _Shown:
    shown = trace.invocations[:MAX_INVOCATIONS_SHOWN]
    allocations = [a for a in trace.allocations if a.invocation < MAX_INVOCATIONS_SHOWN]
    tcm = selected(allocations, MemorySpace.TCM)
    all_tcm = selected(trace.allocations, MemorySpace.TCM)
    span_lo = min((i.start_cycle for i in shown), default=0)
    span_hi = max((i.end_cycle for i in shown), default=0)
    span_hi = max([span_hi, *(a.last_cycle for a in tcm)]) if tcm else span_hi
    top = max((a.offset_bytes + a.size_bytes for a in all_tcm), default=0)
    return _Shown(shown, allocations, tcm, all_tcm, (span_lo, span_hi), max(1, span_hi - span_lo), top,
                  max(top, 1) * 1.06)


def plot_memory_timeline(trace: Trace, path: str | Path, *, tcm_size_bytes: int | None = None,
                         title: str = "") -> Path:
    """Draw the figure into ``path`` (PNG); returns the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    path = Path(path)
    shown = _shown(trace)
    fig = Figure(figsize=FIGSIZE_INCHES, dpi=DPI)
    canvas = FigureCanvasAgg(fig)
    ax_map, ax_use = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.3], "hspace": 0.08})
    fig.subplots_adjust(**MARGINS)
    _draw_map(fig, canvas.get_renderer(), ax_map, shown)
    _mark_limits(ax_map, ax_use, shown, tcm_size_bytes)
    _label_map(ax_map, shown, len(trace.invocations), tcm_size_bytes, title)
    _plot_use(ax_use, shown.allocations, shown.span)
    ax_use.set_xlabel("cycle")
    ax_use.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{int(v):,}"))
    fig.savefig(path, dpi=DPI, pil_kwargs={"compress_level": PNG_COMPRESS_LEVEL})
    return path


def _draw_map(fig: Figure, renderer: RendererAgg, ax: Axes, shown: _Shown) -> None:
    """One rectangle per TCM allocation (at least a sliver wide), labels where they fit."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    min_width = shown.x_range * 0.002
    rects = [Rectangle((a.first_cycle, a.offset_bytes), max(a.last_cycle - a.first_cycle, min_width), a.size_bytes)
             for a in shown.tcm]
    if rects:
        colours = [KIND_COLOURS.get(a.kind, OTHER_COLOUR) for a in shown.tcm]
        ax.add_collection(PatchCollection(rects, facecolors=colours, edgecolors="black",
                                          linewidths=0.3 if len(rects) < 400 else 0.1, alpha=0.85))
    box = ax.get_position()
    width_px = box.width * fig.get_figwidth() * DPI
    height_px = box.height * fig.get_figheight() * DPI
    measure, text_height_px = _text_measure(renderer, fig.dpi)
    for a, text, rotation in _labels(shown.tcm, width_px / (shown.x_range * 1.005), height_px / shown.y_max,
                                     measure, text_height_px):
        ax.text((a.first_cycle + a.last_cycle) / 2, a.offset_bytes + a.size_bytes / 2, text,
                ha="center", va="center", fontsize=LABEL_FONT_SIZE, rotation=rotation, clip_on=True)


def _mark_limits(ax_map: Axes, ax_use: Axes, shown: _Shown, tcm_size_bytes: int | None) -> None:
    """The TCM size as a line, and where each shown invocation after the first starts."""
    span_lo = shown.span[0]
    if tcm_size_bytes is not None and tcm_size_bytes <= shown.y_max:
        ax_map.axhline(tcm_size_bytes, color="red", linestyle="--", linewidth=1)
        ax_map.text(span_lo, tcm_size_bytes, " TCM size", color="red", va="bottom", fontsize=8)
    for inv in shown.invocations[1:]:
        for ax in (ax_map, ax_use):
            ax.axvline(inv.start_cycle, color="grey", linestyle=":", linewidth=0.8)
        ax_map.text(inv.start_cycle, 0.995, f" invocation {inv.index}", transform=ax_map.get_xaxis_transform(),
                    va="top", ha="left", fontsize=7, color="grey")
    ax_map.set_ylim(0, shown.y_max)
    ax_map.set_xlim(span_lo, span_lo + shown.x_range * 1.005)


def _label_map(ax: Axes, shown: _Shown, invocations: int, tcm_size_bytes: int | None, title: str) -> None:
    """Axis, legend of the kinds and title of the memory map."""
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    ax.yaxis.set_major_locator(MultipleLocator(byte_tick_step(shown.y_max)))
    ax.yaxis.set_major_formatter(FuncFormatter(_kib))
    ax.set_ylabel("TCM offset")
    kinds = sorted({a.kind for a in shown.tcm}, key=lambda k: (k not in KIND_COLOURS, k))
    handles = [Patch(facecolor=KIND_COLOURS.get(k, OTHER_COLOUR), edgecolor="black", label=k) for k in kinds]
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8,
                  title="allocation kind", title_fontsize=8, frameon=False)
    heading = title or "TCM memory map"
    capacity = f" of {_kib(tcm_size_bytes)}" if tcm_size_bytes else ""
    count = len(shown.invocations)
    window = f" (invocations 0-{count - 1} of {invocations} shown)" if invocations > count else ""
    ax.set_title(f"{heading}: {len(shown.all_tcm)} TCM allocations, footprint {_kib(shown.top)}{capacity}{window}",
                 loc="left", fontsize=10, y=1.0)  # a fixed y: no tight-bbox pass to place it
    if not shown.tcm:
        ax.text(0.5, 0.5, "no TCM allocation was used", transform=ax.transAxes,
                ha="center", va="center", color="grey")


def _text_measure(renderer: RendererAgg, figure_dpi: float) -> tuple[Callable[[str], float], float]:
    """Width in pixels of a label (the sum of its glyphs' widths as the figure's renderer
    draws them, measured once per character), and the label height."""
    from matplotlib.font_manager import FontProperties

    font = FontProperties(size=LABEL_FONT_SIZE)
    scale = DPI / figure_dpi  # the renderer measures at the figure's dpi; we save at DPI
    glyphs: dict[str, float] = {}

    def measure(text: str) -> float:
        width = 0.0
        for char in text:
            w = glyphs.get(char)
            if w is None:
                w = glyphs[char] = renderer.get_text_width_height_descent(char, font, ismath=False)[0] * scale
            width += w
        return width * KERNING_MARGIN

    height = renderer.get_text_width_height_descent("Ag", font, ismath=False)[1] * scale
    return measure, height


def _plot_use(ax: Axes, allocations: Iterable[AllocationRecord], span: tuple[int, int]) -> None:
    """Bytes in use over time in the TCM, the variable SRAM and the DDR spill space."""
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    allocations = list(allocations)
    curves = [
        ("TCM", occupancy_steps(allocations, MemorySpace.TCM), "#4c72b0"),
        ("variable SRAM", occupancy_steps(allocations, MemorySpace.VARIABLE_SRAM, span=span), "#da8bc3"),
        ("DDR spill", occupancy_steps(allocations, MemorySpace.DDR, kinds=("spill",)), "#c44e52"),
    ]
    for label, (cycles, values), colour in curves:
        if not cycles:
            ax.plot([], [], color=colour, label=f"{label}: none")
            continue
        xs = [span[0], *cycles, span[1]] if cycles[0] > span[0] else [*cycles, span[1]]
        ys = [0, *values, values[-1]] if cycles[0] > span[0] else [*values, values[-1]]
        ax.step(xs, ys, where="post", color=colour, linewidth=1.2,
                label=f"{label}: peak {_kib(max(values))}")
        ax.fill_between(xs, ys, step="post", color=colour, alpha=0.15)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MultipleLocator(byte_tick_step(ax.get_ylim()[1], 5)))
    ax.yaxis.set_major_formatter(FuncFormatter(_kib))
    ax.set_ylabel("bytes in use")
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    ax.grid(True, axis="y", alpha=0.3)


def _short(name: str, limit: int = 28) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"
