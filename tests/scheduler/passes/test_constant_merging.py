"""Constant merging: identical small constants and identical folded copies become one value."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import numpy as np

from npu_sim.api import load_graph
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute
from scheduler.ir.npu_ops import LoweredBlock, LoweredGraph, NpuOp, OpKind, Step, Value, ValueKind
from scheduler.passes.constant_merging import merge_identical_constants
from scheduler.schedule import lower_graph
from tests.scheduler.graphs import check_end_to_end, machine

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _constant(key: str, data: np.ndarray) -> Value:
    return Value(key, TensorType(data.shape, DType.INT8), ValueKind.CONSTANT, data, key)


def _graph() -> LoweredGraph:
    """y = ((x + a) + b) + c with a == b (16 bytes), c a 4 KiB constant equal to d, which a
    folded copy e repeats, and f the graph output equal to a."""
    small = np.arange(16, dtype=np.int8)
    big = np.ones(4096, dtype=np.int8)
    values = {v.key: v for v in (
        Value("x", TensorType((16,), DType.INT8), ValueKind.INPUT, None, "x"),
        _constant("a", small), _constant("b", small.copy()), _constant("c", big), _constant("d", big.copy()),
        _constant("e", big.copy()), _constant("f", small.copy()),
        Value("t", TensorType((16,), DType.INT8), ValueKind.INTERMEDIATE, None, "t"),
        Value("u", TensorType((16,), DType.INT8), ValueKind.INTERMEDIATE, None, "u"),
        Value("y", TensorType((16,), DType.INT8), ValueKind.OUTPUT, None, "y"))}

    def add(name, a, b, out):
        types = (values[a].type, values[b].type)
        step = Step(Op.ADD, make_attribute(Op.ADD), (a, b), types, (values[out].type,), name)
        return NpuOp(name, OpKind.COMPUTE, unit="vector", steps=(step,), outputs=(out,))

    ops = [add("add0", "x", "a", "t"), add("add1", "t", "b", "u"), add("add2", "u", "f", "y")]
    reader = NpuOp("copy", OpKind.COPY, sources=("e",), outputs=("t",))
    block = LoweredBlock("main", ops + [reader], ["x"], ["y"])
    return LoweredGraph(block, values, output_keys={"f"})


def test_small_constants_and_folded_copies_merge_the_rest_stay_apart():
    lowered = _graph()
    assert merge_identical_constants(lowered, small_bytes=2048, folded={"e"}) == 2
    # b (small, equal to a) and e (folded, equal to c) are gone; d (a graph constant over 2 KiB,
    # equal to c) stays, as does f (a graph output)
    assert sorted(k for k, v in lowered.values.items() if v.kind is ValueKind.CONSTANT) == ["a", "c", "d", "f"]
    ops = lowered.main.ops
    assert ops[1].steps[0].operands == ("t", "a") and ops[2].steps[0].operands == ("u", "f")
    assert ops[3].sources == ("c",)


def _repeats(lowered: LoweredGraph, small_bytes: int) -> Counter:
    sizes: Counter = Counter()
    for v in lowered.values.values():
        if v.kind is ValueKind.CONSTANT and v.data is not None and v.size_bytes <= small_bytes:
            sizes[(v.type.dtype, tuple(v.type.shape), hashlib.sha1(v.data.tobytes()).hexdigest())] += 1
    return Counter({k: n for k, n in sizes.items() if n > 1})


def test_an_unrolled_lstm_keeps_one_copy_of_each_weight_and_stays_bit_exact():
    """The converted 8-step LSTM reshapes its kernels at every step; merged, the edge preset
    moves 26,200 bytes from the DDR instead of 62,040 (the golden figures)."""
    graph = load_graph(EXAMPLES / "lstm_unrolled8_int8.tosa")
    lowered = lower_graph(graph, machine("edge"))
    assert not _repeats(lowered, 1 << 20)
    weights = [v for v in lowered.values.values() if v.kind is ValueKind.CONSTANT and len(v.type.shape) == 4]
    assert len(weights) == len({(tuple(v.type.shape), v.data.tobytes()) for v in weights})
    program, result = check_end_to_end(graph, machine("edge"))
    assert result.trace.counters.ddr_read_bytes == 26200
