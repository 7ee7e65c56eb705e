"""Source squared difference: a .tflite's int8 SQUARED_DIFFERENCE (a Keras LayerNormalization's
(x - mean)^2: RESCALEs widening both inputs, a SUB, the difference squared, a RESCALE back, of one
location) is one operation on the Ethos-U presets, timed per output element as Vela's TFLite reader's
own lowering, with the flash reads of its zero constant on the U55; other groups stay apart."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

import npu_sim
from npu_sim.hw.config import load_hw_config
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.loader import save_graph
from npu_sim.tosa.ops import Op
from scheduler.passes.fusion import DEFAULT_RULES, fuse, rules_for
from tests.oracle import run_graph_bytes
from tests.scheduler.graphs import _rescale

SQUARED_DIFFERENCE = "model/layer_normalization/moments/SquaredDifference"


RANK_3 = (1, 64, 96)
RANK_4 = (1, 8, 8, 32)


def _squared_difference(location: str = SQUARED_DIFFERENCE, square: bool = True, shape=RANK_3):
    """x (int8, ``shape``) and its means over the channels, as the converter writes their squared
    difference; with ``square`` False the MUL multiplies the difference by x instead."""
    b = GraphBuilder()
    x = b.input("x", shape, DType.INT8)
    mean = b.input("mean", (*shape[:-1], 1), DType.INT8)
    wide_x = _rescale(b, x, out_dtype=DType.INT32, multiplier=1 << 30, shift=23, izp=-3)
    wide_mean = _rescale(b, mean, out_dtype=DType.INT32, multiplier=1 << 30, shift=23, izp=-3)
    difference = b.op(Op.SUB, [wide_x, wide_mean])
    product = b.op(Op.MUL, [difference, difference if square else wide_x, b.const(None, np.array([0], np.int8))])
    b.output(_rescale(b, product, out_dtype=DType.INT8, multiplier=1 << 30, shift=45, ozp=-128))
    graph = b.build()
    for op in graph.main.operators:
        if op.op in (Op.RESCALE, Op.SUB, Op.MUL):
            op.location = location
    return graph


def _groups(graph, preset: str) -> list[list[str]]:
    block = graph.main
    return [[block.operators[i].op.name for i in g]
            for g in fuse(block, rules=rules_for(DEFAULT_RULES, load_hw_config(preset)))]


WHOLE = ["RESCALE", "RESCALE", "SUB", "MUL", "RESCALE"]


def test_a_tflite_squared_difference_is_one_operation_on_the_ethos_u_presets():
    for preset in ("ethos-u55-256", "ethos-u55-128", "ethos-u65-256", "ethos-u65-512", "ethos-u85-256"):
        assert WHOLE in _groups(_squared_difference(), preset)
    # no location (TOSA input), no square, or a preset without the rate: its TOSA operations
    assert WHOLE not in _groups(_squared_difference(location=""), "ethos-u55-256")
    assert WHOLE not in _groups(_squared_difference(square=False), "ethos-u55-256")
    assert WHOLE not in _groups(_squared_difference(), "edge")


def _run(graph, preset: str):
    """The graph simulated on ``preset``, its output checked against Arm's TOSA reference model."""
    rng = np.random.default_rng(5)
    shape = graph.main.tensor("x").shape
    inputs = {"x": rng.integers(-128, 128, shape, dtype=np.int8),
              "mean": rng.integers(-128, 128, (*shape[:-1], 1), dtype=np.int8)}
    with tempfile.TemporaryDirectory() as work:
        save_graph(graph, Path(work) / "g.tosa")
        (want,) = run_graph_bytes((Path(work) / "g.tosa").read_bytes(), [inputs[k] for k in graph.main.inputs],
                                  list(graph.output_types.values()))
    run = npu_sim.simulate(graph, preset, inputs)
    (got,) = run.outputs.values()
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    (op,) = [op for op in run.summary["ops"] if any(g.startswith("SUB") for g in op["graph_ops"])]
    return run.summary, op


def test_the_squared_difference_costs_its_rate_per_output_element_with_the_reference_bits():
    """[1, 64, 96] on the U55-256: 6,144 output elements at 6.5 cycles for Vela's passes and, with fewer
    than four dimensions, 8.0 for its broadcast ADD (89,088: Vela's BERT LayerNorm 89,490), and the
    command's setup (8); [1, 8, 8, 32] has no broadcast pass (13,312 for 2,048 elements: Vela 13,108).
    On the U85-256 [1, 64, 96], its inputs read from the DRAM, runs in 24 tiles of 8 rows x 32 channels
    at 2.86 (733 each), each with its setup, and the TCM latencies of the first and last tile (32 each)."""
    summary, op = _run(_squared_difference(), "ethos-u55-256")
    assert op["compute_cycles"] == 39936 + 49152 + 8
    summary, op = _run(_squared_difference(shape=RANK_4), "ethos-u55-256")
    assert op["compute_cycles"] == 13312 + 8
    summary, op = _run(_squared_difference(), "ethos-u85-256")
    assert op["compute_cycles"] == 24 * (733 + 8) + 64


def test_on_the_u55_it_reads_its_zero_constant_from_the_flash():
    """Vela's broadcast ADD reads an int32 zero constant of the output's shape from the flash: 4 B
    an output element, 24,576 B; with four dimensions there is no such ADD, and the U85 broadcasts
    both operands and reads none."""
    u55, _ = _run(_squared_difference(), "ethos-u55-256")
    plain, _ = _run(_squared_difference(location=""), "ethos-u55-256")
    assert u55["ddr_read_bytes"] - plain["ddr_read_bytes"] == 6144 * 4
    u55, _ = _run(_squared_difference(shape=RANK_4), "ethos-u55-256")
    plain, _ = _run(_squared_difference(location="", shape=RANK_4), "ethos-u55-256")
    assert u55["ddr_read_bytes"] == plain["ddr_read_bytes"]
    u85, _ = _run(_squared_difference(), "ethos-u85-256")
    plain85, _ = _run(_squared_difference(location=""), "ethos-u85-256")
    assert u85["ddr_read_bytes"] == plain85["ddr_read_bytes"]
