"""The benchmark graphs (benchmarks/graphs.py) build, validate, round-trip and execute.

No timing here: the benchmarks measure, these tests only check that what they measure
is a well-formed graph computing what the reference model computes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import npu_sim
from benchmarks.bench_schedule_quality import mac_operations, working_set_bytes
from benchmarks.graphs import (
    CONV_CNN,
    EXAMPLE_NAMES,
    RELU6_MAX,
    benchmark_graphs,
    conv_cnn_int8,
    quantize_multiplier,
    random_inputs,
    tosa_file,
)
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from tests.oracle import run_graph_bytes


@pytest.mark.parametrize("real", [1e-6, 0.00123, 0.25, 0.5, 0.999999, 1.0, 3.7])
def test_quantize_multiplier_is_accurate_and_in_range(real):
    multiplier, shift = quantize_multiplier(real)
    assert 1 << 30 <= multiplier < 1 << 31
    assert 2 <= shift <= 62
    assert math.isclose(multiplier * 2.0 ** -shift, real, rel_tol=2.0 ** -30)


def test_quantize_multiplier_rejects_scales_rescale_cannot_express():
    with pytest.raises(ValueError):
        quantize_multiplier(0.0)
    with pytest.raises(ValueError):
        quantize_multiplier(1e-12)   # would need a shift above 62


def test_conv_cnn_structure_and_macs():
    graph = conv_cnn_int8()
    ops = [o.op for o in graph.main.operators if o.op is not Op.CONST]
    assert ops == [Op.CONV2D, Op.RESCALE, Op.CLAMP] * 4 + [Op.CONV2D, Op.RESCALE]
    assert graph.input_types["image"].shape == (1, 56, 56, 32)
    (out,) = graph.output_types.values()
    assert out.shape == (1, 28, 28, 64) and out.dtype is DType.INT8
    # 56*56*64*9*32 + 56*56*64*9*64 + 28*28*128*9*64 + 28*28*128*9*128 + 28*28*64*128
    assert sum(e["macs"] for e in mac_operations(graph)) == 353_239_040


def test_conv_cnn_working_set_is_the_second_conv_with_its_constants():
    # conv2: input and output 56*56*64 int8 each, weights 64*3*3*64, bias 64 int32, zero points
    # 1 + 1, multiplier 64 int32, shift 64 int8, rescale zero points 4 + 1 (the int32
    # accumulator and the rescaled tensor stay inside the fused epilogue)
    assert working_set_bytes(conv_cnn_int8()) == 2 * 200_704 + 36_864 + 256 + 2 + 256 + 64 + 5


def test_small_conv_cnn_matches_the_reference_model_through_a_file(tmp_path):
    graph = conv_cnn_int8(height=9, width=10, channels=4, seed=3)
    bench = next(b for b in benchmark_graphs([CONV_CNN]))
    path = tosa_file(bench, tmp_path, graph)
    reloaded = npu_sim.load_graph(path)
    inputs = random_inputs(reloaded, seed=1)
    ours = npu_sim.execute(reloaded, inputs)
    (expected,) = run_graph_bytes(path.read_bytes(), list(inputs.values()), list(reloaded.output_types.values()))
    (name,) = ours
    np.testing.assert_array_equal(ours[name], expected)
    assert ours[name].shape == (1, 5, 5, 8)
    assert len(np.unique(ours[name])) > 20          # not saturated: quantization is sensible


def test_relu6_clamp_bites():
    graph = conv_cnn_int8(height=12, width=12, channels=4, seed=0)
    clamp = next(o for o in graph.main.operators if o.op is Op.CLAMP)
    graph.main.outputs.append(clamp.outputs[0])
    values = npu_sim.execute(graph, random_inputs(graph, seed=0))[clamp.outputs[0]]
    assert values.max() == RELU6_MAX and values.min() == -128


def test_every_benchmark_graph_loads_and_executes():
    graphs = benchmark_graphs()
    assert [g.name for g in graphs] == list(EXAMPLE_NAMES) + [CONV_CNN]
    for bench in graphs[:-1]:        # the examples (the big CNN is covered above)
        graph = bench.load()
        outputs = npu_sim.execute(graph, random_inputs(graph, seed=0))
        assert set(outputs) == set(graph.output_types)


def test_unknown_graph_names_are_refused():
    with pytest.raises(SystemExit, match="unknown graph"):
        benchmark_graphs(["no_such_graph"])
