"""A 16-bit LOGISTIC or TANH gives LiteRT's bits: the converter's interpolated TABLE becomes a
lookup of LiteRT's int16 arithmetic (npu_sim/tosa/tflite/int16_activations.py). Checked over
every int16 input against LiteRT's reference kernels, in exec and on the edge and Ethos-U
presets, and against Arm's reference model; the rewrite's conditions on hand-built graphs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import npu_sim
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.ops import Op
from npu_sim.tosa.schema_generated import RoundingMode
from npu_sim.tosa.tflite.int16_activations import (
    LOGISTIC,
    SIGMOID_Q16,
    TANH,
    input_scaling,
    litert_table,
    logistic_table,
    look_up_activations,
)
from tests.tosa.tflite.single_output import PRESETS, npu_sim_outputs, reference_model_output
from tests.tosa.tflite.test_recurrent_against_litert import litert_outputs

DATA = Path(__file__).resolve().parents[2] / "data" / "tflite"
#: every int16 value once, in the (1, 256, 256) input of the one-activation models
EVERY_INT16 = np.arange(-32768, 32768, dtype=np.int16).reshape(1, 256, 256)
Q15 = (2.0 ** -15, 0)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("stem", ["sigmoid_int16", "tanh_int16", "sigmoid_pot_int16"])
def test_every_int16_input_gives_litert_s_reference_bits(stem, preset):
    path = DATA / f"{stem}.tflite"
    (want,) = litert_outputs(path, [EVERY_INT16], builtin=True)
    (ours,) = npu_sim_outputs(load_graph(path), preset, [EVERY_INT16])
    np.testing.assert_array_equal(ours.reshape(want.shape), want)


@pytest.mark.parametrize("stem", ["sigmoid_int16", "tanh_int16"])
def test_off_a_power_of_two_scale_the_default_interpreter_agrees(stem):
    """(At an input scale of 2^-12 LiteRT's default interpreter takes a fixed-point kernel of
    its own, which its reference kernels do not follow: sigmoid_pot_int16 is checked against
    the reference kernels above.)"""
    path = DATA / f"{stem}.tflite"
    (want,) = litert_outputs(path, [EVERY_INT16])
    (ours,) = npu_sim_outputs(load_graph(path), None, [EVERY_INT16])
    np.testing.assert_array_equal(ours.reshape(want.shape), want)


@pytest.mark.parametrize("preset", PRESETS)
def test_a_sigmoid_after_a_convolution_gives_litert_s_bits(preset):
    path = DATA / "conv_sigmoid_int16.tflite"
    graph = load_graph(path)
    (t,) = graph.input_types.values()
    rng = np.random.default_rng(5)
    xs = [rng.integers(-32768, 32768, size=t.shape).astype(np.int16) for _ in range(3)]
    for ours, want in zip(npu_sim_outputs(graph, preset, xs), litert_outputs(path, xs, builtin=True)):
        np.testing.assert_array_equal(ours.reshape(want.shape), want)


@pytest.mark.parametrize("stem", ["sigmoid_int16", "tanh_int16"])
def test_arms_reference_model_runs_the_lookup_to_the_same_bits(stem, tmp_path):
    graph = load_graph(DATA / f"{stem}.tflite")
    (ours,) = npu_sim_outputs(graph, None, [EVERY_INT16])
    np.testing.assert_array_equal(reference_model_output(graph, EVERY_INT16, tmp_path), ours)


def test_the_converted_table_and_its_rescale_are_gone():
    graph = load_graph(DATA / "sigmoid_int16.tflite")
    kinds = [op.op for op in graph.main.operators]
    assert Op.TABLE not in kinds and Op.RESCALE not in kinds
    assert kinds.count(Op.GATHER) == 1
    assert not any(t.data is not None and t.data.size == 513 for t in graph.main.tensors.values())


def test_the_lookup_runs_on_the_npu_of_each_preset():
    """(On ethos-u55-256 the converter's int16 TABLE ran on the modelled CPU.)"""
    graph = load_graph(DATA / "conv_sigmoid_int16.tflite")
    (name,), (t,) = graph.main.inputs, graph.input_types.values()
    x = np.random.default_rng(0).integers(-32768, 32768, size=t.shape).astype(np.int16)
    for preset in ("edge", "ethos-u55-256", "ethos-u85-256"):
        result = npu_sim.simulate(graph, preset, {name: x})
        assert result.summary["cpu_ops"] == [], preset


def test_litert_s_table_of_sigmoid_i_over_24():
    assert SIGMOID_Q16.size == 256 and SIGMOID_Q16[0] == 32768 and SIGMOID_Q16[-1] == 65535
    assert np.all(np.diff(SIGMOID_Q16) >= 0)
    assert np.abs(SIGMOID_Q16 - 65536 / (1 + np.exp(-np.arange(256) / 24))).max() < 1.5   # its own rounding


def test_the_input_scaling_of_litert_s_prepare():
    assert input_scaling(2.0 ** -12, tanh=False) == (3, 0)      # a power of two: 3 << 0
    assert input_scaling(2.0 ** -11, tanh=True) == (6, 0)       # tanh also takes 2^-11
    multiplier, shift = input_scaling(2.0 ** -11, tanh=False)   # the sigmoid does not
    assert (multiplier, shift) == (24576, 12)   # 6 doubled 12 times
    multiplier, shift = input_scaling(1e-4, tanh=False)   # 1e-4 * 12288 doubled past 2^14 - 1/2
    assert 16383.5 < multiplier * 1.0 < 32768 and multiplier == int(1e-4 * 12288 * 2 ** shift)


def test_what_litert_refuses_or_overflows_has_no_table():
    assert litert_table(LOGISTIC, (1e-4, 0), Q15) is not None
    assert litert_table(TANH, (1e-4, 0), Q15) is not None
    assert litert_table(LOGISTIC, (1e-4, 3), Q15) is None           # input zero point
    assert litert_table(LOGISTIC, (1e-4, 0), (2.0 ** -15, 1)) is None
    assert litert_table(TANH, (1e-4, 0), (2.0 ** -14, 0)) is None   # output scale
    assert logistic_table(10.0) is None   # x * multiplier past int32


def _converted(location: str, rescale_zero: int = 0, read_twice: bool = False) -> Graph:
    """The converter's form: TABLE(x) of 513 entries to int32, RESCALE by 1/128 to int16."""
    b = GraphBuilder()
    x = b.input("x", (1, 4), DType.INT16)
    table = b.op(Op.TABLE, [x, b.const(None, np.zeros(513, np.int16))], location=location)
    one = np.array([0], np.int32)
    result = b.op(Op.RESCALE, [table, b.const(None, np.array([1 << 30], np.int32)),
                               b.const(None, np.array([37], np.int8)), b.const(None, one),
                               b.const(None, np.array([rescale_zero], np.int16))], (1, 4), DType.INT16,
                  scale32=True, rounding_mode=RoundingMode.SINGLE_ROUND, per_channel=False,
                  input_unsigned=False, output_unsigned=False, location=location)
    b.output(result)
    if read_twice:
        b.output(b.op(Op.IDENTITY, [table]))
    return b.build()


def test_only_the_activation_s_own_table_is_replaced():
    values = np.arange(65536, dtype=np.int64).astype(np.int16)
    lookups = {"y": values}
    graph = _converted("y")
    assert look_up_activations(graph, lookups) == 1
    x = np.array([[-32768, -1, 0, 32767]], np.int16)
    (got,) = npu_sim.execute(graph, {"x": x}).values()
    np.testing.assert_array_equal(got, values[x.astype(np.int64) + 32768])
    assert look_up_activations(_converted("z"), lookups) == 0          # another operator's
    assert look_up_activations(_converted("y", rescale_zero=5), lookups) == 0
    assert look_up_activations(_converted("y", read_twice=True), lookups) == 0
