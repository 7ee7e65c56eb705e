"""``npu-sim run`` end to end: outputs bit-identical to ``npu-sim exec``, the report files, errors.

``exec`` (the reference executor, itself checked against Arm's reference model) is the
golden side: the simulated NPU must return the very same bits on every example graph the
scheduler supports, on every preset, with the same inputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import npu_sim
from npu_sim.cli import main
from npu_sim.errors import InputError, UnsupportedFeatureError
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.flatbuffer_io import write_graph
from npu_sim.tosa.ir import Block, Graph, Operator, Region, Tensor
from npu_sim.tosa.ops import Op
from tests.reports.trace_checks import check_trace_document
from tests.tosa.test_validation import _rescale_graph

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SMALL = ["conv_rescale_int8", "add_mul_fp32", "cond_if_int32", "while_loop_int32", "variable_counter_int32"]
BIG = ["ds_cnn_kws_int8", "lstm_stateful_int8"]
PRESETS = ["tiny", "edge", "server"]
REQUIRED = ("graph", "hw_config", "invocations", "total_cycles", "per_invocation_cycles", "clock_hz",
            "ddr_read_bytes", "ddr_write_bytes", "peak_tcm_bytes", "tcm_lower_bound_bytes", "ops",
            "utilization", "outputs")
OP_FIELDS = ("name", "op", "unit", "start_cycle", "end_cycle", "macs", "ddr_read_bytes", "ddr_write_bytes")


def _cli(args: list, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _bits(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array).tobytes()


def _check_same_outputs(run_dir: Path, exec_dir: Path) -> dict:
    run = json.loads((run_dir / "summary.json").read_text())
    ref = json.loads((exec_dir / "summary.json").read_text())
    assert run["outputs"] == ref["outputs"]
    for name, file in ref["outputs"].items():
        got, want = np.load(run_dir / file), np.load(exec_dir / file)
        assert (got.dtype, got.shape) == (want.dtype, want.shape), name
        assert _bits(got) == _bits(want), f"output {name} differs from exec"
    return run


def _check_report(out: Path, summary: dict, hw_name: str) -> None:
    hw = npu_sim.load_hw_config(hw_name)
    assert all(key in summary for key in REQUIRED)
    assert summary["hw_config"] == hw_name and summary["clock_hz"] == hw.clock_hz
    assert summary["total_cycles"] >= sum(summary["per_invocation_cycles"]) > 0
    assert len(summary["per_invocation_cycles"]) == summary["invocations"]
    assert summary["ops"] and all(all(k in op for k in OP_FIELDS) for op in summary["ops"])
    assert sum(op["macs"] for op in summary["ops"]) == summary["macs"]
    assert sum(op["ddr_read_bytes"] for op in summary["ops"]) == summary["ddr_read_bytes"]
    assert sum(op["ddr_write_bytes"] for op in summary["ops"]) == summary["ddr_write_bytes"]
    assert 0 < summary["tcm_lower_bound_bytes"] <= summary["peak_tcm_bytes"] <= hw.tcm.size_bytes
    assert all(0.0 <= u <= 1.0 for u in summary["utilization"].values())
    units = [f"dma{i}" for i in range(hw.dma.engine_count)] + ["mac_array", "vector", "lut", "cpu"]
    assert list(summary["utilization"]) == units
    names = check_trace_document(json.loads((out / "trace.json").read_text()))
    unit_tracks = [n for (pid, _), n in names.items() if pid == 1]
    assert unit_tracks[: len(units)] == units and len(set(unit_tracks)) == len(unit_tracks)
    assert (out / "memory_timeline.png").read_bytes()[:4] == b"\x89PNG"


def _run_and_exec(graph: Path, hw: str, tmp_path: Path, capsys, extra: list) -> tuple[dict, str]:
    code, out, err = _cli(["run", graph, "--hw", hw, *extra, "-o", tmp_path / "run"], capsys)
    assert (code, err) == (0, ""), err
    _check_report(tmp_path / "run", json.loads((tmp_path / "run" / "summary.json").read_text()), hw)
    code, _, err = _cli(["exec", graph, *extra, "-o", tmp_path / "exec"], capsys)
    assert (code, err) == (0, ""), err
    summary = _check_same_outputs(tmp_path / "run", tmp_path / "exec")
    return summary, out


#: Inputs given explicitly (the others are random): a random loop count could be 32767.
GIVEN_INPUTS = {"while_loop_int32": {"n": np.array(5, dtype=np.int32)}}


@pytest.mark.parametrize("hw", PRESETS)
@pytest.mark.parametrize("example", SMALL)
def test_run_matches_exec_on_small_examples(example, hw, tmp_path, capsys):
    given = []
    for name, value in GIVEN_INPUTS.get(example, {}).items():
        np.save(tmp_path / f"{name}.npy", value)
        given += ["-i", f"{name}={tmp_path / name}.npy"]
    summary, stdout = _run_and_exec(EXAMPLES / f"{example}.tosa", hw, tmp_path, capsys,
                                    [*given, "--random-inputs", 7])
    assert "NPU operations" in stdout and f"report: {tmp_path / 'run' / 'summary.json'}" in stdout
    assert "random (seed 7)" in summary["inputs"].values()


@pytest.mark.parametrize("hw", PRESETS)
@pytest.mark.parametrize("example", BIG)
def test_run_matches_exec_on_real_models(example, hw, tmp_path, capsys):
    summary, _ = _run_and_exec(EXAMPLES / f"{example}.tosa", hw, tmp_path, capsys, ["--random-inputs", 3])
    assert summary["macs"] > 0


def test_spread_tcm_trades_tcm_for_cycles_with_the_same_outputs(tmp_path, capsys):
    # on server the compact plan must reuse bytes the LSTM's cell commands (op by op) would
    # rather not wait for
    graph = EXAMPLES / "lstm_stateful_int8.tosa"
    summaries = {}
    for name, extra in (("compact", []), ("spread", ["--spread-tcm"])):
        code, _, err = _cli(["run", graph, "--hw", "server", "--random-inputs", 3, "--no-composite-fusion",
                             *extra, "-o", tmp_path / name], capsys)
        assert (code, err) == (0, "")
        summaries[name] = json.loads((tmp_path / name / "summary.json").read_text())
    assert _cli(["exec", graph, "--random-inputs", 3, "-o", tmp_path / "exec"], capsys)[0] == 0
    _check_same_outputs(tmp_path / "compact", tmp_path / "exec")
    _check_same_outputs(tmp_path / "spread", tmp_path / "exec")
    compact, spread = summaries["compact"], summaries["spread"]
    assert compact["peak_tcm_bytes"] == compact["tcm_lower_bound_bytes"]
    assert spread["peak_tcm_bytes"] > compact["peak_tcm_bytes"]
    assert spread["total_cycles"] < compact["total_cycles"]


def test_invocations_carry_variables_like_exec(tmp_path, capsys):
    increments = np.arange(3 * 4, dtype=np.int32).reshape(3, 1, 4) - 5
    np.save(tmp_path / "inc.npy", increments)
    summary, _ = _run_and_exec(EXAMPLES / "variable_counter_int32.tosa", "edge", tmp_path, capsys,
                               ["-n", 3, "-i", tmp_path / "inc.npy"])
    got = np.load(tmp_path / "run" / summary["outputs"]["state_next"])
    np.testing.assert_array_equal(got, np.cumsum(increments, axis=0))  # the counter persists
    assert summary["invocations"] == 3 and {op["invocation"] for op in summary["ops"]} == {0, 1, 2}


def test_lstm_state_persists_over_invocations(tmp_path, capsys):
    x = np.random.default_rng(5).integers(-128, 128, size=(2, 1, 4, 8)).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    summary, _ = _run_and_exec(EXAMPLES / "lstm_stateful_int8.tosa", "edge", tmp_path, capsys,
                               ["-n", 2, "-i", f"TosaInput_0={tmp_path / 'x.npy'}"])
    assert summary["variable_sram_bytes"] > 0


def _unsupported_graph() -> Graph:
    """A graph with a TOSA 1.1-draft operator (ROW_GATHER), which neither side runs."""
    tensors = {"x": Tensor("x", (2, 4), DType.INT32), "i": Tensor("i", (2, 1), DType.INT32),
               "y": Tensor("y", (2, 4), DType.INT32)}
    block = Block("main", [Operator(Op.ROW_GATHER, ["x", "i"], ["y"])], tensors, ["x", "i"], ["y"])
    return Graph([Region("main", [block])])


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


ERROR_CASES = {
    "unknown preset": (["--hw", "nosuch", "--random-inputs", 0], "unknown hardware config 'nosuch'"),
    "bad config field": (["--hw", "{bad}", "--random-inputs", 0], "ddr.bandwidth_bytes_per_cycle"),
    "unparsable config": (["--hw", "{broken}", "--random-inputs", 0], "not valid YAML"),
    "missing config file": (["--hw", "missing.yaml", "--random-inputs", 0], "not found"),
    "missing input": (["--hw", "edge"], "missing input 'input'"),
    "missing input with -n": (["--hw", "edge", "-n", 2], "missing input 'input'"),
    "bad -n": (["--hw", "edge", "-n", 0], "-n must be at least 1"),
    "TCM too small": (["--hw", "{small}", "--random-inputs", 0], "TCM"),
    "unsupported op": (["--hw", "edge", "--random-inputs", 0], "ROW_GATHER"),
    "missing graph": (["--hw", "edge", "--random-inputs", 0], "no such file"),
}


@pytest.mark.parametrize("case", ERROR_CASES)
def test_errors_exit_2_with_one_line(case, tmp_path, capsys):
    files = {
        "bad": _write(tmp_path / "bad.yaml", "extends: edge\nddr:\n  bandwidth_bytes_per_cycle: 0\n"),
        "broken": _write(tmp_path / "broken.yaml", "tcm: [1, 2\n"),
        "small": _write(tmp_path / "small.yaml",
                        "extends: edge\ntcm:\n  size_bytes: 256\n  bank_count: 1\n  port_count: 1\n"),
    }
    args, message = ERROR_CASES[case]
    args = [str(a).format(**files) for a in args]
    graph = EXAMPLES / "conv_rescale_int8.tosa"
    if case == "unsupported op":
        graph = tmp_path / "row_gather.tosa"
        graph.write_bytes(write_graph(_unsupported_graph()))
    elif case == "missing graph":
        graph = tmp_path / "nothere.tosa"
    code, out, err = _cli(["run", graph, *args, "-o", tmp_path / "out"], capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out" / "summary.json").exists()


# --- the Python API -------------------------------------------------------------------------

def test_simulate_api_matches_execute():
    graph = npu_sim.load_graph(EXAMPLES / "conv_rescale_int8.tosa")
    x = np.random.default_rng(2).integers(-128, 128, size=(1, 8, 8, 3)).astype(np.int8)
    result = npu_sim.simulate(graph, npu_sim.load_hw_config("edge"), {"input": x})
    want = npu_sim.execute(graph, {"input": x})
    assert _bits(result.outputs["output"]) == _bits(want["output"])
    assert result.summary["total_cycles"] == result.total_cycles > 0
    assert result.plan is result.program and result.trace.commands
    assert result.summary["graph"] == result.program.graph_name  # a Graph object has no file name


def test_simulate_api_stacks_invocations_and_keeps_variables():
    path = EXAMPLES / "variable_counter_int32.tosa"
    inc = np.arange(8, dtype=np.int32).reshape(2, 1, 4)
    result = npu_sim.simulate(str(path), "tiny", {"increment": inc}, invocations=2)
    session = npu_sim.Session(npu_sim.load_graph(path))
    want = np.stack([session.invoke({"increment": inc[k]})["state_next"] for k in range(2)])
    assert _bits(result.outputs["state_next"]) == _bits(want)
    assert result.summary["invocations"] == 2 and result.summary["graph"] == str(path)


@pytest.mark.parametrize("inputs, invocations, message", [
    ({}, 1, "missing input 'increment'"),
    ({"increment": np.zeros((1, 4), np.int32)}, 2, "leading axis of 2"),
    ({"increment": np.zeros((2, 1, 4), np.int8)}, 2, "expected INT32"),
    ({"increment": np.zeros((1, 4), np.int32)}, 0, "invocations must be an integer >= 1"),
])
def test_simulate_api_input_errors(inputs, invocations, message):
    with pytest.raises(InputError, match=message):
        npu_sim.simulate(EXAMPLES / "variable_counter_int32.tosa", "edge", inputs, invocations)


def test_simulate_api_refuses_unsupported_operators():
    with pytest.raises(UnsupportedFeatureError, match="ROW_GATHER"):
        npu_sim.simulate(_unsupported_graph(), "edge",
                         {"x": np.zeros((2, 4), np.int32), "i": np.zeros((2, 1), np.int32)})


@pytest.mark.parametrize("selector", [3, -1])
def test_cond_if_example_takes_the_right_branch(selector):
    rng = np.random.default_rng(abs(selector))
    a, b = (rng.integers(-1000, 1000, size=(2, 3)).astype(np.int32) for _ in range(2))
    inputs = {"selector": np.array(selector, np.int32), "a": a, "b": b}
    result = npu_sim.simulate(EXAMPLES / "cond_if_int32.tosa", "edge", inputs)
    np.testing.assert_array_equal(result.outputs["output"], a + b if selector > 0 else a - b)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_while_loop_example_runs_n_iterations(n):
    x = np.array([3, -7, 11, 0], np.int32)
    result = npu_sim.simulate(EXAMPLES / "while_loop_int32.tosa", "tiny", {"x": x, "n": np.array(n, np.int32)})
    np.testing.assert_array_equal(result.outputs["acc_final"], n * x)
    assert int(result.outputs["i_final"]) == n
    loop = [op for op in result.summary["ops"] if op["unit"] == "sequencer"]
    assert len(loop) == 1 and loop[0]["op"] == "WHILE_LOOP"


def test_a_program_the_simulator_rejects_is_an_internal_error(tmp_path, capsys, monkeypatch):
    """A bad access in a program the scheduler made is npu-sim's bug, not the input's: exit 1."""
    import npu_sim.simulation
    from npu_sim.errors import MemoryAccessError

    def broken(*args, **kwargs):
        raise MemoryAccessError("command 3 (ADD): reads tcm[0x40] 1 INT32 element [0], which was never written")

    monkeypatch.setattr(npu_sim.simulation, "simulate_program", broken)
    code, _, err = _cli(["run", EXAMPLES / "add_mul_fp32.tosa", "--hw", "edge", "--random-inputs", 1,
                         "-o", tmp_path / "out"], capsys)
    assert code == 1
    assert err.startswith("internal error (SchedulerBugError): the compiled program failed in the simulator: "
                          "command 3 (ADD)")
    assert err.count("\n") == 1


@pytest.mark.parametrize("name, message", [
    ("conv_input_zp_rank0", r"^error: RESCALE\(layer_78\): output_zp must have shape \[1\], got \[\]$"),
    ("resize_offset_one_value", r"^error: RESIZE\(layer_83\): offset has 1 values, expected 2$"),
    ("rescale_output_zp_shape", r"^error: RESCALE\(requantized\): output_zp must have shape \[1\], got "
                                r"\[24, 12, 4, 0, 0\]$"),
])
def test_a_graph_breaking_an_error_if_is_refused_like_exec_does(name, message, tmp_path, capsys):
    """Fuzzed files that load and validate but break an operator's ERROR_IF: the scheduler or
    the simulator trips over them first; the reference executor's error is reported."""
    import re
    graph = Path(__file__).resolve().parents[1] / "data" / "malformed" / f"{name}.tosa"
    for command in (["exec"], ["run", "--hw", "edge"]):
        code, _, err = _cli([*command, graph, "--random-inputs", 0, "-o", tmp_path / command[0]], capsys)
        assert code == 2
        assert re.match(message, err.strip()) and err.count("\n") == 1


