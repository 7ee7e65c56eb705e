"""npu-sim report, npu-sim compare and npu-sim run --html: pages written where asked, bad
folders and paths refused in one line (exit 2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from npu_sim.cli import main

GRAPH = str(Path(__file__).resolve().parents[2] / "examples" / "conv_rescale_int8.tosa")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    assert main(["run", GRAPH, "--hw", "edge", "--random-inputs", "0", "--html", "-o", str(root / "a")]) == 0
    assert main(["run", GRAPH, "--hw", "tiny", "--random-inputs", "0", "-o", str(root / "b")]) == 0
    return root / "a", root / "b"


def test_run_html_writes_the_page_beside_the_summary(runs: tuple[Path, Path]) -> None:
    a, b = runs
    summary = json.loads((a / "summary.json").read_text())
    assert summary["report_files"] == ["summary.json", "memory_timeline.png", "trace.json", "report.html"]
    assert (a / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert not (b / "report.html").exists()


def test_report_writes_the_page_and_says_where(runs: tuple[Path, Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _, b = runs
    assert main(["report", str(b)]) == 0
    assert capsys.readouterr().out == f"report: {b / 'report.html'}\n"
    assert "<h2>Operations</h2>" in (b / "report.html").read_text()
    assert main(["report", str(b), "-o", str(tmp_path / "page.html")]) == 0
    assert (tmp_path / "page.html").read_text() == (b / "report.html").read_text()
    assert oct(os.stat(tmp_path / "page.html").st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_compare_prints_the_figures_and_writes_the_page(runs: tuple[Path, Path], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    a, b = runs
    monkeypatch.chdir(tmp_path)
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "Latency" in out and "Peak TCM" in out and out.endswith("compare: compare.html\n")
    assert (tmp_path / "compare.html").read_text().count('aria-label="roofline"') == 2
    assert main(["compare", str(a), str(b), "-o", str(tmp_path / "x.html")]) == 0
    assert (tmp_path / "x.html").is_file()


@pytest.mark.parametrize("args, message", [
    (["report", "{tmp}"], "not an npu-sim run folder"),
    (["report", "{a}", "-o", "{tmp}"], "is a directory"),
    (["report", "{a}", "-o", "{tmp}/no/such/dir/x.html"], "cannot write"),
    (["compare", "{a}", "{tmp}"], "not an npu-sim run folder"),
    (["compare", "{a}", "{b}", "-o", "{tmp}"], "is a directory"),
])
def test_bad_folders_and_paths_are_one_line_and_exit_2(runs: tuple[Path, Path], tmp_path: Path, args: list[str],
                                                       message: str, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = runs
    argv = [arg.format(tmp=tmp_path, a=a, b=b) for arg in args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err
