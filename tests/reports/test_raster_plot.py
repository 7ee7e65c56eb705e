"""reports.raster_plot: data units map to pixels, rectangles and curves land where they should,
text is drawn, the PNG is written."""

from __future__ import annotations

import pytest
from PIL import Image

from reports.raster_plot import BLACK, WHITE, Canvas, Panel, blend, hex_colour, nice_step


def test_panel_maps_data_to_pixels_with_y_upwards():
    panel = Panel((10, 20, 110, 220), (0, 50), (0, 1000))
    assert (panel.x(0), panel.x(50), panel.x(25)) == (10, 110, 60)
    assert (panel.y(0), panel.y(1000), panel.y(500)) == (220, 20, 120)
    assert (panel.px_per_x, panel.px_per_y) == (2.0, 0.2)


@pytest.mark.parametrize("span, ticks, step", [(100, 8, 20), (1_000_000, 8, 200_000), (7, 8, 1), (0.3, 5, 0.1)])
def test_nice_steps(span, ticks, step):
    assert nice_step(span, ticks) == pytest.approx(step)
    assert span / nice_step(span, ticks) <= ticks


def test_colours():
    assert hex_colour("#4c72b0") == (0x4C, 0x72, 0xB0)
    assert blend((0, 0, 0), 0.85) == (38, 38, 38)
    assert blend((10, 20, 30), 1.0) == (10, 20, 30)


def test_rectangles_curves_and_text_are_drawn(tmp_path):
    canvas = Canvas(200, 120)
    panel = Panel((0, 0, 199, 99), (0, 100), (0, 100))
    canvas.rectangles(panel, [(10, 10, 30, 50), (60, 0, 60.1, 100), (500, 0, 600, 10)], [(255, 0, 0)] * 3, None)
    pixels = canvas.image.load()
    assert pixels[panel.x(20), panel.y(30)] == (255, 0, 0)        # inside the first
    assert pixels[panel.x(60), panel.y(50)] == (255, 0, 0)        # a sliver: at least a pixel wide
    assert pixels[panel.x(45), panel.y(30)] == WHITE               # between them; the third is off the panel
    canvas.steps(panel, [0, 50, 100], [20, 80], (0, 0, 255), None)
    assert pixels[panel.x(25), panel.y(20)] == (0, 0, 255)
    canvas.text((100, 110), "x", 12, BLACK, anchor="mm")
    assert any(pixels[x, y] != WHITE for x in range(90, 110) for y in range(100, 120))
    canvas.save(tmp_path / "p.png")
    with Image.open(tmp_path / "p.png") as image:
        assert image.size == (200, 120) and image.format == "PNG"