def test_an_elementwise_result_read_only_by_a_variable_write(tmp_path, capsys):
    """A fuzzed but valid graph: an ADD whose only reader is a VARIABLE_WRITE (no result of its
    own) once crashed the fusion pass."""
    graph = Path(__file__).resolve().parents[1] / "data" / "malformed" / "add_into_variable_write.tosa"
    assert _cli(["exec", graph, "--random-inputs", 0, "-o", tmp_path / "exec"], capsys)[0] == 0
    assert _cli(["run", graph, "--hw", "tiny", "--random-inputs", 0, "-o", tmp_path / "run"], capsys)[0] == 0
    _check_same_outputs(tmp_path / "run", tmp_path / "exec")


def test_running_out_of_memory_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    """A graph whose tensors need more memory than the machine has (a fuzzed shape asked for
    30 GiB): the input is at fault, not npu-sim."""
    import npu_sim.simulation

    def greedy(*args, **kwargs):
        raise MemoryError("Unable to allocate 30.0 GiB for an array with shape (1, 503316481, 1, 8)")

    monkeypatch.setattr(npu_sim.simulation, "compile_graph", greedy)
    code, _, err = _cli(["run", EXAMPLES / "add_mul_fp32.tosa", "--hw", "edge", "--random-inputs", 1,
                         "-o", tmp_path], capsys)
    assert code == 2
    assert err == "error: out of memory: Unable to allocate 30.0 GiB for an array with shape (1, 503316481, 1, 8)\n"


