"""TFLite's legacy nearest resize (no align_corners, no half-pixel centres) takes the floor of the
source position: the converted TOSA RESIZE's offset and border move down by half its scale
numerator. LiteRT's reference kernels bit for bit in exec and on simulated NPUs; Arm's reference
model runs the graph to the same bits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.ops import Op
from tests.tosa.tflite.single_output import assert_reference_model_agrees, npu_sim_outputs

MODEL = Path(__file__).resolve().parents[2] / "data" / "tflite" / "resize_nearest_legacy_int8.tflite"


def _inputs(count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(21)
    return [rng.integers(-128, 128, size=(1, 5, 7, 3)).astype(np.int8) for _ in range(count)]


def _litert(x: np.ndarray) -> np.ndarray:
    interpreter = Interpreter(model_path=str(MODEL), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def test_the_offsets_move_down_by_half_the_scale_numerator():
    """5x7 -> 9x13: scale [18, 10, 26, 14] (the converter doubles it), offset [0, 0] -> [-9, -13],
    border [8, 12] -> [-1, -1]; 9x13 -> 18x26: an exact 2x, offset -2 and border -2 on each axis."""
    graph = load_graph(MODEL)
    resizes = [op for op in graph.main.operators if op.op is Op.RESIZE]
    operands = [[graph.main.tensor(name).data.tolist() for name in op.inputs[1:]] for op in resizes]
    assert operands == [[[18, 10, 26, 14], [-9, -13], [-1, -1]], [[4, 2, 4, 2], [-2, -2], [0, 0]]]


@pytest.mark.parametrize("hw", [None, "edge", "ethos-u55-256", "ethos-u85-256"])
def test_a_legacy_nearest_resize_gives_litert_s_bits(hw):
    """The converter's rounding picked the next row and column for about 70% of the outputs
    (up to 253 LSB off)."""
    xs = _inputs(2)
    for ours, x in zip(npu_sim_outputs(load_graph(MODEL), hw, xs), xs):
        theirs = _litert(x)
        np.testing.assert_array_equal(ours.reshape(theirs.shape), theirs)


def test_arms_reference_model_runs_the_graph_to_the_same_bits(tmp_path):
    graph = load_graph(MODEL)
    x = _inputs(1)[0]
    assert_reference_model_agrees(graph, x, tmp_path)
