"""A small raster plotting canvas (Pillow): panels with linear axes, rectangles, step curves, text.

What ``memory_timeline.png`` needs and no more, drawn straight into an RGB image and
saved as PNG. Pillow (matplotlib's own image library, so already installed with it)
imports in some tens of milliseconds where matplotlib takes most of a second, and
draws ten thousand rectangles in a few milliseconds: the PNG of every ``npu-sim run``
costs what its content costs. Text uses Pillow's built-in scalable font.
"""

from __future__ import annotations

import functools
import math
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

Colour = tuple[int, int, int]
BLACK: Colour = (0, 0, 0)
GREY: Colour = (128, 128, 128)
LIGHT_GREY: Colour = (225, 225, 225)
WHITE: Colour = (255, 255, 255)


def hex_colour(text: str) -> Colour:
    """``#rrggbb`` as an RGB triple."""
    return int(text[1:3], 16), int(text[3:5], 16), int(text[5:7], 16)


def blend(colour: Colour, alpha: float, under: Colour = WHITE) -> Colour:
    """``colour`` at opacity ``alpha`` over ``under``."""
    return tuple(round(alpha * c + (1 - alpha) * u) for c, u in zip(colour, under))  # type: ignore[return-value]


@functools.cache
def font(size_px: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """Pillow's built-in font at ``size_px`` (its bitmap font where FreeType is missing)."""
    try:
        return ImageFont.load_default(size=size_px)
    except (ImportError, OSError, TypeError):   # pragma: no cover - a Pillow without FreeType
        return ImageFont.load_default()


def nice_step(span: float, max_ticks: int) -> float:
    """A tick step of 1, 2 or 5 times a power of ten giving at most ``max_ticks`` ticks over ``span``."""
    if span <= 0:
        return 1.0
    step = 10.0 ** math.floor(math.log10(span / max_ticks))
    for factor in (1, 2, 5, 10):
        if span / (step * factor) <= max_ticks:
            return step * factor
    return step * 10   # pragma: no cover - the loop always returns


@dataclass
class Panel:
    """A plotting area ``box`` (left, top, right, bottom pixels) showing ``x_range`` x ``y_range``."""

    box: tuple[int, int, int, int]
    x_range: tuple[float, float]
    y_range: tuple[float, float]

    def x(self, value: float) -> float:
        left, _, right, _ = self.box
        lo, hi = self.x_range
        return left + (value - lo) * (right - left) / ((hi - lo) or 1)

    def y(self, value: float) -> float:
        _, top, _, bottom = self.box
        lo, hi = self.y_range
        return bottom - (value - lo) * (bottom - top) / ((hi - lo) or 1)

    @property
    def px_per_x(self) -> float:
        return (self.box[2] - self.box[0]) / ((self.x_range[1] - self.x_range[0]) or 1)

    @property
    def px_per_y(self) -> float:
        return (self.box[3] - self.box[1]) / ((self.y_range[1] - self.y_range[0]) or 1)


class Canvas:
    """An RGB image to draw panels on; :meth:`save` writes the PNG."""

    def __init__(self, width_px: int, height_px: int) -> None:
        self.image = Image.new("RGB", (width_px, height_px), WHITE)
        self.draw = ImageDraw.Draw(self.image)

    def rectangles(self, panel: Panel, rects: Sequence[tuple[float, float, float, float]],
                   fills: Sequence[Colour], outline: Colour | None) -> None:
        """Rectangles ``(x0, y0, x1, y1)`` in data units, clipped to the panel, at least a pixel each."""
        left, top, right, bottom = panel.box
        rectangle = self.draw.rectangle
        for (x0, y0, x1, y1), fill in zip(rects, fills):
            px0, px1 = max(left, panel.x(x0)), min(right, panel.x(x1))
            py0, py1 = max(top, panel.y(y1)), min(bottom, panel.y(y0))
            if px1 < px0 or py1 < py0:
                continue
            rectangle((px0, py0, max(px1, px0 + 1), max(py1, py0 + 1)), fill=fill, outline=outline, width=1)

    def steps(self, panel: Panel, xs: Sequence[float], ys: Sequence[float], colour: Colour,
              fill: Colour | None) -> None:
        """A step curve (``ys[i]`` from ``xs[i]`` to ``xs[i + 1]``), its area filled with ``fill``."""
        points: list[tuple[float, float]] = []
        for i, value in enumerate(ys):
            y = panel.y(value)
            points.append((panel.x(xs[i]), y))
            if i + 1 < len(xs):
                points.append((panel.x(xs[i + 1]), y))
        if len(points) < 2:
            return
        if fill is not None:
            base = panel.y(panel.y_range[0])
            self.draw.polygon([(points[0][0], base), *points, (points[-1][0], base)], fill=fill)
        self.draw.line(points, fill=colour, width=2)

    def hline(self, panel: Panel, value: float, colour: Colour, dash: int = 0) -> None:
        y = panel.y(value)
        self._line(panel.box[0], y, panel.box[2], y, colour, dash)

    def vline(self, panel: Panel, value: float, colour: Colour, dash: int = 0) -> None:
        x = panel.x(value)
        self._line(x, panel.box[1], x, panel.box[3], colour, dash)

    def _line(self, x0: float, y0: float, x1: float, y1: float, colour: Colour, dash: int) -> None:
        if not dash:
            self.draw.line([(x0, y0), (x1, y1)], fill=colour, width=1)
            return
        length = math.hypot(x1 - x0, y1 - y0)
        for k in range(0, int(length), 2 * dash):
            a, b = k / length, min(k + dash, length) / length
            self.draw.line([(x0 + a * (x1 - x0), y0 + a * (y1 - y0)), (x0 + b * (x1 - x0), y0 + b * (y1 - y0))],
                           fill=colour, width=1)

    def frame(self, panel: Panel) -> None:
        self.draw.rectangle(panel.box, outline=BLACK, width=1)

    def text(self, xy: tuple[float, float], text: str, size_px: int, colour: Colour = BLACK,
             anchor: str = "la", vertical: bool = False) -> None:
        """``text`` at pixel ``xy`` (Pillow anchors: ``la`` left-ascender, ``mm`` middle, ...);
        ``vertical``: rotated a quarter turn, reading upwards, centred on ``xy``."""
        face = font(size_px)
        if not vertical:
            self.draw.text(xy, text, fill=colour, font=face, anchor=anchor)
            return
        width, height = int(face.getlength(text)) + 2, size_px + 4
        label = Image.new("L", (width, height), 0)
        ImageDraw.Draw(label).text((1, height // 2), text, fill=255, font=face, anchor="lm")
        label = label.rotate(90, expand=True)
        self.image.paste(Image.new("RGB", label.size, colour),
                         (round(xy[0] - label.width / 2), round(xy[1] - label.height / 2)), label)

    def x_ticks(self, panel: Panel, step: float, label: Callable[[float], str], size_px: int) -> None:
        lo, hi = panel.x_range
        value = math.ceil(lo / step) * step
        while value <= hi:
            x = panel.x(value)
            self.draw.line([(x, panel.box[3]), (x, panel.box[3] + 4)], fill=BLACK)
            self.text((x, panel.box[3] + 6), label(value), size_px, anchor="ma")
            value += step

    def y_ticks(self, panel: Panel, step: float, label: Callable[[float], str], size_px: int,
                grid: bool = False) -> None:
        lo, hi = panel.y_range
        value = math.ceil(lo / step) * step
        while value <= hi:
            y = panel.y(value)
            if grid:
                self.draw.line([(panel.box[0], y), (panel.box[2], y)], fill=LIGHT_GREY)
            self.draw.line([(panel.box[0] - 4, y), (panel.box[0], y)], fill=BLACK)
            self.text((panel.box[0] - 6, y), label(value), size_px, anchor="rm")
            value += step

    def legend(self, xy: tuple[float, float], entries: Sequence[tuple[str, Colour]], size_px: int,
               title: str = "") -> None:
        """Colour swatches with their names, one per line, from ``xy`` down."""
        x, y = xy
        if title:
            self.text((x, y), title, size_px)
            y += size_px + 6
        for name, colour in entries:
            self.draw.rectangle((x, y + 1, x + size_px, y + size_px), fill=colour, outline=BLACK)
            self.text((x + size_px + 6, y), name, size_px)
            y += size_px + 6

    def save(self, path: Path, compress_level: int = 1) -> None:
        """Write the PNG (:func:`png_bytes`)."""
        Path(path).write_bytes(png_bytes(self.image, compress_level))


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_bytes(image: Image.Image, compress_level: int = 1) -> bytes:
    """``image`` (RGB) as a PNG file: 8-bit truecolour, every row stored as its difference to the
    row above (PNG filter type 2, "Up": a plot's rows mostly repeat the one above, so the rows
    become runs of zeros), one zlib stream at ``compress_level``. The same pixels Pillow's PNG
    writer stores, in some 10 ms less: Pillow tries all five filters on every row, and its PNG
    plugin imports in milliseconds."""
    width, height = image.size
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    rows = np.frombuffer(rgb.tobytes(), np.uint8).reshape(height, width * 3)
    filtered = np.empty((height, width * 3 + 1), np.uint8)
    filtered[:, 0] = 2
    filtered[:1, 1:] = rows[:1]   # the row above the first is zeros
    np.subtract(rows[1:], rows[:-1], out=filtered[1:, 1:])   # modulo 256, as PNG filters are
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)   # 8 bits, RGB, deflate, no interlace
    return b"".join((PNG_SIGNATURE, _png_chunk(b"IHDR", header),
                     _png_chunk(b"IDAT", zlib.compress(filtered.data, compress_level)),
                     _png_chunk(b"IEND", b"")))


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
