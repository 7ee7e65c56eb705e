"""A converted FULLY_CONNECTED rounds its requantization once, as LiteRT does: Dense layers
and the Dense heads of recurrent models give LiteRT's outputs bit for bit (its builtin
kernels, and its default interpreter), and Arm's reference model runs the graph to the
same bits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

import npu_sim
from npu_sim.tosa.loader import load_graph, save_graph
from npu_sim.tosa.ops import Op
from npu_sim.tosa.schema_generated import RoundingMode
from npu_sim.tosa.tflite.flatbuffer import TfliteModel
from npu_sim.tosa.tflite.rounding import fully_connected_weights
from tests.oracle import run_graph_bytes
from tests.tosa.tflite.single_output import npu_sim_outputs, reference_model_output

DATA = Path(__file__).resolve().parents[2] / "data" / "tflite"


def product_rescales(graph: npu_sim.Graph) -> dict[str, RoundingMode]:
    """The rounding of each RESCALE of a CONV2D's accumulators, by the CONV2D's name."""
    found = {}
    for block in graph.blocks():
        producer = {out: op for op in block.operators for out in op.outputs}
        for op in block.operators:
            source = producer.get(op.inputs[0]) if op.op is Op.RESCALE else None
            if source is not None and source.op is Op.CONV2D:
                found[source.name] = RoundingMode(op.attribute.rounding_mode)
    return found


def largest_difference(path: Path, resolver: OpResolverType, invocations: int) -> int:
    graph = load_graph(path)
    interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=resolver)
    interpreter.allocate_tensors()
    given, taken = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    session = npu_sim.Session(graph)
    rng = np.random.default_rng(3)
    largest = 0
    for _ in range(invocations):   # a stateful model carries its state from one to the next
        info = np.iinfo(given["dtype"])
        x = rng.integers(info.min, info.max + 1, size=given["shape"]).astype(given["dtype"])
        interpreter.set_tensor(given["index"], x)
        interpreter.invoke()
        theirs = interpreter.get_tensor(taken["index"]).astype(np.int64)
        (ours,) = session.invoke({graph.main.inputs[0]: x}).values()
        largest = max(largest, int(np.abs(ours.reshape(theirs.shape).astype(np.int64) - theirs).max()))
    return largest


@pytest.mark.parametrize("stem", ["dense_int8", "dense_per_tensor_int8"])
def test_the_dense_layers_requantization_rounds_once(stem):
    rounding = product_rescales(load_graph(DATA / f"{stem}.tflite"))
    assert list(rounding.values()) == [RoundingMode.SINGLE_ROUND] * 2


def test_a_cnn_keeps_double_rounding_but_for_its_dense_head():
    """Five CONV_2D (four of them 1x1) round twice in LiteRT, as the converter writes them;
    only the FULLY_CONNECTED at the end (the last CONV2D) changes."""
    rounding = list(product_rescales(load_graph(DATA / "ds_cnn_kws_int8.tflite")).values())
    assert rounding == [RoundingMode.DOUBLE_ROUND] * 5 + [RoundingMode.SINGLE_ROUND]


@pytest.mark.parametrize("resolver", [OpResolverType.AUTO, OpResolverType.BUILTIN_REF])
@pytest.mark.parametrize("stem, invocations", [("dense_int8", 100), ("dense_per_tensor_int8", 100),
                                               ("dense_int16", 60), ("lstm_int8", 30), ("lstm_stacked_int8", 30)])
def test_dense_layers_and_heads_give_litert_s_bits(stem, invocations, resolver):
    """100 inputs of the int8 Dense models: about 20 elements differed by one LSB with double
    rounding, and 60 of the int16 one 590 elements by up to 2 LSB with the 16-bit multiplier;
    none now, for LiteRT's reference kernels and its default interpreter."""
    assert largest_difference(DATA / f"{stem}.tflite", resolver, invocations) == 0


def test_converted_lstm_gives_litert_s_builtin_kernels_bits():
    """An unrolled LSTM converted by Arm's converter (FULLY_CONNECTED, ADD, MUL, LOGISTIC,
    TANH in int8): bit for bit with LiteRT's builtin kernels over a stream of invocations."""
    assert largest_difference(DATA / "lstm_stateful_int8.tflite", OpResolverType.BUILTIN_REF, 60) == 0


def test_a_16_bit_dense_layer_moves_its_accumulator_to_int32_and_rescales_it_with_32_bit_multipliers():
    graph = load_graph(DATA / "dense_int16.tflite")
    producer = {out: op for op in graph.main.operators for out in op.outputs}
    rescales = [op for op in graph.main.operators if op.op is Op.RESCALE and producer[op.inputs[0]].op is Op.RESCALE]
    assert len(rescales) == 2   # one a Dense layer: int48 -> int32 (by 4 / 2^2), then -> int16
    for rescale in rescales:
        move = producer[rescale.inputs[0]]
        assert graph.main.tensor(move.inputs[0]).dtype.name == "INT48"
        assert graph.main.tensor(rescale.inputs[0]).dtype.name == "INT32"
        assert rescale.attribute.scale32 and rescale.attribute.rounding_mode == RoundingMode.SINGLE_ROUND
        x = np.arange(-5, 6, dtype=np.int64) * 123456789
        assert [int(v) for v in graph.main.tensor(move.inputs[1]).data] == [4]   # (4 v + 2) >> 2 == v
        assert all((4 * x + 2) >> 2 == x)


