"""The LSTM-cell matcher on real conversions of other LSTM forms (tests/data/lstm_variants)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import npu_sim
from npu_sim.inputs import load_inputs
from npu_sim.simulation import simulate_invocations
from npu_sim.tosa.loader import load_graph
from scheduler.passes.fusion import fuse_block
from tests.reference.refmodel_cli import run_invocations

VARIANTS = Path(__file__).resolve().parents[2] / "data" / "lstm_variants"


@pytest.mark.parametrize("model, fused, reasons", [
    ("nobias_int8", 1, []),                 # no bias: the pre-activations are one ADD
    ("seq_fp32", 3, []),                    # three steps, every h' also an output of the model
    ("batch2_int8", 1, []),                 # a batch of two: [2, 4H] gates
    ("stateless_int8", 1, []),              # the first step's state is zero: folded by the converter
    ("relu_fp32", 0, ["gate 2 (g) activation is CLAMP, expected TANH"]),
    ("gru_int8", 1, []),                    # a GRU cell: fused by the GRU rule
])
def test_which_cells_fuse(model, fused, reasons):
    candidates = fuse_block(load_graph(VARIANTS / f"{model}.tosa").main).candidates
    assert sum(c.fused for c in candidates) == fused
    assert [c.reason for c in candidates if not c.fused] == reasons


@pytest.mark.parametrize("model", ["nobias_int8", "seq_fp32", "batch2_int8", "relu_fp32", "gru_int8",
                                   "stateless_int8"])
def test_fused_and_op_by_op_runs_match_the_reference_model(model):
    path = VARIANTS / f"{model}.tosa"
    graph = load_graph(path)
    inputs = load_inputs(graph, [], invocations=3, random_seed=4).invocations
    fused = simulate_invocations(graph, "edge", inputs, stack=True)
    op_by_op = simulate_invocations(graph, "edge", inputs, stack=True, composite_fusion=False)
    (name,) = graph.output_types
    out_type = graph.output_types[name]
    assert np.array_equal(fused.outputs[name], op_by_op.outputs[name])
    want, _ = run_invocations(path.read_bytes(), [[x[n] for n in graph.input_types] for x in inputs],
                              [(out_type.shape, out_type.dtype)])
    for k in range(3):
        if out_type.dtype.is_float:
            np.testing.assert_allclose(fused.outputs[name][k], want[k][0], rtol=1e-5, atol=1e-6)
        else:
            assert np.array_equal(fused.outputs[name][k], want[k][0]), k
    cells = len(fused.summary["fused_composites"])
    assert (fused.summary["per_invocation_cycles"][-1] < op_by_op.summary["per_invocation_cycles"][-1]) == (cells > 0)
    assert npu_sim.execute(graph, inputs[0])[name].shape == out_type.shape
