"""IFM refetch (``tcm.ddr_ifm_refetch``): a convolution reading an input that lives in the DDR reads it
there once per OFM block, while it computes, beyond the copy its DMA brings into the TCM."""

from __future__ import annotations

from npu_sim.hw.config import load_hw_config
from npu_sim.hw.dma import DmaModel
from npu_sim.program import ComputeCommand
from npu_sim.simulator import command_ddr_read_bytes
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from tests.scheduler.graphs import _rescale, check_end_to_end, conv_block


def _conv_on_input():
    """A 3x3 convolution of a 16x16x8 graph input into 64 channels, then a 1x1 one on its result."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 16, 8), DType.INT8)
    y = conv_block(b, x, 64, kernel=3, pad=1, seed=1)
    b.output(conv_block(b, y, 16, kernel=1, pad=0, seed=2))
    return b.build()


def _products(program):
    return [c for c in program.walk() if isinstance(c, ComputeCommand) and c.unit == "mac_array"]


def test_a_convolution_reads_a_graph_input_in_the_dram_once_per_ofm_block():
    """ethos-u85-256: the first convolution fetches 18 blocks of an 8 x 9 x 8 window (10,368 B,
    tests/hw/test_ifm_fetch.py), 8,320 B beyond the input's 2,048. It runs in four tiles of 16
    output channels (its weights stream in stripes), a quarter of the fetches each (2,592 B), the
    first less the window its load brought; 8-byte pixels go in 16-byte accesses, each a 128-byte
    burst. The second convolution reads a TCM intermediate: no refetch. The DDR reads count them,
    each command lasts at least their transfer at one read stream's rate (13 bursts in flight over
    the DRAM's 500-cycle latency: 3.26 B a cycle), the bits are the reference's."""
    hw = load_hw_config("ethos-u85-256")
    program, result = check_end_to_end(_conv_on_input(), hw)
    products = _products(program)
    first = [c for c in products if c.name.startswith("CONV2D(conv2d_3)")]
    assert [(c.ifm_refetch_bytes, c.ifm_refetch_burst_bytes) for c in first] == \
        [(544, 4352)] + [(2592, 20736)] * 3
    assert all(c.ifm_refetch_bytes == 0 for c in products if c not in first)
    records = {r.id: r for r in result.trace.commands}
    latency = hw.ddr.read_latency_cycles
    read_cap = DmaModel(hw).read_cap(latency)
    assert round(read_cap, 3) == 3.258
    # (each tile also reads its 16 channels' scales and biases again: mac_array.channel_parameter_bytes)
    parameters = {c.id: command_ddr_read_bytes(hw, c)[0] - c.ifm_refetch_bytes for c in products}
    assert [parameters[c.id] for c in products] == [16 * 10] * 4 + [8 * 10] * 2   # (then 16 channels in 2 tiles)
    for c in first:
        record = records[c.id]
        assert record.ddr_read_bytes == c.ifm_refetch_bytes + parameters[c.id]
        assert record.end_cycle - record.start_cycle >= c.ifm_refetch_burst_bytes / read_cap + latency
    dma_reads = sum(r.ddr_read_bytes for r in result.trace.commands if r.kind == "dma")
    assert result.trace.counters.ddr_read_bytes == dma_reads + 8320 + sum(parameters.values())


def test_presets_whose_npu_stages_its_input_read_it_once():
    for preset in ("ethos-u55-256", "edge"):
        program, _ = check_end_to_end(_conv_on_input(), load_hw_config(preset))
        assert all(c.ifm_refetch_bytes == 0 for c in _products(program))


def _sum_over_h(dtype: DType):
    """A REDUCE_SUM over H of a 1x32x8x16 graph input (int8 widened first by a RESCALE, as a
    converted MEAN is), then a RESCALE back to int8."""
    b = GraphBuilder()
    x = b.input("x", (1, 32, 8, 16), dtype)
    wide = _rescale(b, x, out_dtype=DType.INT32, multiplier=1 << 30, shift=30) if dtype is DType.INT8 else x
    total = b.op(Op.REDUCE_SUM, [wide], axis=1)
    b.output(_rescale(b, total, out_dtype=DType.INT8, multiplier=1 << 30, shift=38))
    return b.build()


def test_a_transposed_sum_reads_a_graph_input_in_the_dram_once_per_transpose_block():
    """ethos-u85-256 lowers a sum over H as Vela's TOSA path does: a transpose whose 16-byte output
    blocks each fetch 16 rows of the whole [32, 128] input (vector.transpose_fetched_elements):
    8 x 16 x 128 int8 values (the widening RESCALE folds into the sum, the transpose reads the
    narrow map) = 16,384 B, 12,288 beyond the input's 4,096; an int32 input, 4-value blocks:
    32 x 4 x 128 x 4 B = 65,536, 49,152 beyond. In the DRAM those fetches cross the bus (Vela:
    25.7 MB of DRAM reads for EfficientNet-B0's first 401 KB squeeze-and-excite mean); the edge
    preset stages its input and has no such transpose."""
    hw = load_hw_config("ethos-u85-256")
    for dtype, beyond in ((DType.INT8, 12_288), (DType.INT32, 49_152)):
        program, result = check_end_to_end(_sum_over_h(dtype), hw)
        sums = [c for c in program.walk() if isinstance(c, ComputeCommand) and "REDUCE_SUM" in c.name]
        assert sum(c.ifm_refetch_bytes for c in sums) == beyond
        assert all(c.ifm_refetch_bytes == 0 for c in program.walk()
                   if isinstance(c, ComputeCommand) and c not in sums)
        records = {r.id: r for r in result.trace.commands}
        assert sum(records[c.id].ddr_read_bytes for c in sums) >= beyond
    program, _ = check_end_to_end(_sum_over_h(DType.INT8), load_hw_config("edge"))
    assert all(c.ifm_refetch_bytes == 0 for c in program.walk() if isinstance(c, ComputeCommand))
