"""reports.run_figures: the headline of a run in human units, and its one-sentence answer."""

from __future__ import annotations

import pytest

from npu_sim.hw.config import load_hw_config
from reports.run_figures import answer, headline_figures
from reports.summary import build_summary
from tests.reports.synthetic import tiny_case


@pytest.fixture
def summary() -> dict:
    program, trace = tiny_case()
    return build_summary(trace, load_hw_config("edge"), program, graph="tiny.tosa")


def test_the_tiny_case_in_human_units(summary: dict) -> None:
    """1,000 cycles at 1 GHz; 8,192 MACs on a 256-MAC array; 896 DDR bytes; a 1 KiB TCM plan."""
    assert [(f.label, f.value, f.detail) for f in headline_figures(summary)] == [
        ("Latency", "1 us", "1,000 cycles per inference at 1 GHz"),
        ("Inferences per second", "1 M/s", "one inference after another"),
        ("MAC utilisation", "3.2 %", "8.19 k MACs per inference"),
        ("DDR bandwidth", "0.896 GB/s", "5.6 % of the DDR's peak"),
        ("DDR per inference", "896 B", "read 768 B, write 128 B"),
        ("Peak TCM", "1 KiB", "lower bound 1 KiB of 512 KiB"),
        ("Energy per inference", "158 nJ", "most of it ddr: 90.6 %"),
        ("Area", "8.53 mm2", "most of it tcm: 48.0 %")]
    assert headline_figures(summary)[0].number == pytest.approx(1e-6)


def test_per_inference_figures_divide_by_the_invocations_and_extras_show(summary: dict) -> None:
    stream = {**summary, "invocations": 4, "total_cycles": 4000, "per_invocation_cycles": [1000] * 4,
              "ddr_read_bytes": 4 * 768, "ddr_write_bytes": 4 * 128, "energy_pj": 4 * 158150.0,
              "preamble_cycles": 250, "preamble_ddr_bytes": 2048, "tcm_lower_bound_bytes": 800,
              "cpu_ops": [{"name": "softmax", "op": "SOFTMAX", "cycles": 400, "reason": "fp32"}]}
    figures = {f.label: f for f in headline_figures(stream)}
    assert figures["Latency"].detail == "1,000 cycles per inference at 1 GHz, 4 inferences"
    assert (figures["DDR per inference"].value, figures["Energy per inference"].value) == ("896 B", "158 nJ")
    assert figures["Peak TCM"].detail == "lower bound 800 B (+28.0 %) of 512 KiB"
    assert (figures["CPU fallback"].value, figures["CPU fallback"].detail, figures["CPU fallback"].warn) == (
        "1 ops", "on the host CPU: 400 cycles, 10.0 % of the run", True)
    assert (figures["Preamble"].value, figures["Preamble"].detail) == ("250 ns", "constants loaded once: 2 KiB")


def test_the_answer_leads_with_latency_bound_busiest_unit_and_longest_operation(summary: dict) -> None:
    assert answer(summary) == ("1 us per inference on edge; 53.3 % of the operations' cycles are compute-bound; "
                               "the busiest unit is dma0 (40.0 % busy); the longest operation is conv "
                               "(50.0 % of the inference).")


def test_the_tcm_figure_gives_the_constants_share_of_the_peak(summary: dict) -> None:
    resident = {**summary, "tcm_peak": {**summary["tcm_peak"], "by_kind": {"activation": 768, "constant": 256}},
                "tcm_resident_constant_bytes": 256}
    assert {f.label: f for f in headline_figures(resident)}["Peak TCM"].detail == \
        "lower bound 1 KiB of 512 KiB; constants 25.0 % of the peak (256 B resident)"
    streamed = {**resident, "tcm_resident_constant_bytes": 0}
    assert {f.label: f for f in headline_figures(streamed)}["Peak TCM"].detail == \
        "lower bound 1 KiB of 512 KiB; constants 25.0 % of the peak (streamed)"
