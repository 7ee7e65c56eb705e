"""A float GELU runs as LiteRT computes it: the exact one with the error function, the tanh
approximation with a cube of products (no POW, whose base TOSA wants positive). Checked against
LiteRT's builtin kernels on inputs of both signs, in exec and on simulated NPUs; Arm's reference
model runs the rewritten graph to the same values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.ops import Op
from npu_sim.tosa.tflite.flatbuffer import TfliteModel
from npu_sim.tosa.tflite.gelu import exact_gelus
from tests.tosa.tflite.single_output import npu_sim_outputs, reference_model_output

DATA = Path(__file__).resolve().parents[2] / "data" / "tflite"
MODEL = DATA / "gelu_fp32.tflite"


def _inputs(count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(11)
    return [rng.uniform(-6.0, 6.0, size=(1, 4, 4, 4)).astype(np.float32) for _ in range(count)]


def _litert(x: np.ndarray) -> np.ndarray:
    interpreter = Interpreter(model_path=str(MODEL),
                              experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def test_the_model_has_one_exact_and_one_approximate_gelu():
    assert sorted(exact_gelus(TfliteModel(MODEL.read_bytes())).values()) == [False, True]


def test_the_exact_gelu_uses_erf_and_no_pow_is_left():
    ops = [op.op for op in load_graph(MODEL).main.operators]
    assert Op.POW not in ops
    assert ops.count(Op.ERF) == 1 and ops.count(Op.TANH) == 1


@pytest.mark.parametrize("hw", [None, "edge", "ethos-u85-256"])
def test_gelus_give_litert_s_values(hw):
    """The tanh form had been 1.5e-4 away from LiteRT's exact GELU, and POW refused every
    negative input; now within float32 rounding of the two Dense layers' sums."""
    xs = _inputs(3)
    for ours, x in zip(npu_sim_outputs(load_graph(MODEL), hw, xs), xs):
        theirs = _litert(x)
        assert np.abs(ours.reshape(theirs.shape) - theirs).max() <= 2e-6 * max(1.0, float(np.abs(theirs).max()))


def test_arms_reference_model_runs_the_rewritten_graph_to_the_same_values(tmp_path):
    graph = load_graph(MODEL)
    x = _inputs(1)[0]
    (ours,) = npu_sim_outputs(graph, None, [x])
    np.testing.assert_allclose(ours, reference_model_output(graph, x, tmp_path), rtol=1e-6, atol=1e-6)
