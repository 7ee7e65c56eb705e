"""An int8 ARG_MIN: the converter's identity CAST and SUB from -1 (both outside TOSA 1.0's
profiles) written as a NEGATE with zero points 0 and -1. LiteRT's reference kernels bit for bit
in exec and on simulated NPUs; Arm's reference model runs the graph to the same bits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.ops import Op
from tests.tosa.tflite.single_output import (
    PRESETS,
    TFLITE_DATA,
    assert_litert_reference_agrees,
    assert_reference_model_agrees,
)

MODEL = TFLITE_DATA / "argmin_int8.tflite"


def _inputs(count: int) -> list[np.ndarray]:
    """Random int8 inputs, the first with extremes and ties in its first rows."""
    rng = np.random.default_rng(9)
    xs = [rng.integers(-128, 128, size=(1, 10, 6, 4)).astype(np.int8) for _ in range(count)]
    xs[0].reshape(-1)[:12] = [-128, 127, -128, 127, 127, 127, -1, 0, 0, -1, -128, -128]
    return xs


def test_the_cast_and_sub_are_one_negate() -> None:
    graph = load_graph(MODEL)
    ops = [op.op for op in graph.main.operators]
    assert Op.CAST not in ops and Op.SUB not in ops and ops.count(Op.NEGATE) == 1
    negate = next(op for op in graph.main.operators if op.op is Op.NEGATE)
    assert [graph.main.tensor(name).data.tolist() for name in negate.inputs[1:]] == [[0], [-1]]


@pytest.mark.parametrize("hw", PRESETS)
def test_an_int8_argmin_gives_litert_s_bits(hw: str | None) -> None:
    """Was refused: CAST (in_t=INT8, out_t=INT8) is in no TOSA 1.0 profile."""
    assert_litert_reference_agrees(MODEL, hw, _inputs(2))


def test_arms_reference_model_runs_the_graph_to_the_same_bits(tmp_path: Path) -> None:
    assert_reference_model_agrees(load_graph(MODEL), _inputs(1)[0], tmp_path)
