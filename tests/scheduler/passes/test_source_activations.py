"""Source activations: a .tflite's requantizing RELU (a RESCALE and a CLAMP of one location) is one
pass on the Ethos-U55/U65's pooling path, as Vela's TFLite reader runs it; other presets and
graphs without locations keep their rates."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import npu_sim
from npu_sim.hw.config import load_hw_config
from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.ops import Op
from scheduler.passes.fusion import DEFAULT_RULES, fuse, rules_for
from tests.tosa.tflite.single_output import TFLITE_DATA, assert_litert_reference_agrees, assert_reference_model_agrees

UNET = Path(__file__).resolve().parents[3] / "examples" / "unet_int8.tflite"


def _activation_groups(preset: str) -> list[list[str]]:
    block = load_graph(UNET).main
    groups = fuse(block, rules=rules_for(DEFAULT_RULES, load_hw_config(preset)))
    return [[block.operators[i].op.name for i in g] for g in groups
            if {block.operators[i].op for i in g} == {Op.RESCALE, Op.CLAMP}]


def test_the_u65_groups_the_relu_that_requantizes():
    """The U65 runs each elementwise operator apart (max_chained_ops 1): the rule makes the RELU's
    RESCALE and CLAMP one operation; the U85, without the rate, keeps them apart."""
    assert _activation_groups("ethos-u65-256") == [["RESCALE", "CLAMP"]]
    assert _activation_groups("ethos-u85-256") == []


def test_the_relu_costs_its_pooling_pass_with_the_reference_bits():
    """U-Net's [1, 32, 32, 16] Relu: 16,384 elements at 0.5 cycles (Vela 5.2: 8,384 on the U55-256,
    8,352 on the U65-256) and 1.0 on the U55-128 (Vela 16,640), where the RESCALE's widening rates
    had given 34,880."""
    graph = load_graph(UNET)
    (t,) = graph.input_types.values()
    x = np.random.default_rng(5).integers(-128, 128, size=t.shape, dtype=np.int8)
    name = graph.main.inputs[0]
    (want,) = npu_sim.execute(graph, {name: x}).values()
    # (and the command's setup and TCM latencies)
    expected = {"ethos-u55-256": 8192 + 128, "ethos-u65-256": 8192 + 128, "ethos-u55-128": 16384 + 256}
    for preset, cycles in expected.items():
        run = npu_sim.simulate(graph, preset, {name: x})
        (got,) = run.outputs.values()
        assert np.array_equal(got, want)
        (relu,) = [op for op in run.summary["ops"] if op["op"] == "RESCALE+CLAMP"]
        assert relu["compute_cycles"] == cycles


def test_a_16x8_quantize_before_a_concatenation_is_an_average_pool_no_op(tmp_path):
    """A 16x8 export requantizes a CONCATENATION's input with a QUANTIZE (one scale for int16), a lone
    RESCALE from int16 to int16 in TOSA: on the U55 the pooling path's no-op, 1.0 a cycle per 16-bit
    element in 2x2x8 micro-blocks (the [1, 16, 16, 8] max-pool result: 2,048; 4,096 as 16-channel
    bricks), 8 tiles with 8 cycles of setup each (Vela 5.2: 3,372; 7,744 at the RESCALE's int32
    rates). The bits are LiteRT's reference kernels'; the same graph without locations (as its
    TOSA) keeps the RESCALE's own rates."""
    model = TFLITE_DATA / "concat_requantized_int16.tflite"
    x = np.random.default_rng(3).integers(-32768, 32768, size=(1, 16, 16, 8), dtype=np.int16)
    assert_litert_reference_agrees(model, "ethos-u55-256", [x])
    graph = load_graph(model)
    assert_reference_model_agrees(graph, x, tmp_path)   # (Arm's reference model, the same bits)
    name = graph.main.inputs[0]
    (requantize,) = [op for op in npu_sim.simulate(graph, "ethos-u55-256", {name: x}).summary["ops"]
                     if op["op"] == "RESCALE"]
    assert (requantize["tile_count"], requantize["compute_cycles"]) == (8, 8 * 8 + 2048)
    for op in graph.main.operators:
        op.location = ""
    plain_ops = npu_sim.simulate(graph, "ethos-u55-256", {name: x}).summary["ops"]
    (plain,) = [op for op in plain_ops if op["op"] == "RESCALE"]
    assert plain["compute_cycles"] > 7000
