"""Memory roles: where constants, the arena (graph inputs and outputs) and spills live, Vela's
memory modes; nothing writes a read-only memory; a graph that cannot fit says which tensor."""

from __future__ import annotations

import pytest

from npu_sim.errors import ScheduleError
from npu_sim.hw.config import deep_merge, hw_config_from_dict, load_hw_config
from npu_sim.program import Allocation, ComputeCommand, DmaCommand, MemorySpace, Program, View
from npu_sim.tosa.dtype import DType
from reports.memory_traffic import memory_figures
from scheduler.ir.npu_ops import ValueKind
from scheduler.memory.roles import check_writes, home_memory, may_spill, on_chip_kinds
from tests.scheduler.graphs import check_end_to_end, small_cnn

DDR, TCM = MemorySpace.DDR, MemorySpace.TCM


def _config(base: str, **sections):
    data = load_hw_config(base).model_dump(mode="json")
    return hw_config_from_dict(deep_merge(data, sections), f"{base}-roles")


SRAM_ONLY = {"memory_roles": {"constants": "tcm", "arena": "tcm", "spills": "none"}}


def test_the_homes_by_role():
    edge, u55, sram_only = load_hw_config("edge"), load_hw_config("ethos-u55-256"), _config("edge", **SRAM_ONLY)
    assert [home_memory(k, edge) for k in (ValueKind.INPUT, ValueKind.CONSTANT, ValueKind.VARIABLE)] == \
        [DDR, DDR, MemorySpace.VARIABLE_SRAM]
    assert home_memory(ValueKind.INTERMEDIATE, edge) is None
    assert [home_memory(k, u55) for k in (ValueKind.INPUT, ValueKind.OUTPUT, ValueKind.CONSTANT)] == [TCM, TCM, DDR]
    assert on_chip_kinds(u55) == {ValueKind.INPUT, ValueKind.OUTPUT}
    assert on_chip_kinds(sram_only) == {ValueKind.INPUT, ValueKind.OUTPUT, ValueKind.CONSTANT}
    assert may_spill(edge) and not may_spill(u55) and u55.ddr.read_only


def test_shared_sram_keeps_feature_maps_on_chip_and_reads_only_constants_from_flash():
    program, result = check_end_to_end(small_cnn(), load_hw_config("ethos-u55-256"))
    kinds = {(a.kind, a.memory) for a in program.allocations}
    assert ("input", TCM) in kinds and ("output", TCM) in kinds and ("constant", DDR) in kinds
    assert not any(a.memory is DDR and a.kind in ("input", "output", "spill") for a in program.allocations)
    counters = result.trace.counters
    assert counters.ddr_write_bytes == 0 and counters.ddr_read_bytes > 0
    figures = memory_figures(result.trace, load_hw_config("ethos-u55-256"), program)
    assert figures["ddr"]["holds"] == ["constants"] and figures["ddr"]["read_only"]
    assert (figures["ddr"]["read_bytes"], figures["ddr"]["write_bytes"]) == (counters.ddr_read_bytes, 0)
    in_place = sum(view.size_bytes for c in program.walk() if isinstance(c, ComputeCommand) and c.weights_in_place
                   for view in c.in_place_weights())
    # every constant lands in the TCM, or is read where it lives (weights read once)
    assert figures["tcm"]["write_bytes"] + in_place == counters.ddr_read_bytes
    assert figures["tcm"]["holds"] == ["graph inputs and outputs", "feature maps and tiles"]


def test_sram_only_moves_nothing_off_chip():
    program, result = check_end_to_end(small_cnn(), _config("edge", **SRAM_ONLY))
    assert {a.memory for a in program.allocations if a.kind in ("constant", "input", "output")} == {TCM}
    counters = result.trace.counters
    assert (counters.ddr_read_bytes, counters.ddr_write_bytes) == (0, 0)


def test_a_graph_that_does_not_fit_without_spills_names_the_tensor_and_the_memory():
    # (op by op: its chains in stripes would fit the working sets, then not the placement)
    small = _config("ethos-u55-256", tcm={"size_bytes": 4096, "bank_count": 1}, stripes={"slack_fraction": None})
    with pytest.raises(ScheduleError, match=r"its tiles need [\d,]+ bytes of TCM beside the [\d,]+ bytes of tensors "
                                            r"live there \(the largest, '\w+', [\d,]+ bytes\), of the [\d,]+ they may "
                                            r"use; ethos-u55-256 keeps its feature maps in its TCM of 4,096 bytes and "
                                            r"has no memory to spill to \(memory_roles\.spills: none\)$"):
        check_end_to_end(small_cnn(), small)


def test_the_same_graph_spills_where_the_roles_allow_it():
    program, result = check_end_to_end(small_cnn(), _config("edge", tcm={"size_bytes": 4096, "bank_count": 1}))
    assert any(a.kind == "spill" and a.memory is DDR for a in program.allocations)
    assert result.trace.counters.ddr_write_bytes > 0


def test_nothing_may_write_a_read_only_memory():
    u55 = load_hw_config("ethos-u55-256")
    t = View(TCM, 0, (16,), DType.INT8)
    flash = View(DDR, 0, (16,), DType.INT8)
    program = Program({DDR: 64, TCM: 64}, [Allocation("weights", DDR, 0, 16, "constant")],
                      [DmaCommand(0, 0, t, flash, name="store")])
    with pytest.raises(ScheduleError, match=r"^command 0 \(store\) writes 'weights' in the ddr, which is read-only "
                                            r"\(flash\) on ethos-u55-256$"):
        check_writes(program, u55)
    check_writes(program, load_hw_config("edge"))   # a writable DDR
