"""``tf.argmax``'s default int64 indices: the converted ARGMAX gives INT32 (TOSA 1.0's only index
type) and a user gets int64, as from LiteRT. LiteRT's reference kernels bit for bit, int64, in
exec and on simulated NPUs, int8 and float; Arm's reference model runs the graph to the same
indices."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.loader import load_graph
from tests.tosa.tflite.single_output import (
    PRESETS,
    assert_litert_reference_agrees,
    assert_reference_model_agrees,
    npu_sim_outputs,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "tflite"
MODELS = [DATA / "argmax_int64_int8.tflite", DATA / "argmax_int64_fp32.tflite"]


def _inputs(model: Path, count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(13)
    if "int8" in model.name:
        return [rng.integers(-128, 128, size=(1, 12, 12, 3)).astype(np.int8) for _ in range(count)]
    return [rng.uniform(-1, 1, size=(1, 12, 12, 3)).astype(np.float32) for _ in range(count)]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.stem)
def test_the_argmax_gives_int32_and_the_user_int64(model: Path) -> None:
    graph = load_graph(model)
    (output,) = graph.main.outputs
    assert graph.main.tensor(output).dtype is DType.INT32 and graph.int64_outputs == {output}
    for preset in (None, "ethos-u85-256"):
        (ours,) = npu_sim_outputs(graph, preset, _inputs(model, 1))
        assert ours.dtype == np.int64


@pytest.mark.parametrize("hw", PRESETS)
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.stem)
def test_int64_argmax_gives_litert_s_indices(model: Path, hw: str | None) -> None:
    """Was refused: ARGMAX's output is INT64, the specification gives INT32."""
    assert_litert_reference_agrees(model, hw, _inputs(model, 2))


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.stem)
def test_arms_reference_model_runs_the_graph_to_the_same_indices(model: Path, tmp_path: Path) -> None:
    assert_reference_model_agrees(load_graph(model), _inputs(model, 1)[0], tmp_path)
