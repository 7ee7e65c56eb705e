"""A 16x8 attention runs: the int48 score products are rescaled before they are reshaped (TOSA 1.0
has no int48 RESHAPE). LiteRT's outputs bit for bit (its reference kernels and its default
interpreter), in exec and on simulated NPUs; Arm's reference model runs the graph to the same bits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from npu_sim.reference.session import Session
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.ops import Op
from npu_sim.tosa.schema_generated import RoundingMode
from npu_sim.tosa.tflite.wide_reshape import rescale_before_wide_reshapes
from npu_sim.tosa.validation import validate
from tests.tosa.tflite.single_output import assert_reference_model_agrees, npu_sim_outputs

DATA = Path(__file__).resolve().parents[2] / "data" / "tflite"
MODEL = DATA / "attention_int16.tflite"


def _inputs(count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(4)
    return [rng.integers(-32768, 32768, size=(1, 8, 16)).astype(np.int16) for _ in range(count)]


def _litert(x: np.ndarray, resolver: OpResolverType) -> np.ndarray:
    interpreter = Interpreter(model_path=str(MODEL), experimental_op_resolver_type=resolver)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def test_no_int48_value_is_reshaped():
    graph = load_graph(MODEL)
    reshaped = [block.tensor(op.inputs[0]).dtype for block in graph.blocks() for op in block.operators
                if op.op is Op.RESHAPE]
    assert reshaped and DType.INT48 not in reshaped
    assert sum(op.op is Op.MATMUL for op in graph.main.operators) == 2


@pytest.mark.parametrize("resolver", [OpResolverType.BUILTIN_REF, OpResolverType.AUTO])
@pytest.mark.parametrize("hw", [None, "ethos-u85-256"])
def test_a_16x8_attention_gives_litert_s_bits(hw, resolver):
    xs = _inputs(3)
    for ours, x in zip(npu_sim_outputs(load_graph(MODEL), hw, xs), xs):
        theirs = _litert(x, resolver)
        np.testing.assert_array_equal(ours.reshape(theirs.shape), theirs)


def test_arms_reference_model_runs_the_graph_to_the_same_bits(tmp_path):
    graph = load_graph(MODEL)
    x = _inputs(1)[0]
    assert_reference_model_agrees(graph, x, tmp_path)


def _product_reshaped(per_channel: bool, shape: tuple[int, ...]):
    """MATMUL int16 -> int48 [2, 4, 6], RESHAPE to ``shape``, RESCALE to int16."""
    b = GraphBuilder()
    a = b.input("a", (2, 4, 5), DType.INT16)
    w = b.input("w", (2, 5, 6), DType.INT16)
    zero16 = b.const(None, np.zeros((1,), np.int16))
    product = b.op(Op.MATMUL, [a, w, zero16, zero16], dtype=DType.INT48)
    reshaped = b.op(Op.RESHAPE, [product, b.const_shape(None, shape)])
    channels = shape[-1] if per_channel else 1
    multiplier = b.const(None, np.full((channels,), 19661, np.int16))
    shift = b.const(None, np.full((channels,), 20, np.int8))
    zero48 = b.const(None, np.zeros((1,), np.int64), DType.INT48)
    b.output(b.op(Op.RESCALE, [reshaped, multiplier, shift, zero48, zero16],
                  dtype=DType.INT16, per_channel=per_channel, scale32=False, rounding_mode=RoundingMode.SINGLE_ROUND))
    return b.build(validate=False)   # (the int48 RESHAPE is what TOSA 1.0 refuses)


@pytest.mark.parametrize("per_channel, shape, swapped", [(False, (1, 2, 4, 6), True), (True, (1, 8, 6), True),
                                                        (True, (1, 2, 24), False)])
def test_the_rescale_moves_first_where_the_two_commute(per_channel, shape, swapped):
    """A per-channel RESCALE commutes only with a RESHAPE that keeps the last axis."""
    graph = _product_reshaped(per_channel, shape)
    rng = np.random.default_rng(2)
    feeds = {"a": rng.integers(-3000, 3000, size=(2, 4, 5)).astype(np.int16),
             "w": rng.integers(-3000, 3000, size=(2, 5, 6)).astype(np.int16)}
    assert rescale_before_wide_reshapes(graph) == int(swapped)
    if not swapped:
        return
    validate(graph)   # plain TOSA 1.0 now
    (after,) = Session(graph).invoke(feeds).values()
    products = np.matmul(feeds["a"].astype(np.int64), feeds["w"].astype(np.int64))
    expected = np.clip((products * 19661 + (1 << 19)) >> 20, -32768, 32767).reshape(shape)
    np.testing.assert_array_equal(after, expected)
