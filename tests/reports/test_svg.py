"""reports.svg: axis ticks, labels and the bar chart the pages draw."""

from __future__ import annotations

import re

from reports.svg import Bar, bar_chart, esc, linear_ticks, log_ticks, nice_step, tick_label


def test_ticks():
    assert [nice_step(s) for s in (70516, 100, 8, 0)] == [10000.0, 20.0, 1.0, 1.0]
    assert linear_ticks(70516) == [0.0, 10000.0, 20000.0, 30000.0, 40000.0, 50000.0, 60000.0, 70000.0]
    assert log_ticks(3.0, 250.0) == [1.0, 10.0, 100.0, 1000.0]
    assert log_ticks(10.0, 10.0) == [10.0, 100.0]
    assert [tick_label(v) for v in (0.1, 1.0, 1000.0, 1e7)] == ["0.1", "1", "1k", "10M"]


def test_a_bar_chart_draws_each_segment_at_its_fraction_with_its_tooltip():
    chart = bar_chart([Bar("a<b", [(0.5, "#111", "half"), (0.25, "#222", "quarter")], "75 %", "op-3"),
                       Bar("c", [(2.0, "#333", "too much")])], label="test", label_width=100, bar_width=400,
                      note_width=50, row_height=20)
    assert chart.startswith('<svg class="chart" width="550" height="40" viewBox="0 0 550 40"')
    widths = re.findall(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="14" fill="(#\d+)">', chart)
    assert widths == [("100.00", "200.00", "#111"), ("300.00", "100.00", "#222"), ("100.00", "400.00", "#333")]
    assert "<title>quarter</title>" in chart and "a&lt;b" in chart and 'data-row="op-3"' in chart
    assert esc('"x"') == "&quot;x&quot;"
