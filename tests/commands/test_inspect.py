"""``npu-sim inspect``: the description of real graphs, and one-line errors for bad files."""

from __future__ import annotations

import glob
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from npu_sim.cli import main
from npu_sim.tosa import DType, GraphBuilder, Op, write_graph, write_json
from npu_sim.tosa.flatbuffer_io import read_tree, write_tree
from tests.tosa import tosa_tools_io as tt

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_FILES = sorted(glob.glob(str(EXAMPLES / "*.tosa")))
KEYS = {"file", "format", "tosa_version", "draft", "software_version", "inputs", "outputs",
        "regions", "operator_count", "op_counts", "operators", "tensors", "variables", "profiles",
        "extensions", "draft_operators", "unsupported"}
_BYTES_PER_ELEMENT = {"BOOL": 1, "INT8": 1, "INT16": 2, "INT32": 4, "INT48": 6, "FP16": 2,
                      "BF16": 2, "FP32": 4, "FP8E4M3": 1, "FP8E5M2": 1, "SHAPE": 8}


def _inspect_json(capsys, path) -> dict:
    assert main(["inspect", "--json", str(path)]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: Path(p).name)
def test_examples_agree_with_flatcs_view_of_the_file(capsys, path):
    info = _inspect_json(capsys, path)
    assert set(info) == KEYS
    doc = json.loads(tt.flatc_json(Path(path).read_bytes()))  # tosa-tools' own parse
    version = doc["version"]
    assert info["tosa_version"] == f"{version['_major']}.{version['_minor']}.{version['_patch']}" \
        + ("d" if version.get("_draft", True) else "")
    blocks = [b for r in doc["regions"] for b in r["blocks"]]
    assert [r["name"] for r in info["regions"]] == [r["name"] for r in doc["regions"]]
    assert info["operator_count"] == sum(len(b["operators"]) for b in blocks)
    main_block = doc["regions"][0]["blocks"][0]
    assert [t["name"] for t in info["inputs"]] == main_block["inputs"]
    assert [t["name"] for t in info["outputs"]] == main_block["outputs"]
    constants, constant_bytes = 0, 0
    variables = {}
    for b in blocks:
        for t in b["tensors"]:
            if t.get("variable"):
                variables[t["name"]] = t
            elif t["data"]:
                constants += 1
                constant_bytes += math.prod(t["shape"]) * _BYTES_PER_ELEMENT[t["type"]]
        for s in b.get("shapes", []):
            constants += 1
            constant_bytes += 8 * s["rank"]
    assert info["tensors"]["constants"] == {"count": constants, "bytes": constant_bytes}
    assert sorted(v["name"] for v in info["variables"]) == sorted(variables)
    assert info["profiles"], "every example needs a profile"


@pytest.mark.skipif(not (EXAMPLES / "ds_cnn_kws_int8.tosa").exists(), reason="example missing")
def test_ds_cnn_description(capsys):
    info = _inspect_json(capsys, EXAMPLES / "ds_cnn_kws_int8.tosa")
    assert info["format"] == "flatbuffer" and info["tosa_version"] == "1.1.0d"
    assert info["software_version"] == "2026.8.0"
    assert info["inputs"] == [{"name": "TosaInput_0", "shape": [1, 49, 10, 1], "dtype": "INT8"}]
    assert info["outputs"] == [{"name": "TosaOutput_0", "shape": [1, 12], "dtype": "INT8"}]
    assert info["op_counts"]["CONV2D"] == 6 and info["op_counts"]["DEPTHWISE_CONV2D"] == 4
    assert info["op_counts"]["TABLE"] == 4
    first_conv = next(o for o in info["operators"] if o["op"] == "CONV2D")
    assert first_conv["inputs"][0] == {"name": "TosaInput_0", "shape": [1, 49, 10, 1],
                                       "dtype": "INT8"}
    assert first_conv["attribute"]["pad"] == [4, 5, 1, 1]
    assert first_conv["attribute"]["acc_type"] == "INT32"
    assert info["variables"] == [] and info["tensors"]["variables"] == {"count": 0, "bytes": 0}
    assert info["profiles"] == ["PRO-INT"]
    assert info["extensions"] == ["EXT-DOUBLEROUND", "EXT-INT16"]


@pytest.mark.skipif(not (EXAMPLES / "lstm_stateful_int8.tosa").exists(), reason="example missing")
def test_lstm_description_shows_its_variables(capsys):
    info = _inspect_json(capsys, EXAMPLES / "lstm_stateful_int8.tosa")
    assert sorted((v["variable_name"], v["dtype"], v["shape"], v["bytes"], v["initial_value"])
                  for v in info["variables"]) == [("lstm/Variable", "INT8", [1, 16], 16, True),
                                                  ("lstm/Variable_1", "INT8", [1, 16], 16, True)]
    assert info["tensors"]["variables"] == {"count": 2, "bytes": 32}
    assert info["op_counts"]["VARIABLE_READ"] == 2 and info["op_counts"]["VARIABLE_WRITE"] == 2
    assert "EXT-VARIABLE" in info["extensions"]


