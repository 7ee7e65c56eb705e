"""reports.compare_report: two runs side by side, B against A."""

from __future__ import annotations

import re

from reports.compare_report import answer, compare_page, compare_rows, op_differences
from tests.reports.conftest import Run


def test_the_figures_of_both_runs_with_b_over_a(kws_runs: tuple[Run, Run]) -> None:
    a, b = (run.summary for run in kws_runs)
    rows = {label: (x, y, ratio) for label, x, y, ratio in compare_rows(a, b)}
    assert rows["Latency"] == ("68.6 us", "14.5 us", f"{b['total_cycles'] / a['total_cycles']:.3g}")
    # (A's first convolution fetches its DRAM input per OFM block, 3.3 KiB more; its convolutions read
    # their scales and biases again, 10 B a channel: mac_array.channel_parameter_bytes)
    assert rows["DDR per inference"] == ("40.3 KiB", "31.4 KiB", "0.779")
    assert answer(a, b).startswith("B against A: latency 0.211x (68.6 us -> 14.5 us), energy per inference ")


def test_operations_are_matched_by_name_and_invocation(kws_runs: tuple[Run, Run]) -> None:
    a, b = (run.summary for run in kws_runs)
    rows, row_a, row_b = op_differences(a, b)
    names_a = {(op["name"], op["invocation"]) for op in a["ops"]}
    names_b = {(op["name"], op["invocation"]) for op in b["ops"]}
    assert len(rows) == len(names_a | names_b)
    assert sum(r["where"] == "both" for r in rows) == len(names_a & names_b)
    assert sorted(row_a) == list(range(len(a["ops"]))) and sorted(row_b) == list(range(len(b["ops"])))
    for i, op in enumerate(a["ops"]):
        row = rows[row_a[i]]
        assert (row["name"], row["cycles_a"]) == (op["name"], op["cycles"])
        if row["where"] == "both":
            assert row["delta"] == row["cycles_b"] - row["cycles_a"]


def test_the_page_shows_both_runs(kws_runs: tuple[Run, Run]) -> None:
    page = compare_page(kws_runs[0].folder, kws_runs[1].folder)
    rows, _, _ = op_differences(kws_runs[0].summary, kws_runs[1].summary)
    body = page.split('id="ops">', 1)[1].split("</tbody>", 1)[0]
    assert body.count("<tr id=") == len(rows)
    assert page.count("data:image/png;base64,") == 2 and page.count('aria-label="roofline"') == 2
    assert page.count('aria-label="per-operation Gantt"') == 2
    links = set(re.findall(r'data-row="(op-\d+)"', page))
    assert links and links <= {f"op-{i}" for i in range(len(rows))}
