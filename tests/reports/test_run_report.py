"""reports.run_report: the page of one run, read from its folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from npu_sim.errors import InputError
from reports.run_report import op_rows, read_summary, run_page
from tests.reports.conftest import Run


def _rows(page: str, table_id: str) -> list[str]:
    body = page.split(f'id="{table_id}">', 1)[1].split("</tbody>", 1)[0]
    return re.findall(r"<tr[^>]*>.*?</tr>", body.split("<tbody>", 1)[1])


def test_the_page_has_one_row_per_operation_with_its_busy_cycles(kws_runs: tuple[Run, Run]) -> None:
    run = kws_runs[0]
    page = (run.folder / "report.html").read_text()
    assert page == run_page(run.folder)
    ops = run.summary["ops"]
    rows = _rows(page, "ops")
    assert len(rows) == len(ops) == 51   # (no staging copy of the input: tcm.graph_inputs_in_place)
    for op, row in zip(ops, rows):
        values = re.findall(r'<td data-v="([^"]*)"', row)   # the numeric cells
        index, start, busy, share, span = (float(v) for v in values[:5])
        assert (index, start, busy, span) == (ops.index(op), op["start_cycle"], op["cycles"],
                                              op["end_cycle"] - op["start_cycle"])
        assert busy <= op["compute_cycles"] + op["dma_cycles"] and busy <= span
        assert share == pytest.approx(op["cycles"] / run.summary["per_invocation_cycles"][0])
    pool = next(op for op in ops if op["name"] == "constant_pool")
    # (the pool's chunks load on one engine, the U85's weight channel: busy as long as its DMAs)
    assert (pool["cycles"], pool["dma_cycles"], pool["span_cycles"]) == (3749, 3749, 58791)


def test_the_page_leads_with_the_answer_in_human_units(kws_runs: tuple[Run, Run]) -> None:
    page = (kws_runs[0].folder / "report.html").read_text()
    assert "<p class='answer'>68.6 us per inference on ethos-u85-256; 67.3 % of the operations&#x27; cycles are " \
           "compute-bound" in page
    assert re.findall(r'<div class="label">([^<]*)</div><div class="value">([^<]*)</div>', page) == [
        ("Latency", "68.6 us"), ("Inferences per second", "14.6 k/s"), ("MAC utilisation", "15.1 %"),
        ("DDR bandwidth", "0.601 GB/s"), ("DDR per inference", "40.3 KiB"), ("Peak TCM", "19.3 KiB"),
        ("Energy per inference", "13.6 uJ"), ("Area", "4.31 mm2")]
    assert "Share of cycles by bound: compute-bound 67.3 %, memory-bound 11.7 %, setup/latency-bound 21.1 %." in page
    for heading in ("Where the time goes", "Timeline", "Operations", "Roofline", "Memory timeline",
                    "Energy and area"):
        assert f"<h2>{heading}</h2>" in page
    assert page.count("data:image/png;base64,") == 1 and "src='http" not in page
    peak = kws_runs[0].summary["tcm_peak"]
    assert len(_rows(page, "peak-tensors")) == len(peak["tensors"]) > 0


def test_fused_operations_composites_and_the_preamble_are_marked(lstm_stream: Run,
                                                                 kws_runs: tuple[Run, Run]) -> None:
    rows, classes = op_rows(lstm_stream.summary)
    composite = {name for c in lstm_stream.summary["fused_composites"] for name in c["operations"]}
    assert composite and all((c == "composite") == (r["name"] in composite) for r, c in zip(rows, classes))
    preamble = [r for r in rows if r["invocation"] == -1]
    assert [r["name"] for r in preamble] == ["constant_pool"] and preamble[0]["share"] == ""
    page = run_page(lstm_stream.folder)
    assert "composite: lstm_cell" in page and ">preamble</td>" in page
    assert "3 fused" in (kws_runs[0].folder / "report.html").read_text()


def test_a_folder_that_is_not_a_run_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not an npu-sim run folder"):
        read_summary(tmp_path)
    (tmp_path / "summary.json").write_text("{")
    with pytest.raises(InputError, match="not valid JSON"):
        read_summary(tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps({"command": "exec"}))
    with pytest.raises(InputError, match="the summary of npu-sim exec, which times nothing"):
        read_summary(tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps([1]))
    with pytest.raises(InputError, match="not the summary of npu-sim run"):
        read_summary(tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps({"total_cycles": 5, "ops": [{"name": "x"}]}))
    with pytest.raises(InputError, match=r"ops\[0\] is not an operation row"):
        read_summary(tmp_path)
