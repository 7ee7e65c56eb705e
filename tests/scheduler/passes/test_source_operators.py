"""Source operators: the RESCALEs and CLAMP a TFLite operator became around its ADD (or
TRANSPOSE_CONV) run in that operation's output unit on the Ethos-U presets, as Vela compiles a
.tflite; the same graph without locations (TOSA input) keeps them apart."""

from __future__ import annotations

import numpy as np

import npu_sim
from npu_sim.hw.config import load_hw_config
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.passes.fusion import DEFAULT_RULES, fuse, rules_for
from tests.scheduler.graphs import _rescale

ADD = "model/add"


def _quantized_add(locations=(ADD,) * 5):
    """TFLite's int8 ADD as TOSA writes it: each input RESCALEd to int32 (a left shift and a
    scale), the int32 ADD, a RESCALE back to int8 and the CLAMP of a fused ReLU; ``locations``
    of those five operators in that order."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 16), DType.INT8)
    y = b.input("y", (1, 8, 8, 16), DType.INT8)
    wide_x = _rescale(b, x, out_dtype=DType.INT32, multiplier=1 << 30, shift=10, izp=3)
    wide_y = _rescale(b, y, out_dtype=DType.INT32, multiplier=1_518_500_250, shift=10, izp=-5)
    total = b.op(Op.ADD, [wide_x, wide_y])
    narrow = _rescale(b, total, out_dtype=DType.INT8, multiplier=1_300_000_000, shift=42, ozp=-2)
    b.output(b.op(Op.CLAMP, [narrow], min_val=np.int8(-2).tobytes(), max_val=np.int8(127).tobytes(),
                  nan_mode="PROPAGATE"))
    graph = b.build()
    chain = [op for op in graph.main.operators if op.op in (Op.RESCALE, Op.ADD, Op.CLAMP)]
    for op, location in zip(chain, locations, strict=True):
        op.location = location
    return graph


def _groups(graph, hw):
    block = graph.main
    return [[block.operators[i].op.name for i in g] for g in fuse(block, rules=rules_for(DEFAULT_RULES, hw))]


def test_ethos_u85_runs_a_tflite_add_with_its_rescales_as_one_operation():
    u85 = load_hw_config("ethos-u85-256")
    assert ["RESCALE", "RESCALE", "ADD", "RESCALE", "CLAMP"] in _groups(_quantized_add(), u85)
    # TOSA input (no locations): regor runs the ADD's rescales apart on the U85 (scaled_ops: MUL only)
    assert ["ADD"] in _groups(_quantized_add(("",) * 5), u85)
    # the rescale of another operator stays out; so does everything with the switch off
    assert ["RESCALE", "ADD", "RESCALE", "CLAMP"] in _groups(_quantized_add((ADD, "model/other", ADD, ADD, ADD)), u85)
    off = u85.model_copy(update={"npu_support": u85.npu_support.model_copy(update={"source_operators": False})})
    assert ["ADD"] in _groups(_quantized_add(), off)


def test_the_folded_rescales_cost_nothing_and_the_bits_stay_those_of_the_reference():
    rng = np.random.default_rng(4)
    inputs = {"x": rng.integers(-128, 128, (1, 8, 8, 16), dtype=np.int8),
              "y": rng.integers(-128, 128, (1, 8, 8, 16), dtype=np.int8)}
    located, plain = _quantized_add(), _quantized_add(("",) * 5)
    want = npu_sim.execute(plain, inputs)
    runs = {name: npu_sim.simulate(graph, "ethos-u85-256", inputs) for name, graph in
            (("located", located), ("plain", plain))}
    for run in runs.values():
        assert all(np.array_equal(run.outputs[k], v) for k, v in want.items())
    located_ops = [o["op"] for o in runs["located"].summary["ops"] if o["unit"] == "vector"]
    plain_ops = [o["op"] for o in runs["plain"].summary["ops"] if o["unit"] == "vector"]
    assert located_ops == ["RESCALE+RESCALE+ADD+RESCALE+CLAMP"]
    assert sorted(plain_ops) == ["ADD", "CLAMP", "RESCALE", "RESCALE", "RESCALE"]
    vector = {name: run.summary["busy_cycles"]["vector"] for name, run in runs.items()}
    # one int8 ADD pass over 1,024 elements (an elementwise operation: no pooling-path latencies)
    # against three RESCALE passes, an int32 ADD and a CLAMP
    assert vector == {"located": 272, "plain": 4248}


def _quantized_add_16x8(locations=(ADD,) * 7):
    """TFLite's 16x8 ADD as the converter writes it: one int16 input widened by a CAST to int32 and
    a LOGICAL_LEFT_SHIFT by 15, then RESCALEd; the other RESCALEd from int16 directly; the int32 ADD,
    a RESCALE back to int16 and a ReLU's CLAMP. ``locations`` of those seven operators in order."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 16), DType.INT16)
    y = b.input("y", (1, 8, 8, 16), DType.INT16)
    wide = b.op(Op.CAST, [x], dtype=DType.INT32)
    shifted = b.op(Op.LOGICAL_LEFT_SHIFT, [wide, b.const(None, np.array([[[[15]]]], np.int32))])
    scaled_x = _rescale(b, shifted, out_dtype=DType.INT32, multiplier=1_518_500_250, shift=33)
    scaled_y = _rescale(b, y, out_dtype=DType.INT32, multiplier=1 << 30, shift=17)
    total = b.op(Op.ADD, [scaled_x, scaled_y])
    narrow = _rescale(b, total, out_dtype=DType.INT16, multiplier=1_300_000_000, shift=45)
    b.output(b.op(Op.CLAMP, [narrow], min_val=np.int16(0).tobytes(), max_val=np.int16(32767).tobytes(),
                  nan_mode="PROPAGATE"))
    graph = b.build()
    chain = [op for op in graph.main.operators if op.op is not Op.CONST]
    for op, location in zip(chain, locations, strict=True):
        op.location = location
    return graph


