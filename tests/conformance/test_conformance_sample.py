"""A representative sample of tosa-tools' per-operator conformance tests (part of ``make test``).

About one generated test per operator and data type, small tensors (plus a few
floating-point dot-product tests big enough for their compliance checks),
generated once into the pytest cache; see harness.py for how they are judged.
The full selection runs under ``make conformance`` (test_conformance_full.py).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from npu_sim.reference.session import execute
from npu_sim.tosa.flatbuffer_io import read_graph
from tests.conformance.harness import (
    OPERATORS,
    _as_storage,
    _compare,
    cached_tests,
    find_cases,
    generate_negative_sample,
    generate_sample,
    npu_verdict,
    outcome_line,
    reference_result,
    refusal,
    run_cases,
    write_report,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def sample_root(conformance_cache):
    return cached_tests(conformance_cache, "sample", generate_sample)


@pytest.fixture(scope="session")
def sample_outcomes(conformance_cache, sample_root):
    outcomes = run_cases(find_cases(sample_root))
    write_report(outcomes, conformance_cache / "sample_report.md",
                 "npu-sim conformance (sample)", "tosa_verif_build_tests sample")
    by_op = defaultdict(list)
    for outcome in outcomes:
        by_op[outcome.operator].append(outcome)
    return by_op


def test_sample_covers_most_operators(sample_outcomes):
    assert len(sample_outcomes) >= len(OPERATORS) - 4, sorted(set(OPERATORS) - set(sample_outcomes))


@pytest.mark.parametrize("operator", OPERATORS)
def test_operator_sample(operator, sample_outcomes):
    outcomes = sample_outcomes.get(operator)
    if not outcomes:
        pytest.skip(f"the sample has no generated test for {operator}")
    bad = [o for o in outcomes if o.status in ("fail", "error")]
    assert not bad, f"{len(bad)}/{len(outcomes)} failed:\n" + "\n".join(map(outcome_line, bad))


@pytest.mark.parametrize("operator, kind", [("ADD", "i"), ("EXP", "f"), ("CONV2D", "i"),
                                            ("CONV2D", "f"), ("RESCALE", "i")])
def test_the_harness_rejects_a_wrong_answer(operator, kind, sample_root, tmp_path):
    """One value a little off must fail: the comparison is not vacuous (exact for integers,
    tosa_verify for floating point and RESCALE_INEXACT)."""
    for case in find_cases(sample_root):
        if case.operator != operator or case.expected_failure:
            continue
        graph = read_graph((case.path / case.desc["tosa_file"]).read_bytes())
        name = case.desc["ofm_name"][0]
        if graph.output_types[name].dtype.numpy_dtype.kind != kind:
            continue
        break
    else:
        pytest.skip(f"no {operator} test with {kind} output in the sample")
    assert reference_result(case) is None
    inputs = {n: _as_storage(np.load(case.path / f), graph.input_types[n].dtype).reshape(
        graph.input_types[n].shape) for n, f in zip(case.desc["ifm_name"], case.desc["ifm_file"])}
    outputs = execute(graph, inputs)
    assert _compare(case, graph, outputs, tmp_path) is None  # the right answer passes
    wrong = outputs[name].copy()
    flat = wrong.reshape(-1)
    if kind == "f":
        flat[0] = flat[0] * 1.01 + 1  # well outside any ulp bound
    else:
        flat[0] = flat[0] + 3 if flat[0] < np.iinfo(wrong.dtype).max - 3 else flat[0] - 3
    problem = _compare(case, graph, {**outputs, name: wrong}, tmp_path)
    assert problem is not None and name in problem


@pytest.fixture(scope="session")
def negative_root(conformance_cache):
    return cached_tests(conformance_cache, "negative_sample", generate_negative_sample)


def test_every_error_if_test_is_refused(negative_root):
    """The generator's negative tests (one per operator and ERROR_IF condition it knows:
    shapes that do not match, bad attributes, wrong operand lists, non-zero zero points...)
    break a TOSA ERROR_IF: each must end in an NpuSimError (one line, exit 2 in the CLI), never
    run to an answer and never crash."""
    cases = find_cases(negative_root, negative=True)
    assert len(cases) >= 300
    assert {case.operator for case in cases} >= {"ADD", "CONV2D", "RESCALE", "TABLE", "GATHER", "COND_IF"}
    verdicts = {case.name: refusal(case) for case in cases}
    bad = {name: verdict for name, verdict in verdicts.items() if not verdict.startswith("refused: ")}
    assert not bad, f"{len(bad)}/{len(cases)} not refused:\n" + "\n".join(f"{n}: {v}" for n, v in bad.items())


@pytest.mark.parametrize("preset", ["tiny", "edge", "server"])
def test_the_simulated_npu_returns_the_executor_bits(preset, sample_root):
    """Every sample test graph the executor runs also runs on the NPU (scheduled, tiled,
    simulated with real bytes) and gives the very same bits: the executor's answers are the
    ones the conformance tests above judge against Arm's reference model."""
    verdicts = {case.name: npu_verdict(case, preset) for case in find_cases(sample_root)}
    assert sum(v == "same" for v in verdicts.values()) >= 300
    bad = {name: v for name, v in verdicts.items() if v not in ("same", "skip")}
    assert not bad, f"{len(bad)} on {preset}:\n" + "\n".join(f"{n}: {v}" for n, v in bad.items())


