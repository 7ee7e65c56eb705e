"""Recurrent Keras models exported to .tflite the default way give LiteRT's outputs.

The oracle is LiteRT (``ai-edge-litert``, the runtime users deploy .tflite models with):
integer models bit for bit, float ones within 1e-5, over several invocations (LiteRT's fused
LSTM keeps its state in variable tensors from one invocation to the next; so does the
legalized graph), in the reference executor and on the simulated NPU. The legalized graph
is plain TOSA: Arm's reference model runs what ``npu-sim convert`` writes to the same bits.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

import npu_sim
from npu_sim.simulation import compile_graph
from npu_sim.tosa.loader import load_graph, save_graph
from tests.oracle import run_graph_bytes

DATA = Path(__file__).resolve().parents[2] / "data" / "tflite"
#: fused LSTMs (legalized by npu-sim) and LSTMs/GRUs the converter writes as WHILE loops
FUSED = ["lstm_int8", "lstm_sequence_int8", "lstm_batch2_int8", "lstm_stacked_int8", "lstm_bidirectional_int8",
         "lstm_small_cell_int8", "lstm_fused_fp32"]
LOOPS = ["gru_fp32", "gru_reset_before_fp32", "lstm_stateful_fp32", "lstm_hard_sigmoid_fp32",
         "gru_int8", "gru_reset_before_int8", "lstm_stateful_loop_int8", "gru_sequence_fp32", "gru_sequence_int8",
         "gru_wide_int8", "gru_wide_reset_before_int8", "lstm_wide_hard_sigmoid_int8", "lstm_stateful_sequence_int8",
         "gru_stacked_fp32", "gru_stacked_int8"]
#: models on which LiteRT's default interpreter (XNNPACK's int8 ADD, MUL and FULLY_CONNECTED) is
#: off its reference kernels (README, "Whose bits"): checked against the reference kernels, and
#: within this many LSB of the default interpreter
XNNPACK_ROUNDS = {"lstm_stateful_loop_int8": 1, "gru_wide_int8": 1, "gru_wide_reset_before_int8": 2,
                  "lstm_wide_hard_sigmoid_int8": 1, "lstm_stateful_sequence_int8": 2, "gru_stacked_int8": 1}
INVOCATIONS = 3


def litert_outputs(path: Path, inputs: list[np.ndarray], builtin: bool = False) -> list[np.ndarray]:
    """LiteRT's outputs for consecutive invocations (its variable tensors carry over), from its
    default interpreter or (``builtin``) its builtin kernels."""
    resolver = OpResolverType.BUILTIN_REF if builtin else OpResolverType.AUTO
    interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=resolver)
    interpreter.allocate_tensors()
    feed, fetch = interpreter.get_input_details()[0]["index"], interpreter.get_output_details()[0]["index"]
    results = []
    for x in inputs:
        interpreter.set_tensor(feed, x)
        interpreter.invoke()
        results.append(interpreter.get_tensor(fetch).copy())
    return results


def random_inputs(graph: npu_sim.Graph, count: int, seed: int) -> list[np.ndarray]:
    (t,) = graph.input_types.values()
    rng = np.random.default_rng(seed)
    if t.dtype.is_integer:
        return [rng.integers(-128, 128, size=t.shape).astype(np.int8) for _ in range(count)]
    return [rng.normal(0, 1, size=t.shape).astype(np.float32) for _ in range(count)]


def assert_close(ours: np.ndarray, theirs: np.ndarray) -> None:
    if np.issubdtype(theirs.dtype, np.integer):
        np.testing.assert_array_equal(ours.reshape(theirs.shape), theirs)
    else:
        np.testing.assert_allclose(ours.reshape(theirs.shape), theirs, rtol=0, atol=1e-5)


@pytest.mark.parametrize("stem", FUSED + LOOPS)
def test_the_reference_executor_gives_litert_outputs(stem):
    path = DATA / f"{stem}.tflite"
    graph = load_graph(path)
    inputs = random_inputs(graph, INVOCATIONS, seed=3)
    expected = litert_outputs(path, inputs, builtin=stem in XNNPACK_ROUNDS)
    default = litert_outputs(path, inputs)
    session = npu_sim.Session(graph)
    name = graph.main.inputs[0]
    for x, want, near in zip(inputs, expected, default):
        (ours,) = session.invoke({name: x}).values()
        assert_close(ours, want)
        if stem in XNNPACK_ROUNDS:
            assert np.abs(ours.reshape(near.shape).astype(np.int32) - near).max() <= XNNPACK_ROUNDS[stem]


@pytest.mark.parametrize("stem", ["lstm_int8", "lstm_bidirectional_int8", "lstm_fused_fp32", "gru_fp32",
                                  "lstm_stateful_fp32", "lstm_small_cell_int8", "gru_int8", "gru_reset_before_int8",
                                  "lstm_stateful_loop_int8", "gru_sequence_int8", "gru_stacked_fp32",
                                  "gru_stacked_int8"])
def test_the_simulated_npu_gives_litert_outputs(stem):
    path = DATA / f"{stem}.tflite"
    graph = load_graph(path)
    inputs = random_inputs(graph, INVOCATIONS, seed=5)
    expected = litert_outputs(path, inputs, builtin=stem in XNNPACK_ROUNDS)
    result = npu_sim.simulate(graph, "edge", {graph.main.inputs[0]: np.stack(inputs)}, invocations=INVOCATIONS)
    (ours,) = result.outputs.values()
    for k, want in enumerate(expected):
        assert_close(ours[k], want)


@pytest.mark.parametrize("preset", ["ethos-u55-256", "ethos-u85-256"])
@pytest.mark.parametrize("stem", ["lstm_int8", "lstm_stacked_int8", "gru_int8", "lstm_sequence_int8",
                                  "lstm_bidirectional_int8", "gru_stacked_fp32", "gru_stacked_int8"])
def test_the_ethos_u_presets_give_litert_outputs(stem, preset):
    """Three invocations on the Ethos-U presets: the gates' products read their weight streams from
    the flash or DRAM (tcm.matrix_vector_weights_in_place), a slice of the output sequence reads its
    step (scheduler/passes/concat_slices.py), the steps write their slices of the sequence
    (codegen/concat_in_place.py), the U55's graph input and output live in its SRAM only while
    needed; LiteRT's bits."""
    path = DATA / f"{stem}.tflite"
    graph = load_graph(path)
    inputs = random_inputs(graph, INVOCATIONS, seed=7)
    expected = litert_outputs(path, inputs, builtin=stem in XNNPACK_ROUNDS)
    result = npu_sim.simulate(graph, preset, {graph.main.inputs[0]: np.stack(inputs)}, invocations=INVOCATIONS)
    (ours,) = result.outputs.values()
    for k, want in enumerate(expected):
        assert_close(ours[k], want)


