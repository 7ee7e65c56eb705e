"""reports.roofline: operations by MACs per DDR byte under the MAC array's and the DDR's roofs."""

from __future__ import annotations

import math
import re

from npu_sim.hw.config import load_hw_config
from reports.roofline import Roof, points, roofline, roofs
from reports.summary import build_summary
from tests.reports.synthetic import tiny_case


def test_roofs_of_the_presets():
    edge = roofs(load_hw_config("edge").model_dump(mode="json"))
    assert edge is not None and edge.ddr_bytes_per_cycle == 16.0
    assert edge.compute == [Roof(256.0, "int8"), Roof(128.0, "int16/fp16/bf16"), Roof(64.0, "fp32")]
    u85 = roofs(load_hw_config("ethos-u85-256").model_dump(mode="json"))
    assert u85 is not None and u85.ddr_bytes_per_cycle == 12.0
    assert u85.compute == [Roof(256.0, "int8"), Roof(128.0, "int16"), Roof(16.0, "depthwise")]
    assert roofs({}) is None
    assert roofs({"mac_array": {"macs_per_cycle": {}}, "ddr": {"bandwidth_bytes_per_cycle": 8}}) is None


def test_the_tiny_conv_sits_at_its_intensity_and_achieved_rate():
    """conv: 8,192 MACs over 768 DDR bytes (10.7 MACs/byte) in 500 busy cycles (16.4 MACs/cycle);
    on axes of 1..100 MACs/byte and 1..1000 MACs/cycle."""
    program, trace = tiny_case()
    s = build_summary(trace, load_hw_config("edge"), program)
    [p] = points(s)
    assert (p.index, p.name, p.intensity, p.macs_per_cycle, p.bound) == (0, "conv", 8192 / 768, 8192 / 500, "compute")
    chart = roofline(s)
    [(cx, cy, row)] = re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"[^>]*data-row="(op-\d+)"', chart)
    assert float(cx) == round(64 + math.log10(8192 / 768) / 2 * (720 - 64 - 110), 1)
    assert float(cy) == round(420 - 46 - math.log10(8192 / 500) / 3 * (420 - 16 - 46), 1)
    assert row == "op-0"
    assert "int16/fp16/bf16 128" in chart and "DDR 16 B/cycle" in chart


def test_without_macs_or_hardware_it_says_why():
    program, trace = tiny_case()
    s = build_summary(trace, load_hw_config("edge"), program)
    assert "no operation multiplies" in roofline({**s, "ops": [op for op in s["ops"] if not op["macs"]]})
    assert "does not hold the hardware config" in roofline({**s, "hw": {}})
    no_ddr = {**s, "ops": [{**s["ops"][0], "ddr_read_bytes": 0}]}
    assert points(no_ddr)[0].intensity is None and 'fill="#fff"' in roofline(no_ddr)
