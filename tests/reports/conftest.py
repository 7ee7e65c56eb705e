"""Runs of real example models that several report tests read (simulated once per session)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from npu_sim.commands.run_cmd import run_simulation

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@dataclass(frozen=True)
class Run:
    folder: Path
    summary: dict


@pytest.fixture(scope="session")
def kws_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Run]:
    """The keyword-spotting CNN on ethos-u85-256 (A) and on edge (B), each with its report.html."""
    root = tmp_path_factory.mktemp("kws")
    graph = str(EXAMPLES / "ds_cnn_kws_int8.tosa")
    return tuple(Run(root / hw, run_simulation(graph, hw, [], root / hw, random_seed=0, html=True))  # type: ignore
                 for hw in ("ethos-u85-256", "edge"))


@pytest.fixture(scope="session")
def lstm_stream(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The stateful LSTM (fused cells) on edge over 3 invocations: a preamble, composites."""
    folder = tmp_path_factory.mktemp("lstm") / "run"
    summary = run_simulation(str(EXAMPLES / "lstm_stateful_int8.tosa"), "edge", [], folder, random_seed=0,
                             invocations=3)
    return Run(folder, summary)
