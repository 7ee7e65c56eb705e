"""DMA descriptors, DDR burst accounting and DMA timing in the simulator (exact cycles)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from npu_sim.errors import ProgramError
from npu_sim.hw.cost import dma_cycles
from npu_sim.hw.dma import ddr_burst_count, make_descriptor
from npu_sim.program import DmaCommand, MemorySpace, Program, View
from npu_sim.simulator import simulate_program
from npu_sim.tosa.dtype import DType
from tests.hw.hw_programs import DDR, TCM, VAR, copy_program, i32, make_hw


def test_contiguous_copy_is_one_level():
    d = make_descriptor(View(DDR, 0, (2, 3, 4), DType.INT8), View(TCM, 0, (2, 3, 4), DType.INT8))
    assert (d.shape, d.dims, d.run_bytes) == ((24,), 1, 24)


def test_nhwc_channel_slice_is_two_levels():
    # 4 pixels x 8 of 32 channels (int8) out of a [1, 2, 2, 32] tensor -> contiguous tile
    src = View(DDR, 16, (1, 2, 2, 8), DType.INT8, strides_bytes=(128, 64, 32, 1))
    d = make_descriptor(src, View(TCM, 0, (1, 2, 2, 8), DType.INT8))
    assert d.shape == (4, 8) and d.src_strides == (32, 1) and d.dst_strides == (8, 1)


def test_three_levels_accepted_four_rejected():
    three = View(DDR, 0, (2, 3, 4), DType.INT8, strides_bytes=(100, 10, 1))
    assert make_descriptor(three, View(TCM, 0, (2, 3, 4), DType.INT8)).dims == 3
    gather = View(DDR, 0, (2, 3, 4), DType.INT8, strides_bytes=(100, 10, 2))  # not even runs
    with pytest.raises(ProgramError, match="needs 4 strided levels; a DMA descriptor has at most 3"):
        make_descriptor(gather, View(TCM, 0, (2, 3, 4), DType.INT8), "command 3")


def test_burst_count_is_alignment_aware():
    assert ddr_burst_count(View(DDR, 0, (128,), DType.INT8), 64) == 2
    assert ddr_burst_count(View(DDR, 32, (64,), DType.INT8), 64) == 2  # straddles a boundary
    assert ddr_burst_count(View(DDR, 0, (1,), DType.INT8), 64) == 1
    # 4 runs of 16 bytes, 100 bytes apart: starts 0, 100, 200, 300 -> runs [0,16) [100,116)
    # [200,216) [300,316): bursts 0 | 1 | 3 | 4 (one each)
    rows = View(DDR, 0, (4, 16), DType.INT8, strides_bytes=(100, 1))
    assert ddr_burst_count(rows, 64) == 4
    rows_straddling = View(DDR, 56, (2, 16), DType.INT8, strides_bytes=(64, 1))  # [56,72) [120,136)
    assert ddr_burst_count(rows_straddling, 64) == 4


def test_one_dma_takes_setup_plus_bytes_over_bandwidth_plus_latency():
    hw = make_hw()  # setup 10, W = 16 B/cycle, read latency 100, write latency 50, bursts of 64
    size = 1000  # 250 int32 -> 16 bursts of 64 = 1024 bytes on the bus
    program = copy_program(size)
    x = np.arange(size // 4, dtype=np.int32)
    result = simulate_program(program, hw, [{"x": x}])
    load, store = result.trace.commands
    assert (load.start_cycle, load.end_cycle) == (0, 10 + math.ceil(1024 / 16) + 100)
    # the store's destination starts at byte 5096 = 79*64 + 40: 1000 bytes touch 17 bursts
    assert store.end_cycle - store.start_cycle == 10 + 17 * 64 // 16 + 50
    assert dma_cycles(hw, (program.commands[0].src, program.commands[0].dst)) == load.end_cycle
    np.testing.assert_array_equal(result.outputs[0]["y"], x)
    assert result.counters.ddr_read_bytes == size and result.counters.ddr_read_burst_bytes == 1024


def test_outstanding_burst_limit_caps_one_engine():
    hw = make_hw(dma={"max_outstanding_bursts": 2})  # cap = 2*64 / (100 + 64/16) B/cycle
    cap = 2 * 64 / (100 + 4)
    result = simulate_program(copy_program(1024), hw, [{"x": np.zeros(256, np.int32)}])
    load = result.trace.commands[0]
    assert load.end_cycle == 10 + math.ceil(1024 / cap) + 100


def test_two_engines_contend_for_ddr():
    hw = make_hw()
    s1, s2 = 512, 1536  # bytes (whole bursts)
    commands = [DmaCommand(0, 0, i32(DDR, 0, s1 // 4), i32(TCM, 0, s1 // 4), name="a"),
                DmaCommand(1, 1, i32(DDR, 4096, s2 // 4), i32(TCM, 4096, s2 // 4), name="b")]
    program = Program({DDR: 8192, TCM: 8192}, [], commands,
                      inputs={"a": i32(DDR, 0, s1 // 4), "b": i32(DDR, 4096, s2 // 4)})
    result = simulate_program(program, hw, [{"a": np.ones(s1 // 4, np.int32),
                                             "b": np.ones(s2 // 4, np.int32)}])
    ends = {c.name: c.end_cycle for c in result.trace.commands}
    assert ends == {"a": 10 + math.ceil(2 * s1 / 16) + 100, "b": 10 + math.ceil((s1 + s2) / 16) + 100}


def test_on_chip_copy_uses_the_variable_sram_port_and_no_latency():
    hw = make_hw()  # variable SRAM 8 B/cycle, TCM port 16 B/cycle
    commands = [DmaCommand(0, 0, i32(DDR, 0, 64), i32(VAR, 0, 64), name="to var"),
                DmaCommand(1, 1, i32(VAR, 0, 64), i32(TCM, 0, 64), deps=(0,), name="to tcm")]
    program = Program({DDR: 256, TCM: 256, VAR: 256}, [], commands, inputs={"x": i32(DDR, 0, 64)})
    result = simulate_program(program, hw, [{"x": np.arange(64, dtype=np.int32)}])
    first, second = result.trace.commands
    assert first.end_cycle == 10 + math.ceil(256 / 8) + 100  # capped by the SRAM port
    assert second.end_cycle - second.start_cycle == 10 + 256 // 8


def test_engine_out_of_range_is_a_program_error():
    program = copy_program(64, engine=3)
    with pytest.raises(ProgramError, match=r"command 0 \(load\): DMA engine 3 does not exist"):
        simulate_program(program, make_hw(), [{"x": np.zeros(16, np.int32)}])


def test_a_dma_needing_four_levels_is_rejected_by_the_simulator():
    src = View(DDR, 0, (2, 3, 4), DType.INT8, strides_bytes=(100, 10, 2))
    program = Program({DDR: 256, TCM: 64}, [],
                      [DmaCommand(0, 0, src, View(TCM, 0, (2, 3, 4), DType.INT8), name="gather")])
    with pytest.raises(ProgramError, match=r"command 0 \(gather\): the copy .* needs 4 strided levels"):
        simulate_program(program, make_hw(), [{}])


def test_ddr_memory_space_constant():
    assert MemorySpace.DDR.value == "ddr"


def test_a_read_in_short_accesses_pays_a_whole_burst_for_each():
    """access_bytes 16 on bursts of 64: the 1,000-byte load goes in 63 accesses of 16 bytes,
    each taking a whole burst's time on the DDR (63 x 64 bytes charged); its payload and data
    are unchanged, and the store (a write) is not affected."""
    import dataclasses

    hw = make_hw()
    program = copy_program(1000)
    load, store = program.commands
    program = dataclasses.replace(program, commands=[dataclasses.replace(load, access_bytes=16), store])
    x = np.arange(250, dtype=np.int32)
    result = simulate_program(program, hw, [{"x": x}])
    traced_load, traced_store = result.trace.commands
    assert traced_load.end_cycle - traced_load.start_cycle == 10 + 63 * 64 // 16 + 100
    assert traced_store.end_cycle - traced_store.start_cycle == 10 + 17 * 64 // 16 + 50
    assert dma_cycles(hw, program.commands[0]) == 10 + 63 * 64 // 16 + 100
    np.testing.assert_array_equal(result.outputs[0]["y"], x)
    assert result.counters.ddr_read_bytes == 1000 and result.counters.ddr_read_burst_bytes == 63 * 64


def test_a_dma_to_a_block_tensor_reads_its_pointer_table_first():
    hw = make_hw(block_tensors={"table_read_cycles_per_entry": 3})  # setup 10, 16 B/cycle, latency 100
    src = View(DDR, 0, (1000,), DType.INT8)
    whole = View(TCM, 0, (1000,), DType.INT8)
    blocks = View(TCM, 0, (1000,), DType.INT8, blocks=(0, 4096, 1024, 2048), block_bytes=256)
    assert dma_cycles(hw, (src, blocks)) - dma_cycles(hw, (src, whole)) == 4 * 3
    part = View(TCM, 300, (100,), DType.INT8, blocks=(0, 4096, 1024, 2048), block_bytes=256)
    assert part.table_entries == (1,)
    assert dma_cycles(hw, (View(DDR, 0, (100,), DType.INT8), part)) - \
        dma_cycles(hw, (View(DDR, 0, (100,), DType.INT8), View(TCM, 0, (100,), DType.INT8))) == 3
