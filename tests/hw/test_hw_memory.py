"""Byte-array memories: typed strided views, written-ness tracking, bounds."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.errors import MemoryAccessError
from npu_sim.hw.memory import Memory, PointerTables, named
from npu_sim.program import MemorySpace, View
from npu_sim.tosa.dtype import DType

TCM = MemorySpace.TCM


def test_strided_view_writes_and_reads_the_right_bytes():
    memory = Memory(TCM, 64)
    column = View(TCM, 2, (3,), DType.INT16, strides_bytes=(8,))  # every 8th byte from 2
    memory.access(column).write(np.array([1, -2, 0x0304], np.int16))
    assert bytes(memory.data[2:4]) == b"\x01\x00"
    assert bytes(memory.data[10:12]) == b"\xfe\xff"
    assert bytes(memory.data[18:20]) == b"\x04\x03"
    assert memory.written.sum() == 6
    np.testing.assert_array_equal(memory.access(column).read(), [1, -2, 0x0304])


def test_negative_strides_read_backwards():
    memory = Memory(TCM, 16)
    memory.access(View(TCM, 0, (4,), DType.INT8)).write(np.array([1, 2, 3, 4], np.int8))
    backwards = View(TCM, 3, (4,), DType.INT8, strides_bytes=(-1,))
    np.testing.assert_array_equal(memory.access(backwards).read(), [4, 3, 2, 1])


def test_int48_round_trips_through_six_bytes():
    memory = Memory(TCM, 32)
    view = View(TCM, 1, (2,), DType.INT48)
    values = np.array([-(2 ** 47), 2 ** 47 - 1], np.int64)
    memory.access(view).write(values)
    assert memory.written.sum() == 12
    np.testing.assert_array_equal(memory.access(view).read(), values)


def test_bool_is_one_byte_zero_or_one():
    memory = Memory(TCM, 8)
    view = View(TCM, 0, (3,), DType.BOOL)
    memory.access(view).write(np.array([True, False, True]))
    assert bytes(memory.data[:3]) == b"\x01\x00\x01"
    np.testing.assert_array_equal(memory.access(view).read(), [True, False, True])


def test_reading_a_byte_never_written_names_the_element():
    memory = Memory(TCM, 16)
    memory.access(View(TCM, 0, (3,), DType.INT32)).write(np.array([1, 2, 3], np.int32))
    view = View(TCM, 0, (4,), DType.INT32)
    with pytest.raises(MemoryAccessError, match=r"^command 7: reads tcm\[0x0\] 4 INT32 element \[3\], "
                                                 r"which was never written$"):
        with named("command 7"):
            memory.access(view).read()


def test_out_of_bounds_views_and_loads_are_refused():
    memory = Memory(TCM, 16)
    with pytest.raises(MemoryAccessError, match=r"spans bytes \[8, 24\) outside tcm of 16 bytes"):
        memory.access(View(TCM, 8, (4,), DType.INT32))
    with pytest.raises(MemoryAccessError, match=r"spans bytes \[-4, 4\)"):
        memory.access(View(TCM, 0, (2,), DType.INT32, strides_bytes=(-4,)))
    with pytest.raises(MemoryAccessError, match=r"bytes \[10, 20\) outside tcm"):
        memory.load(10, bytes(10))


def test_wrong_dtype_or_size_writes_are_refused():
    memory = Memory(TCM, 16)
    access = memory.access(View(TCM, 0, (2,), DType.INT32))
    with pytest.raises(MemoryAccessError, match="writes int16 data"):
        access.write(np.zeros(2, np.int16))
    with pytest.raises(MemoryAccessError, match=r"writes shape \[3\]"):
        access.write(np.zeros(3, np.int32))


def test_dma_copy_moves_bytes_between_strided_views():
    memory = Memory(TCM, 64)
    src = View(TCM, 0, (2, 3), DType.INT8)
    dst = View(TCM, 32, (2, 3), DType.INT8, strides_bytes=(8, 2))
    memory.access(src).write(np.arange(6, dtype=np.int8).reshape(2, 3))
    memory.access(dst).copy_from(memory.access(src))
    assert list(memory.data[32:45]) == [0, 0, 1, 0, 2, 0, 0, 0, 3, 0, 4, 0, 5]
    np.testing.assert_array_equal(memory.access(dst).read(), np.arange(6).reshape(2, 3))


def test_a_read_only_memory_takes_its_initial_data_and_refuses_writes():
    ddr = MemorySpace.DDR
    flash = Memory(ddr, 16, read_only=True)
    flash.load(0, b"\x07" * 8)
    view = View(ddr, 0, (8,), DType.INT8)
    np.testing.assert_array_equal(flash.access(view).read(), [7] * 8)
    with pytest.raises(MemoryAccessError, match=r"^writes ddr\[0x0\] 8 INT8, but the ddr is read-only \(flash\)$"):
        flash.access(view).write(np.zeros(8, np.int8))
    tcm = Memory(TCM, 16)
    tcm.access(View(TCM, 0, (8,), DType.INT8)).write(np.ones(8, np.int8))
    with pytest.raises(MemoryAccessError, match="read-only"):
        flash.access(view).copy_from(tcm.access(View(TCM, 0, (8,), DType.INT8)))


def test_a_block_tensor_view_scatters_and_gathers_through_its_blocks():
    memory = Memory(TCM, 96)
    # logical bytes 0..15 in the block at 32, 16..31 in the block at 0 (16-byte blocks)
    whole = View(TCM, 0, (2, 4), DType.INT32, blocks=(32, 0), block_bytes=16)
    memory.access(whole).write(np.arange(8, dtype=np.int32).reshape(2, 4))
    assert memory.data[32:48].view(np.int32).tolist() == [0, 1, 2, 3]
    assert memory.data[0:16].view(np.int32).tolist() == [4, 5, 6, 7]
    assert memory.written.sum() == 32
    column = View(TCM, 12, (2,), DType.INT32, strides_bytes=(16,), blocks=(32, 0), block_bytes=16)
    assert memory.access(column).read().tolist() == [3, 7]
    copy = View(TCM, 64, (8,), DType.INT32)   # a DMA gathering the blocks into contiguous bytes
    memory.access(copy).copy_from(memory.access(whole))
    assert memory.access(copy).read().tolist() == list(range(8))
    memory.access(whole).copy_from(memory.access(View(TCM, 64, (2, 4), DType.INT32)))   # and back
    assert memory.access(whole).read().tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert whole.span == (0, 48)
    assert str(whole) == "tcm[2 blocks of 16 from 0x20 +0x0] 2x4 INT32"
    assert whole.table_entries == (0, 1)
    assert column.table_entries == (0, 1)


def test_a_block_tensor_view_refuses_unwritten_bytes():
    memory = Memory(TCM, 64)
    view = View(TCM, 0, (8,), DType.INT8, blocks=(16, 48), block_bytes=4)
    memory.access(View(TCM, 16, (4,), DType.INT8)).write(np.arange(4, dtype=np.int8))
    with pytest.raises(MemoryAccessError, match="element \\[4\\], which was never written"):
        memory.access(view).read()


def test_a_short_last_block_may_end_at_the_end_of_the_memory():
    memory = Memory(TCM, 48)
    view = View(TCM, 0, (20,), DType.INT8, blocks=(0, 44), block_bytes=16)   # 16 B, then 4 B at 44
    assert view.block_pieces == ((0, 16), (44, 48)) and view.span == (0, 48)
    memory.access(view).write(np.arange(20, dtype=np.int8))
    assert memory.data[44:48].tolist() == [16, 17, 18, 19]
    window = View(TCM, 10, (8,), DType.INT8, blocks=(0, 44), block_bytes=16)
    assert window.block_pieces == ((10, 16), (44, 46))



def test_a_block_tensor_access_walks_its_pointer_table_in_the_other_memory():
    tcm, var = Memory(TCM, 64), Memory(MemorySpace.VARIABLE_SRAM, 16)
    tcm.pointer_tables = PointerTables(var, {(0, 16): (4, 2)})   # table at var[4:8), 2 bytes per entry
    var.load(4, (48).to_bytes(2, "little") + (32).to_bytes(2, "little"))   # the table says: 48, then 32
    view = View(TCM, 0, (32,), DType.INT8, blocks=(0, 16), block_bytes=16)
    tcm.access(view).write(np.arange(32, dtype=np.int8))
    assert tcm.data[48:64].tolist() == list(range(16)) and tcm.data[32:48].tolist() == list(range(16, 32))
    assert not tcm.written[:32].any()
    unlisted = View(TCM, 0, (16,), DType.INT8, blocks=(16,), block_bytes=16)   # no table: its own blocks
    tcm.access(unlisted).write(np.ones(16, np.int8))
    assert tcm.data[16:32].tolist() == [1] * 16


def test_an_unwritten_pointer_table_is_an_access_error():
    tcm, var = Memory(TCM, 64), Memory(MemorySpace.VARIABLE_SRAM, 16)
    tcm.pointer_tables = PointerTables(var, {(0, 16): (0, 4)})
    view = View(TCM, 0, (32,), DType.INT8, blocks=(0, 16), block_bytes=16)
    with pytest.raises(MemoryAccessError, match="pointer table at var_sram\\[0:8\\) was never written"):
        tcm.access(view).write(np.arange(32, dtype=np.int8))



def test_a_pointer_table_naming_a_block_outside_the_memory_is_an_access_error():
    tcm, var = Memory(TCM, 64), Memory(MemorySpace.VARIABLE_SRAM, 16)
    tcm.pointer_tables = PointerTables(var, {(0, 16): (0, 1)})
    var.load(0, bytes([0, 60]))   # the second block would run past the TCM's 64 bytes
    view = View(TCM, 0, (32,), DType.INT8, blocks=(0, 16), block_bytes=16)
    with pytest.raises(MemoryAccessError, match="names a block outside tcm of 64 bytes"):
        tcm.access(view).write(np.arange(32, dtype=np.int8))
    short = View(TCM, 0, (20,), DType.INT8, blocks=(0, 16), block_bytes=16)   # 4 bytes at 60: inside
    tcm.access(short).write(np.arange(20, dtype=np.int8))
    assert tcm.data[60:64].tolist() == [16, 17, 18, 19]
