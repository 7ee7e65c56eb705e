"""A 16x8 residual ADD as Keras exports it: the converter widens one input by a CAST to int32 and a
LOGICAL_LEFT_SHIFT by 15 before its RESCALE. On the Ethos-U presets the whole TFLite ADD (widening,
RESCALEs, int32 ADD, RESCALE back and the ReLU's CLAMP) is one vector operation at the 16-bit Add's
rate, as Vela's TFLite reader runs it; the bits stay LiteRT's reference kernels'."""

from __future__ import annotations

import numpy as np
import pytest

import npu_sim
from npu_sim.tosa.loader import load_graph
from tests.tosa.tflite.single_output import (
    TFLITE_DATA,
    assert_litert_reference_agrees,
    assert_reference_model_agrees,
    random_int_inputs,
)

MODEL = TFLITE_DATA / "residual_add_int16.tflite"


def _inputs(count: int) -> list[np.ndarray]:
    return random_int_inputs((1, 16, 16, 16), np.int16, count, seed=11)


@pytest.mark.parametrize("preset", ["ethos-u55-256", "ethos-u85-256"])
def test_the_16x8_residual_add_gives_litert_reference_bits(preset):
    assert_litert_reference_agrees(MODEL, preset, _inputs(2))


def test_arms_reference_model_runs_the_converted_graph_to_the_same_bits(tmp_path):
    assert_reference_model_agrees(load_graph(MODEL), _inputs(1)[0], tmp_path)


def test_the_16x8_add_with_its_widening_is_one_operation_at_the_16_bit_add_rate():
    graph = load_graph(MODEL)
    run = npu_sim.simulate(graph, "ethos-u55-256", {graph.main.inputs[0]: _inputs(1)[0]})
    vector = [o for o in run.summary["ops"] if o["unit"] == "vector"]
    assert [o["op"] for o in vector] == ["RESCALE+CAST+LOGICAL_LEFT_SHIFT+RESCALE+ADD+RESCALE+CLAMP"]
    # 16 x 16 x 16 elements at 0.75 a cycle (Vela's int16 Add on the U55-256), in 4 tiles of 768
    # cycles, each with 8 of setup and one of its in-place parameters' SRAM traffic
    assert vector[0]["tile_count"] == 4 and vector[0]["cycles"] == 4 * (8 + 768 + 1)
