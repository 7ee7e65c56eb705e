"""Models with an unknown batch dimension run (batch 1, or the shape of the given input, or
--input-shape); data that break a TOSA REQUIRE finish with --allow-unpredictable and say so
in summary.json, and without the flag the one-line error names it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from npu_sim.cli import main
from npu_sim.tosa import DType, GraphBuilder, Op
from npu_sim.tosa.loader import load_graph, save_graph
from npu_sim.tosa.mlir_reader import read_mlir

MODEL = Path(__file__).resolve().parents[1] / "data" / "tflite" / "unknown_batch_int8.tflite"


def _cli(args, capsys):
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.err.strip().splitlines()


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def test_an_unknown_batch_is_one_for_random_inputs_and_follows_the_shape_asked(tmp_path, capsys):
    assert "?" not in str(load_graph(MODEL).main.tensors["TosaInput_0"].shape)
    assert load_graph(MODEL).input_types["TosaInput_0"].shape == (1, 16, 16, 3)
    runs = {}
    for label, extra in (("default", []), ("one", ["--input-shape", "TosaInput_0=1x16x16x3"]),
                         ("two", ["--input-shape", "TosaInput_0=2x16x16x3"])):
        code, err = _cli(["run", MODEL, "--hw", "edge", "--random-inputs", "0", "-o", tmp_path / label, *extra],
                         capsys)
        assert code == 0, err
        runs[label] = _summary(tmp_path / label)
    assert runs["default"]["total_cycles"] == runs["one"]["total_cycles"] < runs["two"]["total_cycles"]
    assert np.load(tmp_path / "two" / runs["two"]["outputs"]["TosaOutput_0"]).shape == (2, 4)


def test_the_input_file_gives_the_batch(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((3, 16, 16, 3), np.int8))
    code, err = _cli(["exec", MODEL, "-i", tmp_path / "x.npy", "-o", tmp_path / "out"], capsys)
    assert code == 0, err
    assert np.load(tmp_path / "out" / "outputs" / "TosaOutput_0.npy").shape == (3, 4)


@pytest.mark.parametrize("shape, message", [("TosaInput_0=1x16x16", "does not fit it"),
                                            ("nope=1x16x16x3", "the graph has no input 'nope'"),
                                            ("TosaInput_0=1xAx3", "expected NAME=D0xD1x")])
def test_a_wrong_input_shape_is_refused(tmp_path, capsys, shape, message):
    code, err = _cli(["run", MODEL, "--hw", "edge", "--random-inputs", "0", "-o", tmp_path / "o",
                      "--input-shape", shape], capsys)
    assert code == 2 and len(err) == 1 and message in err[0], err


def test_mlir_reshape_to_minus_one_takes_the_remaining_size():
    text = """func.func @main(%a: tensor<?x4x2xi32>) -> tensor<?x8xi32> {
      %0 = tosa.const_shape {values = dense<[-1, 8]> : tensor<2xindex>} : () -> !tosa.shape<2>
      %1 = tosa.reshape %a, %0 : (tensor<?x4x2xi32>, !tosa.shape<2>) -> tensor<?x8xi32>
      return %1 : tensor<?x8xi32>
    }"""
    from npu_sim.tosa.shape_resolution import resolve_unknown_dims

    graph = read_mlir(text)
    resolve_unknown_dims(graph, {"TosaInput_0": (5, 4, 2)})
    assert graph.output_types["TosaOutput_0"].shape == (5, 8)


@pytest.fixture
def shifting(tmp_path):
    b = GraphBuilder()
    x, s = b.input("x", (1, 8), DType.INT32), b.input("s", (1, 8), DType.INT32)
    b.output(b.op(Op.ARITHMETIC_RIGHT_SHIFT, [x, s], round=False, name="y"))
    save_graph(b.build(), tmp_path / "shift.tosa")
    np.save(tmp_path / "x.npy", np.arange(8, dtype=np.int32).reshape(1, 8) * 1000)
    np.save(tmp_path / "s.npy", np.full((1, 8), 40, np.int32))     # REQUIRE(0 <= shift <= 31) broken
    np.save(tmp_path / "ok.npy", np.full((1, 8), 3, np.int32))
    return tmp_path


@pytest.mark.parametrize("command", [["exec"], ["run", "--hw", "edge"]])
def test_a_broken_require_names_the_flag_and_the_flag_finishes_the_run(shifting, capsys, command):
    args = [*command, shifting / "shift.tosa", "-i", f"x={shifting / 'x.npy'}", "-i", f"s={shifting / 's.npy'}"]
    code, err = _cli([*args, "-o", shifting / "a"], capsys)
    assert code == 2 and len(err) == 1
    assert "REQUIRE(0 <= value2 && value2 <= 31)" in err[0] and "--allow-unpredictable" in err[0]
    code, err = _cli([*args, "-o", shifting / "b", "--allow-unpredictable"], capsys)
    assert code == 0
    assert len(err) == 1 and err[0].startswith("warning: the result is unpredictable")
    summary = _summary(shifting / "b")
    assert summary["tosa_status"] == "unpredictable"
    assert summary["tosa_unpredictable"]["operator"] == "ARITHMETIC_RIGHT_SHIFT(y)"
    valid = [*command, shifting / "shift.tosa", "-i", f"x={shifting / 'x.npy'}", "-i", f"s={shifting / 'ok.npy'}"]
    assert _cli([*valid, "-o", shifting / "c", "--allow-unpredictable"], capsys)[0] == 0
    assert _summary(shifting / "c")["tosa_status"] == "valid"
    if command[0] == "run":   # the timing does not depend on the values
        assert _summary(shifting / "b")["total_cycles"] == _summary(shifting / "c")["total_cycles"]


def test_a_sweep_finishes_unpredictable_points_when_asked(shifting, capsys):
    spec = shifting / "spec.yaml"
    spec.write_text("graph: shift.tosa\nhw: edge\ninputs: {x: x.npy, s: s.npy}\n"
                    "axes:\n  dma.engine_count: [1, 2]\n")
    code, _ = _cli(["sweep", spec, "-o", shifting / "plain", "--workers", "1", "--no-progress"], capsys)
    rows = (shifting / "plain" / "results.csv").read_text().splitlines()
    assert code == 0 and all(",error," in row and "--allow-unpredictable" in row for row in rows[1:])
    code, _ = _cli(["sweep", spec, "-o", shifting / "asked", "--workers", "1", "--no-progress",
                    "--allow-unpredictable"], capsys)
    rows = (shifting / "asked" / "results.csv").read_text().splitlines()
    assert code == 0 and len(rows) == 3 and all(",ok," in row for row in rows[1:])