def _deserialized_mlir(tosa_file, work):
    """``tosa-opt``'s TOSA MLIR text of a flatbuffer (None where it cannot read it)."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    tosa_opt = shutil.which("tosa-opt") or str(Path(sys.executable).with_name("tosa-opt"))
    empty = work / "empty.mlir"
    empty.write_text("module {}\n")
    done = subprocess.run([tosa_opt, "--tosa-deserialize", f"--tosa-deserialize-filename={tosa_file}", str(empty)],
                          capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def test_the_mlir_reader_reads_every_sample_graph_as_the_flatbuffer_reader_does(sample_root, tmp_path):
    """Every sample test's graph, turned into TOSA MLIR by tosa-opt and read back by our reader:
    the same operators, attributes, tensor types and constant data as the flatbuffer reader gives
    (control-flow block names aside: MLIR regions have none)."""
    from npu_sim.errors import NpuSimError
    from npu_sim.tosa.loader import load_graph
    from npu_sim.tosa.mlir_reader import read_mlir

    checked, differences = 0, []
    for tosa_file in sorted(sample_root.rglob("*.tosa")):
        try:
            flat = load_graph(tosa_file, validate=False)
        except NpuSimError:
            continue
        text = _deserialized_mlir(tosa_file, tmp_path)
        if text is None:
            continue
        from_text = read_mlir(text, tosa_file.parent.name)
        checked += 1
        for b1, b2 in zip(flat.blocks(), from_text.blocks(), strict=True):
            assert len(b1.operators) == len(b2.operators), tosa_file.parent.name
            for o1, o2 in zip(b1.operators, b2.operators):
                same_attribute = o1.attribute == o2.attribute or o1.op.name in ("COND_IF", "WHILE_LOOP")
                if o1.op != o2.op or not same_attribute:
                    differences.append(f"{tosa_file.parent.name}: {o1.op.name}")
                for t1, t2 in ((b1.tensors[a], b2.tensors[b]) for a, b in zip(o1.outputs, o2.outputs)):
                    same_data = (t1.data is None and t2.data is None) or (
                        t1.data is not None and t2.data is not None
                        and np.array_equal(np.asarray(t1.data), np.asarray(t2.data), equal_nan=True))
                    if (t1.shape, t1.dtype) != (t2.shape, t2.dtype) or not same_data:
                        differences.append(f"{tosa_file.parent.name}: tensor {t1.name}")
    assert checked >= 100
    assert differences == []
