"""A fused cell takes in the quantisation steps at its edges when its state crosses a loop."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import npu_sim
from npu_sim.simulation import compile_graph
from npu_sim.tosa.loader import load_graph
from scheduler.passes.fusion import fuse_block

DATA = Path(__file__).resolve().parents[2] / "data"


def _kinds(names):
    return [name.split("(")[0] for name in names]


def test_the_stateful_int8_lstm_loop_cell_takes_in_its_state_quantisation():
    """Keras' LSTM(16, stateful=True) as TFLite's WHILE loop: the body quantizes the float h
    and c it carries (MUL, CAST, ADD, CAST each) and dequantizes h', c' and the step's
    output (CAST, SUB, MUL each; the output reshaped first)."""
    graph = load_graph(DATA / "tflite" / "lstm_stateful_loop_int8.tflite")
    program = compile_graph(graph, npu_sim.load_hw_config("edge"))
    (candidate,) = program.stats.composite_candidates
    assert candidate.fused and candidate.block.endswith("_body")
    kinds = _kinds(candidate.operators)
    # the cell's 42 operators, 12 of prologue (the quantizations saturate: MAXIMUM, MINIMUM
    # before the narrowing CAST), 10 of epilogue
    assert len(kinds) == 64
    assert kinds[:12] == ["MUL", "CAST", "ADD", "MAXIMUM", "MINIMUM", "CAST"] * 2
    assert kinds[-4:] == ["RESHAPE", "CAST", "SUB", "MUL"]
    dequantized = ("MUL(layer_117)", "MUL(layer_129)", "MUL(layer_136)")   # c', h' and the output, in float
    assert all(name in candidate.operators for name in dequantized)


def test_fused_at_most_0_6_of_op_by_op_with_the_same_bits():
    """Issue 24, item 7: a stateful int8 LSTM converted from Keras runs fused at <= 0.6x its
    op-by-op cycles per invocation (edge, a stream of invocations)."""
    graph = load_graph(DATA / "tflite" / "lstm_stateful_loop_int8.tflite")
    x = np.random.default_rng(3).integers(-128, 128, size=(4, 1, 8, 10)).astype(np.int8)
    fused = npu_sim.simulate(graph, "edge", [x], invocations=4)
    op_by_op = npu_sim.simulate(graph, "edge", [x], invocations=4, composite_fusion=False)
    np.testing.assert_array_equal(fused.outputs["TosaOutput_0"], op_by_op.outputs["TosaOutput_0"])
    steady_fused = fused.summary["per_invocation_cycles"][-1]
    steady_op_by_op = op_by_op.summary["per_invocation_cycles"][-1]
    assert steady_fused <= 0.6 * steady_op_by_op


def test_unrolled_cells_keep_their_operators():
    """h' of one unrolled cell is read by the next one: no chain to a block output, nothing
    taken in (each cell matched as before)."""
    graph = load_graph("examples/lstm_stateful_int8.tosa")
    fused = [c for c in fuse_block(graph.main).candidates if c.fused]
    assert [len(c.operators) for c in fused] == [44, 42, 42, 42]   # the first joins the variable reads
