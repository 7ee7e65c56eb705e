"""Prepared graphs and bound kernels: repeated invocations give the bits and the errors of a
first one (npu_sim.reference.prepared, executor's bindings, kernel_api.bind_kernel).

A graph's operators run their plain kernels on the first two invocations and bound ones
after; operators of constant operands are folded after the first. So every test here runs
a graph at least three times. Integer results are checked against Arm's reference model;
float results bit for bit against a first, unbound run of a copy of the graph (the
kernels themselves are checked against the reference model per operator elsewhere).
"""

from __future__ import annotations

import gc
import warnings
from pathlib import Path

import numpy as np
import pytest

from npu_sim.errors import GraphValidationError, TosaRuntimeError
from npu_sim.inputs import random_array
from npu_sim.reference import prepared
from npu_sim.reference.conv import Axis, _conv_taps, _fp_conv
from npu_sim.reference.session import Session, execute
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.ops import Op, make_attribute
from tests.oracle import run_graph_bytes

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted([*ROOT.glob("examples/*.tosa"), *ROOT.glob("tests/data/converted/*.tosa"),
                 *ROOT.glob("benchmarks/models/*.tosa")])
I8, I32, FP32 = DType.INT8, DType.INT32, DType.FP32


def _inputs(graph: Graph, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: (rng.integers(-20, 21, size=t.shape).astype(np.int32) if t.dtype is I32
                   else random_array(t, rng)) for name, t in graph.input_types.items()}


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_every_invocation_of_a_model_gives_the_bits_of_a_first_one(path):
    graph = load_graph(path)
    integer = all(not t.dtype.is_float for t in graph.output_types.values())
    for seed in range(5):  # 1st: plain kernels (and folding); 2nd: binding; then bound
        inputs = _inputs(graph, seed)
        got = execute(graph, inputs)
        if integer:
            want = run_graph_bytes(path.read_bytes(), list(inputs.values()), list(graph.output_types.values()))
        else:
            want = list(execute(graph.copy(), inputs).values())  # a new graph: plain kernels
        for name, expected in zip(graph.output_types, want):
            assert _same_bits(got[name], expected), (seed, name)


def test_a_session_binds_once_and_keeps_the_reference_bits():
    path = ROOT / "examples" / "ds_cnn_kws_int8.tosa"
    graph = load_graph(path)
    session = Session(graph)
    for seed in range(4):
        inputs = _inputs(graph, seed)
        (want,) = run_graph_bytes(path.read_bytes(), list(inputs.values()), list(graph.output_types.values()))
        (got,) = session.invoke(inputs).values()
        assert _same_bits(got, want)


# --- errors on the bound path -----------------------------------------------------------
def _rescale_graph(shift: int, multiplier: int, in_dtype: DType = I32, out_dtype: DType = I8) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (1, 4), in_dtype)
    m = b.const("m", np.array([multiplier], np.int32), I32)
    s = b.const("s", np.array([shift], np.int8), I8)
    izp = b.const("izp", np.array([0], in_dtype.numpy_dtype), in_dtype)
    ozp = b.const("ozp", np.array([0], out_dtype.numpy_dtype), out_dtype)
    y = b.op(Op.RESCALE, [x, m, s, izp, ozp], (1, 4), out_dtype, scale32=True,
             rounding_mode="SINGLE_ROUND", name="y")
    b.output(y)
    return b.build()


def test_a_bound_rescale_still_checks_the_value_range_its_shift_allows():
    graph = _rescale_graph(shift=20, multiplier=1 << 20)  # REQUIRE |value| < 2**19: the data decide
    ok = {"x": np.array([[1 << 18, -(1 << 18), 5, -5]], np.int32)}
    for _ in range(3):
        np.testing.assert_array_equal(execute(graph, ok)["y"], [[127, -128, 5, -5]])
    with pytest.raises(TosaRuntimeError,
                       match=r"apply_scale_32: REQUIRE\(value >= \(-1 << \(shift - 1\)\) && "
                             r"value < \(1 << \(shift - 1\)\)\)"):
        execute(graph, {"x": np.array([[1 << 19, 0, 0, 0]], np.int32)})
    np.testing.assert_array_equal(execute(graph, ok)["y"], [[127, -128, 5, -5]])


def test_an_int8_rescale_some_int8_values_violate_keeps_checking_them():
    # shift 2: REQUIRE |value| < 2, so no table of all 256 int8 results can be made
    graph = _rescale_graph(shift=2, multiplier=1 << 30, in_dtype=I8, out_dtype=I32)
    ok = {"x": np.array([[1, -1, 0, -2]], np.int8)}
    for _ in range(3):
        np.testing.assert_array_equal(execute(graph, ok)["y"], [[1 << 28, -(1 << 28), 0, -(1 << 29)]])
    with pytest.raises(TosaRuntimeError, match=r"REQUIRE\(value >= \(-1 << \(shift - 1\)\)"):
        execute(graph, {"x": np.array([[2, 0, 0, 0]], np.int8)})


