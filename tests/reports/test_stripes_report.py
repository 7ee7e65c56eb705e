"""Striped chains in summary.json and the plan statistics' text."""

from npu_sim.hw.config import with_optimise
from npu_sim.simulation import simulate
from reports.stripes import striped_chain_figures, striped_chain_lines
from tests.scheduler.graphs import machine, random_inputs
from tests.scheduler.passes.test_stripes import _chain_graph


def test_the_summary_lists_the_chains_and_both_lower_bounds():
    graph = _chain_graph()
    result = simulate(graph, with_optimise(machine("tiny"), "size"), random_inputs(graph))
    summary = result.summary
    assert (summary["tcm_lower_bound_bytes"], summary["tcm_lower_bound_unstriped_bytes"]) == (4800, 21696)
    stripes = summary["stripes"]
    assert {k: v for k, v in stripes.items() if k != "chains"} == {
        "count": 1, "tcm_lower_bound_unstriped_bytes": 21696, "rolling_bytes": 1536, "rolling_whole_bytes": 18432}
    assert stripes["chains"][0]["rolling_buffers"][0] == {"value": "clamp_9", "rows": 3, "size_bytes": 1152,
                                                          "whole_bytes": 9216}
    assert summary["tcm_peak"]["by_kind"]["stripe"] == 1536
    assert striped_chain_lines(stripes)[0] == ("striped chains: 1, rolling buffers 1.5 KiB for 18 KiB of whole "
                                               "tensors; lower bound unstriped 21.2 KiB")


def test_without_stripes_both_bounds_are_one():
    graph = _chain_graph()
    result = simulate(graph, machine("tiny"), random_inputs(graph))
    assert result.summary["tcm_lower_bound_unstriped_bytes"] == result.summary["tcm_lower_bound_bytes"] == 20160
    assert striped_chain_figures(None)["count"] == 0 and striped_chain_lines(result.summary["stripes"]) == []
