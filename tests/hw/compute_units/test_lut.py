"""The LUT unit's cost: results per cycle plus, where configured, a LUT reload per table op."""

from __future__ import annotations

from npu_sim.hw.compute_units import lut
from npu_sim.program import KernelStep
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute
from tests.hw.hw_programs import make_hw


def _table(dtype: DType, out_dtype: DType) -> KernelStep:
    return KernelStep(Op.TABLE, make_attribute(Op.TABLE), (), (TensorType((1, 64), dtype),),
                      (TensorType((1, 64), out_dtype),))


def test_without_a_reload_rate_tables_stay_resident():
    hw = make_hw()
    assert hw.lut.table_load_bytes_per_cycle == 0
    assert lut.table_load_cycles(hw, _table(DType.INT8, DType.INT8)) == 0
    assert lut.step_cycles(hw, _table(DType.INT8, DType.INT8)) == -(-64 // hw.lut.elements_per_cycle)


def test_each_table_reloads_its_lut_by_input_width():
    hw = make_hw()
    hw = hw.model_copy(update={"lut": hw.lut.model_copy(update={"table_load_bytes_per_cycle": 2.0})})
    assert lut.table_load_cycles(hw, _table(DType.INT8, DType.INT8)) == 128
    assert lut.table_load_cycles(hw, _table(DType.INT16, DType.INT32)) == 1024
    assert lut.step_cycles(hw, _table(DType.INT8, DType.INT8)) == 128 + -(-64 // hw.lut.elements_per_cycle)


def test_a_reload_from_the_ddr_waits_for_its_latency():
    """Vela's MemToMemCycles for an int8 table: the U55 reads its flash (latency 64, 1 B/cycle)
    while the LUT memory takes 1 B/cycle: 64 + 256 = 320 cycles; the U65/U85 read DRAM (latency
    500, 12 B/cycle): 500 + 22 = 522, longer than the LUT's 256."""
    from npu_sim.hw.config import load_hw_config

    int8 = _table(DType.INT8, DType.INT8)
    assert lut.table_load_cycles(load_hw_config("ethos-u55-256"), int8) == 320
    assert lut.table_load_cycles(load_hw_config("ethos-u65-256"), int8) == 522
    assert lut.table_load_cycles(load_hw_config("ethos-u85-256"), _table(DType.INT16, DType.INT32)) \
        == max(2048, 500 + 2048 // 12 + 1)


def test_a_fractional_lookup_rate_by_table_width():
    """Vela's int8 TABLE: 0.5 cycles an element on every Ethos-U (16,384 elements: 8,192 cycles
    and the table load); the U85's 16-bit tables 1.25."""
    from npu_sim.hw.config import load_hw_config

    u85 = load_hw_config("ethos-u85-256")
    narrow, wide = _table(DType.INT8, DType.INT8), _table(DType.INT16, DType.INT32)
    assert lut.lookup_cycles(u85, narrow) == 32 and lut.lookup_cycles(u85, wide) == 80   # 64 elements
    assert lut.lookup_cycles(load_hw_config("ethos-u55-256"), wide) == 32   # no wide rate: as narrow
    assert lut.lookup_cycles(make_hw(), narrow) == 64 // make_hw().lut.elements_per_cycle
