"""The LSTM-cell composite: which converted LSTM steps fuse, and why the others do not."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

import npu_sim
from npu_sim.simulation import compile_graph
from npu_sim.tosa.ir import Graph, Operator
from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.ops import Op
from scheduler.passes.fusion import CHAIN_RULES, fuse, fuse_block

EXAMPLES = "examples"


def _composites(graph: Graph):
    fusion = fuse_block(graph.main)
    return [g.composite for g in fusion.groups if g.composite is not None], fusion.candidates


# operators per cell: 42 (int8) or 21 (fp32), plus the VARIABLE_READs of the state the cell
# alone reads (the first step's h and c; later steps get theirs from the step before)
@pytest.mark.parametrize("model, cells, hidden, input_size, operators", [
    ("lstm_stateful_int8", 4, 16, 8, [44, 42, 42, 42]),     # 4 time steps unrolled in one invocation
    ("lstm_unrolled8_int8", 8, 32, 8, [44] + [42] * 7),     # 8 steps, the same weights each time
    ("lstm_stacked_int8", 2, 128, None, [44, 43]),   # 16 inputs, then the first layer's h' (no read)
    ("lstm_stateful_fp32", 1, 32, 8, [23]),
    ("lstm_step64_int8", 1, 64, 16, [44]),
])
def test_every_cell_of_the_examples_fuses(model, cells, hidden, input_size, operators):
    graph = load_graph(f"{EXAMPLES}/{model}.tosa")
    facts, candidates = _composites(graph)
    assert len(facts) == cells and all(c.fused for c in candidates) and len(candidates) == cells
    assert {f.hidden_units for f in facts} == {hidden}
    sizes = [f.input_size for f in facts]
    assert sizes == ([16, 128] if input_size is None else [input_size] * cells)
    assert [len(c.operators) for c in candidates] == operators
    # each cell hands out h' and c'; groups cover every operator exactly once
    groups = fuse(graph.main)
    assert sorted(i for g in groups for i in g) == list(range(len(graph.main.operators)))
    assert all(len(f.outputs) == 2 for f in facts)


def test_the_cell_is_checked_against_the_lstm_equations():
    """fp32: i, f, g, o from SLICEs at 0, H, 2H, 3H; f * c + i * g; o * tanh(c')."""
    graph = load_graph(f"{EXAMPLES}/lstm_stateful_fp32.tosa")
    (facts,), _ = _composites(graph)
    block = graph.main
    producer = {n: o for o in block.operators for n in o.outputs}
    h_next, c_next = facts.outputs
    assert producer[h_next].op is Op.MUL and producer[c_next].op is Op.ADD
    written = {o.inputs[1]: o.inputs[0] for o in block.operators if o.op is Op.VARIABLE_WRITE}
    assert written == {c_next: "Variable_0", h_next: "Variable_1"}


def _mutated(model: str, change) -> Graph:
    graph = copy.deepcopy(load_graph(f"{EXAMPLES}/{model}.tosa"))
    change(graph.main)
    return graph


def _op(block, output: str) -> Operator:
    return next(o for o in block.operators if output in o.outputs)


def _reason(graph: Graph) -> str:
    facts, candidates = _composites(graph)
    assert facts == [] and len(candidates) == 1 and not candidates[0].fused
    return candidates[0].reason


def test_a_wrong_gate_activation_is_named():
    def abs_for_tanh(block):
        _op(block, "layer_33").op = Op.ABS   # gate g: TANH -> ABS
    assert _reason(_mutated("lstm_stateful_fp32", abs_for_tanh)) == "gate 2 (g) activation is ABS, expected TANH"

    def tanh_for_sigmoid(block):
        _op(block, "layer_32").op = Op.TANH  # gate o: SIGMOID -> TANH
    assert _reason(_mutated("lstm_stateful_fp32", tanh_for_sigmoid)) == \
        "gate 3 (o) activation is TANH, expected SIGMOID"


def test_an_int8_table_is_classified_by_its_contents():
    """A TABLE is a sigmoid if monotone and never below its output zero point, a tanh if it
    spans it; a table shaped like a RELU's (flat, then rising) is neither."""
    graph = load_graph(f"{EXAMPLES}/lstm_stateful_int8.tosa")
    block = graph.main
    tanh_table = _op(block, "layer_158").inputs[1]   # gate g of the first cell
    relu = np.concatenate([np.zeros(128), np.arange(128)]).astype(np.int8)

    def relu_for_tanh(block):
        block.tensors[tanh_table].data = relu
    facts, candidates = _composites(_mutated("lstm_stateful_int8", relu_for_tanh))
    assert [c.fused for c in candidates] == [False, True, True, True]   # each cell has its own table
    assert len(facts) == 3
    assert candidates[0].reason == "gate 2 (g) activation is SIGMOID, expected TANH"

    def shuffled(block):
        block.tensors[tanh_table].data = np.random.default_rng(0).permutation(
            block.tensors[tanh_table].data)
    _, candidates = _composites(_mutated("lstm_stateful_int8", shuffled))
    assert candidates[0].reason == "gate 2 (g) activation is a non-monotone TABLE, expected TANH"


def test_swapped_gates_do_not_fuse():
    def swap_i_and_f(block):   # the slices of gates i and f exchange their starts
        a, b = _op(block, "layer_25"), _op(block, "layer_26")
        a.inputs[1], b.inputs[1] = b.inputs[1], a.inputs[1]
    reason = _reason(_mutated("lstm_stateful_fp32", swap_i_and_f))
    assert reason.startswith("gate i is multiplied by layer_19")


def test_an_intermediate_read_elsewhere_keeps_the_cell_op_by_op():
    def expose(block):
        block.outputs.append("layer_23")   # the sum of the two products is also a graph output
    assert _reason(_mutated("lstm_stateful_fp32", expose)) == \
        "layer_23 is also read by the block's results, outside the cell"


def test_weights_must_be_constant():
    def weights_as_input(block):
        block.tensors["layer_9"].data = None
        block.operators = [o for o in block.operators if "layer_9" not in o.outputs]
        block.inputs.append("layer_9")
    assert _reason(_mutated("lstm_stateful_fp32", weights_as_input)) == \
        "the weights of CONV2D(layer_21) are not constant"


def test_a_cell_larger_than_the_budget_stays_op_by_op():
    graph = load_graph(f"{EXAMPLES}/lstm_stateful_fp32.tosa")
    fusion = fuse_block(graph.main, max_composite_bytes=1000)
    assert [g for g in fusion.groups if g.composite] == []
    (candidate,) = fusion.candidates
    assert candidate.reason.startswith("its working set (")
    assert candidate.reason.endswith("exceeds the TCM budget (1000 bytes)")


def test_without_the_composite_rule_nothing_is_looked_at():
    graph = load_graph(f"{EXAMPLES}/lstm_stateful_int8.tosa")
    fusion = fuse_block(graph.main, CHAIN_RULES)
    assert fusion.candidates == [] and all(g.composite is None for g in fusion.groups)


def test_groups_run_after_what_they_read():
    """A cell ends after the VARIABLE_WRITE of its c' in graph order: the write moves after it,
    and every group still runs after the groups computing its operands."""
    graph = load_graph(f"{EXAMPLES}/lstm_stateful_int8.tosa")
    block = graph.main
    groups = fuse(block)
    position = {i: k for k, g in enumerate(groups) for i in g}
    producer = {n: i for i, o in enumerate(block.operators) for n in o.outputs}
    for k, group in enumerate(groups):
        for i in group:
            for name in block.operators[i].inputs:
                if name in producer:
                    assert position[producer[name]] <= k
    write_c = next(i for i, o in enumerate(block.operators)
                   if o.op is Op.VARIABLE_WRITE and o.inputs[0] == "Variable_0")
    last_cell = max(k for k, g in enumerate(groups) if len(g) >= 42)
    assert write_c < max(groups[last_cell]) and position[write_c] > last_cell


def test_a_hard_sigmoid_lstm_in_a_while_body_fuses_with_the_bits_of_op_by_op():
    """Keras' LSTM(recurrent_activation="hard_sigmoid"), which TFLite does not fuse: a WHILE
    loop whose gates i, f, o are clip(0.2 x + 0.5, 0, 1) (MUL, ADD, MINIMUM, CLAMP)."""
    graph = load_graph(Path(__file__).resolve().parents[2] / "data" / "tflite" / "lstm_hard_sigmoid_fp32.tflite")
    program = compile_graph(graph, npu_sim.load_hw_config("edge"))
    (candidate,) = program.stats.composite_candidates
    # 30 operators of the cell and the RESHAPE of h' into the loop's carried value
    assert candidate.fused and candidate.block.endswith("_body") and len(candidate.operators) == 31
    assert sum(1 for name in candidate.operators if name.startswith("MINIMUM")) == 3
    x = np.random.default_rng(4).normal(size=(1, 8, 10)).astype(np.float32)
    fused = npu_sim.simulate(graph, "edge", [x])
    op_by_op = npu_sim.simulate(graph, "edge", [x], composite_fusion=False)
    (name,) = fused.outputs
    np.testing.assert_array_equal(fused.outputs[name], op_by_op.outputs[name])
    assert fused.summary["total_cycles"] < 0.8 * op_by_op.summary["total_cycles"]


def test_an_int8_hard_sigmoid_lstm_in_a_while_body_fuses():
    """The same in int8: each hard sigmoid is RESCALEs around an int32 MUL and ADD of
    constants, a MINIMUM, RESCALEs again and a CLAMP; the gate is the CLAMP's result."""
    graph = load_graph(Path(__file__).resolve().parents[2] / "data" / "tflite" / "lstm_wide_hard_sigmoid_int8.tflite")
    program = compile_graph(graph, npu_sim.load_hw_config("edge"))
    (candidate,) = program.stats.composite_candidates
    assert candidate.fused and candidate.block.endswith("_body"), candidate.reason
    assert sum(1 for name in candidate.operators if name.startswith("CLAMP")) == 3   # gates i, f, o
    x = np.random.default_rng(4).integers(-128, 128, size=(2, 1, 20, 13)).astype(np.int8)
    fused = npu_sim.simulate(graph, "edge", [x], invocations=2)
    op_by_op = npu_sim.simulate(graph, "edge", [x], invocations=2, composite_fusion=False)
    (name,) = fused.outputs
    np.testing.assert_array_equal(fused.outputs[name], op_by_op.outputs[name])
    expected = np.stack([list(outputs.values())[0] for outputs in _stream(graph, x)])
    np.testing.assert_array_equal(fused.outputs[name].reshape(2, -1), expected.reshape(2, -1))
    assert fused.summary["per_invocation_cycles"][-1] < 0.6 * op_by_op.summary["per_invocation_cycles"][-1]


def _stream(graph: Graph, x: np.ndarray) -> list[dict[str, np.ndarray]]:
    session = npu_sim.Session(graph)
    return [session.invoke({graph.main.inputs[0]: x[k]}) for k in range(len(x))]
