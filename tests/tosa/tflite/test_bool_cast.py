"""The converter's CAST from bool to float (no TOSA 1.0 profile has it) becomes a SELECT of 1.0
and 0.0 (npu_sim/tosa/tflite/bool_cast.py): the graph validates, gives the same values, and a
float ReLU with a threshold gives LiteRT's outputs, as Arm's reference model does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import npu_sim
from npu_sim.errors import GraphValidationError
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.ops import Op
from npu_sim.tosa.tflite.bool_cast import select_bool_casts
from npu_sim.tosa.validation import validate
from tests.tosa.tflite.single_output import PRESETS, npu_sim_outputs, reference_model_output
from tests.tosa.tflite.test_recurrent_against_litert import litert_outputs

MODEL = Path(__file__).resolve().parents[2] / "data" / "tflite" / "relu_threshold_fp32.tflite"


def _step(dtype: DType) -> Graph:
    """x > 0.5 cast to ``dtype``, as the converter writes a threshold."""
    b = GraphBuilder()
    x = b.input("x", (1, 4), dtype)
    above = b.op(Op.GREATER, [x, b.const(None, np.full((1, 1), 0.5, dtype.numpy_dtype))])
    b.output(b.op(Op.CAST, [above], dtype=dtype))
    return b.build(validate=False)


@pytest.mark.parametrize("dtype", [DType.FP32, DType.FP16])
def test_a_bool_cast_to_float_becomes_a_select_of_one_and_zero(dtype):
    graph = _step(dtype)
    with pytest.raises(GraphValidationError, match="in_t=BOOL"):
        validate(graph)
    assert select_bool_casts(graph) == 1
    validate(graph)
    assert [op.op for op in graph.main.operators if op.op is not Op.CONST] == [Op.GREATER, Op.SELECT]
    x = np.array([[-1.0, 0.5, 0.75, 3.0]], dtype.numpy_dtype)
    (out,) = npu_sim.execute(graph, {"x": x}).values()
    assert out.dtype == dtype.numpy_dtype and out.tolist() == [[0.0, 0.0, 1.0, 1.0]]


def test_bool_casts_to_integers_are_left_alone():
    b = GraphBuilder()   # (TOSA 1.0 has bool to int8, int16 and int32)
    x = b.input("x", (1, 4), DType.INT32)
    b.output(b.op(Op.CAST, [b.op(Op.GREATER, [x, b.const(None, np.zeros((1, 1), np.int32))])], dtype=DType.INT32))
    assert select_bool_casts(b.build()) == 0


def _inputs(graph: npu_sim.Graph, count: int) -> list[np.ndarray]:
    (t,) = graph.input_types.values()
    rng = np.random.default_rng(3)
    return [rng.uniform(-8, 8, size=t.shape).astype(np.float32) for _ in range(count)]


@pytest.mark.parametrize("preset", PRESETS)
def test_a_float_relu_with_a_threshold_gives_litert_outputs(preset):
    graph = load_graph(MODEL)   # (validated: refused before the rewrite)
    xs = _inputs(graph, 2)
    for got, want in zip(npu_sim_outputs(graph, preset, xs), litert_outputs(MODEL, xs, builtin=True), strict=True):
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=0, atol=1e-6)


def test_arms_reference_model_runs_the_rewritten_graph_to_the_same_values(tmp_path):
    graph = load_graph(MODEL)
    (x,) = _inputs(graph, 1)
    (ours,) = npu_sim_outputs(graph, None, [x])
    np.testing.assert_allclose(ours, reference_model_output(graph, x, tmp_path), rtol=0, atol=1e-6)
