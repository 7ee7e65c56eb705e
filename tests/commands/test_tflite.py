"""``.tflite`` models as GRAPH: converted through tosa-converter-for-tflite and read as TOSA
MLIR, they give the outputs and cycles of the TOSA flatbuffers made from them; what cannot be
converted is refused in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from npu_sim.cli import main
from npu_sim.tosa.loader import load_graph

ROOT = Path(__file__).resolve().parents[2]
TFLITE = ROOT / "tests" / "data" / "tflite"
EXAMPLES = ROOT / "examples"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NPU_SIM_CACHE", str(tmp_path / "cache"))


def _cli(args, capsys):
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip().splitlines()


@pytest.mark.parametrize("stem", ["ds_cnn_kws_int8", "lstm_stateful_int8"])
def test_a_tflite_runs_like_the_tosa_made_from_it(tmp_path, capsys, stem):
    results = {}
    for graph in (TFLITE / f"{stem}.tflite", EXAMPLES / f"{stem}.tosa", EXAMPLES / f"{stem}.mlir"):
        out = tmp_path / graph.suffix[1:]
        code, _, err = _cli(["run", graph, "--hw", "edge", "--random-inputs", "3", "-n", "2", "-o", out], capsys)
        assert code == 0, err
        summary = json.loads((out / "summary.json").read_text())
        outputs = [np.load(out / f) for f in summary["outputs"].values()]
        results[graph.suffix] = (summary["total_cycles"], outputs)
    cycles, outputs = results[".tosa"]
    for suffix in (".tflite", ".mlir"):
        assert results[suffix][0] == cycles
        assert all(np.array_equal(a, b) for a, b in zip(results[suffix][1], outputs, strict=True))


def test_convert_writes_the_flatbuffer_and_caches_the_conversion(tmp_path, capsys):
    model = TFLITE / "ds_cnn_kws_int8.tflite"
    code, out, err = _cli(["convert", model, "-o", tmp_path / "kws.tosa"], capsys)
    assert code == 0, err
    assert "149 operators" in out
    assert list((tmp_path / "cache" / "tflite").glob("*.mlir"))   # converted once, kept
    converted, reference = load_graph(tmp_path / "kws.tosa"), load_graph(EXAMPLES / "ds_cnn_kws_int8.tosa")
    assert [op.op for op in converted.main.operators] == [op.op for op in reference.main.operators]
    assert _cli(["convert", model, "-o", tmp_path / "kws.json", "--no-cache"], capsys)[0] == 0
    assert load_graph(tmp_path / "kws.json").main.operators[5].op == reference.main.operators[5].op
    code, _, err = _cli(["convert", model, "-o", tmp_path / "kws.txt"], capsys)
    assert code == 2 and "name a .tosa (flatbuffer) or .json file" in err[0]


@pytest.mark.parametrize("make, message", [
    (lambda: (TFLITE / "ds_cnn_kws_int8_vela.tflite").read_bytes(), "already compiled by Vela"),
    (lambda: (TFLITE / "ds_cnn_kws_int8.tflite").read_bytes()[:3000], "truncated or damaged"),
    (lambda: b"\0\0\0\0TFL3" + b"\xff" * 40, "truncated or damaged"),
    # (the converter segfaults on it: it runs in a process of its own)
    (lambda: (TFLITE.parent / "malformed" / "converter_crash.tflite").read_bytes(), "crashed on signal"),
])
@pytest.mark.parametrize("command", [["inspect"], ["run", "--hw", "edge", "--random-inputs", "0", "-o", "out"]])
def test_models_that_cannot_be_converted_are_refused_in_one_line(tmp_path, capsys, make, message, command):
    model = tmp_path / "model.tflite"
    model.write_bytes(make())
    code, _, err = _cli([command[0], model, *command[1:]], capsys)
    assert code == 2
    assert len(err) == 1 and message in err[0], err


def test_without_the_converter_the_error_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tosa_converter_for_tflite", None)
    code, _, err = _cli(["inspect", TFLITE / "ds_cnn_kws_int8.tflite"], capsys)
    assert code == 2 and "pip install 'npu-sim[tflite]'" in err[0]


def test_the_names_of_the_tflite_signature_are_shown_and_accepted(tmp_path, capsys):
    model = TFLITE / "ds_cnn_kws_int8.tflite"
    code, out, _ = _cli(["inspect", "--json", model], capsys)
    info = json.loads(out)
    assert (info["inputs"][0]["name"], info["inputs"][0]["original_name"]) == ("TosaInput_0", "mfcc")
    assert (info["outputs"][0]["name"], info["outputs"][0]["original_name"]) == ("TosaOutput_0", "softmax")
    x = np.arange(490, dtype=np.int8).reshape(1, 49, 10, 1)
    np.save(tmp_path / "x.npy", x)
    by_tosa = _cli(["exec", model, "-i", f"TosaInput_0={tmp_path / 'x.npy'}", "-o", tmp_path / "a"], capsys)
    by_tflite = _cli(["exec", model, "-i", f"mfcc={tmp_path / 'x.npy'}", "-o", tmp_path / "b"], capsys)
    assert by_tosa[0] == by_tflite[0] == 0
    assert np.array_equal(np.load(tmp_path / "a" / "outputs" / "TosaOutput_0.npy"),
                          np.load(tmp_path / "b" / "outputs" / "TosaOutput_0.npy"))
