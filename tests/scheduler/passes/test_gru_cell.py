"""The GRU-cell composite: Keras GRU cells (reset_after=True or False), unrolled or in a WHILE
body, fp32 or int8, fuse into one operation with the same bits as op by op; other shapes stay op
by op with the reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import npu_sim
from npu_sim.simulation import compile_graph
from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.ops import Op
from scheduler.passes.fusion import fuse_block

DATA = Path(__file__).resolve().parents[2] / "data"


def candidates(graph):
    program = compile_graph(graph, npu_sim.load_hw_config("edge"))
    return [c for c in program.stats.composite_candidates if c.kind == "gru_cell"]


def test_a_gru_in_a_while_body_fuses_and_keeps_its_weights_in_the_tcm():
    graph = load_graph(DATA / "tflite" / "gru_fp32.tflite")
    (candidate,) = candidates(graph)
    # 23 operators of the cell and the RESHAPE of h' into the loop's carried value (its epilogue)
    assert candidate.fused and candidate.block.endswith("_body") and len(candidate.operators) == 24
    assert candidate.operators[-1] == "RESHAPE(layer_41)"
    x = np.random.default_rng(1).normal(size=(1, 8, 10)).astype(np.float32)
    fused = npu_sim.simulate(graph, "edge", [x])
    op_by_op = npu_sim.simulate(graph, "edge", [x], composite_fusion=False)
    np.testing.assert_array_equal(fused.outputs["TosaOutput_0"], op_by_op.outputs["TosaOutput_0"])
    assert fused.summary["total_cycles"] < 0.8 * op_by_op.summary["total_cycles"]
    (facts,) = fused.summary["fused_composites"]
    assert (facts["kind"], facts["hidden_units"], facts["input_size"]) == ("gru_cell", 12, 10)
    weights = 36 * 12 * 4 + 36 * 10 * 4
    assert fused.summary["ddr_read_bytes"] < 2 * weights   # loaded once, not once per step (8 steps)


@pytest.mark.parametrize("stem, operators, products", [("gru_int8", 66, 2), ("gru_reset_before_int8", 69, 3)])
def test_an_int8_gru_in_a_while_body_fuses(stem, operators, products):
    """TFLite's quantizer fills the loop body with int8 operators: r * h reaches the
    candidate's product (reset_after=False) through its requantisation. The cell takes in
    the quantisation of the float state it is carried in (MUL, CAST, ADD, CAST) and the
    dequantisation of h' into the loop's two carried values (CAST, SUB, MUL; RESHAPE first)."""
    graph = load_graph(DATA / "tflite" / f"{stem}.tflite")
    (candidate,) = candidates(graph)
    assert candidate.fused and candidate.block.endswith("_body") and len(candidate.operators) == operators
    assert [name.split("(")[0] for name in candidate.operators[:6]] == ["MUL", "CAST", "ADD", "MAXIMUM", "MINIMUM",
                                                                         "CAST"]
    assert [name.split("(")[0] for name in candidate.operators[-7:]] == \
        ["CAST", "SUB", "MUL", "RESHAPE", "CAST", "SUB", "MUL"]
    assert sum(1 for name in candidate.operators if name.startswith("CONV2D")) == products
    x = np.random.default_rng(4).integers(-128, 128, size=(1, 8, 10)).astype(np.int8)
    fused = npu_sim.simulate(graph, "edge", [x])
    op_by_op = npu_sim.simulate(graph, "edge", [x], composite_fusion=False)
    np.testing.assert_array_equal(fused.outputs["TosaOutput_0"], op_by_op.outputs["TosaOutput_0"])
    assert fused.summary["total_cycles"] < 0.8 * op_by_op.summary["total_cycles"]


def test_an_unrolled_int8_gru_fuses():
    graph = load_graph(DATA / "lstm_variants" / "gru_int8.tosa")
    (candidate,) = [c for c in fuse_block(graph.main).candidates if c.kind == "gru_cell"]
    assert candidate.fused and len(candidate.operators) == 54


def test_a_gru_with_its_reset_gate_before_the_product_fuses_with_its_three_products():
    graph = load_graph(DATA / "tflite" / "gru_reset_before_fp32.tflite")
    (candidate,) = candidates(graph)
    assert candidate.fused and len(candidate.operators) == 26   # 25 and the RESHAPE of h' to the loop
    assert sum(1 for name in candidate.operators if name.startswith("CONV2D")) == 3
    x = np.random.default_rng(2).normal(size=(1, 8, 10)).astype(np.float32)
    fused = npu_sim.simulate(graph, "edge", [x])
    op_by_op = npu_sim.simulate(graph, "edge", [x], composite_fusion=False)
    np.testing.assert_array_equal(fused.outputs["TosaOutput_0"], op_by_op.outputs["TosaOutput_0"])
    np.testing.assert_allclose(fused.outputs["TosaOutput_0"], npu_sim.execute(graph, [x])["TosaOutput_0"],
                               rtol=0, atol=1e-6)
    assert fused.summary["total_cycles"] < 0.8 * op_by_op.summary["total_cycles"]
    (facts,) = fused.summary["fused_composites"]
    assert (facts["kind"], facts["hidden_units"], facts["input_size"]) == ("gru_cell", 12, 10)


def test_a_reset_gate_that_multiplies_something_else_than_h_says_so():
    graph = load_graph(DATA / "tflite" / "gru_reset_before_fp32.tflite")
    body = next(b for b in graph.blocks() if b.name.endswith("_body"))
    muls = [op for op in body.operators if op.op is Op.MUL]
    reset = muls[1]   # r * h (z * h comes first)
    keep = muls[0]
    reset.inputs[1] = keep.outputs[0]   # r * (z * h): no GRU
    (candidate,) = candidates(graph)
    assert not candidate.fused and candidate.reason == "r multiplies another value than the h that z multiplies"


def test_a_cell_that_differs_says_why():
    graph = load_graph(DATA / "tflite" / "gru_fp32.tflite")
    body = next(b for b in graph.blocks() if b.name.endswith("_body"))
    first_sigmoid = next(op for op in body.operators if op.op is Op.SIGMOID)
    first_sigmoid.op = Op.TANH   # z = tanh(...): no GRU
    (candidate,) = candidates(graph)
    assert not candidate.fused and candidate.reason == "gate z activation is TANH, expected SIGMOID"


@pytest.mark.parametrize("preset", ["ethos-u55-256", "ethos-u85-256"])
def test_npus_without_the_datapath_run_it_op_by_op(preset):
    graph = load_graph(DATA / "tflite" / "gru_fp32.tflite")
    program = compile_graph(graph, npu_sim.load_hw_config(preset))
    assert not program.stats.composite_candidates


def test_a_gru_whose_recurrent_split_is_left_in_float_fuses():
    """TF's quantizer left GRU(24, reset_after=False)'s split of its recurrent product in float
    (dequantize, two float SLICEs, a quantization of each): the round trip gives every int8
    value back, so the SLICEs run on the int8 product and the cell fuses."""
    graph = load_graph(DATA / "tflite" / "gru_wide_reset_before_int8.tflite")
    (candidate,) = candidates(graph)
    assert candidate.fused, candidate.reason
    assert sum(1 for name in candidate.operators if name.startswith("CONV2D")) == 3
    x = np.random.default_rng(5).integers(-128, 128, size=(1, 20, 13)).astype(np.int8)
    fused = npu_sim.simulate(graph, "edge", [x])
    op_by_op = npu_sim.simulate(graph, "edge", [x], composite_fusion=False)
    np.testing.assert_array_equal(fused.outputs["TosaOutput_0"], op_by_op.outputs["TosaOutput_0"])
    np.testing.assert_array_equal(fused.outputs["TosaOutput_0"], npu_sim.execute(graph, [x])["TosaOutput_0"])
    assert fused.summary["total_cycles"] < 0.6 * op_by_op.summary["total_cycles"]
