"""reports.gantt: each operation's busy intervals on the lanes of its units."""

from __future__ import annotations

import re

from npu_sim.hw.config import load_hw_config
from reports.gantt import gantt, lanes
from reports.summary import build_summary
from tests.reports.synthetic import tiny_case


def test_the_tiny_case_places_each_busy_interval_in_percent_of_the_run():
    program, trace = tiny_case()
    s = build_summary(trace, load_hw_config("edge"), program)
    assert lanes(s) == ["dma0", "dma1", "mac_array", "vector", "lut"]
    html = gantt(s)
    groups = re.findall(r'<g fill="(#\w+)"[^>]*data-row="(op-\d)"><title>([^<]*)</title>(.*?)</g>', html)
    assert [(colour, row) for colour, row, _, _ in groups] == [("#3a7d44", "op-0"), ("#2f6db5", "op-1")]
    assert groups[0][2] == "conv (CONV2D+RESCALE), invocation 0: 500 busy cycles over a span of 500, compute-bound"
    rects = [re.findall(r'x="([\d.]+)%" y="(\d+)" width="([\d.]+)%"', g[3]) for g in groups]
    # conv: dma0 0..100, dma1 0..50, mac_array 100..500; add: vector 500..700, dma0 700..1000 (of 1,000)
    assert rects == [[("0.0000", "3", "10.0000"), ("0.0000", "27", "5.0000"), ("10.0000", "51", "40.0000")],
                     [("50.0000", "75", "20.0000"), ("70.0000", "3", "30.0000")]]
    assert re.findall(r">(\d+ ns|1 us)</text>", html)[::5] == ["0 ns", "500 ns", "1 us"]


def test_a_summary_without_intervals_draws_spans_and_an_empty_one_says_so():
    old = {"busy_cycles": {"mac_array": 5}, "ops": [{"name": "x", "unit": "mac_array", "start_cycle": 0,
                                                      "end_cycle": 10, "bound": "compute"}]}
    assert 'x="0.0000%" y="3" width="100.0000%"' in gantt(old)
    assert "No operations to draw" in gantt({"ops": []})
