"""Weights in place: a matrix-vector product on the U55 reads its weights from the flash where
they live, while it computes (``tcm.matrix_vector_weights_in_place``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

import npu_sim
from npu_sim.api import load_graph
from npu_sim.hw.config import load_hw_config
from npu_sim.program import ComputeCommand, DmaCommand, MemorySpace
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.ir.npu_ops import copy_producers
from scheduler.passes.weights_in_place import _op_cycles, _stream_bytes, _weight_transfer_cycles
from scheduler.schedule import lower_graph
from tests.scheduler.graphs import check_end_to_end, conv_block


def _dense(rows: int = 1):
    """Two 1x1 convolutions of 256 channels on ``rows`` x 1 positions (a dense layer's pair)."""
    b = GraphBuilder()
    x = b.input("x", (1, rows, 1, 64), DType.INT8)
    y = conv_block(b, x, 256, kernel=1, pad=0, seed=1)
    b.output(conv_block(b, y, 64, kernel=1, pad=0, seed=2))
    return b.build()


def _products(lowered):
    return [op for op in lowered.main.ops if op.unit == "mac_array"]


def test_only_matrix_vector_products_on_the_u55_read_their_weights_in_place():
    assert [op.weights_in_place for op in _products(lower_graph(_dense(), load_hw_config("ethos-u55-256")))] == \
        [True, True]
    # four positions: both read their weights once (one OFM block), the 256-channel product's in
    # 8 depth slices, the 64-channel one's in 2: in place (tcm.read_once_weights_in_place)
    assert [op.weights_in_place for op in _products(lower_graph(_dense(4), load_hw_config("ethos-u55-256")))] == \
        [True, True]
    # 128 positions: more than one block (2,048 results of 32 channels) holds, each block reading
    # the weights again: both buffered
    assert [op.weights_in_place for op in _products(lower_graph(_dense(128), load_hw_config("ethos-u55-256")))] == \
        [False, False]
    # the U85 reads them in place too where a buffer would not pay (16 KiB for a few thousand cycles)
    assert [op.weights_in_place for op in _products(lower_graph(_dense(), load_hw_config("ethos-u85-256")))] == \
        [True, True]
    # ... and so for four positions, whose weights are read once too (tcm.read_once_weights_in_place);
    # 128 positions read them per block: buffered
    assert [op.weights_in_place for op in _products(lower_graph(_dense(4), load_hw_config("ethos-u85-256")))] == \
        [True, True]
    assert not any(op.weights_in_place for op in _products(lower_graph(_dense(128), load_hw_config("ethos-u85-256"))))
    several = lower_graph(_dense(), load_hw_config("ethos-u55-256"), resident_constants=True)   # (-n N: the pool)
    assert not any(op.weights_in_place for op in _products(several))


def test_the_weight_stream_crosses_the_ddr_channel_while_the_product_computes():
    """No DMA moves the weights (16 KiB each) or the per-channel bias, multipliers and shifts
    (9 bytes a channel: 256, then 64 channels); each product reads them from the flash as one
    stream (1 byte a cycle, 128-byte bursts, 64 cycles of latency): its command lasts at least
    that long, the outputs are the reference's bit for bit, and the DDR reads count them."""
    hw = load_hw_config("ethos-u55-256")
    program, result = check_end_to_end(_dense(), hw)
    products = [c for c in program.walk() if isinstance(c, ComputeCommand) and c.unit == "mac_array"]
    assert [c.weights_in_place for c in products] == [True, True]
    weights = [c.in_place_weights() for c in products]
    assert [[(v.memory, v.size_bytes) for v in views] for views in weights] == [
        [(MemorySpace.DDR, 16384), (MemorySpace.DDR, 1024), (MemorySpace.DDR, 1024), (MemorySpace.DDR, 256)],
        [(MemorySpace.DDR, 16384), (MemorySpace.DDR, 256), (MemorySpace.DDR, 256), (MemorySpace.DDR, 64)]]
    streams = [18688, 16960]
    homes = {(v.offset_bytes, v.size_bytes) for views in weights for v in views}
    for dma in (c for c in program.walk() if isinstance(c, DmaCommand)):
        assert (dma.src.offset_bytes, dma.src.size_bytes) not in homes
    records = [r for r in result.trace.commands if r.id in {c.id for c in products}]
    floors = [math.ceil(size / 128) * 128 // hw.ddr.bandwidth_bytes_per_cycle + hw.ddr.read_latency_cycles
              for size in streams]
    assert [r.ddr_read_bytes for r in records] == streams
    assert all(r.end_cycle - r.start_cycle >= floor for r, floor in zip(records, floors))
    dma_reads = sum(r.ddr_read_bytes for r in result.trace.commands if r.kind == "dma")
    assert result.trace.counters.ddr_read_bytes == dma_reads + sum(streams)
    assert max(a.offset_bytes + a.size_bytes for a in program.allocations if a.memory is MemorySpace.TCM) < 16384


def test_a_keras_lstm_reads_its_gate_weights_from_the_flash_as_vela_times_it():
    """LSTM(16) over 8 steps and a Dense layer (TFLite, unrolled): every gate product is a
    matrix-vector product. Vela 5.2 estimates 36,470 cycles on this configuration; reading their
    weight streams in place it takes 36,284 here, in 320 bytes of TCM, its result computed into the
    graph output, its zero points and shifts command parameters (35,394 cycles and 960 bytes with
    each gate's stream loaded into the TCM before it)."""
    graph = load_graph(Path(__file__).resolve().parents[2] / "data" / "tflite" / "lstm_int8.tflite")
    inputs = {name: np.zeros(t.shape, np.int8) for name, t in graph.input_types.items()}
    summary = npu_sim.simulate(graph, "ethos-u55-256", inputs).summary
    assert (summary["total_cycles"], summary["peak_tcm_bytes"]) == (36284, 320)


def test_a_long_stream_of_a_program_reading_weights_in_place_runs_every_invocation():
    """Invocation replay checks the DMAs' transfers only: a program whose products read their
    weights in place runs each invocation event by event, the same cycles each time."""
    from npu_sim.simulator import FOLD_MIN_INVOCATIONS, simulate_program
    from scheduler.schedule import schedule

    hw = load_hw_config("ethos-u55-256")
    graph = _dense()
    program = schedule(graph, hw)
    x = {"x": np.arange(64, dtype=np.int8).reshape(1, 1, 1, 64)}
    result = simulate_program(program, hw, [x] * FOLD_MIN_INVOCATIONS)
    spans = {r.end_cycle - r.start_cycle for r in result.trace.invocations}
    assert len(spans) == 1 and not result.trace.repeats


def test_on_the_u85_a_product_keeps_its_weight_buffer_where_the_buffer_pays():
    """ethos-u85-256 (tcm.matrix_vector_weights_buffered_when_hidden): a stream arrives at one read
    stream's rate (13 bursts over the DRAM's 500 cycles: 3.26 B a cycle) after that latency, and is
    read from the TCM at 32 B a cycle. A 16-channel dense pair's 400-byte streams take 667 cycles so:
    the first product reads the graph input, whose DRAM latency its 923 cycles include (as Vela's
    operation cycles do): buffered; the second, on a TCM intermediate, takes 455: in place. The 16 KiB
    streams of the 256-channel pair need 5,500 cycles against 2,100-6,300: read in place, as Vela reads
    an autoencoder's dense layers."""
    b = GraphBuilder()
    x = b.input("x", (1, 1, 1, 16), DType.INT8)
    b.output(conv_block(b, conv_block(b, x, 16, kernel=1, pad=0, seed=1), 16, kernel=1, pad=0, seed=2))
    small = b.build()
    hw = load_hw_config("ethos-u85-256")
    assert [op.weights_in_place for op in _products(lower_graph(small, hw))] == [False, True]
    assert [op.weights_in_place for op in _products(lower_graph(_dense(), hw))] == [True, True]
    check_end_to_end(small, hw)
    check_end_to_end(_dense(), hw)


def test_parameters_are_command_stream_registers_on_the_ethos_u_presets() -> None:
    """Zero points and scalar shifts stay where they live (no TCM copy) on the Ethos-U presets
    (``tcm.parameters_in_command_stream``), the outputs bit for bit; a generic preset loads them."""
    from npu_sim.program import is_command_parameter
    from npu_sim.tosa.ir import TensorType
    from npu_sim.tosa.ops import Op

    assert is_command_parameter(Op.RESCALE, 3, TensorType((1,), DType.INT8))
    assert is_command_parameter(Op.RESHAPE, 1, TensorType((4,), DType.SHAPE))
    assert not is_command_parameter(Op.CONV2D, 1, TensorType((1, 1, 1, 1), DType.INT8))   # a weight
    assert not is_command_parameter(Op.ADD, 1, TensorType((1, 1, 1, 8), DType.INT32))
    # a scalar data operand: the 16-bit IFM2 scalar register holds an int8 one, not an int32 one
    assert is_command_parameter(Op.ADD, 1, TensorType((1, 1, 1, 1), DType.INT8))
    assert not is_command_parameter(Op.MUL, 1, TensorType((1, 1, 1, 1), DType.INT32))
    assert is_command_parameter(Op.RESCALE, 1, TensorType((1,), DType.INT32))   # (a scale register)
    graph = _dense(4)
    for preset, in_place in (("ethos-u55-256", True), ("ethos-u85-256", True), ("edge", False)):
        program, _ = check_end_to_end(graph, load_hw_config(preset))
        products = [c for c in program.walk() if isinstance(c, ComputeCommand) and c.unit == "mac_array"]
        zero_points = [c.steps[0].operands[3] for c in products]   # the CONV2D's input zero point
        assert {v.memory for v in zero_points} == {MemorySpace.DDR if in_place else MemorySpace.TCM}, preset
        assert all(c.parameters_in_place is in_place for c in products), preset


def _conv1d_pair(positions: int, channels: int):
    """Two pointwise convolutions over ``positions`` x 1 (a Conv1D net's): 32 -> 32 -> ``channels``."""
    b = GraphBuilder()
    x = b.input("x", (1, positions, 1, 32), DType.INT8)
    y = conv_block(b, x, 32, kernel=1, pad=0, seed=1)
    b.output(conv_block(b, y, channels, kernel=1, pad=0, seed=2))
    return b.build()


def test_on_the_u55_weights_read_once_stay_in_the_flash_however_deep():
    """Vela 5.2 leaves a Keras Conv1D net's second convolution unbuffered, reading its weights from
    the flash as it computes, whether its [64, C] output takes two 32-deep slices (C = 64: 10 KB of
    weights), four (128) or sixteen (512; 5 KB and 21 KB in its schedule, "Weight buffer = 0 bytes"):
    one OFM block reads each weight once. An output of more positions than a block holds (the
    weights read again per block) keeps its buffer. Bits stay the reference's."""
    u55 = load_hw_config("ethos-u55-256")
    for channels in (64, 128, 512):
        assert [op.weights_in_place for op in _products(lower_graph(_conv1d_pair(64, channels), u55))] == \
            [True, True], channels
    assert [op.weights_in_place for op in _products(lower_graph(_conv1d_pair(128, 64), u55))] == [False, False]
    edge = load_hw_config("edge")   # (edge does not set tcm.read_once_weights_in_place)
    assert not any(op.weights_in_place for op in _products(lower_graph(_conv1d_pair(64, 64), edge)))
    check_end_to_end(_conv1d_pair(64, 64), u55)


def _dense_loop(steps: int = 3):
    """h = dense(h) (a 1x1 convolution of 64 channels, its bias and rescale) ``steps`` times in a
    WHILE_LOOP: a recurrent cell's product in a loop body, as TFLite exports a Keras GRU."""
    b = GraphBuilder()
    h0 = b.input("h", (1, 1, 1, 64), DType.INT8)

    def cond_fn(bb, i, h):
        return bb.op(Op.GREATER, [bb.const(None, np.array([[steps]], np.int32)), i])

    def body_fn(bb, i, h):
        table = bb.const(None, np.arange(-128, 128, dtype=np.int8)[::-1].copy())   # a lookup: 256 B
        return [bb.op(Op.ADD, [i, bb.const(None, np.array([[1]], np.int32))]),
                bb.op(Op.TABLE, [conv_block(bb, h, 64, kernel=1, pad=0, seed=3), table])]
    _, h = b.while_loop([b.const(None, np.array([[0]], np.int32)), h0], cond_fn, body_fn)
    b.output(h)
    return b.build()


def test_a_loop_body_streams_its_constants_at_every_iteration_where_the_preset_streams_them():
    """On the U55 a loop body's product reads its weights from the flash at every iteration and
    its bias and scales stream with it (Vela's WHILE body of a Keras GRU: no SRAM copy): nothing
    of them stays in the TCM across the loop. The edge preset keeps reused constants: loaded once,
    before the loop, they stay. (The lookup's table is no weight: it streams as a loop body's constant.)"""
    graph = _dense_loop()
    lowered = lower_graph(graph, load_hw_config("ethos-u55-256"))
    body_ops = [op for block in lowered.main.walk_blocks() for op in block.ops if op.unit == "mac_array"]
    assert [op.weights_in_place for op in body_ops] == [True]
    for preset, pooled_bytes in (("ethos-u55-256", 0), ("edge", 4096 + 256)):
        program, _ = check_end_to_end(graph, load_hw_config(preset))
        # (scalars, the counter's step and bound, may stay: 16 B across the loop)
        pool = sum(a.size_bytes for a in program.allocations
                   if a.memory is MemorySpace.TCM and a.kind == "constant" and a.size_bytes > 64)
        assert pool >= pooled_bytes if pooled_bytes else pool == 0, (preset, pool)


def test_on_the_u85_a_weight_buffer_needs_the_operation_before_to_hide_its_transfer():
    """An unrolled LSTM on the U85 (tcm.weight_buffer_visible_cycles: 1000): each step's input
    product (4,740 B of weights and parameters) follows a lookup on the LUT, a few dozen cycles,
    and reads its weights in place; each recurrent product (1,668 B) follows a vector rescale, and
    its transfer (1,012 cycles) is short enough to buffer: as Vela's debug database has them
    (6,112 B unbuffered, 1,696 B double-buffered). Without the rule every product but the last
    kept its buffer."""
    graph = load_graph(Path(__file__).parents[3] / "examples" / "lstm_unrolled8_int8.tosa")
    hw = load_hw_config("ethos-u85-256")
    assert hw.tcm.weight_buffer_visible_cycles == 1000
    lowered = lower_graph(graph, hw)
    assert [(_stream_bytes(op, lowered), op.weights_in_place) for op in _products(lowered)] == \
        [(4740, True), (1668, False), (1668, False), (4740, True)] + [(1668, False), (4740, True)] * 6 + [(152, True)]
    off = hw.model_copy(update={"tcm": hw.tcm.model_copy(update={"weight_buffer_visible_cycles": 0})})
    assert [op.weights_in_place for op in _products(lower_graph(graph, off))] == [False] * 16 + [True]


def _two_input_products():
    """Two dense layers of 288 channels on one 60-element vector, one after the other (an unrolled
    Keras GRU(96)'s input product at two steps: 17,280 B of weights, 19,872 B with the parameters)."""
    b = GraphBuilder()
    x = b.input("x", (1, 1, 1, 60), DType.INT8)
    b.output(conv_block(b, x, 288, kernel=1, pad=0, seed=1))
    b.output(conv_block(b, x, 288, kernel=1, pad=0, seed=2))
    return b.build()


def test_on_the_u85_a_buffer_transfer_is_weighed_at_the_mem2mem_channel_rate():
    """The second product follows the first (7,564 estimated cycles, bound by its 288 channels'
    parameter reads), which hides its transfer; its buffer would pay at one read stream's rate
    (19,872 B / 3.26 + 500 = 6,599 cycles, + 653 from the TCM <= 7,564) but not at Vela's Mem2Mem
    channel rate (tcm.weight_buffer_transfer_bytes_per_cycle: 2.6624 B/cycle, 7,964 + 653 > 7,564):
    it reads its weights in place, as Vela reads every step's input product of an unrolled GRU(96)
    (288 B of staging, its output alone)."""
    hw = load_hw_config("ethos-u85-256")
    assert hw.tcm.weight_buffer_transfer_bytes_per_cycle == 2.6624
    lowered = lower_graph(_two_input_products(), hw)
    producers = copy_producers(lowered.main)
    first, second = _products(lowered)
    assert (_stream_bytes(second, lowered), _op_cycles(hw, second, lowered, producers)) == (19872, 7564)
    assert round(_weight_transfer_cycles(hw, 19872)) == 7964
    assert (first.weights_in_place, second.weights_in_place) == (True, True)
    stream = hw.model_copy(update={"tcm": hw.tcm.model_copy(update={"weight_buffer_transfer_bytes_per_cycle": 0.0})})
    assert round(_weight_transfer_cycles(stream, 19872)) == 6599
    assert [op.weights_in_place for op in _products(lower_graph(_two_input_products(), stream))] == [True, False]


def _lookup():
    """A TABLE of a [1, 8, 8, 16] int8 map through a 256-entry int8 table (a sigmoid's LUT)."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 16), DType.INT8)
    b.output(b.op(Op.TABLE, [x, b.const(None, np.arange(-128, 128, dtype=np.int8)[::-1].copy())]))
    return b.build()


def test_a_lookup_table_goes_from_the_flash_into_the_lut_with_no_tcm_copy():
    """Where the LUT loads its table from the constants' memory (``lut.table_source_latency_cycles``,
    timed in the lookup), a TABLE reads its table where it lives: no DMA brings its 256 bytes into the
    TCM (Vela 5.2 copies the table from the flash into the LUT memory; an unrolled Keras GRU's
    sigmoid and tanh tables take none of its SRAM). Edge, without that latency, copies it into the
    TCM first. Bits stay the reference's."""
    for preset, memory, loads in (("ethos-u55-256", MemorySpace.DDR, 0), ("edge", MemorySpace.TCM, 1)):
        program, _ = check_end_to_end(_lookup(), load_hw_config(preset))
        (table,) = [c for c in program.walk() if isinstance(c, ComputeCommand) and c.unit == "lut"]
        assert (table.table_in_place, table.steps[0].operands[1].memory) == (memory is MemorySpace.DDR, memory), preset
        table_loads = [c for c in program.walk() if isinstance(c, DmaCommand) and c.dst.memory is MemorySpace.TCM
                       and c.dst.size_bytes == 256]
        assert len(table_loads) == loads, preset


