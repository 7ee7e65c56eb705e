"""Lookups written as TOSA operators (CAST, ADD of the offset, RESHAPE, GATHER of a constant
table, RESHAPE) run as one operation on the LUT unit, reading their table where it lives."""

from __future__ import annotations

import numpy as np
import pytest

import npu_sim
from npu_sim.hw.compute_units.lut import step_cycles
from npu_sim.program import ComputeCommand, DmaCommand, MemorySpace
from npu_sim.simulation import compile_graph
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.passes.fusion import FusionContext
from scheduler.passes.table_lookup import match_lookup


def lookup_graph(count: int = 64, dtype: DType = DType.INT16, offset: int | None = None):
    bits = 16 if dtype is DType.INT16 else 8
    b = GraphBuilder()
    x = b.input("x", (1, count), dtype)
    index = b.op(Op.CAST, [x], (1, count), DType.INT32)
    shifted = b.op(Op.ADD, [index, b.const(None, np.full((1, 1), offset or 1 << (bits - 1), np.int32))])
    flat = b.op(Op.RESHAPE, [shifted, b.const_shape(None, [1, count])])
    table = (np.arange(1 << bits) * 7 % 65521 - 32000).astype(np.int16).reshape(1, -1, 1)
    found = b.op(Op.GATHER, [b.const(None, table), flat], (1, count, 1), DType.INT16)
    b.output(b.op(Op.RESHAPE, [found, b.const_shape(None, [1, count])], name="y"))
    return b.build(), table.reshape(-1)


def test_the_chain_is_recognised_from_its_cast():
    graph, table = lookup_graph()
    block = graph.main
    ctx = FusionContext.of(block)
    cast = next(i for i, op in enumerate(block.operators) if op.op is Op.CAST)
    found = match_lookup(block, cast, ctx.sole_consumer)
    assert found is not None and found.offset == 32768 and np.array_equal(found.table, table)
    assert [block.operators[i].op for i in found.indices] == [Op.CAST, Op.ADD, Op.RESHAPE, Op.GATHER, Op.RESHAPE]


def test_an_offset_other_than_half_the_table_is_no_lookup():
    graph, _ = lookup_graph(offset=100)
    block = graph.main
    cast = next(i for i, op in enumerate(block.operators) if op.op is Op.CAST)
    assert match_lookup(block, cast, FusionContext.of(block).sole_consumer) is None


@pytest.mark.parametrize("dtype", [DType.INT16, DType.INT8])
def test_it_runs_on_the_lut_reading_the_table_in_place(dtype):
    graph, table = lookup_graph(dtype=dtype)
    program = compile_graph(graph, npu_sim.load_hw_config("edge"), verify=True)
    computes = [c for c in program.commands if isinstance(c, ComputeCommand)]
    assert [c.unit for c in computes] == ["lut"]
    (gather,) = [s for s in computes[0].steps if s.op is Op.GATHER]
    assert gather.operands[0].memory is MemorySpace.DDR   # the table, where it lives
    loads = [c for c in program.commands if isinstance(c, DmaCommand) and c.dst.memory is MemorySpace.TCM]
    assert sum(c.src.size_bytes for c in loads) < 1024   # the values, not the table
    info = np.iinfo(dtype.numpy_dtype)
    x = np.random.default_rng(0).integers(info.min, info.max + 1, size=(1, 64)).astype(dtype.numpy_dtype)
    result = npu_sim.simulate(graph, "edge", {"x": x})
    np.testing.assert_array_equal(result.outputs["y"], table[x.astype(np.int64) - info.min].reshape(1, 64))


def test_its_cost_is_the_lut_rate_and_one_table_load():
    graph, _ = lookup_graph(count=64)
    hw = npu_sim.load_hw_config("ethos-u55-256")
    program = compile_graph(graph, hw)
    (command,) = [c for c in program.commands if isinstance(c, ComputeCommand)]
    costs = {s.op: step_cycles(hw, s) for s in command.steps}
    assert costs[Op.CAST] == costs[Op.ADD] == costs[Op.RESHAPE] == 0
    load = max(-(-hw.lut.table_int16_bytes // hw.lut.table_load_bytes_per_cycle),
               hw.lut.table_source_latency_cycles + -(-hw.lut.table_int16_bytes // hw.ddr.bandwidth_bytes_per_cycle))
    assert costs[Op.GATHER] == 64 // 2 + load   # lut.cycles_per_element: 0.5
