"""Table loads behind the previous operation: on the U85 a lookup's table is copied into the LUT
memory while the operation before it computes (``lut.table_load_behind_previous``)."""

from __future__ import annotations

import numpy as np

from npu_sim.hw.config import load_hw_config
from npu_sim.program import ComputeCommand
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from tests.scheduler.graphs import _rescale, check_end_to_end, conv_block

SIGMOID_LIKE = np.arange(-128, 128, dtype=np.int8)[::-1].copy()


def _lookups():
    """Int8 lookups of [1, 1, 4, 16] maps (64 elements, 32 cycles each at 0.5 an element): two
    back to back, a 3x3 convolution, a third; then a CLAMP of a second input and a lookup of its
    result."""
    b = GraphBuilder()
    y = b.input("x", (1, 1, 4, 16), DType.INT8)
    z = b.input("z", (1, 1, 4, 16), DType.INT8)
    y = b.op(Op.TABLE, [y, b.const(None, SIGMOID_LIKE)])
    y = b.op(Op.TABLE, [y, b.const(None, np.roll(SIGMOID_LIKE, 7))])
    y = conv_block(b, y, 16, kernel=3, pad=1, seed=1)
    b.output(b.op(Op.TABLE, [y, b.const(None, np.roll(SIGMOID_LIKE, 9))]))
    z = b.op(Op.CLAMP, [z], min_val=np.int8(-100).tobytes(), max_val=np.int8(100).tobytes(), nan_mode="PROPAGATE")
    b.output(b.op(Op.TABLE, [z, b.const(None, SIGMOID_LIKE)]))
    return b.build()


def _lookup_records(preset: str):
    program, result = check_end_to_end(_lookups(), load_hw_config(preset))
    cycles = {r.id: r.end_cycle - r.start_cycle for r in result.trace.commands}
    return [(c.name, c.unit, c.table_load_hidden_cycles, cycles[c.id]) for c in program.walk()
            if isinstance(c, ComputeCommand)]


def test_on_the_u85_a_table_loads_behind_the_operation_before_its_lookup():
    """A lookup costs 8 cycles of setup, 32 of lookups and what the operation before it did not
    hide of its table's 256-cycle load (1 byte a cycle). The first has nothing before it: it pays
    all 256. The second's load runs while the first looks up (32 cycles). The third's hides behind
    the convolution. The last looks up the CLAMP's result, as its activation: the operation before
    the CLAMP, the third lookup, hides 32 cycles of its load. The outputs are the reference's bit
    for bit (check_end_to_end)."""
    assert [(name, hidden, cycles) for name, _, hidden, cycles in _lookup_records("ethos-u85-256")] == [
        ("TABLE(table_1)", 0, 296), ("TABLE(table_3)", 32, 264),
        ("CONV2D(conv2d_7)+RESCALE(rescale_12)+CLAMP(clamp_13)", 0, 1286), ("TABLE(table_15)", 256, 40),
        ("CLAMP(clamp_16)", 0, 88), ("TABLE(table_18)", 32, 264)]


def test_without_it_every_lookup_pays_its_whole_table_load():
    """The U55 preset charges every lookup its table's load from the flash (64 cycles of latency,
    256 bytes at 1 byte a cycle: 320), as its example LSTMs fit Vela 5.2 best."""
    lookups = [(hidden, cycles) for _, unit, hidden, cycles in _lookup_records("ethos-u55-256") if unit == "lut"]
    assert lookups == [(0, 360)] * 4


def _activation_after_a_chained_add(second_reader: bool):
    """An int8 lookup, an ADD of its result and a second input (RESCALEs around it), and a lookup of
    the ADD's result: the ADD chains onto the first lookup's operation, and the second lookup is that
    operation's activation, unless the ADD's result has another reader (a graph output)."""
    b = GraphBuilder()
    x = b.input("x", (1, 1, 4, 16), DType.INT8)
    w = b.input("w", (1, 1, 4, 16), DType.INT8)
    y = b.op(Op.TABLE, [x, b.const(None, SIGMOID_LIKE)])
    total = b.op(Op.ADD, [_rescale(b, y, DType.INT32), _rescale(b, w, DType.INT32)])
    result = _rescale(b, total, DType.INT8)
    b.output(b.op(Op.TABLE, [result, b.const(None, np.roll(SIGMOID_LIKE, 5))]))
    if second_reader:
        b.output(result)
    return b.build()


def test_on_the_u85_a_fused_activation_pays_no_table_load():
    """Vela 5.2 fuses a lookup into the operation group producing its input (its one reader, no graph
    output) and charges the sub-operation nothing: the second lookup costs its 8 cycles of setup and
    32 of lookups (``lut.fused_activation_table_loads_free``). With the ADD's result also a graph
    output it stands alone: the operation before hides 32 cycles of its 256-cycle load, as before.
    Bits as the reference's (check_end_to_end)."""
    hw = load_hw_config("ethos-u85-256")
    for second_reader, expected in ((False, (256, 40)), (True, (32, 264))):
        program, result = check_end_to_end(_activation_after_a_chained_add(second_reader), hw)
        cycles = {r.id: r.end_cycle - r.start_cycle for r in result.trace.commands}
        lookups = [(c.table_load_hidden_cycles, cycles[c.id]) for c in program.walk()
                   if isinstance(c, ComputeCommand) and c.unit == "lut"]
        assert lookups == [(0, 296), expected]