def test_a_bound_add_still_reports_int32_overflow():
    b = GraphBuilder()
    x, y = b.input("x", (3,), I32), b.input("y", (3,), I32)
    b.output(b.op(Op.ADD, [x, y], name="z"))
    graph = b.build()
    ones = np.ones(3, np.int32)
    for _ in range(3):
        np.testing.assert_array_equal(execute(graph, {"x": ones, "y": ones})["z"], [2, 2, 2])
    big = np.array([2 ** 31 - 1, 0, 0], np.int32)
    with pytest.raises(TosaRuntimeError, match=r"apply_add_s: REQUIRE"):
        execute(graph, {"x": big, "y": ones})


def test_a_bound_mul_still_checks_its_shift_operand():
    b = GraphBuilder()
    x, y, shift = b.input("x", (2,), I32), b.input("y", (2,), I32), b.input("shift", (1,), I8)
    b.output(b.op(Op.MUL, [x, y, shift], name="z"))
    graph = b.build()
    inputs = {"x": np.array([6, -6], np.int32), "y": np.array([7, 7], np.int32), "shift": np.array([1], np.int8)}
    for _ in range(3):
        np.testing.assert_array_equal(execute(graph, inputs)["z"], [21, -21])
    with pytest.raises(TosaRuntimeError, match=r"REQUIRE\(0 <= shift && shift <= 63\)"):
        execute(graph, {**inputs, "shift": np.array([64], np.int8)})


def test_bound_floating_point_kernels_give_inf_and_nan_without_warnings():
    b = GraphBuilder()
    x, y = b.input("x", (3,), FP32), b.input("y", (3,), FP32)
    b.output(b.op(Op.ADD, [x, y], name="z"))
    graph = b.build()
    inputs = {"x": np.array([3e38, -np.inf, 1], np.float32), "y": np.array([3e38, np.inf, 2], np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            out = execute(graph, inputs)["z"]
    assert out[0] == np.inf and np.isnan(out[1]) and out[2] == 3


@pytest.mark.parametrize("op", [Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL])
def test_bound_comparisons_give_the_first_bits_nan_false_and_broadcast(op):
    b = GraphBuilder()
    x, y = b.input("x", (4,), FP32), b.input("y", (1,), FP32)
    i, j = b.input("i", (), I32), b.input("j", (), I32)
    b.output(b.op(op, [x, y], name="f"))
    b.output(b.op(op, [i, j], name="n"))
    graph = b.build()
    runs = [{"x": np.array([1, 2, np.nan, -np.inf], np.float32), "y": np.array([2], np.float32),
             "i": np.array(k, np.int32), "j": np.array(1, np.int32)} for k in (0, 1, 2, 1)]
    for inputs in runs:
        out = execute(graph, inputs)
        expected = {Op.EQUAL: np.equal, Op.GREATER: np.greater, Op.GREATER_EQUAL: np.greater_equal}[op]
        np.testing.assert_array_equal(out["f"], expected(inputs["x"], inputs["y"]))
        assert out["n"].dtype == np.bool_ and out["n"].shape == () and out["n"] == expected(inputs["i"], inputs["j"])


@pytest.mark.parametrize("out_t", [I8, DType.INT16, I32])
def test_a_bound_float_to_int_cast_rounds_saturates_and_zeroes_nan_as_the_kernel(out_t):
    b = GraphBuilder()
    x = b.input("x", (12,), FP32)
    b.output(b.op(Op.CAST, [x], name="y", dtype=out_t))
    graph = b.build()
    values = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 126.6, 127.5, -129.5, 3e9, -3e9, np.inf, -np.inf], np.float32)
    first = execute(graph, {"x": values})["y"]
    with_nan = values.copy()
    with_nan[[1, 7]] = np.nan
    first_nan = execute(graph, {"x": with_nan})["y"]
    for _ in range(3):   # bound from the third run on
        np.testing.assert_array_equal(execute(graph, {"x": values})["y"], first)
        out = execute(graph, {"x": with_nan})["y"]
        np.testing.assert_array_equal(out, first_nan)
        assert out.dtype == first.dtype and out[1] == 0 and out[7] == 0


def test_a_bound_int32_sub_reports_overflow_and_keeps_scalars_scalar():
    b = GraphBuilder()
    x, y = b.input("x", (), I32), b.input("y", (), I32)
    b.output(b.op(Op.SUB, [x, y], name="z"))
    graph = b.build()
    for k in range(4):
        out = execute(graph, {"x": np.array(k, np.int32), "y": np.array(5, np.int32)})["z"]
        assert out.shape == () and out.dtype == np.int32 and out == k - 5
    with pytest.raises(TosaRuntimeError, match=r"apply_sub_s: REQUIRE"):
        execute(graph, {"x": np.array(-(2 ** 31), np.int32), "y": np.array(1, np.int32)})