@pytest.mark.parametrize("stem, cells", [("lstm_int8", 8), ("lstm_fused_fp32", 4), ("lstm_bidirectional_int8", 16),
                                         ("lstm_stacked_int8", 16), ("lstm_small_cell_int8", 8)])
def test_each_time_step_runs_as_one_fused_cell_on_edge(stem, cells):
    graph = load_graph(DATA / f"{stem}.tflite")
    result = npu_sim.simulate(graph, "edge", random_inputs(graph, 1, seed=0))
    fused = result.summary["fused_composites"]
    assert [c["kind"] for c in fused] == ["lstm_cell"] * cells
    op_by_op = npu_sim.simulate(graph, "edge", random_inputs(graph, 1, seed=0), composite_fusion=False)
    assert all(np.array_equal(a, b) for a, b in zip(result.outputs.values(), op_by_op.outputs.values()))


def test_a_cell_state_below_2_to_the_minus_15_reproduces_litert_skipping_its_tanh():
    """LiteRT's tanh of a cell state with fewer than 0 integer bits does nothing and leaves
    its output buffer holding the input gate: h' = o * i. The legalized cell does that too
    (so it is no LSTM cell for the matcher: the second layer stays op by op; the outputs are
    checked against LiteRT above)."""
    graph = load_graph(DATA / "lstm_small_cell_int8.tflite")
    program = compile_graph(graph, npu_sim.load_hw_config("edge"))
    refused = [c.reason for c in program.stats.composite_candidates if not c.fused]
    assert len(refused) == 8
    assert all(re.fullmatch(r"the new cell state \S+ goes through 0 tanh activations, expected 1", r) for r in refused)


def test_the_cells_of_int8_loops_fuse_in_their_bodies_on_edge():
    """One GRU or LSTM cell per WHILE body (it runs once per time step)."""
    for stem, kind in [("gru_int8", "gru_cell"), ("gru_reset_before_int8", "gru_cell"),
                       ("lstm_stateful_loop_int8", "lstm_cell"), ("gru_sequence_int8", "gru_cell"),
                       ("gru_stacked_int8", "gru_cell")]:
        graph = load_graph(DATA / f"{stem}.tflite")
        result = npu_sim.simulate(graph, "edge", random_inputs(graph, 1, seed=0))
        loops = 2 if "stacked" in stem else 1
        assert [c["kind"] for c in result.summary["fused_composites"]] == [kind] * loops, stem


@pytest.mark.parametrize("stem", ["lstm_int8", "lstm_fused_fp32", "lstm_bidirectional_int8", "gru_reset_before_int8",
                                  "gru_stacked_fp32", "gru_stacked_int8"])
def test_arms_reference_model_runs_the_converted_graph_to_the_same_bits(stem, tmp_path):
    graph = load_graph(DATA / f"{stem}.tflite")
    save_graph(graph, tmp_path / "model.tosa")
    (x,) = random_inputs(graph, 1, seed=11)
    (ours,) = npu_sim.execute(graph, {graph.main.inputs[0]: x}).values()
    (theirs,) = run_graph_bytes((tmp_path / "model.tosa").read_bytes(), [x], list(graph.output_types.values()))
    if np.issubdtype(theirs.dtype, np.integer):
        np.testing.assert_array_equal(ours, theirs)
    else:   # float sums may differ in their last bits (within TOSA's compliance bounds)
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)
