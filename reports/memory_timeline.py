"""``memory_timeline.png``: where in the TCM each buffer lived, and when; and memory use over time.

Top panel: an address-versus-time map of the TCM. One rectangle per allocation
and invocation: x from the first to the last cycle a command touched it, y from its
offset to offset + size. Colour by kind (input, activation, tile, spill, ...);
only rectangles big enough to hold a label get one, so hundreds of tiles stay
readable. Bottom panel: bytes in use over time in the TCM, the variable SRAM and
the DDR spill space (allocations of kind ``spill`` in DDR).

With many invocations only the first :data:`MAX_INVOCATIONS_SHOWN` are drawn (they
repeat). Reads only the trace's allocation records.

Drawn with :mod:`reports.raster_plot` (Pillow): each allocation a filled rectangle in
the image, no plotting objects per allocation and no plotting library to import, so a
``npu-sim run`` pays milliseconds for its PNG (matplotlib took most of a second to
import and draw).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from npu_sim.hw.trace import AllocationRecord, InvocationRecord, Trace
from npu_sim.program import MemorySpace, block_tensor_of
from reports.occupancy import UsedAllocation, occupancy_steps, selected, trace_occupancy_steps
from reports.raster_plot import GREY, Canvas, Colour, Panel, blend, font, hex_colour, nice_step

#: Colour of each allocation kind (Program.Allocation.kind); other kinds are grey.
KIND_COLOURS = {
    "input": "#4c72b0",
    "output": "#dd8452",
    "constant": "#8c8c8c",
    "activation": "#55a868",
    "stripe": "#8fd175",
    "tile": "#8172b3",
    "spill": "#c44e52",
    "variable": "#da8bc3",
}
OTHER_COLOUR = "#bcbd22"
#: The blocks of one block tensor share a colour, the tensors taking these in turn.
BLOCK_TENSOR_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#17becf", "#e377c2", "#8c564b")
#: At most this many rectangles get a text label (the largest ones that have room).
MAX_LABELS = 40
#: The image (pixels) and its panels: the memory map above the bytes in use, legends on the right.
WIDTH_PX, HEIGHT_PX = 1600, 920
MAP_BOX = (95, 40, 1350, 604)
USE_BOX = (95, 616, 1350, 860)
LEGEND_X = 1362
FONT_PX = 13
#: zlib level of the PNG (1: fast; the image is mostly flat colour, so it compresses well anyway).
PNG_COMPRESS_LEVEL = 1
#: Labels are measured with the font's own advances; a label must fit with this much to spare.
KERNING_MARGIN = 1.05
#: Later invocations repeat the first ones: only this many are drawn (the title says so).
MAX_INVOCATIONS_SHOWN = 4
#: Above this many rectangles they are drawn without outlines (the outlines would hide them).
MAX_OUTLINED = 400
RED: Colour = (220, 30, 30)


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


#: Font size of the rectangle labels (pixels) and the pixels kept free around a label.
LABEL_FONT_PX = 11
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
        if across < text_height_px or room < 0:   # (no text is narrower than nothing: a sliver's)
            continue
        for text in label_texts(name):
            if measure(text) <= room:
                return text, rotation
    text = label_texts(name)[-1]
    # shortened, horizontally: at least 6 characters; the longest that fits, if the shortest
    # does (a longer one is no narrower: the widths of the glyphs add up). Most rectangles of a
    # long program are slivers: one measure each, not one per length.
    if height >= text_height_px and width >= 0 and len(text) > 6 and measure(_short(text, 6)) <= width:
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
    path = Path(path)
    shown = _shown(trace)
    canvas = Canvas(WIDTH_PX, HEIGHT_PX)
    x_range = (shown.span[0], shown.span[0] + shown.x_range * 1.005)
    memory_map = Panel(MAP_BOX, x_range, (0, shown.y_max))
    _draw_map(canvas, memory_map, shown)
    _mark_limits(canvas, memory_map, shown, tcm_size_bytes)
    _label_map(canvas, memory_map, shown, len(trace.invocations), tcm_size_bytes, title)
    use = _plot_use(canvas, x_range, trace, shown)
    for inv in shown.invocations[1:]:
        canvas.vline(use, inv.start_cycle, GREY, dash=3)
    canvas.x_ticks(use, nice_step(x_range[1] - x_range[0], 8), lambda v: f"{int(v):,}", FONT_PX)
    canvas.text(((USE_BOX[0] + USE_BOX[2]) / 2, HEIGHT_PX - 28), "cycle", FONT_PX, anchor="ma")
    canvas.save(path, PNG_COMPRESS_LEVEL)
    return path


def _draw_map(canvas: Canvas, panel: Panel, shown: _Shown) -> None:
    """One rectangle per TCM allocation (at least a sliver wide), labels where they fit."""
    min_width = shown.x_range * 0.002
    rects = [(a.first_cycle, a.offset_bytes, a.first_cycle + max(a.last_cycle - a.first_cycle, min_width),
              a.offset_bytes + a.size_bytes) for a in shown.tcm]
    canvas.rectangles(panel, rects, _fills(shown.tcm), (0, 0, 0) if len(rects) < MAX_OUTLINED else None)
    measure, text_height_px = _text_measure()
    for a, text, rotation in _labels(shown.tcm, panel.px_per_x, panel.px_per_y, measure, text_height_px):
        centre = (panel.x((a.first_cycle + a.last_cycle) / 2), panel.y(a.offset_bytes + a.size_bytes / 2))
        canvas.text(centre, text, LABEL_FONT_PX, anchor="mm", vertical=rotation == 90.0)
    canvas.frame(panel)


def _fills(records: list[UsedAllocation]) -> list[Colour]:
    """Each record's fill: its kind's colour, or its block tensor's (one per tensor)."""
    fills = {kind: blend(hex_colour(colour), 0.85) for kind, colour in KIND_COLOURS.items()}
    other = blend(hex_colour(OTHER_COLOUR), 0.85)
    tensors: dict[str, Colour] = {}
    out = []
    for a in records:
        tensor = block_tensor_of(a.name)
        if tensor and tensor not in tensors:
            tensors[tensor] = blend(hex_colour(BLOCK_TENSOR_COLOURS[len(tensors) % len(BLOCK_TENSOR_COLOURS)]), 0.85)
        out.append(tensors[tensor] if tensor else fills.get(a.kind, other))
    return out