@pytest.mark.parametrize("stem, dtype", [("dense_int8", np.int8), ("dense_int16", np.int16)])
def test_arms_reference_model_runs_the_changed_graph_to_the_same_bits(stem, dtype, tmp_path):
    graph = load_graph(DATA / f"{stem}.tflite")
    save_graph(graph, tmp_path / "model.tosa")
    info = np.iinfo(dtype)
    x = np.random.default_rng(5).integers(info.min, info.max + 1, size=(1, 40)).astype(dtype)
    (ours,) = npu_sim.execute(graph, {graph.main.inputs[0]: x}).values()
    (theirs,) = run_graph_bytes((tmp_path / "model.tosa").read_bytes(), [x], list(graph.output_types.values()))
    np.testing.assert_array_equal(ours, theirs)
    (simulated,) = npu_sim.simulate(graph, "edge", [x]).outputs.values()
    np.testing.assert_array_equal(simulated, ours)


def test_a_requantizing_relu_rounds_twice():
    """hard_sigmoid's closing RELU, its output scale set by a CONCATENATION: the RESCALE before its
    CLAMP rounds twice (the converter wrote SINGLE_ROUND)."""
    graph = load_graph(DATA / "relu_requantized_int8.tflite")
    producer = {out: op for op in graph.main.operators for out in op.outputs}
    before_clamps = [producer[op.inputs[0]] for op in graph.main.operators if op.op is Op.CLAMP]
    assert [RoundingMode(op.attribute.rounding_mode) for op in before_clamps] == [RoundingMode.DOUBLE_ROUND]


@pytest.mark.parametrize("hw", [None, "ethos-u55-256"])
def test_a_requantizing_relu_gives_litert_s_bits(hw):
    """85 elements of 4 inputs were one LSB off LiteRT's reference kernels; none now."""
    path = DATA / "relu_requantized_int8.tflite"
    graph = load_graph(path)
    interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    given, taken = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    rng = np.random.default_rng(8)
    xs = [rng.integers(-128, 128, size=given["shape"]).astype(np.int8) for _ in range(6)]
    for ours, x in zip(npu_sim_outputs(graph, hw, xs), xs):
        interpreter.set_tensor(given["index"], x)
        interpreter.invoke()
        theirs = interpreter.get_tensor(taken["index"])
        np.testing.assert_array_equal(ours.reshape(theirs.shape), theirs)


def test_arms_reference_model_runs_the_relu_graph_to_the_same_bits(tmp_path):
    graph = load_graph(DATA / "relu_requantized_int8.tflite")
    x = np.random.default_rng(9).integers(-128, 128, size=(1, 8, 8, 4)).astype(np.int8)
    (ours,) = npu_sim_outputs(graph, None, [x])
    np.testing.assert_array_equal(ours, reference_model_output(graph, x, tmp_path))


def test_a_requantizing_relu_takes_litert_s_float32_multiplier():
    """LiteRT's ReluPrepare divides the tensors' float scales in float32 (the MobileNetV3 stem's
    hard-sigmoid RELU: 1982712832, against 1982712881 from the double quotient the converter
    takes, one LSB apart on near-ties)."""
    graph = load_graph(DATA / "hard_swish_int16.tflite")
    producer = {out: op for op in graph.main.operators for out in op.outputs}
    [rescale] = [producer[op.inputs[0]] for op in graph.main.operators if op.op is Op.CLAMP
                 and producer[op.inputs[0]].op is Op.RESCALE]
    assert graph.main.tensor(rescale.inputs[1]).data.tolist() == [1982712832]
    assert graph.main.tensor(rescale.inputs[2]).data.tolist() == [31]
    assert RoundingMode(rescale.attribute.rounding_mode) == RoundingMode.DOUBLE_ROUND


@pytest.mark.parametrize("hw", ["edge", "ethos-u55-256"])
def test_a_16x8_hard_swish_gives_litert_s_bits_invocation_after_invocation(hw):
    """Its hard sigmoid's rank-0 constant chain failed in the simulator from the second
    invocation on (a bound CAST gave a numpy scalar); now LiteRT's reference kernels bit for bit
    over three invocations."""
    path = DATA / "hard_swish_int16.tflite"
    graph = load_graph(path)
    interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    given, taken = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    xs = np.random.default_rng(12).integers(-32768, 32768, size=(3, *given["shape"])).astype(np.int16)
    (ours,) = npu_sim.simulate(graph, hw, {graph.main.inputs[0]: xs}, invocations=3).outputs.values()
    for k, x in enumerate(xs):
        interpreter.set_tensor(given["index"], x)
        interpreter.invoke()
        theirs = interpreter.get_tensor(taken["index"])
        np.testing.assert_array_equal(ours[k].reshape(theirs.shape), theirs)


def test_fully_connecteds_sharing_weights_keep_their_own_requantization():
    """An unrolled 16x8 LSTM's steps share one weight tensor with three different scales; each
    converted product takes the multipliers of the FULLY_CONNECTED its location names (all had the
    last step's: up to 10,651 LSB off LiteRT)."""
    path = DATA / "lstm_unrolled_int16.tflite"
    shared = [uses for uses in fully_connected_weights(TfliteModel(path.read_bytes())).values() if len(uses) > 1]
    assert shared and all(len({fc for _, fc in uses}) == len(uses) for uses in shared)
    graph = load_graph(path)
    interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    given, taken = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    xs = list(np.random.default_rng(13).integers(-32768, 32768, size=(3, *given["shape"])).astype(np.int16))
    for hw in (None, "edge", "ethos-u85-256"):
        for ours, x in zip(npu_sim_outputs(graph, hw, xs), xs):
            interpreter.set_tensor(given["index"], x)
            interpreter.invoke()
            theirs = interpreter.get_tensor(taken["index"])
            np.testing.assert_array_equal(ours.reshape(theirs.shape), theirs)
