"""The PNG writer of reports.raster_plot: the pixels drawn are the pixels a PNG reader decodes."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from reports.raster_plot import BLACK, Canvas, Panel, png_bytes


def _decoded(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def test_png_bytes_decode_to_the_same_pixels() -> None:
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    pixels[10:20] = pixels[9]   # repeated rows, and wrapping differences between the others
    image = Image.fromarray(pixels, "RGB")
    for level in (0, 1, 9):
        decoded = _decoded(png_bytes(image, level))
        assert decoded.mode == "RGB" and decoded.size == (53, 37)
        assert np.array_equal(np.asarray(decoded), pixels)


def test_a_canvas_saves_what_it_drew(tmp_path) -> None:
    canvas = Canvas(120, 80)
    panel = Panel((10, 10, 110, 70), (0, 10), (0, 5))
    canvas.rectangles(panel, [(1, 1, 4, 3), (5, 0, 9, 5)], [(200, 30, 30), (30, 30, 200)], BLACK)
    canvas.text((20, 20), "TCM", 12)
    canvas.save(tmp_path / "plot.png")
    assert np.array_equal(np.asarray(_decoded((tmp_path / "plot.png").read_bytes())), np.asarray(canvas.image))
    grey = Image.new("L", (5, 4), 77)
    assert np.array_equal(np.asarray(_decoded(png_bytes(grey))), np.asarray(grey.convert("RGB")))
