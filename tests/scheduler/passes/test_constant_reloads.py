"""Constant reloads: a small constant read by distant operations is loaded again for each run of
nearby readers (``tcm.keep_reused_constants`` false, constants streamed)."""

from __future__ import annotations

import numpy as np

import npu_sim
from npu_sim.hw.config import load_hw_config
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.passes.constant_reloads import reload_distant_constants
from scheduler.schedule import lower_graph
from tests.scheduler.graphs import check_end_to_end


def _chain(length: int):
    """``length`` ADDs in a chain, the first and the last adding the same 64-element bias; the
    others each add a constant of their own."""
    b = GraphBuilder()
    x = b.input("x", (1, 1, 1, 64), DType.INT32)
    bias = b.const("bias", np.arange(64, dtype=np.int32).reshape(1, 1, 1, 64))
    y = b.op(Op.ADD, [x, bias])
    for k in range(length - 2):
        y = b.op(Op.ADD, [y, b.const(None, np.full((1, 1, 1, 64), k + 1, dtype=np.int32))])
    b.output(b.op(Op.ADD, [y, bias]))
    return b.build()


def _readers(lowered, prefix: str):
    return [op.name for op in lowered.main.ops for key in op.inputs if key.startswith(prefix)]


def test_a_distant_reader_gets_a_copy_of_its_own():
    hw = load_hw_config("ethos-u85-256")
    graph = _chain(40)
    lowered = lower_graph(graph, hw)   # (the pass ran: 39 operations between the two readers)
    first, last = lowered.main.ops[0], lowered.main.ops[-1]
    assert first.inputs[1] == "bias" and last.inputs[1] == "bias@reload1"
    assert np.array_equal(lowered.values["bias@reload1"].data, lowered.values["bias"].data)
    check_end_to_end(graph, hw)


def test_near_readers_share_one_load():
    lowered = lower_graph(_chain(20), load_hw_config("ethos-u85-256"))
    assert lowered.main.ops[-1].inputs[1] == "bias"   # (19 operations apart: one chunk kept)
    assert reload_distant_constants(lowered, 2048, near_operations=5) == 1
    assert lowered.main.ops[-1].inputs[1] == "bias@reload1"


def test_the_reload_reads_the_bytes_again_and_frees_the_tcm_between():
    """Against keeping reused constants: the 256-byte bias crosses the DDR twice, and is not in
    the TCM while the 38 operations between its readers run."""
    hw = load_hw_config("ethos-u85-256")
    graph = _chain(40)
    x = {"x": np.arange(64, dtype=np.int32).reshape(1, 1, 1, 64)}
    reloaded = npu_sim.simulate(graph, hw, x).summary
    kept = npu_sim.simulate(graph, hw.model_copy(update={"tcm": hw.tcm.model_copy(
        update={"keep_reused_constants": True})}), x).summary
    assert reloaded["ddr_read_bytes"] - kept["ddr_read_bytes"] == 256
    assert (reloaded["peak_tcm_bytes"], kept["peak_tcm_bytes"]) == (1280, 1536)


def test_readers_a_long_time_apart_load_it_again_though_few_operations_lie_between():
    """A CNN's few long operations: readers a few operations apart but with more estimated cycles
    between them than 100 loads of the constant start a run of their own (ResNet-50 on the U85
    read one 2 KB multiplier vector in operations 17 to 74, held through its peak)."""
    from scheduler.passes.constant_reloads import _far_cycles, _runs

    assert _runs([3, 5, 9], 32, [0.0] * 3 + [10.0] * 7, 5.0) == [0, 0, 0]
    assert _runs([3, 5, 9], 32, [0.0] * 7 + [100.0] * 3, 5.0) == [0, 0, 1]   # (operation 6: 100 cycles)
    assert _runs([3, 40], 32, None, 0.0) == [0, 1]
    lowered = lower_graph(_chain(4), load_hw_config("ethos-u85-256"))
    hw = load_hw_config("ethos-u85-256")   # (the DRAM latency, and the 256 bytes at its bandwidth)
    assert _far_cycles(lowered, "bias", hw) == 100 * (500 + 256 / hw.ddr.bandwidth_bytes_per_cycle)
