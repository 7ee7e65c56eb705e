"""Rescale folding: a MUL with the RESCALEs around it is one operation where the output unit scales
its operands (vector.scaled_ops); an ADD's rescales stay apart; generic presets fold nothing."""

from __future__ import annotations

import numpy as np

from npu_sim.hw.config import deep_merge, hw_config_from_dict, load_hw_config
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.passes.fusion import DEFAULT_RULES, fuse, rules_for
from scheduler.passes.rescale_folding import RescaleFoldRule
from tests.scheduler.graphs import _rescale, check_end_to_end


def _quantized(op: Op):
    """x * y (or x + y) as TFLite's int8 arithmetic reaches TOSA: each input widened to int32, the
    int32 operation, rescaled back to int8 and clamped."""
    b = GraphBuilder()
    x, y = b.input("x", (1, 4, 4, 16), DType.INT8), b.input("y", (1, 4, 4, 16), DType.INT8)
    wide = [_rescale(b, v, out_dtype=DType.INT32, shift=30) for v in (x, y)]
    extra = {"shift": b.const(None, np.zeros((1,), np.int8))} if op is Op.MUL else {}
    product = b.op(op, [*wide, *extra.values()], dtype=DType.INT32, shape=(1, 4, 4, 16))
    narrow = _rescale(b, product, shift=38)
    b.output(b.op(Op.CLAMP, [narrow], min_val=np.int8(-100).tobytes(), max_val=np.int8(100).tobytes(),
                  nan_mode="PROPAGATE", name="out"))
    return b.build()


def _ops(block, group):
    return [block.operators[i].op for i in group]


def test_a_mul_and_its_rescales_are_one_operation_on_the_u65():
    """The U65's vector unit chains nothing, but its output unit scales a MUL's operands."""
    graph = _quantized(Op.MUL)
    block = graph.main
    groups = [_ops(block, g) for g in fuse(block, rules=rules_for(DEFAULT_RULES, load_hw_config("ethos-u65-256")))]
    assert [Op.RESCALE, Op.RESCALE, Op.MUL, Op.RESCALE, Op.CLAMP] in groups


def test_an_add_keeps_its_rescales_apart_and_edge_folds_nothing():
    block = _quantized(Op.ADD).main
    groups = [_ops(block, g) for g in fuse(block, rules=rules_for(DEFAULT_RULES, load_hw_config("ethos-u65-256")))]
    assert all(len(g) == 1 for g in groups if Op.ADD in g)
    assert not any(isinstance(r, RescaleFoldRule) for r in rules_for(DEFAULT_RULES, load_hw_config("edge")))


def test_the_folded_operation_keeps_the_reference_bits():
    hw = load_hw_config("ethos-u65-256")
    program, _ = check_end_to_end(_quantized(Op.MUL), hw)
    plain = hw_config_from_dict(deep_merge(hw.model_dump(mode="json"), {"vector": {"scaled_ops": []}}), "plain")
    check_end_to_end(_quantized(Op.MUL), plain)
    assert program.stats is not None
    assert [op.op for op in program.stats.operations if op.unit == "vector"] == ["RESCALE+RESCALE+MUL+RESCALE+CLAMP"]
