"""The growing graphs of the scaling benchmark (benchmarks/scaling_graphs.py) build, grow as
documented, and the simulated NPU computes them bit for bit (the int8 ones as Arm's reference
model does); the fitted exponent is a plain log-log slope."""

from __future__ import annotations

import math

import numpy as np
import pytest

import npu_sim
from benchmarks.bench_schedule_scaling import fitted_exponent
from benchmarks.graphs import random_inputs
from benchmarks.scaling_graphs import mobilenet_v2, resnet, unrolled_lstm
from npu_sim.tosa.loader import save_graph
from npu_sim.tosa.ops import Op
from tests.oracle import run_graph_bytes


def _operators(graph) -> list[Op]:
    return [op.op for block in graph.blocks() for op in block.operators]


def test_the_lstm_grows_by_one_cell_per_step():
    one, four = _operators(unrolled_lstm(1)), _operators(unrolled_lstm(4))
    per_step = (len(four) - len(one)) // 3
    assert per_step == 23 and len(four) - len(one) == 3 * per_step
    assert four.count(Op.SIGMOID) == 12 and four.count(Op.TANH) == 8
    assert four.count(Op.CONV2D) == 2 * 4 + 1    # input and recurrent products per step, the head


def test_mobilenet_keeps_its_operators_at_every_resolution():
    small, large = mobilenet_v2(32), mobilenet_v2(96)
    assert _operators(small) == _operators(large)
    assert _operators(small).count(Op.DEPTHWISE_CONV2D) == 17    # MobileNetV2's 17 inverted residual blocks
    assert small.input_types["image"].shape == (1, 32, 32, 3)


def test_resnet_50_has_its_bottlenecks():
    graph = resnet((3, 4, 6, 3), resolution=32)
    convs = _operators(graph).count(Op.CONV2D)
    assert convs == 1 + 16 * 3 + 4 + 1      # stem, three per bottleneck, a projection per stage, the head
    assert _operators(graph).count(Op.ADD) == 16


@pytest.mark.parametrize("build", [lambda: unrolled_lstm(3), lambda: mobilenet_v2(32),
                                   lambda: resnet((1, 1, 1, 1), 32)], ids=["lstm", "mobilenet_v2", "resnet"])
def test_the_npu_computes_them_as_the_executor(build):
    graph = build()
    inputs = random_inputs(graph)
    expected = npu_sim.execute(graph, inputs)
    result = npu_sim.simulate(graph, "ethos-u85-256", inputs)
    for name, want in expected.items():
        np.testing.assert_array_equal(result.outputs[name], want)


@pytest.mark.parametrize("build", [lambda: mobilenet_v2(32), lambda: resnet((1, 1, 1, 1), 32)],
                         ids=["mobilenet_v2", "resnet"])
def test_the_int8_ones_compute_what_the_reference_model_computes(build, tmp_path):
    graph = build()
    inputs = random_inputs(graph)
    save_graph(graph, tmp_path / "g.tosa")
    expected = run_graph_bytes((tmp_path / "g.tosa").read_bytes(), list(inputs.values()),
                               list(graph.output_types.values()))
    ours = npu_sim.execute(graph, inputs)
    for name, want in zip(graph.output_types, expected):
        np.testing.assert_array_equal(ours[name], want)


def test_fitted_exponent_is_the_log_log_slope():
    assert math.isclose(fitted_exponent([10, 100, 1000], [1.0, 10.0, 100.0]), 1.0)
    assert math.isclose(fitted_exponent([10, 100], [1.0, 100.0]), 2.0)
    assert fitted_exponent([5, 5], [1.0, 2.0]) is None
