"""npu-sim report (one run as a self-contained HTML page) and npu-sim compare (two runs side by side)."""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_sim.cli import main
from npu_sim.commands.run_cmd import run_simulation
from reports.run_report import compare_rows

GRAPH = str(Path(__file__).resolve().parents[2] / "examples" / "conv_rescale_int8.tosa")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict, dict]:
    root = tmp_path_factory.mktemp("runs")
    a = run_simulation(GRAPH, "edge", [], root / "a", random_seed=0)
    b = run_simulation(GRAPH, "tiny", [], root / "b", random_seed=0)
    return root / "a", root / "b", a, b


def test_report_is_one_self_contained_page(runs: tuple[Path, Path, dict, dict]) -> None:
    run_a, _, summary, _ = runs
    assert main(["report", str(run_a)]) == 0
    page = (run_a / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 1 and "src='http" not in page
    assert f"<td>total_cycles</td><td>{summary['total_cycles']}</td>" in page
    assert page.count("<tr>") >= len(summary["ops"])


def test_compare_gives_b_over_a(runs: tuple[Path, Path, dict, dict], capsys: pytest.CaptureFixture[str]) -> None:
    run_a, run_b, a, b = runs
    rows = {name: (x, y, ratio) for name, x, y, ratio in compare_rows(a, b)}
    assert rows["total_cycles"] == (a["total_cycles"], b["total_cycles"],
                                    f"{b['total_cycles'] / a['total_cycles']:.3f}")
    assert main(["compare", str(run_a), str(run_b)]) == 0
    assert f"{b['total_cycles']:,}" in capsys.readouterr().out


def test_a_folder_without_summary_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path)]) == 2
    assert "not an npu-sim run folder" in capsys.readouterr().err
