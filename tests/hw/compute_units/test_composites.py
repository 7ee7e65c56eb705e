"""Cost of the fused LSTM cell (npu_sim.hw.compute_units.composites), on the fp32 example's commands."""

from __future__ import annotations

import pytest

from npu_sim.errors import ProgramError
from npu_sim.hw.compute_units import composites
from npu_sim.hw.config import ConfigError, deep_merge, hw_config_from_dict, load_hw_config
from npu_sim.hw.cost import command_tcm_bytes, compute_command_cycles, variable_sram_read_cycles
from npu_sim.program import ComputeCommand
from npu_sim.simulation import compile_graph
from npu_sim.tosa.loader import load_graph


@pytest.fixture(scope="module")
def edge_cells():
    hw = load_hw_config("edge")
    program = compile_graph(load_graph("examples/lstm_stateful_fp32.tosa"), hw, resident_constants=True)
    cells = [c for c in program.walk() if isinstance(c, ComputeCommand) and c.composite]
    return hw, cells


def test_the_recurrent_product_is_a_matrix_vector_product_over_the_whole_array(edge_cells):
    hw, (recurrent, _) = edge_cells
    assert [s.op.name for s in recurrent.steps] == ["RESHAPE", "CONV2D", "RESHAPE"]
    # h [1,32] x U [128,32] fp32: ceil(128 / 256 PEs) * K 32 * 4 cycles per fp32 MAC, + a drain of 128/16
    assert composites.gate_product_cycles(hw, recurrent.steps) == 1 * 32 * 4 + 8
    assert composites.gate_tail_cycles(hw, recurrent.steps) == 0   # reshapes only address
    # but 16 KiB of weights cross the two 16-byte TCM ports: TCM-bound, plus the MAC array's setup
    tcm_bytes = command_tcm_bytes(recurrent.steps, recurrent.outputs, distinct=True)
    assert tcm_bytes == 128 * 32 * 4 + 128 * 4 + 52   # U, the product, the shape operands
    # h comes straight from the variable SRAM: 128 bytes through its 16-byte port
    assert variable_sram_read_cycles(recurrent, hw) == 32 * 4 // 16
    assert compute_command_cycles(hw, recurrent) == 16 + -(-tcm_bytes // 32) == 546


def test_the_gate_tail_is_one_pipeline(edge_cells):
    hw, (_, cell) = edge_cells
    assert composites.gate_product_cycles(hw, cell.steps) == 1 * 8 * 4 + 8   # x [1,8] x W [128,8]
    # slowest stage: an fp32 ADD of 128 values on 8 lanes; depth: ADD ADD SIGMOID MUL ADD TANH MUL
    assert composites.gate_tail_cycles(hw, cell.steps) == 16 + 7
    assert composites.table_load_cycles(hw, cell.steps) == 0
    assert compute_command_cycles(hw, cell) == 16 + -(-command_tcm_bytes(cell.steps, cell.outputs, True) // 32) == 190


def test_each_distinct_table_loads_once_where_the_config_has_a_load_rate():
    edge = load_hw_config("edge").model_dump(mode="json")
    hw = hw_config_from_dict(deep_merge(edge, {"lut": {"table_load_bytes_per_cycle": 1.0}}), "edge+lut-loads")
    program = compile_graph(load_graph("examples/lstm_stateful_int8.tosa"), hw, resident_constants=True)
    cell = next(c for c in program.walk() if isinstance(c, ComputeCommand) and c.composite
                and any(s.op.name == "TABLE" for s in c.steps))
    tables = {s.operands[1] for s in cell.steps if s.op.name == "TABLE"}
    assert len(tables) == 3   # sigmoid, tanh of the gate, tanh of c' (the sigmoid serves three gates)
    per_table = -(-hw.lut.table_int8_bytes // hw.lut.table_load_bytes_per_cycle)
    assert composites.table_load_cycles(hw, cell.steps) == 3 * per_table


def test_an_unknown_composite_is_refused(edge_cells):
    hw, (cell, _) = edge_cells
    with pytest.raises(ProgramError, match="unknown composite 'attention_head'"):
        compute_command_cycles(hw, ComputeCommand(cell.id, cell.unit, cell.steps, cell.outputs,
                                                  output_steps=cell.output_steps, composite="attention_head"))


@pytest.mark.parametrize("preset", ["ethos-u55-256", "ethos-u65-256", "ethos-u85-256"])
def test_npus_without_the_datapath_run_the_cells_op_by_op(preset):
    """Ethos-U has no fused LSTM datapath (Vela runs the cells op by op): its presets say so."""
    hw = load_hw_config(preset)
    assert hw.composites == []
    program = compile_graph(load_graph("examples/lstm_stateful_fp32.tosa"), hw)
    assert not any(isinstance(c, ComputeCommand) and c.composite for c in program.walk())
    assert program.stats is not None and program.stats.composite_candidates == ()


def test_an_unknown_composite_in_a_config_is_refused():
    edge = load_hw_config("edge").model_dump(mode="json")
    known = "\\(known: gru_cell, lstm_cell\\)"
    with pytest.raises(ConfigError, match=f"composites: unknown composite 'attention_head' {known}"):
        hw_config_from_dict({**edge, "composites": ["attention_head"]}, "mine.yaml")
