"""Fixed placements: homes of inputs, outputs, constants and variables; the constant pool and its chunks."""

from __future__ import annotations

import numpy as np

from npu_sim.program import MemorySpace
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute
from scheduler.ir.npu_ops import LoweredBlock, LoweredGraph, NpuOp, OpKind, Step, Value, ValueKind
from scheduler.memory.fixed_placements import fixed_placements
from tests.hw.hw_programs import make_hw

DDR, TCM, VAR = MemorySpace.DDR, MemorySpace.TCM, MemorySpace.VARIABLE_SRAM


def _value(key: str, kind: ValueKind, count: int, dtype: DType = DType.INT8, data: bool = False) -> Value:
    t = TensorType((count,), dtype)
    array = np.arange(count, dtype=dtype.numpy_dtype) if data else None
    return Value(key, t, kind, array, key)


def _add(name: str, a: str, b: str, out: str, values: dict[str, Value]) -> NpuOp:
    types = (values[a].type, values[b].type)
    step = Step(Op.ADD, make_attribute(Op.ADD), (a, b), types, (values[out].type,), name)
    return NpuOp(name, OpKind.COMPUTE, unit="vector", steps=(step,), outputs=(out,))


def _graph(swap: bool = False) -> LoweredGraph:
    """x + a -> t; b + c -> t; t + d -> y (``swap``: d read by the second operation, b by the third)."""
    values = {v.key: v for v in (
        _value("x", ValueKind.INPUT, 64), _value("y", ValueKind.OUTPUT, 64),
        _value("a", ValueKind.CONSTANT, 100, data=True),                 # pooled: 100 -> 104 bytes
        _value("b", ValueKind.CONSTANT, 50, DType.INT32, data=True),    # pooled: 200 bytes
        _value("c", ValueKind.CONSTANT, 3000, data=True),                # too big for the pool
        _value("d", ValueKind.CONSTANT, 300, data=True),                 # pooled: 300 -> 304 bytes
        _value("v", ValueKind.VARIABLE, 16, data=True),
        _value("t", ValueKind.INTERMEDIATE, 64))}
    second, third = ("d", "b") if swap else ("b", "d")
    ops = [_add("op0", "x", "a", "t", values), _add("op1", second, "c", "t", values),
           _add("op2", "t", third, "y", values)]
    return LoweredGraph(LoweredBlock("main", ops, ["x"], ["y"]), values)


def test_homes_and_the_pool_in_order_of_first_use():
    lowered = _graph()
    fixed = fixed_placements(lowered, make_hw(), tcm_alignment=16)
    assert [(b.name, b.memory, b.kind, b.size_bytes) for b in fixed.buffers] == [
        ("x", DDR, "input", 64), ("y", DDR, "output", 64), ("c", DDR, "constant", 3000),
        ("v", VAR, "variable", 16), ("constant_pool", DDR, "constant", 608), ("constant_pool", TCM, "constant", 608)]
    assert [(k, fixed.placements[k].offset_bytes) for k in ("a", "b", "d")] == [("a", 0), ("b", 104), ("d", 304)]
    assert all(fixed.placements[k].buffer is fixed.pool_tcm and fixed.const_ddr[k].buffer is fixed.pool_ddr
               for k in ("a", "b", "d"))
    assert fixed.const_ddr["c"].buffer.memory is DDR and "t" not in fixed.placements
    image = fixed.pool_ddr.initial_data
    assert image[104:304] == np.arange(50, dtype=np.int32).tobytes() and image[100:104] == bytes(4)
    assert fixed.buffers[3].initial_data == np.arange(16, dtype=np.int8).tobytes()


def test_small_chunks_merge_into_the_next_but_the_first():
    # entries: a 104 bytes (op0), b 200 (op1), d 304 (op2); a chunk below max(256 B, the bytes
    # the DDR moves during a DMA setup: 10 cycles x 16 B) waits for the next operation's
    assert fixed_placements(_graph(), make_hw(), 16).pool_chunks == {0: (0, 104), 1: (104, 504)}
    # d (304 bytes) first: a chunk of its own; b (200) is the last: its own too
    assert fixed_placements(_graph(swap=True), make_hw(), 16).pool_chunks == {0: (0, 104), 1: (104, 304),
                                                                             2: (408, 200)}
    # a slow setup (40 cycles: 640 bytes) merges all but the first
    slow = make_hw(dma={"setup_cycles": 40})
    assert fixed_placements(_graph(swap=True), slow, 16).pool_chunks == {0: (0, 104), 1: (104, 504)}