def _bias_add():
    """An unrolled LSTM's gate bias: an int32 [1, 256] ADD of a constant to a [1, 256] input."""
    b = GraphBuilder()
    x = b.input("x", (1, 256), DType.INT32)
    bias = b.const(None, (np.arange(-128, 128, dtype=np.int32) * 1000).reshape(1, 256))
    b.output(b.op(Op.ADD, [x, bias]))
    return b.build()


def test_on_the_u55_an_elementwise_constant_is_read_from_the_flash_with_no_tcm_copy():
    """``tcm.elementwise_constants_in_place``: the ADD reads its 1 KiB constant where it lives (Vela
    5.2's BiasAdd of a Keras LSTM(64, unroll=True) on the U55: flash access cycles, no SRAM
    staging): no DMA brings it into the TCM, the command's DDR reads count its bytes, it lasts at
    least their transfer (1 byte a cycle from the flash, after 64 cycles of latency) and the peak
    TCM holds only the input and the result. Edge copies it into the TCM. Bits stay the reference's."""
    program, result = check_end_to_end(_bias_add(), load_hw_config("ethos-u55-256"))
    (add,) = [c for c in program.walk() if isinstance(c, ComputeCommand)]
    assert add.constant_operands_in_place == ((0, 1),)
    assert [(v.memory, v.size_bytes) for v in add.in_place_constants()] == [(MemorySpace.DDR, 1024)]
    assert not [c for c in program.walk() if isinstance(c, DmaCommand) and c.dst.memory is MemorySpace.TCM
                and c.dst.size_bytes == 1024 and c.src.memory is MemorySpace.DDR and c.name.startswith("load constant")]
    (record,) = [r for r in result.trace.commands if r.id == add.id]
    assert record.ddr_read_bytes == 1024 and record.end_cycle - record.start_cycle >= 64 + 1024
    assert program.stats.peak_tcm_bytes == 2 * 1024
    edge, _ = check_end_to_end(_bias_add(), load_hw_config("edge"))
    (edge_add,) = [c for c in edge.walk() if isinstance(c, ComputeCommand)]
    assert edge_add.constant_operands_in_place == () and all(
        o.memory is MemorySpace.TCM for s in edge_add.steps for o in s.operands if hasattr(o, "memory"))


def test_a_16x8_bias_widened_by_a_cast_is_read_from_the_flash_too():
    """A 16x8 LSTM's int16 gate bias reaches its int32 ADD through a CAST: the CAST reads it where it
    lives (384 bytes from the flash), no TCM copy; bits stay the reference's."""
    b = GraphBuilder()
    x = b.input("x", (1, 192), DType.INT32)
    bias = b.op(Op.CAST, [b.const(None, np.arange(-96, 96, dtype=np.int16).reshape(1, 192) * 100)], dtype=DType.INT32)
    b.output(b.op(Op.ADD, [x, bias]))
    program, _ = check_end_to_end(b.build(), load_hw_config("ethos-u55-256"))
    (op,) = [c for c in program.walk() if isinstance(c, ComputeCommand)]
    assert [(v.memory, v.size_bytes) for v in op.in_place_constants()] == [(MemorySpace.DDR, 384)]
    assert program.stats.peak_tcm_bytes == 2 * 192 * 4
