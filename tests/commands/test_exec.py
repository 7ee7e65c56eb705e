"""``npu-sim exec``: inputs by name or position, -n invocations, random inputs, errors.

Expected outputs come from Arm's reference model on the same .tosa files.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tosa_reference_model as trm

from npu_sim.cli import main
from npu_sim.inputs import random_array
from npu_sim.tosa.flatbuffer_io import read_graph
from tests.reference.refmodel_cli import run_invocations
from tests.reference.serializer_graphs import I32, Builder, accumulator_graph, cond_if_graph


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _save(path: Path, array: np.ndarray) -> Path:
    np.save(path, array)
    return path


@pytest.fixture
def cond_if(tmp_path):
    graph = tmp_path / "cond_if.tosa"
    graph.write_bytes(cond_if_graph())
    rng = np.random.default_rng(3)
    arrays = {"cond": np.array([False]),
              "a": rng.integers(-99, 99, size=(2, 3)).astype(np.int32),
              "b": rng.integers(-99, 99, size=(2, 3)).astype(np.int32)}
    files = {name: _save(tmp_path / f"{name}.npy", value) for name, value in arrays.items()}
    (want,), status = trm.run(graph.read_bytes(), list(arrays.values()))
    assert status == trm.GraphStatus.TOSA_VALID
    return graph, files, want


def _check_outdir(out: Path, graph: Path, want: dict[str, np.ndarray], invocations: int) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    assert summary["graph"] == str(graph)
    assert summary["invocations"] == invocations
    assert set(summary["outputs"]) == set(want)
    for name, expected in want.items():
        got = np.load(out / summary["outputs"][name])
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
    assert summary["timing"]["reference_seconds"] >= 0
    assert len(summary["timing"]["per_invocation_seconds"]) == invocations
    return summary


def test_exec_inputs_by_name(cond_if, tmp_path, capsys):
    graph, files, want = cond_if
    out = tmp_path / "out"
    code, stdout, err = _cli(["exec", graph, "-i", f"b={files['b']}", "-i", f"cond={files['cond']}",
                              "-i", f"a={files['a']}", "-o", out], capsys)
    assert (code, err) == (0, "")
    assert "1 invocation(s)" in stdout
    _check_outdir(out, graph, {"out": want}, 1)
    assert sorted(p.name for p in (out / "outputs").iterdir()) == ["out.npy"]


def test_exec_inputs_in_graph_order(cond_if, tmp_path, capsys):
    graph, files, want = cond_if
    out = tmp_path / "out"
    code, _, err = _cli(["exec", graph, "-i", files["cond"], "-i", files["a"], "-i", files["b"],
                         "-o", out], capsys)
    assert (code, err) == (0, "")
    summary = _check_outdir(out, graph, {"out": want}, 1)
    assert summary["inputs"] == {name: str(path) for name, path in files.items()}


def test_exec_n_invocations_carries_variables(tmp_path, capsys):
    graph = tmp_path / "acc.tosa"
    graph.write_bytes(accumulator_graph())
    rng = np.random.default_rng(11)
    xs = rng.integers(-500, 500, size=(3, 2, 3)).astype(np.int32)
    ys = rng.integers(-128, 128, size=(3, 4)).astype(np.int8)
    types = [(t.shape, t.dtype) for t in read_graph(graph.read_bytes()).output_types.values()]
    outs, _ = run_invocations(graph.read_bytes(), [[xs[k], ys[k]] for k in range(3)], types)
    want = {name: np.stack([o[i] for o in outs]) for i, name in enumerate(["acc_before", "sum", "last_y"])}
    code, _, err = _cli(["exec", graph, "-i", f"x={_save(tmp_path / 'x.npy', xs)}",
                         "-i", f"y={_save(tmp_path / 'y.npy', ys)}", "-n", 3, "-o", tmp_path / "out"], capsys)
    assert (code, err) == (0, "")
    _check_outdir(tmp_path / "out", graph, want, 3)


def test_exec_random_inputs_are_seeded(cond_if, tmp_path, capsys):
    graph, _, _ = cond_if
    for run in ("r1", "r2"):
        code, _, err = _cli(["exec", graph, "--random-inputs", 42, "-o", tmp_path / run], capsys)
        assert (code, err) == (0, "")
    first, second = (np.load(tmp_path / run / "outputs" / "out.npy") for run in ("r1", "r2"))
    np.testing.assert_array_equal(first, second)
    # The data is random_array's, drawn in graph input order; the reference model agrees.
    rng = np.random.default_rng(42)
    inputs = [random_array(t, rng) for t in read_graph(graph.read_bytes()).input_types.values()]
    (want,), _ = trm.run(graph.read_bytes(), inputs)
    np.testing.assert_array_equal(first, want)
    summary = json.loads((tmp_path / "r1" / "summary.json").read_text())
    assert summary["inputs"] == {name: "random (seed 42)" for name in ("cond", "a", "b")}


def test_exec_random_inputs_fill_only_the_missing_ones(cond_if, tmp_path, capsys):
    graph, files, _ = cond_if
    code, _, err = _cli(["exec", graph, "-i", f"cond={files['cond']}", "--random-inputs", 1,
                         "-o", tmp_path / "out"], capsys)
    assert (code, err) == (0, "")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["inputs"]["cond"] == str(files["cond"])
    assert summary["inputs"]["a"] == "random (seed 1)"


def test_output_names_are_made_file_safe(tmp_path, capsys):
    b = Builder()
    x = b.input("in put", [2], I32)
    for name in ("out:0/x", "out_0_x"):
        b.tensor(name, [2], I32)
        b.identity(x, name)
        b.output(name)
    graph = tmp_path / "names.tosa"
    graph.write_bytes(b.serialize())
    code, _, err = _cli(["exec", graph, "-i", _save(tmp_path / "x.npy", np.array([4, 5], np.int32)),
                         "-o", tmp_path / "out"], capsys)
    assert (code, err) == (0, "")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["outputs"] == {"out:0/x": "outputs/out_0_x.npy", "out_0_x": "outputs/out_0_x_1.npy"}
    for file in summary["outputs"].values():
        assert np.load(tmp_path / "out" / file).tolist() == [4, 5]


# --- errors: exit 2, one line naming the input and what was expected ------------------
ERROR_CASES = {
    "missing": ([["cond"], ["a"]], [], "missing input 'b': expected INT32 \\(int32\\) of shape \\[2, 3\\]"),
    "wrong dtype": ([["cond"], ["a"], ["b", np.zeros((2, 3), np.int64)]], [],
                    "input 'b': .* holds int64 of shape \\[2, 3\\], expected INT32 \\(int32\\) of shape \\[2, 3\\]"),
    "same count, other shape": ([["cond"], ["a"], ["b", np.zeros((3, 2), np.int32)]], [],
                                "input 'b': .* holds int32 of shape \\[3, 2\\], "
                                "expected INT32 \\(int32\\) of shape \\[2, 3\\]"),
    "bad -n": ([["cond"], ["a"], ["b"]], ["-n", "0"], "-n must be at least 1, got 0"),
    "-n without leading axis": ([["cond"], ["a"], ["b"]], ["-n", "2"],
                                "input 'cond': .* holds bool of shape \\[1\\], "
                                "expected BOOL \\(bool\\) of shape \\[2, 1\\]"),
    "-n with a missing input": ([["cond", np.zeros((2, 1), bool)]], ["-n", "2"],
                                "missing input 'a': with -n 2 every input needs a file"),
    "unknown name": ([["cond"], ["a"], ["b"], ["c", np.zeros(1)]], [], "the graph has no input 'c'"),
    "given twice": ([["cond"], ["a"], ["b"], ["a"]], [], "input 'a' given twice"),
    "no such file": ([["cond"], ["a"], ["b", "missing.npy"]], [], "input 'b': no such file"),
    "not npy": ([["cond"], ["a"], ["b", b"not a numpy file"]], [], "input 'b': .* is not a readable .npy file"),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_exec_errors_exit_2_with_one_line(case, cond_if, tmp_path, capsys):
    graph, files, _ = cond_if
    specs, extra, message = ERROR_CASES[case]
    args = ["exec", graph, "-o", tmp_path / "out", *extra]
    for spec in specs:
        name = spec[0]
        if len(spec) == 1:
            path = files[name]
        elif isinstance(spec[1], str):
            path = tmp_path / spec[1]
        elif isinstance(spec[1], bytes):
            path = tmp_path / f"{name}_bad.npy"
            path.write_bytes(spec[1])
        else:
            path = _save(tmp_path / f"{name}_{case.replace(' ', '_')}.npy", spec[1])
        args += ["-i", f"{name}={path}"]
    code, stdout, err = _cli(args, capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert "Traceback" not in err
    assert re.search(message, err), err
    assert not (tmp_path / "out" / "summary.json").exists()


def test_exec_entry_point_end_to_end(cond_if, tmp_path):
    """The installed command: success writes the files; an error is one line, exit 2."""
    graph, files, want = cond_if
    command = [sys.executable, "-m", "npu_sim.cli", "exec", str(graph), "-o", str(tmp_path / "out")]
    ok = subprocess.run(command + [f"-i{files[n]}" for n in ("cond", "a", "b")],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "outputs" / "out.npy"), want)
    bad = subprocess.run(command + ["-i", f"a={files['a']}"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: missing input 'cond'") and bad.stderr.count("\n") == 1


def test_exec_runtime_errors_exit_2_with_one_line(tmp_path, capsys):
    """A variable read before any write, and an unregistered CUSTOM operator."""
    from npu_sim.tosa.dtype import DType
    from npu_sim.tosa.ir import Block, Graph, Operator, Region, Tensor
    from npu_sim.tosa.loader import save_graph
    from npu_sim.tosa.ops import Op, make_attribute

    b = Builder()
    x = b.input("x", [2], I32)
    var = b.variable("v", "state", None, [2], I32)  # no initial value
    b.tensor("old", [2], I32)
    b.var_read(var, "old")
    b.var_write(x, var)
    b.output("old")
    unwritten = tmp_path / "unwritten.tosa"
    unwritten.write_bytes(b.serialize())
    x_file = _save(tmp_path / "x.npy", np.array([1, 2], np.int32))
    code, _, err = _cli(["exec", unwritten, "-i", x_file, "-o", tmp_path / "o1"], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "variable 'state' is read but was never written" in err

    attribute = make_attribute(Op.CUSTOM, domain_name="acme", operator_name="magic")
    tensors = {"x": Tensor("x", (2,), DType.INT32), "y": Tensor("y", (2,), DType.INT32)}
    graph = Graph([Region("main", [Block("main", [Operator(Op.CUSTOM, ["x"], ["y"], attribute)],
                                         tensors, ["x"], ["y"])])])
    custom = tmp_path / "custom.tosa"
    save_graph(graph, custom)
    code, _, err = _cli(["exec", custom, "-i", x_file, "-o", tmp_path / "o2"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "CUSTOM operator 'acme'::'magic' has no implementation" in err