def test_verify_checks_the_plan_and_times_it(tmp_path, capsys):
    code, out, _ = _cli(["run", EXAMPLES / "ds_cnn_kws_int8.tosa", "--hw", "tiny", "--random-inputs", 0,
                         "--verify", "-o", tmp_path / "out"], capsys)
    assert code == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert list(summary["wall_seconds"]) == ["schedule", "verify", "simulate", "summary", "reports"]
    code, out, _ = _cli(["plan", EXAMPLES / "ds_cnn_kws_int8.tosa", "--hw", "tiny", "--verify", "--json"], capsys)
    assert code == 0 and json.loads(out)["peak_tcm_bytes"] == summary["peak_tcm_bytes"]


def test_a_plan_the_verifier_rejects_is_an_internal_error(tmp_path, capsys, monkeypatch):
    """A scheduler that places two live TCM buffers on the same bytes: ``--verify`` says so (exit 1)
    before anything runs; without it the plan is printed as it is."""
    import dataclasses

    import npu_sim.simulation
    from npu_sim.program import MemorySpace

    real_schedule = npu_sim.simulation.schedule

    def overlapping(graph, hw, **kwargs):
        program = real_schedule(graph, hw, **kwargs)
        tcm = [a for a in program.allocations if a.memory is MemorySpace.TCM]
        for i, a in enumerate(tcm):
            for b in tcm[i + 1:]:
                if a.offset_bytes != b.offset_bytes and not (
                        a.last_use is not None and b.first_use is not None and a.last_use < b.first_use):
                    index = program.allocations.index(b)
                    program.allocations[index] = dataclasses.replace(b, offset_bytes=a.offset_bytes)
                    return program
        raise AssertionError("no two TCM allocations live at once")

    monkeypatch.setattr(npu_sim.simulation, "schedule", overlapping)
    graph = EXAMPLES / "conv_rescale_int8.tosa"
    assert _cli(["plan", graph, "--hw", "edge"], capsys)[0] == 0
    for command in (["plan"], ["run", "--random-inputs", 0, "-o", tmp_path / "out"]):
        code, _, err = _cli([*command, graph, "--hw", "edge", "--verify"], capsys)
        assert code == 1
        assert err.startswith("internal error (SchedulerBugError): the plan verifier rejects the compiled "
                              "program: allocations ")
        assert err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("graph, hw, pe_cycles_per_mac", [
    ("misc_fp32", "edge", 4),          # edge: 256 int8, 64 fp32 MACs a cycle
    ("resnet_int16x8", "edge", 2),     # 128 int16 MACs a cycle
    ("resnet_int16x8", "tiny", 2),
    ("misc_fp32", "tiny", 0),          # tiny's array has no fp32 rate: the vector unit does them
])
def test_mac_utilization_is_against_the_peak_of_the_dtype(graph, hw, pe_cycles_per_mac):
    from npu_sim.inputs import random_array

    g = npu_sim.load_graph(Path(__file__).resolve().parents[1] / "data" / "converted" / f"{graph}.tosa")
    rng = np.random.default_rng(0)
    s = npu_sim.simulate(g, hw, {n: random_array(t, rng) for n, t in g.input_types.items()}).summary
    pes = s["hw"]["mac_array"]["rows"] * s["hw"]["mac_array"]["cols"]
    assert s["macs"] > 0
    assert s["mac_utilization"] == s["macs"] * pe_cycles_per_mac / (s["total_cycles"] * pes)
    assert (s["utilization"]["mac_array"] > 0) == (pe_cycles_per_mac > 0)


