"""Chaining: on the Ethos-U85 a swish's MUL runs in its sigmoid lookup's operation and costs no
pass of its own; presets without chaining keep it apart."""

from __future__ import annotations

import numpy as np
import pytest

import npu_sim
from npu_sim.hw.config import load_hw_config
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.passes.fusion import DEFAULT_RULES, fuse, rules_for
from tests.scheduler.graphs import _rescale


def _swish():
    """``x * sigmoid(x)`` as TOSA writes a quantized TFLite swish: an int8 TABLE, both MUL
    operands widened to int32 (unit scale: zero points only), the MUL and a RESCALE back."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 16, 32), DType.INT8)
    table = b.const(None, np.arange(-128, 128, dtype=np.int8), DType.INT8)
    sigmoid = b.op(Op.TABLE, [x, table])
    wide_s = _rescale(b, sigmoid, out_dtype=DType.INT32, multiplier=1 << 30, shift=30, izp=-128)
    wide_x = _rescale(b, x, out_dtype=DType.INT32, multiplier=1 << 30, shift=30, izp=5)
    product = b.op(Op.MUL, [wide_s, wide_x, b.const(None, np.array([0], dtype=np.int8), DType.INT8)])
    b.output(_rescale(b, product, out_dtype=DType.INT8, multiplier=1_500_000_000, shift=40, ozp=3))
    return b.build()


def _groups(graph, preset):
    block = graph.main
    rules = rules_for(DEFAULT_RULES, load_hw_config(preset))
    return [[block.operators[i].op.name for i in g] for g in fuse(block, rules=rules)]


def test_the_u85_chains_the_mul_onto_the_lookup_and_the_u55_does_not():
    assert ["TABLE", "RESCALE", "RESCALE", "MUL", "RESCALE"] in _groups(_swish(), "ethos-u85-256")
    assert ["TABLE"] in _groups(_swish(), "ethos-u55-256")


@pytest.mark.parametrize(("input_in_place", "tiles"), [(True, 4), (False, 8)])
def test_the_chained_mul_costs_nothing_and_keeps_the_bits(input_in_place, tiles):
    """On the preset the lookup loads its 4-row tiles of ``x`` from the DRAM (tcm.graph_inputs_in_place;
    3-row ones are estimated 9% slower, beyond tcm.constant_stream_slack_fraction); with ``x`` staged
    into the TCM first, it runs in 8 tiles. Either way the MUL adds nothing to the lookup's cycles."""
    graph = _swish()
    x = np.random.default_rng(2).integers(-128, 128, (1, 16, 16, 32), dtype=np.int8)
    (want,) = npu_sim.execute(graph, {"x": x}).values()
    hw = load_hw_config("ethos-u85-256")
    hw = hw.model_copy(update={"tcm": hw.tcm.model_copy(update={"graph_inputs_in_place": input_in_place})})
    run = npu_sim.simulate(graph, hw, {"x": x})
    (got,) = run.outputs.values()
    assert np.array_equal(got, want)
    (lookup,) = [o for o in run.summary["ops"] if o["unit"] == "lut"]
    assert lookup["op"] == "TABLE+RESCALE+RESCALE+MUL+RESCALE"
    # 8,192 lookups at 0.5 cycles, the table's load once (256 B into the LUT at 1 B a cycle: the
    # DDR's latency is the constant stream's) and the commands' setups (8 cycles each); nothing for
    # the MUL, and no vector operation
    assert lookup["tile_count"] == tiles and run.summary["busy_cycles"]["lut"] == 4096 + 256 + tiles * 8
    assert run.summary["busy_cycles"]["vector"] == 0


def _exp_shifted():
    """A TOSA softmax's exponential: an int16 lookup to int32, its result shifted left by a scalar
    (the converter's SHL after each of the four TABLEs of exp)."""
    b = GraphBuilder()
    x = b.input("x", (1, 4, 16, 16), DType.INT16)
    table = b.const(None, np.arange(-256, 257, dtype=np.int16), DType.INT16)
    looked_up = b.op(Op.TABLE, [x, table])
    b.output(b.op(Op.LOGICAL_LEFT_SHIFT, [looked_up, b.const(None, np.array([[[[3]]]], dtype=np.int32),
                                                               DType.INT32)]))
    return b.build()


def test_a_shift_chains_onto_the_lookup_and_keeps_the_reference_bits(tmp_path):
    """Vela 5.2 chains the SHL after each of a TOSA softmax's int16 lookups onto it on the U85 (0
    cycles of its own in its debug database for a keyword transformer); the U55 runs it apart."""
    from npu_sim.tosa.loader import save_graph
    from tests.oracle import run_graph_bytes

    graph = _exp_shifted()
    assert [g for g in _groups(graph, "ethos-u85-256") if g != ["CONST"]] == [["TABLE", "LOGICAL_LEFT_SHIFT"]]
    assert ["LOGICAL_LEFT_SHIFT"] in _groups(graph, "ethos-u55-256")
    save_graph(graph, tmp_path / "exp.tosa")
    x = np.random.default_rng(4).integers(-32768, 32768, (1, 4, 16, 16), dtype=np.int16)
    (want,) = run_graph_bytes((tmp_path / "exp.tosa").read_bytes(), [x], list(graph.output_types.values()))
    run = npu_sim.simulate(graph, "ethos-u85-256", {"x": x})
    (got,) = run.outputs.values()
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    assert run.summary["busy_cycles"]["vector"] == 0