def test_no_pool_without_small_constants():
    lowered = _graph()
    for key in ("a", "b", "d"):
        lowered.values[key] = _value(key, ValueKind.CONSTANT, 4096, data=True)
    fixed = fixed_placements(lowered, make_hw(), tcm_alignment=16)
    assert (fixed.pool_ddr, fixed.pool_tcm, fixed.pool_chunks) == (None, None, {})
    assert [b.name for b in fixed.buffers] == ["x", "y", "a", "b", "c", "d", "v"]


def test_streamed_pool_chunks_live_only_around_their_readers():
    # tcm.constant_stream_slack_fraction set: no resident pool; a (op0, 104 B) is below the
    # 256-byte minimum chunk and loads with b (op1, 200 B) in one buffer of 304 bytes before
    # op0; d (op2, 304 B) in a buffer of its own before op2
    hw = make_hw(tcm={"constant_stream_slack_fraction": 0.02}, dma={"prefetch_operations": 0})
    fixed = fixed_placements(_graph(), hw, tcm_alignment=16)
    assert fixed.pool_tcm is None and fixed.pool_chunks == {}
    loads = {i: [(start, size, b.name, b.size_bytes, b.whole_program) for start, size, b in chunk]
             for i, chunk in fixed.segment_loads.items()}
    assert loads == {0: [(0, 304, "constant_pool[0:304)", 304, False)],
                     2: [(304, 304, "constant_pool[304:608)", 304, False)]}
    assert [(k, fixed.placements[k].buffer.name, fixed.placements[k].offset_bytes) for k in ("a", "b", "d")] == [
        ("a", "constant_pool[0:304)", 0), ("b", "constant_pool[0:304)", 104), ("d", "constant_pool[304:608)", 0)]
    assert [(k, fixed.const_ddr[k].offset_bytes) for k in ("a", "b", "d")] == [("a", 0), ("b", 104), ("d", 304)]
    # the first buffer dies after op1, before the second loads: 304 bytes at most
    assert fixed.segment_peak_bytes == 304
    # prefetched one operation ahead, d's buffer loads during op1: both live then
    ahead = make_hw(tcm={"constant_stream_slack_fraction": 0.02}, dma={"prefetch_operations": 1})
    assert fixed_placements(_graph(), ahead, tcm_alignment=16).segment_peak_bytes == 608


def test_several_invocations_keep_the_resident_pool_when_constants_stream():
    hw = make_hw(tcm={"constant_stream_slack_fraction": 0.02})
    fixed = fixed_placements(_graph(), hw, tcm_alignment=16, resident_constants=True)
    # the resident pool as without streaming: a, c (3,000 B, any size fits a resident pool), b, d
    assert fixed.segment_loads == {} and fixed.pool_tcm is not None and fixed.pool_tcm.size_bytes == 3616
    assert fixed.pool_chunks == {0: (0, 104), 1: (104, 3200), 2: (3304, 304)}


def test_a_small_chunk_does_not_keep_a_vector_alive_for_a_scalar_read_much_later():
    """A 104-byte constant read by op0 and a 1-byte one read by op0 and op5: both runs are below the
    256-byte minimum chunk, but joined, the 104 bytes would live to op5 for one scalar's DMA; they
    load apart (a stateful LSTM's 256-byte bias had stayed to the end with a 1-byte shift read at
    every step). A 1-byte run read up to op1 still joins it (one operation longer)."""
    hw = make_hw(tcm={"constant_stream_slack_fraction": 0.02}, dma={"prefetch_operations": 0})

    def chunks(last_read: int) -> list[tuple[int, int]]:
        values = {v.key: v for v in (
            _value("x", ValueKind.INPUT, 64), _value("y", ValueKind.OUTPUT, 64),
            _value("a", ValueKind.CONSTANT, 100, data=True), _value("s", ValueKind.CONSTANT, 1, data=True),
            _value("t", ValueKind.INTERMEDIATE, 64))}
        ops = [_add("op0", "x", "a", "t", values)]
        ops[0].steps = (*ops[0].steps, _add("op0s", "t", "s", "t", values).steps[0])
        for i in range(1, 6):
            ops.append(_add(f"op{i}", "t", "s" if i == last_read else "t", "t" if i < 5 else "y", values))
        fixed = fixed_placements(LoweredGraph(LoweredBlock("main", ops, ["x"], ["y"]), values), hw, tcm_alignment=16)
        return [(start, size) for loads in fixed.segment_loads.values() for start, size, _ in loads]

    assert chunks(5) == [(0, 104), (104, 8)]
    assert chunks(1) == [(0, 112)]
