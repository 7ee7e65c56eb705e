"""Fused LSTM cells end to end: bit-exact with Arm's reference model fused and op by op,
``fused_composites`` in the summary, the candidates in the plan statistics."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

import npu_sim
from npu_sim.hw.config import load_hw_config
from npu_sim.inputs import load_inputs
from npu_sim.simulation import compile_graph, simulate_invocations
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.flatbuffer_io import write_graph
from npu_sim.tosa.loader import load_graph
from reports.plan_stats import format_plan_stats, plan_stats
from tests.reference.refmodel_cli import run_invocations

INVOCATIONS = 4


def _runs(model: str):
    path = f"examples/{model}.tosa"
    graph = load_graph(path)
    inputs = load_inputs(graph, [], invocations=INVOCATIONS, random_seed=11).invocations
    fused = simulate_invocations(graph, "edge", inputs, stack=True)
    op_by_op = simulate_invocations(graph, "edge", inputs, stack=True, composite_fusion=False)
    (name,) = graph.output_types
    out_type = graph.output_types[name]
    want, _ = run_invocations(Path(path).read_bytes(), [[x[n] for n in graph.input_types] for x in inputs],
                              [(out_type.shape, out_type.dtype)])
    # the same kernels in the same order: fused and op by op give the same bits
    assert np.array_equal(fused.outputs[name], op_by_op.outputs[name])
    for k in range(INVOCATIONS):   # invocation k starts from the state k - 1 left
        if out_type.dtype.is_float:   # whole-graph fp32: the reference model rounds its dot products differently
            np.testing.assert_allclose(fused.outputs[name][k], want[k][0], rtol=1e-5, atol=1e-6)
        else:
            assert np.array_equal(fused.outputs[name][k], want[k][0]), k
    return fused.summary, op_by_op.summary


@pytest.mark.parametrize("model, cells, ratio_at_most", [
    ("lstm_stacked_int8", 2, 0.6),
    ("lstm_unrolled8_int8", 8, 0.6),
    ("lstm_stateful_fp32", 1, 0.65),    # a small cell: the input's DDR latency weighs more
    ("lstm_stateful_int8", 4, 0.7),     # 16 units: likewise
])
def test_fused_cells_are_bit_exact_and_cheaper(model, cells, ratio_at_most):
    fused, op_by_op = _runs(model)
    assert op_by_op["fused_composites"] == []
    entries = fused["fused_composites"]
    assert len(entries) == cells and {e["kind"] for e in entries} == {"lstm_cell"}
    assert all(e["weights_resident"] for e in entries)
    assert all(e["cycles_per_invocation"] > 0 and len(e["replaced_operators"]) >= 21 for e in entries)
    steady_fused, steady_op = fused["per_invocation_cycles"][-1], op_by_op["per_invocation_cycles"][-1]
    assert steady_fused <= ratio_at_most * steady_op
    # the weights stay in TCM: a steady invocation moves only its input and output over DDR
    moved = fused["ddr_read_bytes"] + fused["ddr_write_bytes"] - fused["preamble_ddr_bytes"]
    assert moved / INVOCATIONS <= 2048


def test_the_summary_entry_of_a_cell():
    fused, _ = _runs("lstm_stateful_fp32")
    (entry,) = fused["fused_composites"]
    assert entry["operations"] == ["lstm_cell(RESHAPE(layer_16)):recurrent", "lstm_cell(RESHAPE(layer_16))"]
    assert (entry["hidden_units"], entry["input_size"], entry["outputs"]) == (32, 8, ["layer_37", "layer_35"])
    assert entry["replaced_operators"][:2] == ["RESHAPE(layer_16)", "CONV2D(layer_17)"]
    assert len(entry["replaced_operators"]) == 21   # (and the two VARIABLE_READs it does itself)
    assert entry["cycles_per_invocation"] == 546 + 190   # its two commands (see test_composites)


def test_weights_stream_without_a_preamble():
    """One invocation: no constant stays resident across invocations, so the entry says so."""
    graph = load_graph("examples/lstm_stateful_fp32.tosa")
    inputs = load_inputs(graph, [], invocations=1, random_seed=1).invocations
    summary = simulate_invocations(graph, "edge", inputs).summary
    assert [e["weights_resident"] for e in summary["fused_composites"]] == [False]


def test_the_plan_lists_every_candidate():
    hw = load_hw_config("edge")
    stats = plan_stats(compile_graph(load_graph("examples/lstm_unrolled8_int8.tosa"), hw), hw)
    assert len(stats["composites"]) == 8 and all(c["fused"] for c in stats["composites"])
    text = format_plan_stats(stats)
    assert "composites: 8 of 8 candidates fused" in text
    assert "  lstm_cell at layer_213 (block main): fused, 44 operators" in text
    assert "  lstm_cell at layer_275 (block main): fused, 42 operators" in text
    off = plan_stats(compile_graph(load_graph("examples/lstm_unrolled8_int8.tosa"), hw, composite_fusion=False), hw)
    assert off["composites"] == [] and "composites: no candidate" in format_plan_stats(off)


def _built_lstm(hidden: int, features: int):
    """An fp32 LSTM step of any size, as the converter lowers it (examples/lstm_builder.py)."""
    return runpy.run_path("examples/lstm_builder.py")["fp32_lstm_step"](hidden, features, seed=hidden)


@pytest.mark.parametrize("hidden, features", [(8, 5), (48, 16), (100, 3)])
def test_built_lstms_of_other_sizes_fuse_and_match_the_reference_model(hidden, features):
    graph = _built_lstm(hidden, features)
    x = np.random.default_rng(features).standard_normal((INVOCATIONS, 1, 1, features)).astype(np.float32)
    fused = npu_sim.simulate(graph, "edge", {"x": x}, invocations=INVOCATIONS)
    op_by_op = npu_sim.simulate(graph, "edge", {"x": x}, invocations=INVOCATIONS, composite_fusion=False)
    (entry,) = fused.summary["fused_composites"]
    assert (entry["hidden_units"], entry["input_size"], entry["weights_resident"]) == (hidden, features, True)
    assert np.array_equal(fused.outputs["y"], op_by_op.outputs["y"])
    want, _ = run_invocations(write_graph(graph), [[x[k]] for k in range(INVOCATIONS)], [((1, 4), DType.FP32)])
    for k in range(INVOCATIONS):
        np.testing.assert_allclose(fused.outputs["y"][k], want[k][0], rtol=1e-5, atol=1e-6)
    assert fused.summary["per_invocation_cycles"][-1] < op_by_op.summary["per_invocation_cycles"][-1]