def test_tosa_level_8k_refuses_a_rank_7_graph_and_none_runs_it(tmp_path, capsys):
    from npu_sim.tosa.loader import save_graph
    from tests.tosa.test_levels import _add

    graph = tmp_path / "rank7.tosa"
    save_graph(_add(7), graph)
    for command in (["exec"], ["run", "--hw", "tiny"], ["plan", "--hw", "tiny"], ["inspect"]):
        out = ["-o", tmp_path / command[0], "--random-inputs", 0] if command[0] in ("exec", "run") else []
        code, _, err = _cli([*command, graph, *out], capsys)
        assert code == 2 and err.count("\n") == 1
        assert "the rank of 'x' is 7, more than MAX_RANK = 6 of TOSA level 8K" in err
        assert _cli([*command, graph, *out, "--tosa-level", "none"], capsys)[0] == 0
    _check_same_outputs(tmp_path / "run", tmp_path / "exec")
    code, _, err = _cli(["exec", graph, "--tosa-level", "16K", "-o", tmp_path / "x"], capsys)
    assert (code, err) == (2, "error: unknown TOSA level '16K' (levels: 8K, none)\n")


def test_simulate_validates_a_graph_built_in_python():
    """A Graph object that never went through the loader is validated before scheduling: an
    ADD with one operand is a GraphValidationError, not a crash in the scheduler."""
    from npu_sim.errors import GraphValidationError

    tensors = {"x": Tensor("x", (4,), DType.INT32), "y": Tensor("y", (4,), DType.INT32)}
    graph = Graph([Region("main", [Block("main", [Operator(Op.ADD, ["x"], ["y"])], tensors, ["x"], ["y"])])])
    with pytest.raises(GraphValidationError, match=r"ADD\(y\): takes 2 input\(s\), has 1"):
        npu_sim.simulate(graph, "edge", {"x": np.zeros(4, np.int32)})


