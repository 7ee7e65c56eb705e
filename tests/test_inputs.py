"""npu_sim.inputs: how -i / -n / --random-inputs become the inputs of each invocation."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from npu_sim.errors import InputError
from npu_sim.inputs import (
    bind_input_files,
    load_inputs,
    output_file_names,
    parse_input_spec,
    random_array,
    safe_file_stem,
)
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Region, Tensor, TensorType


def _graph(**inputs: tuple[tuple[int, ...], DType]) -> Graph:
    tensors = {n: Tensor(n, shape, dtype) for n, (shape, dtype) in inputs.items()}
    return Graph([Region("main", [Block("main", [], tensors, list(inputs), [])])])


def test_specs_name_an_input_or_bind_by_position():
    names = ["x", "y"]
    assert parse_input_spec("x=a.npy", names).name == "x"
    assert parse_input_spec("a.npy", names).name is None
    # '=' inside a path is not a name when the part before it is not an input name.
    spec = parse_input_spec("runs/k=3/a.npy", names)
    assert (spec.name, spec.path) == (None, Path("runs/k=3/a.npy"))
    with pytest.raises(InputError, match="no file after '='"):
        parse_input_spec("x=", names)


def test_binding_positional_files_follow_the_graph_input_order():
    graph = _graph(x=((2,), DType.INT8), y=((2,), DType.INT8))
    assert bind_input_files(graph, ["a.npy", "b.npy"]) == {"x": Path("a.npy"), "y": Path("b.npy")}
    with pytest.raises(InputError, match="3 positional input file\\(s\\) for 2 graph input\\(s\\)"):
        bind_input_files(graph, ["a.npy", "b.npy", "c.npy"])
    with pytest.raises(InputError, match="input 'x' given twice \\(by name and by position\\)"):
        bind_input_files(graph, ["x=a.npy", "b.npy"])


def test_n_invocations_slice_the_leading_axis(tmp_path):
    graph = _graph(x=((2,), DType.INT16))
    data = np.arange(6, dtype=np.int16).reshape(3, 2)
    np.save(tmp_path / "x.npy", data)
    loaded = load_inputs(graph, [f"x={tmp_path / 'x.npy'}"], invocations=3)
    assert [inv["x"].tolist() for inv in loaded.invocations] == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(InputError, match="-n must be at least 1"):
        load_inputs(graph, [f"x={tmp_path / 'x.npy'}"], invocations=0)


def test_bf16_npy_records_are_reinterpreted(tmp_path):
    graph = _graph(x=((2,), DType.BF16))
    np.save(tmp_path / "x.npy", np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16))  # stored as |V2
    (inv,) = load_inputs(graph, [str(tmp_path / "x.npy")]).invocations
    assert inv["x"].dtype == ml_dtypes.bfloat16 and inv["x"].astype(np.float32).tolist() == [1.5, -2.0]


def test_int4_values_must_fit(tmp_path):
    graph = _graph(x=((2,), DType.INT4))
    np.save(tmp_path / "x.npy", np.array([7, 8], np.int8))
    with pytest.raises(InputError, match="input 'x': .* outside the INT4 range \\[-8, 7\\]"):
        load_inputs(graph, [str(tmp_path / "x.npy")])


@pytest.mark.parametrize("dtype, lo, hi", [(DType.INT8, -128, 127), (DType.INT4, -8, 7),
                                           (DType.INT32, -(1 << 15), (1 << 15) - 1)])
def test_random_integers_cover_their_range(dtype, lo, hi):
    values = random_array(TensorType((4000,), dtype), np.random.default_rng(0))
    assert values.dtype == dtype.numpy_dtype
    assert lo <= values.min() < lo + (hi - lo) // 8 and hi - (hi - lo) // 8 < values.max() <= hi


def test_random_inputs_depend_only_on_the_seed():
    graph = _graph(a=((3,), DType.FP16), b=((2, 2), DType.BOOL))
    first = load_inputs(graph, [], random_seed=5).invocations[0]
    second = load_inputs(graph, [], random_seed=5).invocations[0]
    other = load_inputs(graph, [], random_seed=6).invocations[0]
    assert first["a"].dtype == np.float16 and first["b"].dtype == np.bool_
    assert first["a"].tobytes() == second["a"].tobytes() != other["a"].tobytes()


def test_random_inputs_with_n_are_independent_draws_in_invocation_order(tmp_path):
    graph = _graph(a=((4,), DType.INT8), b=((2,), DType.INT16))
    given = tmp_path / "b.npy"
    np.save(given, np.arange(6, dtype=np.int16).reshape(3, 2))
    three = load_inputs(graph, [f"b={given}"], invocations=3, random_seed=7)
    single = load_inputs(graph, [], random_seed=7).invocations[0]
    a = [inv["a"] for inv in three.invocations]
    assert [x.shape for x in a] == [(4,)] * 3
    assert a[0].tobytes() == single["a"].tobytes()          # invocation 0 is the single draw
    assert len({x.tobytes() for x in a}) == 3               # each invocation draws anew
    assert [inv["b"].tolist() for inv in three.invocations] == [[0, 1], [2, 3], [4, 5]]
    assert three.sources == {"a": "random (seed 7)", "b": str(given)}


@pytest.mark.parametrize("seed", [-1, 1 << 64])
def test_random_seed_out_of_range_is_an_input_error(seed):
    with pytest.raises(InputError, match="--random-inputs: the seed must be an integer from 0"):
        load_inputs(_graph(a=((4,), DType.INT8)), [], random_seed=seed)


def test_output_file_names_are_safe_and_unique():
    assert safe_file_stem("lstm/Variable:0") == "lstm_Variable_0"
    assert output_file_names(["a/b", "a_b", "A_B", "c"]) == {
        "a/b": "a_b.npy", "a_b": "a_b_1.npy", "A_B": "A_B_2.npy", "c": "c.npy"}


def test_random_data_of_an_impossible_shape_is_an_input_error():
    """A fuzzed graph input with a negative dimension, or more than numpy can hold."""
    rng = np.random.default_rng(0)
    for shape in [(2, -1), (1,) * 70]:
        with pytest.raises(InputError, match=r"cannot make random data of shape .* \(give the input as a file\)"):
            random_array(TensorType(shape, DType.INT8), rng)


def _embedding_graph() -> Graph:
    """ids [1, 6] int32 -> RESHAPE -> GATHER rows of a [1, 50, 4] table; ``bias`` is an int32 input
    that only an ADD reads; ``ids`` also feeds a second GATHER of a [1, 20, 4] table."""
    from npu_sim.tosa.ir import Operator
    from npu_sim.tosa.ops import Op, make_attribute

    i32, i8, shape = DType.INT32, DType.INT8, DType.SHAPE
    tensors = {t.name: t for t in [
        Tensor("ids", (1, 6), i32), Tensor("bias", (1, 6), i32),
        Tensor("new_shape", (2,), shape, data=np.array([1, 6], np.int64)),
        Tensor("ids2", (1, 6), i32), Tensor("shifted", (1, 6), i32),
        Tensor("table", (1, 50, 4), i8, data=np.zeros((1, 50, 4), np.int8)),
        Tensor("small", (1, 20, 4), i8, data=np.zeros((1, 20, 4), np.int8)),
        Tensor("rows", (1, 6, 4), i8), Tensor("rows2", (1, 6, 4), i8)]}
    ops = [Operator(Op.RESHAPE, ["ids", "new_shape"], ["ids2"]),
           Operator(Op.GATHER, ["table", "ids2"], ["rows"]),
           Operator(Op.GATHER, ["small", "ids"], ["rows2"]),
           Operator(Op.ADD, ["bias", "bias"], ["shifted"], make_attribute(Op.ADD))]
    return Graph([Region("main", [Block("main", ops, tensors, ["ids", "bias"], ["rows", "rows2", "shifted"])])])


def test_random_gather_indices_lie_in_the_table():
    from npu_sim import execute
    from npu_sim.inputs import index_limits

    graph = _embedding_graph()
    assert index_limits(graph) == {"ids": 20}
    for seed in range(20):
        inputs = load_inputs(graph, [], random_seed=seed).invocations[0]
        assert 0 <= inputs["ids"].min() and inputs["ids"].max() < 20
        execute(graph, inputs)     # GATHER's REQUIRE holds
    bias = np.concatenate([load_inputs(graph, [], random_seed=s).invocations[0]["bias"] for s in range(20)])
    assert bias.min() < -1000 and bias.max() > 1000     # other int32 inputs keep their range


def test_random_inputs_with_invocations_are_independent_and_seeded():
    """``--random-inputs SEED -n N``: N independent draws, the first equal to a run without -n."""
    graph = _graph(a=((3,), DType.INT8), b=((2,), DType.INT16))
    single = load_inputs(graph, [], random_seed=7).invocations[0]
    many = load_inputs(graph, [], invocations=3, random_seed=7)
    again = load_inputs(graph, [], invocations=3, random_seed=7)
    assert len(many.invocations) == 3 and many.sources == {"a": "random (seed 7)", "b": "random (seed 7)"}
    assert many.invocations[0]["a"].tobytes() == single["a"].tobytes()
    assert many.invocations[0]["a"].tobytes() != many.invocations[1]["a"].tobytes()
    assert [inv["b"].tobytes() for inv in many.invocations] == [inv["b"].tobytes() for inv in again.invocations]
