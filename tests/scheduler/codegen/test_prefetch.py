"""``dma.prefetch_operations``: how many operations back an operation's weight loads may be issued.

Vela stages an operation's weights under the previous operation only (regor
network_performance.cpp, EstimateFullOpPerformance: the transfer less the previous operation's
cycles), so a small FULLY_CONNECTED behind a short elementwise operation waits for its weights; the
Ethos-U65/U85 presets say 1, the generic ones keep 8.
"""

import numpy as np
import pytest

import npu_sim
from npu_sim.program import ComputeCommand, DmaCommand
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from tests.scheduler.graphs import check_end_to_end, conv_block, machine, random_inputs


def gate_chain(count: int = 4, width: int = 32):
    """``count`` times a 1x1 convolution (an LSTM gate's FULLY_CONNECTED, its weights streamed
    from the DRAM) and a CLAMP of its own (16 cycles)."""
    b = GraphBuilder()
    x = b.input("x", (1, 1, 1, width), DType.INT8)
    for i in range(count):
        x = conv_block(b, x, width, kernel=1, pad=0, seed=i + 1)
        x = b.op(Op.CLAMP, [x], min_val=np.int8(-100).tobytes(), max_val=np.int8(100).tobytes(),
                 nan_mode="PROPAGATE")
    b.output(x)
    return b.build()


def run(prefetch: int):
    hw = machine("ethos-u85-256")
    # (without the TCM's and DDR's block latencies, which every convolution pays alike; with the
    # weights loaded, not read in place: tcm.matrix_vector_weights_in_place)
    hw = hw.model_copy(update={"dma": hw.dma.model_copy(update={"prefetch_operations": prefetch}),
                               "tcm": hw.tcm.model_copy(update={"read_latency_cycles": 0, "write_latency_cycles": 0,
                                                                "matrix_vector_weights_in_place": False})})
    graph = gate_chain()
    return npu_sim.simulate(graph, hw, random_inputs(graph)).summary


def test_presets():
    assert machine("edge").dma.prefetch_operations == 8
    assert machine("tiny").dma.prefetch_operations == 8
    for preset in ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256", "ethos-u65-512", "ethos-u85-256"):
        assert machine(preset).dma.prefetch_operations == 1


# 8 and 64 reach back over the whole chain alike (a reach longer than the operations before
# one takes them all, not the last few). (The constants load on one engine, the U85's weight
# channel. No copy stages the input, tcm.graph_inputs_in_place: the first convolution loads its 32
# bytes itself and the pool's first chunk starts at cycle 0, not behind the staging DMA at 72, so
# every figure is 72 cycles below the staged input's.)
@pytest.mark.parametrize(("prefetch", "cycles"), [(64, 4606), (8, 4606), (1, 7272), (0, 7272)])
def test_weight_loads_wait_for_the_operation_before(prefetch, cycles):
    summary = run(prefetch)
    assert summary["total_cycles"] == cycles
    convs = [o for o in summary["ops"] if o["op"].startswith("CONV2D")]
    later_start_before_earlier_end = any(b["start_cycle"] < a["end_cycle"] for a, b in zip(convs, convs[1:]))
    # hoisted over several operations, a convolution's weights arrive while the one before
    # still runs; behind one CLAMP (16 cycles) they come after it: 1,645 cycles a convolution
    assert later_start_before_earlier_end is (prefetch >= 8)
    if prefetch <= 1:
        # (the second's per-channel parameters load in a pool chunk of their own, not kept from the
        # first operation on: 190 cycles more before it; the first starts at cycle 0 and loads its
        # input itself, 183 cycles more of its span than behind the staging copy, which it waited for)
        assert [b["start_cycle"] - a["start_cycle"] for a, b in zip(convs, convs[1:])] == [2018, 1645, 1645]


def bottleneck():
    """A DenseNet bottleneck's pair on the U55: a 1x1 convolution of 16x16x224 to 128 channels, then
    a 3x3 one to 32 (their weights streamed from the flash in rotating stripes)."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 16, 224), DType.INT8)
    b.output(conv_block(b, conv_block(b, x, 128, kernel=1, pad=0, seed=1), 32, kernel=3, pad=1, seed=2))
    return b.build()


def test_a_prefetched_weight_stripe_takes_the_place_of_a_finished_one_under_the_last_tile():
    """``dma.prefetch_under_last_tile`` (the U55; Vela hides the next operation's first weight slice
    under the previous one's last slice, and counts it from there): the 3x3 convolution's first
    stripe loads before the 1x1 one's last tile, into the stripe buffer that only its earlier tiles
    read: 14,336 bytes less at the peak than holding both of its stripes beside it. Same bits."""
    u55 = machine("ethos-u55-256")
    off = u55.model_copy(update={"dma": u55.dma.model_copy(update={"prefetch_under_last_tile": False})})
    peaks = {}
    for name, hw in (("last tile", u55), ("after loads", off)):
        program, _ = check_end_to_end(bottleneck(), hw)
        peaks[name] = program.stats.peak_tcm_bytes
        commands = list(program.walk())
        computes = [c.name for c in commands if isinstance(c, ComputeCommand)]
        first_op, second_op = computes[0], computes[-1]   # the 1x1 convolution's, the 3x3 one's
        first_load = next(k for k, c in enumerate(commands) if isinstance(c, DmaCommand)
                          and c.name.startswith(second_op + ": load"))
        first_products = [k for k, c in enumerate(commands) if isinstance(c, ComputeCommand) and c.name == first_op]
        # the hoisted load comes before the first convolution's last tile only, or before all but none
        assert (first_load > first_products[-2]) is (name == "last tile")
    assert peaks == {"last tile": 124320, "after loads": 138656}
