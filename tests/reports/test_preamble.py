"""Resident constants: with -n N the constant pool loads once, in a preamble (reports.preamble)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from npu_sim.inputs import load_inputs
from npu_sim.simulation import simulate_invocations
from npu_sim.tosa.loader import load_graph
from tests.reference.refmodel_cli import run_invocations

LSTM = "examples/lstm_stateful_int8.tosa"


def _run(invocations: int):
    graph = load_graph(LSTM)
    inputs = load_inputs(graph, [], invocations=invocations, random_seed=3).invocations
    return graph, inputs, simulate_invocations(graph, "edge", inputs, stack=True)


def test_constants_load_once_and_outputs_match_the_reference_model():
    graph, inputs, result = _run(4)
    summary = result.summary
    # the weights and quantisation constants and the shape operands the fused LSTM cells'
    # RESHAPE and SLICE steps read, each once (the converter repeats them at every step:
    # 13,480 bytes before identical constants were merged)
    assert summary["preamble_ddr_bytes"] == summary["resident_constant_bytes"] == 8872
    assert summary["preamble_cycles"] == 1132
    assert summary["per_invocation_cycles"] == [1236] * 4
    # steady state: each invocation reads its 32-byte input and writes its 4-byte output
    assert summary["ddr_read_bytes"] == 8872 + 4 * 32 and summary["ddr_write_bytes"] == 4 * 4
    (name,) = graph.output_types
    want, _ = run_invocations(Path(LSTM).read_bytes(), [[x[n] for n in graph.input_types] for x in inputs],
                              [(graph.output_types[name].shape, graph.output_types[name].dtype)])
    for k in range(4):
        assert np.array_equal(result.outputs[name][k], want[k][0]), k


def test_one_invocation_has_no_preamble():
    _, _, result = _run(1)
    summary = result.summary
    assert summary["preamble_cycles"] == summary["preamble_ddr_bytes"] == 0
    assert summary["ddr_read_bytes"] == 8872 + 32


@pytest.mark.parametrize("model, resident_bytes", [("lstm_stacked_int8", 222240), ("lstm_unrolled8_int8", 26136)])
def test_lstm_weights_stay_resident_and_outputs_match_the_reference_model(model, resident_bytes):
    """Every weight of the 2-layer 128-unit LSTM (and of the 8-step one) loads once; a
    steady-state invocation moves only its input and output over DDR."""
    path = f"examples/{model}.tosa"
    graph = load_graph(path)
    inputs = load_inputs(graph, [], invocations=3, random_seed=5).invocations
    result = simulate_invocations(graph, "edge", inputs, stack=True)
    summary = result.summary
    assert summary["preamble_ddr_bytes"] == resident_bytes
    in_bytes = sum(t.size_bytes for t in graph.input_types.values())
    out_bytes = sum(t.size_bytes for t in graph.output_types.values())
    assert summary["ddr_read_bytes"] == resident_bytes + 3 * in_bytes
    assert summary["ddr_write_bytes"] == 3 * out_bytes
    (name,) = graph.output_types
    want, _ = run_invocations(Path(path).read_bytes(), [[x[n] for n in graph.input_types] for x in inputs],
                              [(graph.output_types[name].shape, graph.output_types[name].dtype)])
    for k in range(3):
        assert np.array_equal(result.outputs[name][k], want[k][0]), k