def test_a_16x8_add_widened_by_a_cast_and_shift_is_one_operation_at_the_int16_add_rate():
    """The CAST and shift the converter widens one input of a 16x8 ADD with are that input's scale
    in the output unit, as Vela's TFLite reader runs the ADD (one Add of 16-bit data: a ResNet-8
    16x8's [1, 32, 32, 16] residual Add 12,288 cycles on the U55-256, 0.75 an element, Vela 5.2),
    with the RESCALEs and CLAMP of the same TFLite operator; the bits are the reference's."""
    u55 = load_hw_config("ethos-u55-256")
    assert ["CAST", "LOGICAL_LEFT_SHIFT", "RESCALE", "RESCALE", "ADD", "RESCALE", "CLAMP"] in \
        _groups(_quantized_add_16x8(), u55)
    # a shift of another operator keeps the widening apart
    assert ["RESCALE", "RESCALE", "ADD", "RESCALE", "CLAMP"] in \
        _groups(_quantized_add_16x8((ADD, "model/other", ADD, ADD, ADD, ADD, ADD)), u55)
    rng = np.random.default_rng(7)
    inputs = {"x": rng.integers(-32768, 32768, (1, 8, 8, 16), dtype=np.int16),
              "y": rng.integers(-32768, 32768, (1, 8, 8, 16), dtype=np.int16)}
    want = npu_sim.execute(_quantized_add_16x8(("",) * 7), inputs)
    run = npu_sim.simulate(_quantized_add_16x8(), "ethos-u55-256", inputs)
    assert all(np.array_equal(run.outputs[k], v) for k, v in want.items())
    assert [o["op"] for o in run.summary["ops"] if o["unit"] == "vector"] == \
        ["CAST+LOGICAL_LEFT_SHIFT+RESCALE+RESCALE+ADD+RESCALE+CLAMP"]
    # one 16-bit Add over 1,024 elements at 0.75 a cycle (vector.cycles_per_element.add: 768), after
    # the command's 8 of setup; its SRAM traffic, 6,144 B of maps and the in-place parameters at
    # 8 B a cycle, takes one cycle more
    assert run.summary["busy_cycles"]["vector"] == 8 + 769
    plain = npu_sim.simulate(_quantized_add_16x8(("",) * 7), "ethos-u55-256", inputs)
    assert plain.summary["busy_cycles"]["vector"] > 3 * 777   # the widening and the int32 ADD apart
