"""Source means: a .tflite's MEAN over height and width (RESCALE, two REDUCE_SUMs, RESCALE of one
location) is one operation on the Ethos-U presets, timed per input element as Vela's depthwise
pass; without its location (TOSA input) it stays the transposed sums Vela's TOSA path makes."""

from __future__ import annotations

import numpy as np

import npu_sim
from npu_sim.hw.config import load_hw_config
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.passes.fusion import DEFAULT_RULES, fuse, rules_for
from tests.scheduler.graphs import _rescale

MEAN = "model/global_average_pooling2d/Mean"


def _mean(location=MEAN):
    b = GraphBuilder()
    x = b.input("x", (1, 16, 16, 64), DType.INT8)
    wide = _rescale(b, x, out_dtype=DType.INT32, multiplier=1 << 30, shift=30, izp=-7)
    rows = b.op(Op.REDUCE_SUM, [wide], axis=1)
    total = b.op(Op.REDUCE_SUM, [rows], axis=2)
    b.output(_rescale(b, total, out_dtype=DType.INT8, multiplier=1 << 30, shift=38, ozp=2))
    graph = b.build()
    for op in graph.main.operators:
        if op.op in (Op.RESCALE, Op.REDUCE_SUM):
            op.location = location
    return graph


def test_a_tflite_mean_is_one_operation_on_the_ethos_u_presets():
    for preset in ("ethos-u55-256", "ethos-u85-256"):
        block = _mean().main
        groups = [[block.operators[i].op.name for i in g]
                  for g in fuse(block, rules=rules_for(DEFAULT_RULES, load_hw_config(preset)))]
        assert ["RESCALE", "REDUCE_SUM", "REDUCE_SUM", "RESCALE"] in groups
    block = _mean(location="").main
    plain = [[block.operators[i].op.name for i in g]
             for g in fuse(block, rules=rules_for(DEFAULT_RULES, load_hw_config("ethos-u85-256")))]
    assert ["RESCALE", "REDUCE_SUM"] in plain and ["REDUCE_SUM"] in plain


def test_the_mean_costs_its_rate_per_input_element_with_the_reference_bits():
    x = np.random.default_rng(3).integers(-128, 128, (1, 16, 16, 64), dtype=np.int8)
    (want,) = npu_sim.execute(_mean(), {"x": x}).values()
    cycles = {}
    for name, graph in (("located", _mean()), ("plain", _mean(location=""))):
        run = npu_sim.simulate(graph, "ethos-u85-256", {"x": x})
        (got,) = run.outputs.values()
        assert np.array_equal(got, want)
        cycles[name] = run.summary["busy_cycles"]["vector"]
    # 16,384 elements at 1.27 (vector.cycles_per_element.source_mean), one command's setup (8) and,
    # starting with a RESCALE, the TCM latencies of the pooling path (32 + 32); without the
    # location, Vela's TOSA path: a transpose per sum, more than twice as long
    assert cycles["located"] == 20808 + 8 + 64
    assert cycles["plain"] > 2 * cycles["located"]


def test_a_lone_sum_of_a_location_keeps_the_transposed_cost():
    """A REDUCE_SUM alone in its operation (a TOSA graph's file position as its location, as
    tosa-opt writes one per operator) is no TFLite MEAN: the rate applies to a MEAN's group only."""
    from npu_sim.hw.compute_units.vector import body_cycles, source_mean_cycles
    from npu_sim.program import KernelStep
    from npu_sim.tosa.ir import TensorType
    from npu_sim.tosa.ops import make_attribute

    step = KernelStep(Op.REDUCE_SUM, make_attribute(Op.REDUCE_SUM, axis=1), (),
                      (TensorType((1, 16, 16, 64), DType.INT32),), (TensorType((1, 1, 16, 64), DType.INT32),),
                      origin='loc("model.mlir":12:10)')
    u85 = load_hw_config("ethos-u85-256")
    assert source_mean_cycles(u85, [step]) is None
    assert body_cycles(u85, [step]) > 2 * 16384 * 1.27