def test_long_streams_draw_their_first_invocations_and_match_exec(tmp_path, capsys):
    """``-n 20 --random-inputs``: 20 independent inputs (as exec draws them); the timeline and
    the trace show the first 16 invocations, the summary all 20, after a constant preamble."""
    summary, _ = _run_and_exec(EXAMPLES / "lstm_stateful_int8.tosa", "edge", tmp_path, capsys,
                               ["-n", 20, "--random-inputs", 4])
    assert summary["invocations"] == 20 and summary["report_invocations_drawn"] == 16
    assert summary["preamble_ddr_bytes"] == 8872 and summary["ddr_read_bytes"] == 8872 + 20 * 32
    events = json.loads((tmp_path / "run" / "trace.json").read_text())["traceEvents"]
    invocations = {e["args"]["invocation"] for e in events if "invocation" in e.get("args", {})}
    assert invocations == set(range(16))


def test_summary_json_of_a_long_stream_writes_one_ops_row_per_line():
    from npu_sim.commands.run_cmd import OPS_ROWS_INDENTED_MAX, summary_json

    rows = [{"name": f"op{k}", "cycles": k} for k in range(OPS_ROWS_INDENTED_MAX + 1)]
    summary = {"command": "run", "ops": rows, "hw": {"name": "edge"}}
    text = summary_json(summary)
    assert json.loads(text) == summary
    assert '\n    {"name": "op3", "cycles": 3},\n' in text and text.startswith('{\n  "command": "run",\n')
    short = {"command": "run", "ops": rows[:2]}
    assert summary_json(short) == json.dumps(short, indent=2) + "\n"


