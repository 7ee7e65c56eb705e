"""The reference executor on whole graphs: control flow, CUSTOM, input checking, examples.

Expected values come from Arm's reference model running the very same .tosa
bytes (built with tosa-tools' serializer, or the example models).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tosa_reference_model as trm

from npu_sim.errors import GraphValidationError, InputError, TosaRuntimeError, UnsupportedFeatureError
from npu_sim.inputs import random_array
from npu_sim.reference.custom import register_custom, unregister_custom
from npu_sim.reference.session import Session, execute
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.flatbuffer_io import read_graph
from npu_sim.tosa.ir import Block, Graph, Operator, Region, Tensor
from npu_sim.tosa.ops import Op, make_attribute
from tests.reference.refmodel_cli import run_invocations
from tests.reference.serializer_graphs import cond_if_graph, while_loop_graph

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
I32 = DType.INT32


def _reference(binary: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """In-process reference model; only for graphs that cannot trip a REQUIRE."""
    outputs, status = trm.run(binary, inputs)
    assert status == trm.GraphStatus.TOSA_VALID
    return [np.asarray(o) for o in outputs]


# --- control flow ---------------------------------------------------------------
@pytest.mark.parametrize("condition", [True, False])
def test_cond_if_takes_the_branch_the_reference_model_takes(condition):
    binary = cond_if_graph()
    rng = np.random.default_rng(int(condition))
    a = rng.integers(-1000, 1000, size=(2, 3), dtype=np.int32)
    b = rng.integers(-1000, 1000, size=(2, 3), dtype=np.int32)
    inputs = [np.array([condition]), a, b]
    (want,) = _reference(binary, inputs)
    got = execute(read_graph(binary), inputs)["out"]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, a + b if condition else a - b)  # and it is the right branch


@pytest.mark.parametrize("n", [0, 1, 5])
def test_while_loop_matches_the_reference_model(n):
    binary = while_loop_graph()
    inputs = [np.array([0], np.int32), np.array([n], np.int32), np.array([1, -2, 3], np.int32)]
    want = _reference(binary, inputs)
    got = execute(read_graph(binary), inputs)
    for name, expected in zip(["i_out", "n_out", "acc_out"], want):
        np.testing.assert_array_equal(got[name], expected)
    assert got["acc_out"].tolist() == [2 ** n, -(2 ** n) * 2, 3 * 2 ** n]


def test_runaway_while_loop_raises_instead_of_hanging():
    graph = read_graph(while_loop_graph())
    inputs = [np.array([0], np.int32), np.array([50], np.int32), np.zeros(3, np.int32)]
    with pytest.raises(TosaRuntimeError, match="WHILE_LOOP.*still running after 10 iterations"):
        execute(graph, inputs, max_iterations=10)
    assert execute(graph, inputs, max_iterations=50)["i_out"].tolist() == [50]  # 50 is enough


def test_control_flow_nesting_limit():
    graph = read_graph(cond_if_graph())
    inputs = [np.array([True]), np.zeros((2, 3), np.int32), np.zeros((2, 3), np.int32)]
    assert execute(graph, inputs, max_nesting=1)["out"].shape == (2, 3)
    graph.main.tensors["b"].shape = (3, 2)  # operand list no longer matches the branch inputs
    with pytest.raises(GraphValidationError, match="COND_IF.*do not match the inputs .* of then_graph 'THEN'"):
        execute(graph, [inputs[0], inputs[1], np.zeros((3, 2), np.int32)])


def test_cond_if_condition_must_be_a_single_bool():
    graph = read_graph(cond_if_graph())
    graph.main.tensors["cond"].shape = (2,)
    with pytest.raises(GraphValidationError, match=r"condition must be a one-element BOOL tensor, is BOOL\[2\]"):
        execute(graph, [np.array([True, False]), np.zeros((2, 3), np.int32), np.zeros((2, 3), np.int32)])


# --- CUSTOM -----------------------------------------------------------------------
def _custom_graph(domain: str = "acme", name: str = "twice") -> Graph:
    attribute = make_attribute(Op.CUSTOM, domain_name=domain, operator_name=name,
                               implementation_attrs=b"\x03")
    tensors = {"x": Tensor("x", (4,), I32), "y": Tensor("y", (4,), I32)}
    block = Block("main", [Operator(Op.CUSTOM, ["x"], ["y"], attribute)], tensors, ["x"], ["y"])
    return Graph([Region("main", [block])])


def test_custom_operator_runs_the_registered_implementation():
    def scale(args):
        factor = args.attribute.implementation_attrs[0]
        return [(args.inputs[0] * factor).astype(np.int32)]

    register_custom("acme", "twice", scale)
    try:
        out = execute(_custom_graph(), {"x": np.array([1, 2, 3, 4], np.int32)})
        assert out["y"].tolist() == [3, 6, 9, 12]
        with pytest.raises(ValueError, match="already registered"):
            register_custom("acme", "twice", scale)
    finally:
        unregister_custom("acme", "twice")


def test_unregistered_custom_operator_is_a_clear_error():
    with pytest.raises(UnsupportedFeatureError, match="CUSTOM operator 'acme'::'nothing'.*register_custom"):
        execute(_custom_graph(name="nothing"), {"x": np.zeros(4, np.int32)})


def test_custom_implementation_must_return_the_declared_outputs():
    register_custom("acme", "sloppy", lambda args: [args.inputs[0].astype(np.int64)])
    try:
        with pytest.raises(TosaRuntimeError, match="output 0 is int64.*expected INT32"):
            execute(_custom_graph(name="sloppy"), {"x": np.zeros(4, np.int32)})
    finally:
        unregister_custom("acme", "sloppy")


# --- inputs ------------------------------------------------------------------------
@pytest.mark.parametrize("inputs, message", [
    ({}, "missing input 'cond': expected BOOL \\(bool\\) of shape \\[1\\]"),
    ({"cond": np.array([True]), "a": np.zeros((2, 3), np.int32), "b": np.zeros((2, 3), np.int32),
      "c": np.zeros(1)}, "unknown input 'c'"),
    ([np.array([True])], "expected 3 input\\(s\\)"),
    ([np.array([True]), np.zeros((2, 3), np.int64), np.zeros((2, 3), np.int32)],
     "input 'a': expected INT32 \\(int32\\) of shape \\[2, 3\\], got int64 of shape \\[2, 3\\]"),
    # Same element count, other shape: refused (the reference model would accept it).
    ([np.array([True]), np.zeros((3, 2), np.int32), np.zeros((2, 3), np.int32)],
     "input 'a': expected INT32 \\(int32\\) of shape \\[2, 3\\], got int32 of shape \\[3, 2\\]"),
    ([np.array([True]), [[0, 0, 0], [0, 0, 0]], np.zeros((2, 3), np.int32)],
     "input 'a': expected a numpy array"),
])
def test_bad_inputs_are_refused_naming_the_input(inputs, message):
    with pytest.raises(InputError, match=message):
        execute(read_graph(cond_if_graph()), inputs)


def test_reading_an_unproduced_tensor_is_a_graph_error():
    tensors = {"x": Tensor("x", (2,), I32), "t": Tensor("t", (2,), I32), "y": Tensor("y", (2,), I32)}
    ops = [Operator(Op.IDENTITY, ["t"], ["y"]), Operator(Op.IDENTITY, ["x"], ["t"])]
    graph = Graph([Region("main", [Block("main", ops, tensors, ["x"], ["y"])])])
    with pytest.raises(GraphValidationError, match=r"uses tensor 't' before IDENTITY\(t\) produces it"):
        execute(graph, [np.zeros(2, np.int32)])


def test_outputs_are_fresh_arrays():
    binary = cond_if_graph()
    session = Session(read_graph(binary))
    a = np.ones((2, 3), np.int32)
    out = session.invoke([np.array([True]), a, a])["out"]
    out[...] = 0
    assert a.tolist() == [[1] * 3] * 2


# --- the example models, whole graph vs the reference model -------------------------
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.tosa"))


def _example_input(t, rng: np.random.Generator) -> np.ndarray:
    """Random data; int32 kept within [-100, 100] (loop counts, sums without overflow)."""
    if t.dtype is DType.INT32:
        return rng.integers(-100, 101, size=t.shape).astype(np.int32)
    return random_array(t, rng)


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=[p.stem for p in EXAMPLE_FILES])
def test_example_model_matches_the_reference_model(path):
    binary = path.read_bytes()
    graph = read_graph(binary)
    rng = np.random.default_rng(2024)
    invocations = 3 if graph.variables() else 1
    inputs = [[_example_input(t, rng) for t in graph.input_types.values()] for _ in range(invocations)]
    output_types = [(t.shape, t.dtype) for t in graph.output_types.values()]
    want_outputs, want_states = run_invocations(binary, inputs, output_types)
    session = Session(graph)
    # a few fp32 ulp apart at most, op by op correctly rounded; SIGMOID and TANH are approximate
    # in TOSA (both sides within their error bound, not equal), and an LSTM's state carries
    # their differences through every step and invocation: there, 1e-6 apart (values near 0
    # make ulp counts meaningless)
    approximate = any(o.op in (Op.SIGMOID, Op.TANH) for o in graph.main.operators)

    def close(got: np.ndarray, want: np.ndarray) -> None:
        if approximate:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_max_ulp(got, want, maxulp=2)
    for k in range(invocations):
        got = session.invoke(inputs[k])
        for (name, t), want in zip(graph.output_types.items(), want_outputs[k]):
            if t.dtype.is_float:
                close(got[name], want)
            else:
                np.testing.assert_array_equal(got[name], want, err_msg=name)
        state = session.export_state()
        assert state.keys() == want_states[k].keys()
        for name in state:
            if approximate and state[name].dtype.kind == "f":
                close(state[name], want_states[k][name])
            else:
                np.testing.assert_array_equal(state[name], want_states[k][name], err_msg=name)
