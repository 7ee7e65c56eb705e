"""The full conformance selection (``make conformance``): tosa_verif_conformance_generator's
TOSA 1.0.2 positive tests, every one through our reader and executor.

Generation takes a long while the first time (cached afterwards); set
``NPU_SIM_CONFORMANCE_DIR`` to use an already generated tree, and
``NPU_SIM_CONFORMANCE_JOBS`` for parallelism (default 2), ``NPU_SIM_CONFORMANCE_PRESETS``
(e.g. ``edge,tiny``) to also run every test on the simulated NPU of those presets (about
15 minutes each). Writes the per-operator
table to ``conformance_report.md`` at the repository root; outcomes stream into
``full_outcomes.jsonl`` in the conformance cache while it runs.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conformance.harness import (
    OPERATORS,
    cached_tests,
    find_cases,
    generate_full,
    npu_verdict,
    outcome_line,
    run_cases,
    write_report,
)

pytestmark = pytest.mark.conformance
REPORT = Path(__file__).resolve().parents[2] / "conformance_report.md"


@pytest.fixture(scope="session")
def full_root(conformance_cache) -> Path:
    given = os.environ.get("NPU_SIM_CONFORMANCE_DIR")
    if given:
        return Path(given)
    jobs = int(os.environ.get("NPU_SIM_CONFORMANCE_JOBS", "2"))
    return cached_tests(conformance_cache, "full", lambda out: generate_full(out, jobs))


@pytest.fixture(scope="session")
def full_outcomes(conformance_cache, full_root):
    jobs = int(os.environ.get("NPU_SIM_CONFORMANCE_JOBS", "2"))
    given = os.environ.get("NPU_SIM_CONFORMANCE_DIR")
    source = ("tosa_verif_conformance_generator --tosa-version 1.0.2 --test-type positive, "
              "every TOSA 1.0 extension")
    if given:
        source = f"{source} (pre-generated in {given})"
    root = full_root
    log = conformance_cache / "full_outcomes.jsonl"  # follow a long run with tail -f
    outcomes = run_cases(find_cases(root), jobs, log)
    write_report(outcomes, REPORT, "npu-sim conformance report", source)
    by_op = defaultdict(list)
    for outcome in outcomes:
        by_op[outcome.operator].append(outcome)
    return by_op


@pytest.mark.parametrize("operator", OPERATORS)
def test_operator_conformance(operator, full_outcomes):
    outcomes = full_outcomes.get(operator)
    if not outcomes:
        pytest.skip(f"no conformance test for {operator}")
    bad = [o for o in outcomes if o.status in ("fail", "error")]
    assert not bad, f"{len(bad)}/{len(outcomes)} failed:\n" + "\n".join(map(outcome_line, bad[:20]))


@pytest.mark.parametrize("preset", [p for p in os.environ.get("NPU_SIM_CONFORMANCE_PRESETS", "").split(",") if p])
def test_every_test_on_the_simulated_npu(preset, full_root):
    """On the NPU every test graph gives the executor's bits, or is refused because a tile
    or the graph does not fit the preset (a reduction over 65,539 elements on edge's
    512 KiB TCM, a 102 MB RESIZE output in tiny's 64 MiB DDR)."""
    verdicts = {case.name: npu_verdict(case, preset) for case in find_cases(full_root)}
    bad = {name: v for name, v in verdicts.items() if v != "same" and v != "skip"
           and not v.startswith("too big: ")}
    assert not bad, f"{len(bad)} on {preset}:\n" + "\n".join(f"{n}: {v}" for n, v in list(bad.items())[:30])
