"""Session: variables persisting across invocations (TOSA stateful-ops semantics).

Multi-invocation expectations come from Arm's reference model run invocation
after invocation from the command line, its variables carried over through
.npy files (tests/reference/refmodel_cli.py). Error cases follow the
specification's VARIABLE* pseudocode (where the reference model differs, e.g.
reading a never-written variable, the specification wins).
"""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.errors import GraphValidationError, InputError, TosaRuntimeError, VariableError
from npu_sim.reference.session import Session, VariableStore, execute
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.flatbuffer_io import read_graph
from npu_sim.tosa.ir import Block, Graph, Operator, Region, Tensor, TensorType
from npu_sim.tosa.ops import Op
from tests.reference.refmodel_cli import run_invocations
from tests.reference.serializer_graphs import accumulator_graph

I32 = DType.INT32


def _accumulator_inputs(count: int, seed: int = 7) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [[rng.integers(-1000, 1000, size=(2, 3), dtype=np.int32),
             rng.integers(-128, 128, size=4, dtype=np.int64).astype(np.int8)] for _ in range(count)]


@pytest.fixture(scope="module")
def accumulator():
    binary = accumulator_graph()
    invocations = _accumulator_inputs(4)
    expected_outputs, expected_states = run_invocations(
        binary, invocations, [((2, 3), I32), ((2, 3), I32), ((4,), DType.INT8)])
    return binary, invocations, expected_outputs, expected_states


def test_variables_persist_like_the_reference_model(accumulator):
    binary, invocations, expected_outputs, expected_states = accumulator
    session = Session(read_graph(binary))
    for k, inputs in enumerate(invocations):
        outputs = session.invoke(inputs)
        assert list(outputs) == ["acc_before", "sum", "last_y"]
        for got, want in zip(outputs.values(), expected_outputs[k]):
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype
        state = session.export_state()
        assert state.keys() == expected_states[k].keys() == {"acc", "last"}
        for name in state:
            np.testing.assert_array_equal(state[name], expected_states[k][name])
    assert session.invocations == len(invocations)


def test_import_state_resumes_where_the_reference_model_was(accumulator):
    binary, invocations, expected_outputs, expected_states = accumulator
    session = Session(read_graph(binary))
    session.import_state(expected_states[1])  # as if invocations 0 and 1 had run
    outputs = session.invoke(invocations[2])
    for got, want in zip(outputs.values(), expected_outputs[2]):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(session.export_state()["acc"], expected_states[2]["acc"])


def test_execute_starts_from_initial_values_every_time(accumulator):
    binary, invocations, expected_outputs, _ = accumulator
    graph = read_graph(binary)
    for _ in range(2):
        outputs = execute(graph, invocations[0])
        np.testing.assert_array_equal(outputs["sum"], expected_outputs[0][1])


def test_import_state_rejects_unknown_names_and_wrong_types(accumulator):
    session = Session(read_graph(accumulator[0]))
    with pytest.raises(InputError, match="unknown variable 'nope'.*'acc'"):
        session.import_state({"nope": np.zeros(3, np.int32)})
    with pytest.raises(InputError, match="variable 'acc'.*INT32.*\\[2, 3\\]"):
        session.import_state({"acc": np.zeros((3, 2), np.int32)})
    with pytest.raises(InputError, match="variable 'last'.*INT8"):
        session.import_state({"last": np.zeros(4, np.int16)})
    assert session.export_state() == {}  # nothing imported


# --- the specification's rules, on graphs in the IR's variable convention ------
def _variable_graph(initial: np.ndarray | None, read_type: TensorType | None = None,
                    write_type: TensorType | None = None) -> Graph:
    """out = v (read); v <- x (write). Types of the read/written values can be skewed."""
    var_type = TensorType((3,), I32)
    read_type = read_type or var_type
    write_type = write_type or var_type
    tensors = {
        "v": Tensor("v", var_type.shape, var_type.dtype, data=initial, variable=True, variable_name="state"),
        "x": Tensor("x", write_type.shape, write_type.dtype),
        "out": Tensor("out", read_type.shape, read_type.dtype),
    }
    ops = [Operator(Op.VARIABLE_READ, ["v"], ["out"]), Operator(Op.VARIABLE_WRITE, ["v", "x"], [])]
    return Graph([Region("main", [Block("main", ops, tensors, ["x"], ["out"])])])


