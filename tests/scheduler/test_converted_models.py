"""Real converted models (tests/data/converted) on every preset: a clean plan, the reference
model's bits (integers) and `exec`'s bits (floats)."""

from pathlib import Path

import numpy as np
import pytest

from npu_sim.inputs import random_array
from npu_sim.reference.session import Session
from npu_sim.simulator import simulate_program
from npu_sim.tosa.loader import load_graph
from scheduler.schedule import schedule
from scheduler.verify import verify_program
from tests.scheduler.graphs import machine

MODELS = Path(__file__).resolve().parents[1] / "data" / "converted"


@pytest.mark.parametrize("preset", ["tiny", "edge", "server"])
@pytest.mark.parametrize("model", ["misc_fp32", "misc_int8", "misc2b_int8", "resnet_int16x8", "attn1h_int8"])
def test_converted_model_runs_bit_exact(model, preset):
    _check_bit_exact(MODELS / f"{model}.tosa", preset, seed=5)


def _check_bit_exact(path: Path, preset: str, seed: int) -> None:
    """Schedule on ``preset``, verify the plan, simulate random inputs and compare with the
    reference model (integers) or the executor (floats, checked per operator)."""
    from tests.oracle import run_graph_bytes
    graph = load_graph(path)
    hw = machine(preset)
    program = schedule(graph, hw)
    verify_program(program)
    rng = np.random.default_rng(seed)
    inputs = {name: random_array(t, rng) for name, t in graph.input_types.items()}
    got = simulate_program(program, hw, [inputs]).outputs[0]
    if any(t.dtype.is_float for t in graph.output_types.values()):
        expected = Session(graph).invoke(inputs)
        for name in graph.output_types:
            assert np.array_equal(got[name], expected[name]), name
    else:
        wants = run_graph_bytes(path.read_bytes(), list(inputs.values()), list(graph.output_types.values()))
        for name, want in zip(graph.output_types, wants):
            assert np.array_equal(got[name], want), name


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("preset", ["ethos-u55-256", "ethos-u85-256"])
@pytest.mark.parametrize("model", ["ds_cnn_kws_int8", "mobilenet_v1_025_96_softmax_int8"])
def test_a_cnn_with_a_softmax_head_runs_bit_exact_on_the_ethos_presets(model, preset):
    """The Ethos-U presets' own lowering (a widening RESCALE folded into its sum on the U85, thin
    image reads, OFM-block costs) changes timing only: the reference model's bits."""
    _check_bit_exact(EXAMPLES / f"{model}.tosa", preset, seed=11)


@pytest.mark.parametrize("model", ["lstm_unrolled8_int8", "lstm_stacked_int8", "lstm_step64_int8"])
def test_gates_reading_their_weights_from_the_flash_give_the_reference_models_bits(model):
    """On ethos-u55-256 the LSTM gates' products read their weight streams in place
    (tcm.matrix_vector_weights_in_place) and distant readers reload shared constants: Arm's
    reference model's bits."""
    _check_bit_exact(EXAMPLES / f"{model}.tosa", "ethos-u55-256", seed=3)


FAMILIES = ["kws_transformer_int8", "mobilenet_v3_small_int8", "efficientnet_swish_se_int8", "ds_cnn_kws_int16",
            "unet_int8"]


@pytest.mark.parametrize("preset", ["ethos-u55-256", "ethos-u85-256", "edge"])
@pytest.mark.parametrize("model", FAMILIES)
def test_the_model_families_run_bit_exact(model, preset):
    """The examples of the families calibrated against Vela (examples/generate_family_examples.py):
    the reference model's bits on the Ethos-U presets (the U55 runs a softmax's int32 REDUCE_MAX
    and int16 TABLEs on its host CPU) and on edge."""
    _check_bit_exact(EXAMPLES / f"{model}.tosa", preset, seed=13)