def _control_flow_graph():
    b = GraphBuilder()
    flag = b.input("flag", (1,), DType.BOOL)
    x = b.input("x", (2, 3), DType.INT32)
    state = b.variable("state", (2, 3), DType.INT8, np.zeros((2, 3), np.int8))
    b.variable_write(state, b.op(Op.CAST, [x], dtype=DType.INT8))
    b.output(*b.cond_if(flag, [x], lambda bb, v: bb.op(Op.ADD, [v, v]), lambda bb, v: v,
                        names=["y"], block_names=("twice", "same")))
    return b.build()


def test_human_output(capsys, tmp_path):
    path = tmp_path / "cf.tosa"
    path.write_bytes(write_graph(_control_flow_graph()))
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    for text in ("TOSA 1.0.0, flatbuffer", "Signature", "flag", "BOOL", "Regions and blocks",
                 "twice", "Operators (4)", "COND_IF", "then_graph=twice", "VARIABLE_WRITE",
                 "variables", "variable 'state': INT8[2, 3] (6 bytes, initial value: yes)",
                 "Profiles: PRO-INT", "EXT-CONTROLFLOW", "EXT-VARIABLE"):
        assert text in out, text


def test_json_form_describes_the_same_graph(capsys, tmp_path):
    g = _control_flow_graph()
    (tmp_path / "g.tosa").write_bytes(write_graph(g))
    (tmp_path / "g.json").write_text(write_json(g))
    flat, text = (_inspect_json(capsys, tmp_path / n) for n in ("g.tosa", "g.json"))
    assert (flat.pop("format"), text.pop("format")) == ("flatbuffer", "json")
    flat.pop("file"), text.pop("file")
    assert flat == text


# --- errors: one line on stderr, exit code 2, no traceback ------------------------------
def _valid_tree():
    b = GraphBuilder()
    x = b.input("x", (1, 4), DType.INT32)
    y = b.op(Op.ADD, [x, x], name="y")
    z = b.op(Op.SUB, [y, x], name="z")
    b.output(z)
    return read_tree(write_graph(b.build()))


def _mutated(change) -> bytes:
    tree = _valid_tree()
    change(tree, tree["regions"][0]["blocks"][0])
    return write_tree(tree)


def _random_bytes() -> bytes:
    return np.random.default_rng(4).integers(0, 256, 300, dtype=np.uint8).tobytes()


def _set_op(block, index, **fields):
    block["operators"][index].update(fields)


BAD_FILES = {
    "empty file": (lambda: b"", "empty file"),
    "random bytes": (_random_bytes, "not a TOSA flatbuffer"),
    "truncated": (lambda: write_tree(_valid_tree())[:150], "corrupt or truncated"),
    "wrong identifier": (lambda: _mutated(lambda t, b: None)[:4] + b"TFL3"
                         + _mutated(lambda t, b: None)[8:], "TFLite converter"),   # read as a .tflite
    "wrong major version": (lambda: _mutated(lambda t, b: t["version"].update(_major=2)),
                            "declares TOSA 2.0.0"),
    "dangling tensor": (lambda: _mutated(lambda t, b: _set_op(b, 1, inputs=["y", "nowhere"])),
                        "'nowhere' does not exist"),
    "wrong arity": (lambda: _mutated(lambda t, b: _set_op(b, 0, inputs=["x"])),
                    "takes 2 input(s), has 1"),
    "operator cycle": (lambda: _mutated(lambda t, b: _set_op(b, 0, inputs=["x", "z"])),
                       "operator cycle"),
    "output never produced": (lambda: _mutated(lambda t, b: b["operators"].pop(1)),
                              "output 'z' is never produced"),
    "unknown op code": (lambda: _mutated(lambda t, b: _set_op(b, 1, op=777)),
                        "unknown TOSA operator code 777"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_files_give_one_line_and_exit_2(capsys, tmp_path, case):
    make, message = BAD_FILES[case]
    path = tmp_path / "bad.tosa"
    path.write_bytes(make())
    assert main(["inspect", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], captured.err
    assert "Traceback" not in captured.err


def test_missing_file_and_subprocess_end_to_end(tmp_path):
    path = tmp_path / "bad.tosa"
    path.write_bytes(BAD_FILES["unknown op code"][0]())
    done = subprocess.run([sys.executable, "-m", "npu_sim.cli", "inspect", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [f"error: {path}: block 'main', operator #1: "
                                                "unknown TOSA operator code 777"]
    done = subprocess.run([sys.executable, "-m", "npu_sim.cli", "inspect", "--json",
                           str(tmp_path / "absent.tosa")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {tmp_path / 'absent.tosa'}: no such file"


def test_draft_operators_are_inspected(capsys, tmp_path):
    b = GraphBuilder(version=(1, 1, 0, True))
    x = b.input("x", (1, 2, 3), DType.FP32)
    b.output(b.op(Op.MATMUL_T, [x, x], (1, 2, 2), DType.FP32))
    path = tmp_path / "draft.tosa"
    path.write_bytes(write_graph(b.build()))
    info = _inspect_json(capsys, path)
    assert info["tosa_version"] == "1.1.0d" and info["draft_operators"] == ["MATMUL_T"]
    assert info["operators"][0]["op"] == "MATMUL_T"
