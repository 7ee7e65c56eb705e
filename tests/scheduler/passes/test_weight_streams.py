"""Weight streams: each matrix product gets private copies of its small shared weights and
per-channel parameters, which the streamed pool loads in one DMA before it (``tcm.packed_weight_streams``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import npu_sim
from npu_sim.api import load_graph
from npu_sim.hw.compute_units.mac_array import MAC_OPS
from npu_sim.hw.config import deep_merge, hw_config_from_dict, load_hw_config
from npu_sim.program import ComputeCommand, DmaCommand, MemorySpace
from scheduler.passes.weight_streams import private_weight_streams, weights_and_parameters
from scheduler.schedule import lower_graph, schedule
from tests.scheduler.graphs import check_end_to_end

LSTM = Path(__file__).resolve().parents[2] / "data" / "tflite" / "lstm_int8.tflite"   # LSTM(16), 8 steps, Dense(4)


def _u55(packed: bool, in_place: bool = False):
    """ethos-u55-256 with its weight streams packed or not, its matrix-vector products' weights
    read in place or loaded (as they are here: this module is about the loads)."""
    data = load_hw_config("ethos-u55-256").model_dump(mode="json")
    tcm = {"packed_weight_streams": packed, "matrix_vector_weights_in_place": in_place}
    return hw_config_from_dict(deep_merge(data, {"tcm": tcm}), "u55-test")


def _mac_ops(lowered):
    return [op for op in lowered.main.ops if any(step.op in MAC_OPS for step in op.steps)]


def test_every_gate_at_every_step_reads_copies_of_its_own():
    lowered = lower_graph(load_graph(LSTM), _u55(packed=True))
    macs = _mac_ops(lowered)
    assert len(macs) == 65   # 8 steps x (4 gates x 2 products) + the Dense layer
    streams = [set.union(*weights_and_parameters(op)) for op in macs]
    # the 64 gate products share nothing any more; each copy holds its original's bytes
    gate_keys = [key for keys in streams[:-1] for key in keys]
    # weights, multipliers and shifts of each product, the bias of the input product
    assert len(gate_keys) == len(set(gate_keys)) == 32 * 4 + 32 * 3
    for key in gate_keys:
        original = key.split("@")[0]
        assert key.endswith("@" + next(op.name for op, keys in zip(macs, streams) if key in keys))
        assert np.array_equal(lowered.values[key].data, lowered.values[original].data)


def test_only_constants_the_pool_takes_are_copied():
    lowered = lower_graph(load_graph(LSTM), _u55(packed=False))   # (no copies made)
    # at most 200 bytes: the 16x10 input weights (160 B) and every parameter, not the 16x16
    # recurrent weights (256 B): 4 copies for an input product, 2 for a recurrent one (no bias)
    assert private_weight_streams(lowered, item_max_bytes=200) == 8 * (4 * 4 + 4 * 2)
    shared = [key for op in _mac_ops(lowered) for key in weights_and_parameters(op)[0] if "@" not in key]
    assert len(shared) == 8 * 4 + 1   # the recurrent weights at each step, and the Dense layer's


def test_each_product_loads_its_weights_and_parameters_in_one_dma_bit_for_bit():
    program, _ = check_end_to_end(load_graph(LSTM), _u55(packed=True))
    loads = [c for c in program.walk() if isinstance(c, DmaCommand) and c.src.memory is MemorySpace.DDR]
    # one pool chunk per gate product: 160 B of weights + 64 + 64 + 16 of parameters = 304 B,
    # 256 + 80 = 336 B for the recurrent ones; the other loads are the input and small chunks
    sizes = sorted(c.size_bytes for c in loads)
    assert sizes.count(304) == 32 and sizes.count(336) == 32
    assert (len(loads), sum(sizes)) == (74, 20648)
    unpacked = schedule(load_graph(LSTM), _u55(packed=False))
    before = [c for c in unpacked.walk() if isinstance(c, DmaCommand) and c.src.memory is MemorySpace.DDR]
    assert len(before) == 227   # a DMA per tensor: 32 x 4 + 32 x 3 of them, and 3 others
    # a gate product reads its weights and bias from the buffer one load filled
    gate = next(c for c in program.walk() if isinstance(c, ComputeCommand) and c.name.startswith("CONV2D")
                and c.steps[0].operands[2].shape == (16,))   # (an input projection: a bias per channel)
    weights, bias = gate.steps[0].operands[1], gate.steps[0].operands[2]
    chunk = next(c for c in loads if c.dst.offset_bytes <= weights.offset_bytes < c.dst.offset_bytes + c.size_bytes)
    assert chunk.dst.offset_bytes <= bias.offset_bytes < chunk.dst.offset_bytes + chunk.size_bytes


def test_fewer_cycles_and_burst_bytes_than_a_dma_per_tensor_on_the_flash():
    """1 B/cycle flash, 128-byte bursts: a 16-byte shift no longer costs a burst of its own.
    Vela 5.2 estimates 36,470 cycles for this model on this configuration."""
    graph = load_graph(LSTM)
    inputs = {name: np.zeros(t.shape, np.int8) for name, t in graph.input_types.items()}
    packed = npu_sim.simulate(graph, _u55(packed=True), inputs).summary
    unpacked = npu_sim.simulate(graph, _u55(packed=False), inputs).summary
    assert (packed["total_cycles"], unpacked["total_cycles"]) == (35394, 43208)   # (scalars in the command stream)
    assert packed["ddr_read_burst_bytes"] < unpacked["ddr_read_burst_bytes"]