def test_no_composite_fusion_runs_the_lstm_op_by_op_with_the_same_outputs(tmp_path, capsys):
    graph = EXAMPLES / "lstm_step64_int8.tosa"
    summaries = {}
    for name, extra in (("fused", []), ("op", ["--no-composite-fusion"])):
        code, _, err = _cli(["run", graph, "--hw", "edge", "-n", 4, "--random-inputs", 2, *extra,
                             "-o", tmp_path / name], capsys)
        assert (code, err) == (0, "")
        summaries[name] = json.loads((tmp_path / name / "summary.json").read_text())
    _check_same_outputs(tmp_path / "fused", tmp_path / "op")
    assert [e["kind"] for e in summaries["fused"]["fused_composites"]] == ["lstm_cell"]
    assert summaries["op"]["fused_composites"] == []
    assert summaries["fused"]["per_invocation_cycles"] == [1251] * 4
    assert summaries["op"]["per_invocation_cycles"] == [2279] * 4
    code, out, err = _cli(["plan", graph, "--hw", "edge"], capsys)
    assert (code, err) == (0, "") and "composites: 1 of 1 candidates fused" in out
    code, out, err = _cli(["plan", graph, "--hw", "edge", "--no-composite-fusion", "--json"], capsys)
    assert (code, err) == (0, "") and json.loads(out)["composites"] == []


