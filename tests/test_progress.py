"""npu_sim.progress: a progress line on a terminal once work takes long (stage and items done),
erased at the end; nothing when the output is not a terminal; the CLI's run and plan use it."""

from __future__ import annotations

import io
import time
from pathlib import Path

from npu_sim import progress
from npu_sim.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ds_cnn_kws_int8.tosa"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_the_stage_and_the_count_then_a_clean_line():
    out, done = Terminal(), []
    with progress.showing(out, delay_seconds=0.0):
        progress.stage("compiling operations", 40, done.__len__)
        done += [1] * 10
        time.sleep(3 * progress.REFRESH_SECONDS)
        progress.stage("planning the memories")
        time.sleep(3 * progress.REFRESH_SECONDS)
    text = out.getvalue()
    assert "compiling operations: 10/40 (25%)" in text and "planning the memories ..." in text
    assert text.endswith("\r") and text.rstrip("\r").split("\r")[-1].strip() == ""   # erased


def test_short_work_and_pipes_show_nothing():
    out = Terminal()
    with progress.showing(out, delay_seconds=5.0):
        progress.stage("reading the graph")
    assert out.getvalue() == ""
    pipe = io.StringIO()
    with progress.showing(pipe, delay_seconds=0.0):
        progress.stage("reading the graph", 3, lambda: 1)
        assert progress.line() == ""   # not shown: stages are not even kept
        time.sleep(2 * progress.REFRESH_SECONDS)
    assert pipe.getvalue() == ""


def test_run_and_plan_report_their_stages(tmp_path, monkeypatch, capsys):
    seen: list[str] = []
    real = progress.stage
    monkeypatch.setattr(progress, "_shown", True)

    def recording(name, total=0, done=None):
        seen.append(name)
        real(name, total, done)

    monkeypatch.setattr(progress, "stage", recording)
    assert main(["run", str(EXAMPLE), "--hw", "edge", "--random-inputs", "0", "-o", str(tmp_path / "out")]) == 0
    assert main(["plan", str(EXAMPLE), "--hw", "edge", "--json"]) == 0
    assert "\r" not in capsys.readouterr().out     # pytest's output is no terminal
    for name in ("reading the graph", "lowering the graph", "compiling operations", "simulating commands",
                 "writing the outputs and reports"):
        assert name in seen
    assert seen.count("lowering the graph") == 2   # run, then plan
