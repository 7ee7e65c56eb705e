"""reports.occupancy: step curves from allocation records, the plan's live-bytes bound."""

from __future__ import annotations

from npu_sim.hw.trace import AllocationRecord
from npu_sim.program import Allocation, DmaCommand, MemorySpace, Program, View
from npu_sim.tosa.dtype import DType
from reports.occupancy import footprint_bytes, occupancy_steps, planned_live_bytes_bound, spilled_bytes
from tests.reports.synthetic import many_tiles_case, tiny_case


def test_tcm_steps_of_the_tiny_case():
    _, trace = tiny_case()
    # in_tcm 512 + w_tcm 256 over [0,500); conv_out 256 over [100,700); add_out 128 over [500,1000)
    assert occupancy_steps(trace.allocations, MemorySpace.TCM) == (
        [0, 100, 500, 700, 1000], [768, 1024, 384, 128, 0])
    assert occupancy_steps(trace.allocations, "tcm", kinds=("activation",)) == (
        [100, 500, 700, 1000], [256, 384, 128, 0])


def test_an_end_and_a_start_on_one_cycle_do_not_coexist():
    records = [AllocationRecord("a", "tcm", 0, 100, "tile", 0, 0, 10),
               AllocationRecord("b", "tcm", 100, 50, "tile", 0, 10, 20),
               AllocationRecord("unused", "tcm", 0, 999, "tile", 0, None, None),
               AllocationRecord("instant", "tcm", 0, 999, "tile", 0, 5, 5)]
    assert occupancy_steps(records, "tcm") == ([0, 10, 20], [100, 50, 0])


def test_persistent_memory_spans_the_run_once():
    records = [AllocationRecord("v", "var_sram", 0, 64, "variable", inv, 100 * inv + 10, 100 * inv + 20)
               for inv in range(3)]
    assert occupancy_steps(records, MemorySpace.VARIABLE_SRAM, span=(0, 300)) == ([0, 300], [64, 0])


def test_peak_against_brute_force():
    _, trace = many_tiles_case(layers=6, tiles=8, seed=4)
    cycles, values = occupancy_steps(trace.allocations, "tcm")
    tcm = [a for a in trace.allocations if a.memory == "tcm"]
    for t in range(0, cycles[-1], 37):  # the curve at t equals the sum over allocations live at t
        expected = sum(a.size_bytes for a in tcm if a.first_cycle <= t < a.last_cycle)
        index = max(i for i, c in enumerate(cycles) if c <= t)
        assert values[index] == expected


def _dma(cid: int) -> DmaCommand:
    v = View(MemorySpace.TCM, 0, (4,), DType.INT8)
    return DmaCommand(cid, 0, v, v)


def test_planned_bound_follows_stream_order_not_ids():
    commands = [_dma(10), _dma(5), _dma(7)]  # stream order 10, 5, 7
    allocations = [Allocation("a", MemorySpace.TCM, 0, 100, "tile", 10, 5),
                   Allocation("b", MemorySpace.TCM, 100, 30, "tile", 7, 7),
                   Allocation("c", MemorySpace.TCM, 200, 40, "tile", 5, 7),
                   Allocation("pool", MemorySpace.TCM, 300, 8, "constant"),  # whole program
                   Allocation("d", MemorySpace.DDR, 0, 1000, "input")]
    program = Program({MemorySpace.TCM: 1024, MemorySpace.DDR: 4096}, allocations, commands)
    assert planned_live_bytes_bound(program, MemorySpace.TCM) == 8 + 140  # a + c at command 5
    assert planned_live_bytes_bound(program, MemorySpace.TCM, include=lambda k: k == "tile") == 140
    assert footprint_bytes(program, MemorySpace.TCM) == 308
    assert footprint_bytes(program, MemorySpace.DDR) == 1000


def test_spilled_bytes_count_every_spill_once_per_invocation_that_used_it():
    """Two spills sharing their DDR bytes at different times both count (the space they held at
    once does not); an unused spill and a DDR constant do not."""
    records = [AllocationRecord("s1", "ddr", 0, 4096, "spill", inv, 100 * inv, 100 * inv + 40) for inv in range(2)]
    records += [AllocationRecord("s2", "ddr", 0, 1024, "spill", 0, 50, 90),
                AllocationRecord("never", "ddr", 8192, 512, "spill", 0, None, None),
                AllocationRecord("w", "ddr", 9000, 777, "constant", 0, 0, 10)]
    assert spilled_bytes(records) == 2 * 4096 + 1024
    assert max(occupancy_steps(records, "ddr", kinds=("spill",))[1]) == 4096
