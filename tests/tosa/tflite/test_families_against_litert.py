"""The model families calibrated against Vela, as the .tflite Keras exports (examples/), give
LiteRT's outputs, in the reference executor and on an Ethos-U preset that times them as Vela
compiles a .tflite (``npu_support.source_operators``: the RESCALEs a TFLite operator became run in
its operation's output unit, never changing a bit).

The oracle is LiteRT's builtin kernels (``ai-edge-litert``), bit for bit."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

import npu_sim
from npu_sim.tosa.loader import load_graph
from tests.tosa.tflite.test_recurrent_against_litert import litert_outputs

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
FAMILIES = ["kws_transformer_int8", "mobilenet_v3_small_int8", "efficientnet_swish_se_int8", "ds_cnn_kws_int16",
            "unet_int8"]


def _input(graph: npu_sim.Graph, seed: int) -> np.ndarray:
    (t,) = graph.input_types.values()
    info = np.iinfo(t.dtype.numpy_dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, size=t.shape).astype(t.dtype.numpy_dtype)


@pytest.mark.parametrize("stem", FAMILIES)
def test_a_family_tflite_gives_litert_outputs_folded_or_not(stem):
    path = EXAMPLES / f"{stem}.tflite"
    graph = load_graph(path)
    x = _input(graph, seed=5)
    (want,) = litert_outputs(path, [x], builtin=True)
    name = graph.main.inputs[0]
    (executed,) = npu_sim.execute(graph, {name: x}).values()
    np.testing.assert_array_equal(executed.reshape(want.shape), want)
    plain = copy.deepcopy(graph)   # the same graph without its TFLite locations: as its TOSA times
    for op in plain.main.operators:
        op.location = ""
    runs = [npu_sim.simulate(g, "ethos-u85-256", {name: x}) for g in (graph, plain)]
    for run in runs:
        (simulated,) = run.outputs.values()
        np.testing.assert_array_equal(simulated.reshape(want.shape), want)
    folded, apart = (len(run.summary["ops"]) for run in runs)
    assert folded < apart and runs[0].total_cycles < runs[1].total_cycles


@pytest.mark.parametrize("stem, u55_peak", [("autoencoder_int8", 768), ("lstm_sequence_int8", 1104)])
def test_the_ethos_u55_holds_no_more_than_velas_sram_with_litert_outputs(stem, u55_peak):
    """The dense autoencoder and the LSTM with its output sequence (examples/): LiteRT's bits on
    both Ethos-U presets, and on the U55 at most Vela 5.2's SRAM (768 and 1,152 bytes; 768 and 1,104 here): the graph
    input and output live only while needed, the last layer writes the output, the steps write
    their slices of the sequence, zero points stay in the command stream."""
    path = EXAMPLES / f"{stem}.tflite"
    graph = load_graph(path)
    x = _input(graph, seed=3)
    (want,) = litert_outputs(path, [x], builtin=True)
    name = graph.main.inputs[0]
    for preset in ("ethos-u55-256", "ethos-u85-256"):
        run = npu_sim.simulate(graph, preset, {name: x})
        (simulated,) = run.outputs.values()
        np.testing.assert_array_equal(simulated.reshape(want.shape), want)
        if preset == "ethos-u55-256":
            assert run.summary["peak_tcm_bytes"] == u55_peak