def test_strict_npu_refuses_a_cpu_fallback_in_one_line(tmp_path, capsys):
    code, out, err = _cli(["run", EXAMPLES / "add_mul_fp32.tosa", "--hw", "ethos-u55-256", "--random-inputs", "0",
                           "-o", tmp_path / "out", "--strict-npu"], capsys)
    assert code == 2 and out == ""
    assert err == ("error: ADD(sum): FP32 data: the NPU runs TOSA PRO-INT only, no floating point (Vela 5.2 "
                   "SUPPORTED_OPS.md, Ethos-U55/U65 TOSA); ethos-u55-256 runs it on no NPU unit (strict NPU "
                   "support: no CPU fallback)\n")
    assert not (tmp_path / "out").exists()
    code, out, err = _cli(["plan", EXAMPLES / "add_mul_fp32.tosa", "--hw", "ethos-u85-256", "--strict-npu"], capsys)
    assert code == 2 and err.startswith("error: ADD(sum): FP32 data") and err.count("\n") == 1


def test_run_reports_the_host_cpus_operators(tmp_path, capsys):
    code, out, err = _cli(["run", EXAMPLES / "add_mul_fp32.tosa", "--hw", "ethos-u55-256", "--random-inputs", "0",
                           "-o", tmp_path / "out"], capsys)
    assert (code, err) == (0, "")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [(c["op"], c["dtype"]) for c in summary["cpu_ops"]] == [("ADD+MUL+MAXIMUM", "fp32")]   # one chain
    assert all(c["cycles"] > 0 and c["reason"].startswith("FP32 data") for c in summary["cpu_ops"])
    assert "│ cpu (host) │" in out
    assert f"host CPU: 1 operation the NPU cannot run, {summary['cpu_ops'][0]['cycles']:,} cycles: " \
           "ADD+MUL+MAXIMUM (fp32)" in out
    code, out, err = _cli(["plan", EXAMPLES / "add_mul_fp32.tosa", "--hw", "ethos-u55-256"], capsys)
    assert code == 0 and "on the host CPU: ADD(sum)+MUL(product)+MAXIMUM(output) (ADD+MUL+MAXIMUM, fp32): FP32" in out


def test_a_graph_too_big_for_the_arena_is_refused_naming_the_tensor(tmp_path, capsys):
    (tmp_path / "small.yaml").write_text("extends: ethos-u55-256\ntcm: {size_bytes: 16384, bank_count: 1}\n")
    code, out, err = _cli(["run", EXAMPLES / "mobilenet_v2_035_96_int8.tosa", "--hw", tmp_path / "small.yaml",
                           "--random-inputs", "0", "-o", tmp_path / "out"], capsys)
    assert (code, out) == (2, "")
    assert err == ("error: input 'TosaInput_0' (27,648 bytes) does not fit the TCM of 16,384 bytes of small, where "
                   "its memory roles keep it, with the other tensors kept there (31,786 bytes in all, the constant "
                   "pool included)\n")


def test_timing_only_writes_the_same_figures_and_no_outputs(tmp_path, capsys):
    graph = EXAMPLES / "ds_cnn_kws_int8.tosa"
    for name, extra in (("full", []), ("timed", ["--timing-only"])):
        code, out, err = _cli(["run", graph, "--hw", "edge", "--random-inputs", "0", *extra, "-o", tmp_path / name],
                              capsys)
        assert (code, err) == (0, ""), err
    full, timed = (json.loads((tmp_path / name / "summary.json").read_text()) for name in ("full", "timed"))
    assert "no outputs (timing only" in out and not (tmp_path / "timed" / "outputs").exists()
    assert (timed["timing_only"], timed["outputs"], full["timing_only"]) == (True, {}, False)
    skip = ("wall_seconds", "timing_only", "outputs")
    assert {k: v for k, v in timed.items() if k not in skip} == {k: v for k, v in full.items() if k not in skip}
    _check_report(tmp_path / "timed", {**timed, "outputs": full["outputs"]}, "edge")