def _mark_limits(canvas: Canvas, panel: Panel, shown: _Shown, tcm_size_bytes: int | None) -> None:
    """The TCM size as a line, and where each shown invocation after the first starts."""
    if tcm_size_bytes is not None and tcm_size_bytes <= shown.y_max:
        canvas.hline(panel, tcm_size_bytes, RED, dash=6)
        canvas.text((panel.box[0] + 4, panel.y(tcm_size_bytes) - 2), "TCM size", FONT_PX - 2, RED, anchor="ld")
    for inv in shown.invocations[1:]:
        canvas.vline(panel, inv.start_cycle, GREY, dash=3)
        canvas.text((panel.x(inv.start_cycle) + 3, panel.box[1] + 3), f"invocation {inv.index}", FONT_PX - 2,
                    GREY)


def _label_map(canvas: Canvas, panel: Panel, shown: _Shown, invocations: int, tcm_size_bytes: int | None,
               title: str) -> None:
    """Axis, legend of the kinds and title of the memory map."""
    canvas.y_ticks(panel, byte_tick_step(shown.y_max), _kib, FONT_PX)
    canvas.text((22, (panel.box[1] + panel.box[3]) / 2), "TCM offset", FONT_PX, vertical=True)
    kinds = sorted({a.kind for a in shown.tcm if not block_tensor_of(a.name)},
                   key=lambda k: (k not in KIND_COLOURS, k))
    entries = [(k, hex_colour(KIND_COLOURS.get(k, OTHER_COLOUR))) for k in kinds]
    if any(block_tensor_of(a.name) for a in shown.tcm):
        entries.append(("block tensor (a colour each)", hex_colour(BLOCK_TENSOR_COLOURS[0])))
    if entries:
        canvas.legend((LEGEND_X, panel.box[1]), entries, FONT_PX, title="allocation kind")
    heading = title or "TCM memory map"
    capacity = f" of {_kib(tcm_size_bytes)}" if tcm_size_bytes else ""
    count = len(shown.invocations)
    window = f" (invocations 0-{count - 1} of {invocations} shown)" if invocations > count else ""
    canvas.text((panel.box[0], 14), f"{heading}: {len(shown.all_tcm)} TCM allocations, footprint "
                f"{_kib(shown.top)}{capacity}{window}", FONT_PX + 2)
    if not shown.tcm:
        canvas.text(((panel.box[0] + panel.box[2]) / 2, (panel.box[1] + panel.box[3]) / 2),
                    "no TCM allocation was used", FONT_PX, GREY, anchor="mm")


def _text_measure() -> tuple[Callable[[str], float], float]:
    """Width in pixels of a label (the sum of its glyphs' advances in the label font, each
    measured once, with a margin for kerning), and the label height."""
    face = font(LABEL_FONT_PX)
    glyphs: dict[str, float] = {}

    def measure(text: str) -> float:
        width = 0.0
        for char in text:
            w = glyphs.get(char)
            if w is None:
                w = glyphs[char] = face.getlength(char)
            width += w
        return width * KERNING_MARGIN

    return measure, float(LABEL_FONT_PX + 2)


def _plot_use(canvas: Canvas, x_range: tuple[float, float], trace: Trace, shown: _Shown) -> Panel:
    """Bytes in use over time in the TCM, the variable SRAM and the DDR spill space (of the
    invocations shown: the trace's own curves when that is all of them)."""
    span = shown.span
    steps: Callable[..., tuple[list[int], list[int]]]
    if len(shown.allocations) == len(trace.allocations):
        steps = partial(trace_occupancy_steps, trace)
    else:
        steps = partial(occupancy_steps, shown.allocations)
    curves = [
        ("TCM", steps(MemorySpace.TCM), "#4c72b0"),
        ("variable SRAM", steps(MemorySpace.VARIABLE_SRAM, span=span), "#da8bc3"),
        ("DDR spill", steps(MemorySpace.DDR, kinds=("spill",)), "#c44e52"),
    ]
    top = max((max(values) for _, (_, values), _ in curves if values), default=0)
    panel = Panel(USE_BOX, x_range, (0, max(1, top) * 1.05))
    canvas.y_ticks(panel, byte_tick_step(panel.y_range[1], 5), _kib, FONT_PX, grid=True)
    entries = []
    for label, (cycles, values), colour in curves:
        if not cycles:
            entries.append((f"{label}: none", hex_colour(colour)))
            continue
        xs = [span[0], *cycles, span[1]] if cycles[0] > span[0] else [*cycles, span[1]]
        ys = [0, *values] if cycles[0] > span[0] else list(values)
        canvas.steps(panel, xs, ys, hex_colour(colour), blend(hex_colour(colour), 0.15))
        entries.append((f"{label}: peak {_kib(max(values))}", hex_colour(colour)))
    canvas.legend((LEGEND_X, panel.box[1]), entries, FONT_PX)
    canvas.text((22, (panel.box[1] + panel.box[3]) / 2), "bytes in use", FONT_PX, vertical=True)
    canvas.frame(panel)
    return panel


def _short(name: str, limit: int = 28) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"