# --- the cache of prepared graphs --------------------------------------------------------
def _scale_graph() -> Graph:
    b = GraphBuilder()
    x = b.input("x", (4,), I32)
    c = b.const("c", np.array([1, 2, 3, 4], np.int32), I32)
    b.output(b.op(Op.ADD, [x, c], name="y"))
    return b.build()


def test_a_graph_changed_in_place_is_prepared_again():
    graph = _scale_graph()
    x = {"x": np.array([10, 20, 30, 40], np.int32)}
    for _ in range(3):
        np.testing.assert_array_equal(execute(graph, x)["y"], [11, 22, 33, 44])
    graph.main.tensors["c"].data[0] = 100  # constant data edited in place
    np.testing.assert_array_equal(execute(graph, x)["y"], [110, 22, 33, 44])
    graph.main.operators[-1].op = Op.SUB  # an operator changed
    graph.main.operators[-1].attribute = make_attribute(Op.SUB)
    np.testing.assert_array_equal(execute(graph, x)["y"], [-90, 18, 27, 36])
    graph.main.tensors["y"].shape = (5,)  # now invalid: validated again, every time
    for _ in range(2):
        with pytest.raises(GraphValidationError, match="has shape \\[5\\], the specification gives \\[4\\]"):
            execute(graph, x)


def test_prepared_graphs_are_shared_and_dropped_with_their_graph():
    graph = _scale_graph()
    first = prepared.prepare(graph, validate=True)
    assert prepared.prepare(graph, validate=True) is first
    assert Session(graph)._runner.compiled is first.compiled
    count = len(prepared._PREPARED)
    del graph, first
    gc.collect()
    assert len(prepared._PREPARED) == count - 1


def test_a_graph_prepared_without_validation_is_validated_when_asked():
    graph = _scale_graph()
    graph.main.tensors["y"].shape = (5,)
    Session(graph, validate=False)  # trusted: no validation
    with pytest.raises(GraphValidationError):
        Session(graph)


# --- the floating-point convolution sum --------------------------------------------------
def _spec_conv_sum(xv, wv, taps, out_shape, fp16):
    """The pseudocode's order: for each tap, each input channel, acc = acc + x * w."""
    acc = np.zeros(out_shape, np.float16 if fp16 else np.float32)
    with np.errstate(all="ignore"):
        for k, out_index, in_index in taps:
            view, xs, w = acc[out_index], xv[in_index], wv[k]
            for ic in range(w.shape[0]):
                product = xs[..., ic:ic + 1] * w[ic]
                view += product.astype(np.float16) if fp16 else product
    return acc


@pytest.mark.parametrize("size,channels", [(3, 5), (8, 12), (20, 40)])  # at once; in rows; by channel
def test_the_floating_point_conv_sum_is_the_pseudocodes_bit_for_bit(size, channels):
    rng = np.random.default_rng(size)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, 3e38, -3e38], np.float32)
    for trial in range(60):
        fp16, kernel = trial % 3 == 0, 1 + trial % 3
        xv = (rng.standard_normal((1, size, size, channels)) * 10.0 ** rng.integers(-6, 6)).astype(np.float32)
        wv = (rng.standard_normal((kernel, kernel, channels, 6)) * 10.0 ** rng.integers(-6, 6)).astype(np.float32)
        for a in (xv, wv):
            mask = rng.random(a.shape) < 0.05 * (trial % 4)
            a[mask] = rng.choice(specials, size=int(mask.sum()))
        if fp16:
            with np.errstate(all="ignore"):
                xv, wv = (a.astype(np.float16).astype(np.float32) for a in (xv, wv))
        axes = [Axis(size, kernel, 1, kernel // 2)] * 2
        out = size + 2 * (kernel // 2) - kernel + 1
        taps = _conv_taps(axes, ((0, out), (0, out)), (0, 0))
        shape = (1, out, out, 6)
        got = _fp_conv(xv, wv, taps, shape, DType.FP16 if fp16 else DType.FP32)
        assert _same_bits(got, _spec_conv_sum(xv, wv, taps, shape, fp16)), trial


def test_loaded_constants_are_read_only_and_a_new_array_is_seen():
    """The loader's constant data cannot be edited in place (so the cache need not read it on
    every call); assigning a new array is an assignment the cache notices."""
    graph = load_graph("examples/conv_rescale_int8.tosa")
    tensor = next(t for t in graph.main.tensors.values() if t.data is not None and t.data.size > 4)
    with pytest.raises(ValueError, match="read-only"):
        tensor.data[0] = 1
    inputs = {name: np.ones(t.shape, t.dtype.numpy_dtype) for name, t in graph.input_types.items()}
    before = execute(graph, inputs)
    tensor.data = np.zeros_like(tensor.data)   # e.g. all weights zero
    after = execute(graph, inputs)
    assert any(not np.array_equal(before[n], after[n]) for n in before)
    assert prepared.prepare(graph, validate=False) is prepared.prepare(graph, validate=False)
