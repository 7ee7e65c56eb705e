"""A 16x8 grouped Conv2D: the converter's identity RESCALE of each group's int48 accumulator with
scale32 (which TOSA 1.0 forbids) is written with a 16-bit multiplier. LiteRT's reference kernels
bit for bit in exec and on simulated NPUs; Arm's reference model runs the graph to the same bits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.ops import Op
from npu_sim.tosa.schema_generated import RoundingMode
from tests.tosa.tflite.single_output import (
    PRESETS,
    TFLITE_DATA,
    assert_litert_reference_agrees,
    assert_reference_model_agrees,
    random_int_inputs,
)

MODEL = TFLITE_DATA / "grouped_conv_int16.tflite"


def _inputs(count: int) -> list[np.ndarray]:
    return random_int_inputs((1, 6, 6, 8), np.int16, count, seed=5)


def test_no_rescale_of_int48_keeps_scale32() -> None:
    """Each group's identity is 16384 >> 14, single rounding."""
    graph = load_graph(MODEL)
    wide = [op for op in graph.main.operators
            if op.op is Op.RESCALE and graph.main.tensor(op.inputs[0]).dtype is DType.INT48]
    identities = [op for op in wide if graph.main.tensor(op.inputs[1]).dtype is DType.INT16]
    assert identities and not [op for op in wide if op.attribute.scale32]
    for op in identities:
        assert graph.main.tensor(op.inputs[1]).data.tolist() == [16384]
        assert graph.main.tensor(op.inputs[2]).data.tolist() == [14]
        assert op.attribute.rounding_mode == RoundingMode.SINGLE_ROUND


@pytest.mark.parametrize("hw", PRESETS)
def test_a_16x8_grouped_conv_gives_litert_s_bits(hw: str | None) -> None:
    """Was refused: ERROR_IF(scale32 && is_same<in_t, i48_t>())."""
    assert_litert_reference_agrees(MODEL, hw, _inputs(2))


def test_arms_reference_model_runs_the_graph_to_the_same_bits(tmp_path: Path) -> None:
    assert_reference_model_agrees(load_graph(MODEL), _inputs(1)[0], tmp_path)
