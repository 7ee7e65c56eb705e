"""``dma.prefetch_operations``: how many operations back an operation's weight loads may be issued.

Vela stages an operation's weights under the previous operation only (regor
network_performance.cpp, EstimateFullOpPerformance: the transfer less the previous operation's
cycles), so a small FULLY_CONNECTED behind a short elementwise operation waits for its weights; the
Ethos-U65/U85 presets say 1, the generic ones keep 8.
"""

import numpy as np
import pytest

import npu_sim
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from tests.scheduler.graphs import conv_block, machine, random_inputs


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
# channel: the constant pool's first chunk queues behind the input's staging, 183 cycles later.)
@pytest.mark.parametrize(("prefetch", "cycles"), [(64, 4678), (8, 4678), (1, 7344), (0, 7344)])
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
        # first operation on: 190 cycles more before it)
        assert [b["start_cycle"] - a["start_cycle"] for a, b in zip(convs, convs[1:])] == [1835, 1645, 1645]
