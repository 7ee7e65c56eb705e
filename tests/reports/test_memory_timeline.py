"""reports.memory_timeline: the PNG is written, labels go where they fit, big traces stay fast."""

from __future__ import annotations

import time

import pytest
from PIL import Image

from npu_sim.hw.trace import AllocationRecord, Counters
from reports.memory_timeline import _labels, byte_tick_step, label_texts, plot_memory_timeline
from tests.reports.synthetic import Trace, many_tiles_case, tiny_case

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_writes_a_png(tmp_path):
    _, trace = tiny_case()
    path = plot_memory_timeline(trace, tmp_path / "m.png", tcm_size_bytes=1024, title="tiny")
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    with Image.open(path) as image:
        width, height = image.size
        pixels = image.convert("RGB").getcolors(maxcolors=1 << 16)
    assert width > 1000 and height > 600
    assert len(pixels) > 20    # rectangles in the kinds' colours, text, curves: not a blank page


def test_hundreds_of_allocations(tmp_path):
    _, trace = many_tiles_case(layers=12, tiles=24, invocations=2)
    assert len(trace.allocations) > 500
    start = time.perf_counter()
    plot_memory_timeline(trace, tmp_path / "m.png", tcm_size_bytes=256 * 1024)
    assert time.perf_counter() - start < 10


def test_empty_trace(tmp_path):
    path = plot_memory_timeline(Trace([], [], [], Counters(), []), tmp_path / "m.png")
    assert path.read_bytes()[:8] == PNG_SIGNATURE


def test_labels_only_where_they_fit():
    def measure(text):  # 6 pixels per character
        return 6.0 * len(text)

    big = AllocationRecord("activation_0", "tcm", 0, 4096, "activation", 0, 0, 1000)
    tall = AllocationRecord("weights_long_name", "tcm", 0, 4096, "tile", 0, 0, 30)
    fused = AllocationRecord("CONV2D(a)+RESCALE(b)+CLAMP(c):in0/1", "tcm", 0, 200, "tile", 0, 0, 150)
    cut = AllocationRecord("a_rather_long_buffer_name", "tcm", 0, 200, "tile", 0, 0, 80)
    tiny = AllocationRecord("t", "tcm", 0, 16, "tile", 0, 0, 10)
    chosen = {a.name: (text, rot) for a, text, rot in _labels([tiny, tall, big, fused, cut], 1.0, 0.1,
                                                             measure, 10.0)}
    assert chosen == {"activation_0": ("activation_0", 0.0),
                      "weights_long_name": ("weights_long_name", 90.0),
                      "CONV2D(a)+RESCALE(b)+CLAMP(c):in0/1": ("CLAMP(c):in0/1", 0.0),
                      "a_rather_long_buffer_name": ("a_rather_lo…", 0.0)}  # 12 chars in 80-6 px


def test_label_texts():
    assert label_texts("x") == ["x"]
    assert label_texts("A(x)+B(y):in0") == ["A(x)+B(y):in0", "B(y):in0"]


@pytest.mark.parametrize("top, step", [(100, 16), (1024, 128), (215 * 1024, 32 * 1024), (1, 1)])
def test_byte_tick_step(top, step):
    assert byte_tick_step(top) == step
