"""An elementwise result written over an input it alone reads (tcm.elementwise_result_over_input:
Vela's ReuseIFM): one buffer instead of two, the same bits."""

from __future__ import annotations

import numpy as np

from npu_sim.hw.config import HwConfig, load_hw_config
from npu_sim.program import ComputeCommand, View
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from tests.scheduler.graphs import _rescale, check_end_to_end, conv_block

UNITS = 64


def _gate(shared: bool = False):
    """TABLE(RESCALE(ADD(RESCALE(a), RESCALE(c)))) of two 1x1 convolutions of ``x``, read by a third
    (an unrolled GRU's gate); ``shared``: the last convolution reads ``a`` too."""
    b = GraphBuilder()
    x = b.input("x", (1, 1, 1, 16), DType.INT8)
    a = conv_block(b, x, UNITS, kernel=1, pad=0, seed=1, relu=False)
    c = conv_block(b, x, UNITS, kernel=1, pad=0, seed=2, relu=False)
    s = b.op(Op.ADD, [_rescale(b, a, DType.INT32, shift=30), _rescale(b, c, DType.INT32, shift=30)],
             (1, 1, 1, UNITS), DType.INT32)
    table = b.const(None, np.arange(-128, 128, dtype=np.int8)[::-1].copy())
    gate = b.op(Op.TABLE, [_rescale(b, s, shift=32), table], name="gate")
    if shared:
        gate = b.op(Op.CONCAT, [gate, a], axis=3)
    b.output(conv_block(b, gate, 8, kernel=1, pad=0, seed=3))
    return b.build()


def _hw(on: bool) -> HwConfig:
    hw = load_hw_config("ethos-u55-256")
    return hw.model_copy(update={"tcm": hw.tcm.model_copy(update={"elementwise_result_over_input": on})})


def _tcm_operand(command: ComputeCommand, step: int = 0) -> int:
    return next(v.offset_bytes for v in command.steps[step].operands if isinstance(v, View) and v.memory.value == "tcm")


def _gate_commands(program) -> list[ComputeCommand]:
    return [c for c in program.walk() if isinstance(c, ComputeCommand) and ("ADD(" in c.name or "TABLE(" in c.name)]


def test_the_gate_and_its_lookup_write_over_their_input() -> None:
    program, _ = check_end_to_end(_gate(), _hw(True))
    add, lookup = _gate_commands(program)
    assert _tcm_operand(add) == add.outputs[0].offset_bytes   # over RESCALE(a)'s convolution
    assert _tcm_operand(lookup) == lookup.outputs[0].offset_bytes
    # x (16 B) and both convolutions (64 B each) live together; then never three 64-byte maps
    assert program.stats.peak_tcm_bytes == 16 + 2 * UNITS


def test_without_the_field_each_result_has_a_buffer_of_its_own() -> None:
    program, _ = check_end_to_end(_gate(), _hw(False))
    add, lookup = _gate_commands(program)
    assert _tcm_operand(add) != add.outputs[0].offset_bytes
    assert _tcm_operand(lookup) != lookup.outputs[0].offset_bytes
    assert program.stats.peak_tcm_bytes == 3 * UNITS


def test_an_input_read_later_keeps_its_bytes() -> None:
    """A CONCAT after the lookup reads ``a`` too: the ADD writes over ``c`` instead."""
    program, _ = check_end_to_end(_gate(shared=True), _hw(True))
    add, lookup = _gate_commands(program)
    assert _tcm_operand(add, 0) != add.outputs[0].offset_bytes   # a
    assert _tcm_operand(add, 1) == add.outputs[0].offset_bytes   # c
    assert _tcm_operand(lookup) == lookup.outputs[0].offset_bytes
