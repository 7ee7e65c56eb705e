"""Concat slices: a SLICE inside one CONCAT input reads that input; the CONCAT then goes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import npu_sim
from npu_sim.api import load_graph
from npu_sim.hw.config import load_hw_config
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.passes.concat_slices import slice_concats
from tests.scheduler.graphs import check_end_to_end

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _steps_then_slice(start, size):
    """Three 'time steps' (each x_t + x_t) CONCATed on axis 1, then one SLICE of the sequence."""
    b = GraphBuilder()
    steps = []
    for t in range(3):
        x = b.input(f"x{t}", (1, 1, 4), DType.INT32)
        steps.append(b.op(Op.ADD, [x, x]))
    sequence = b.op(Op.CONCAT, steps, axis=1)
    b.output(b.op(Op.SLICE, [sequence, b.const_shape(None, start), b.const_shape(None, size)]))
    return b.build(), steps


def _ops(graph):
    return [op.op for op in graph.main.operators]


def test_the_last_step_of_a_sequence_is_that_step():
    graph, steps = _steps_then_slice([0, 2, 0], [1, 1, 4])
    simpler = slice_concats(graph)
    assert Op.CONCAT not in _ops(simpler) and Op.SLICE not in _ops(simpler)
    identity = next(op for op in simpler.main.operators if op.op is Op.IDENTITY)
    assert identity.inputs == [steps[2]]
    assert Op.CONCAT in _ops(graph)   # (the graph given is not changed)
    check_end_to_end(graph, load_hw_config("ethos-u85-256"))


def test_part_of_one_step_is_a_slice_of_it():
    graph, steps = _steps_then_slice([0, 1, 1], [1, 1, 2])
    simpler = slice_concats(graph)
    slice_op = next(op for op in simpler.main.operators if op.op is Op.SLICE)
    assert slice_op.inputs[0] == steps[1]
    assert list(simpler.main.tensor(slice_op.inputs[1]).data) == [0, 0, 1]
    assert Op.CONCAT not in _ops(simpler)
    check_end_to_end(graph, load_hw_config("ethos-u55-256"))


def test_a_window_across_two_steps_stays_a_slice_of_the_sequence():
    graph, _ = _steps_then_slice([0, 1, 0], [1, 2, 4])
    assert slice_concats(graph) is graph


def test_a_keras_lstm_returning_its_last_output_keeps_no_sequence():
    """The keyword LSTM (TFLite's fused LSTM over 49 steps, then a strided slice of the last
    output): no CONCAT is scheduled, and the U55's peak TCM falls below Vela's 4,464 bytes."""
    graph = load_graph(EXAMPLES / "lstm_kws_int8.tflite")
    assert Op.CONCAT in _ops(graph) and Op.CONCAT not in _ops(slice_concats(graph))
    inputs = {name: np.zeros(t.shape, t.dtype.numpy_dtype) for name, t in graph.input_types.items()}
    result = npu_sim.simulate(graph, "ethos-u55-256", inputs)
    assert "CONCAT" not in {op["op"] for op in result.summary["ops"]}
    assert result.summary["peak_tcm_bytes"] < 4464
