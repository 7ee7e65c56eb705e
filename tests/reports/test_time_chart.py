"""reports.time_chart: where the time goes, as bar charts."""

from __future__ import annotations

import re

from npu_sim.hw.config import load_hw_config
from reports.summary import build_summary
from reports.time_chart import bound_chart, top_operations, top_operations_chart, unit_chart
from tests.reports.synthetic import many_tiles_case, tiny_case


def _summary(case=tiny_case) -> dict:
    program, trace = case()
    return build_summary(trace, load_hw_config("edge"), program)


def test_the_bound_and_unit_charts_give_each_share():
    s = _summary()
    bounds = bound_chart(s)
    assert [n for n in re.findall(r">([^<>]*ops)</text>", bounds)] == [
        "53.3 % · 1 ops", "33.7 % · 1 ops", "13.0 % · 0 ops"]
    assert "<title>compute: 560 cycles</title>" in bounds
    units = unit_chart(s)
    assert re.findall(r">([\d.]+ % busy)</text>", units) == ["40.0 % busy", "5.0 % busy", "40.0 % busy",
                                                             "20.0 % busy", "0.0 % busy"]


def test_the_longest_operations_come_first_split_by_bound_and_link_to_their_rows():
    s = _summary(lambda: many_tiles_case(layers=5, tiles=3, invocations=2))
    top = top_operations(s, 3)
    cycles = [s["ops"][i]["cycles"] for i in top]
    assert cycles == sorted(cycles, reverse=True) and all(s["ops"][i]["invocation"] == 0 for i in top)
    chart = top_operations_chart(s, 3)
    assert re.findall(r'data-row="(op-\d+)"', chart) == [f"op-{i}" for i in top]
    assert chart.count("<rect") == 3 + sum(1 for i in top for v in s["ops"][i]["bound_shares"].values() if v)
    assert "No operations" in top_operations_chart({"ops": []})