def test_spec_read_then_write_order_within_and_across_invocations():
    session = Session(_variable_graph(np.array([1, 2, 3], np.int32)))
    first = session.invoke({"x": np.array([4, 5, 6], np.int32)})
    second = session.invoke({"x": np.array([7, 8, 9], np.int32)})
    assert first["out"].tolist() == [1, 2, 3]  # the initial value
    assert second["out"].tolist() == [4, 5, 6]  # what invocation 1 wrote
    assert session.export_state()["state"].tolist() == [7, 8, 9]


def test_reading_a_never_written_variable_is_an_error():
    # The reference model would read zeros; VARIABLE_READ REQUIREs is_written.
    session = Session(_variable_graph(None))
    with pytest.raises(VariableError, match="'state' is read but was never written"):
        session.invoke({"x": np.array([4, 5, 6], np.int32)})
    assert session.export_state() == {}
    session.import_state({"state": np.array([9, 9, 9], np.int32)})
    assert session.invoke({"x": np.zeros(3, np.int32)})["out"].tolist() == [9, 9, 9]


def test_read_and_write_must_match_the_variable_type():
    initial = np.array([1, 2, 3], np.int32)
    with pytest.raises(GraphValidationError, match=r"VARIABLE_READ.* INT32\[1, 3\] does not match variable 'state'"):
        execute(_variable_graph(initial, read_type=TensorType((1, 3), I32)),
                {"x": np.zeros(3, np.int32)})
    with pytest.raises(GraphValidationError, match=r"VARIABLE_WRITE.* INT8\[3\] does not match variable 'state'"):
        execute(_variable_graph(initial, write_type=TensorType((3,), DType.INT8)),
                {"x": np.zeros(3, np.int8)})


def test_a_failed_invocation_leaves_the_state_untouched():
    graph = _variable_graph(np.array([1, 2, 3], np.int32))
    # A write followed by an operator failing at run time (INTDIV by zero): the write must not survive.
    graph.main.tensors["zero"] = Tensor("zero", (3,), I32, data=np.zeros(3, np.int32))
    graph.main.tensors["q"] = Tensor("q", (3,), I32)
    graph.main.operators.append(Operator(Op.INTDIV, ["x", "zero"], ["q"]))
    graph.main.outputs.append("q")
    session = Session(graph)
    session.import_state({"state": np.array([7, 7, 7], np.int32)})
    with pytest.raises(TosaRuntimeError, match=r"REQUIRE\(value2 != 0\)"):
        session.invoke({"x": np.array([4, 5, 6], np.int32)})
    assert session.export_state()["state"].tolist() == [7, 7, 7]
    assert session.invocations == 0


def test_store_declaration_rules():
    t = TensorType((2,), I32)
    store = VariableStore()
    store.begin_invocation()
    store.declare("v", t, None, where="VARIABLE(v)", explicit=True)
    with pytest.raises(VariableError, match="'v' declared twice in one invocation"):
        store.declare("v", t, None, where="VARIABLE(v)", explicit=True)
    store.declare("v", t, None, where="block", explicit=False)  # a reference, not a re-declaration
    with pytest.raises(VariableError, match="declared as INT32.*\\[3\\].*is INT32.*\\[2\\]"):
        store.declare("v", TensorType((3,), I32), None, where="block", explicit=False)
    store.begin_invocation()  # seen flags cleared: declaring again is fine
    store.declare("v", t, np.array([5, 6], np.int32), where="VARIABLE(v)", explicit=True)
    assert store.slots["v"].value is None  # an existing variable keeps its state
    with pytest.raises(VariableError, match="never declared"):
        store.read("w", t, where="VARIABLE_READ(w)")


def test_writing_requires_the_declaration_in_this_invocation():
    t = TensorType((2,), I32)
    store = VariableStore()
    store.declare("v", t, np.array([1, 2], np.int32), where="VARIABLE(v)", explicit=True)
    store.begin_invocation()
    with pytest.raises(VariableError, match="written before being declared in this invocation"):
        store.write("v", np.array([3, 4], np.int32), t, where="VARIABLE_WRITE(v)")
    assert store.read("v", t, where="VARIABLE_READ(v)").tolist() == [1, 2]  # reads need no decl.