def test_block_tensors_spill_less_than_without_with_the_same_outputs(tmp_path, capsys):
    """On tiny with a 36 KiB TCM the plan of MobileNetV2 fragments: block tensors store 43 tensors
    in its holes, spilling 4 fewer values; the bits stay those of exec, with or without."""
    graph, hw = EXAMPLES / "mobilenet_v2_035_96_int8.tosa", EXAMPLES / "tiny_tcm36k.yaml"
    code, _, err = _cli(["exec", graph, "--random-inputs", "3", "-o", tmp_path / "exec"], capsys)
    assert (code, err) == (0, "")
    figures = {}
    for name, extra in (("with", []), ("without", ["--no-block-tensors"])):
        code, _, err = _cli(["run", graph, "--hw", hw, "--random-inputs", "3", "--verify", *extra,
                             "-o", tmp_path / name], capsys)
        assert (code, err) == (0, ""), err
        s = _check_same_outputs(tmp_path / name, tmp_path / "exec")
        figures[name] = (s["block_tensors"], s["ddr_spill_bytes"], s["ddr_spill_space_bytes"], s["ddr_read_bytes"],
                         s["ddr_write_bytes"], s["peak_tcm_bytes"], s["total_cycles"])
    # the spills are the DDR writes but the 10 bytes of the output
    assert figures["with"] == ({"count": 43, "blocks": 775, "pointer_table_bytes": 3100},
                               322560, 110592, 866774, 322570, 36848, 243888)
    assert figures["without"] == ({"count": 0, "blocks": 0, "pointer_table_bytes": 0},
                                  380832, 138240, 930662, 380842, 36016, 249491)


def test_simulate_api_switches_block_tensors_off():
    graph = npu_sim.load_graph(EXAMPLES / "ds_cnn_kws_int16.tosa")
    hw = npu_sim.load_hw_config(EXAMPLES / "tiny_tcm36k.yaml")
    x = np.random.default_rng(1).integers(-32768, 32767, size=(1, 49, 10, 1), dtype=np.int16)
    want = npu_sim.execute(graph, {"TosaInput_0": x})["TosaOutput_0"]
    on = npu_sim.simulate(graph, hw, {"TosaInput_0": x})
    off = npu_sim.simulate(graph, hw, {"TosaInput_0": x}, block_tensors=False)
    assert _bits(on.outputs["TosaOutput_0"]) == _bits(off.outputs["TosaOutput_0"]) == _bits(want)
    assert (on.summary["block_tensors"]["count"], off.summary["block_tensors"]["count"]) == (8, 0)
    assert (on.summary["ddr_write_bytes"], off.summary["ddr_write_bytes"]) == (32024, 48024)


def test_optimise_size_runs_in_stripes_with_the_same_outputs(tmp_path, capsys):
    """MobileNetV3-Small on ethos-u85-256: the preset's stripes (within 5% of the cycles; one chain
    of 6-row stripes, 35,808 B against 47,712 B of whole maps, its input read in the DRAM) and the
    fewest-bytes ones (--optimise size; three chains, 16,608 B) give exec's bits."""
    graph = EXAMPLES / "mobilenet_v3_small_int8.tosa"
    code, _, err = _cli(["exec", graph, "--random-inputs", "3", "-o", tmp_path / "exec"], capsys)
    assert (code, err) == (0, "")
    figures = {}
    for name, extra in (("preset", []), ("size", ["--optimise", "size"])):
        code, _, err = _cli(["run", graph, "--hw", "ethos-u85-256", "--random-inputs", "3", "--verify", *extra,
                             "-o", tmp_path / name], capsys)
        assert (code, err) == (0, ""), err
        s = _check_same_outputs(tmp_path / name, tmp_path / "exec")
        figures[name] = (s["stripes"]["count"], s["peak_tcm_bytes"], s["tcm_lower_bound_unstriped_bytes"])
    assert figures == {"preset": (1, 35808, 62688), "size": (3, 16608, 51168)}


def test_timing_only_refuses_a_rescale_that_breaks_a_static_error_if(tmp_path, capsys):
    """scale32 with an int48 input: the full run's kernel refused it, a timing-only run (no kernel)
    timed it; both now stop at validation with one line and exit 2."""
    bad = _rescale_graph(DType.INT48, scale32=True, multiplier_dtype=DType.INT32)
    (tmp_path / "bad.tosa").write_bytes(write_graph(bad))
    for extra in ([], ["--timing-only"]):
        code, out, err = _cli(["run", tmp_path / "bad.tosa", "--hw", "edge", "--random-inputs", "0", *extra,
                               "-o", tmp_path / "out"], capsys)
        assert (code, out) == (2, "") and err.count("\n") == 1, extra
        assert "ERROR_IF(scale32 && is_same<in_t,i48_t>())" in err, extra
