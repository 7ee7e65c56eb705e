"""TFLite's 16-bit SOFTMAX saturates its table indices: the converted graph clamps them before
its CASTs (npu_sim/tosa/tflite/softmax.py). Checked on hand-built index chains, and on a
Rescaling(16) + Softmax 16x8 model against LiteRT's builtin kernels (bit for bit, in exec and on
the edge and Ethos-U presets) and Arm's reference model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import npu_sim
from npu_sim.tosa import converted_graph
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.ops import Op
from npu_sim.tosa.schema_generated import RoundingMode
from npu_sim.tosa.tflite.softmax import saturate_softmax_lookups
from tests.tosa.tflite.single_output import PRESETS, npu_sim_outputs, reference_model_output
from tests.tosa.tflite.test_recurrent_against_litert import litert_outputs

DATA = Path(__file__).resolve().parents[2] / "data" / "tflite"
MODEL = DATA / "softmax_scaled_int16.tflite"
#: a monotonic int16 table of 513 entries (TABLE's int16 form)
TABLE = (np.arange(513) * 100 - 25600).astype(np.int16)


def _i32(value: int) -> np.ndarray:
    return np.full((1, 1), value, np.int32)


def _exp_index_graph(also_copied: bool = False) -> Graph:
    """The converter's exp index of a row: RESCALE(x - REDUCE_MAX(x)) + 32767, CAST, TABLE (and
    with ``also_copied`` an IDENTITY of the index as a second output)."""
    b = GraphBuilder()
    x = b.input("x", (1, 4), DType.INT32)
    difference = b.op(Op.SUB, [x, b.op(Op.REDUCE_MAX, [x], axis=1)])
    scaled = b.op(Op.RESCALE, [difference, b.const(None, np.array([1 << 30], np.int32)),
                               b.const(None, np.array([30], np.int8)), b.const(None, np.array([0], np.int32)),
                               b.const(None, np.array([0], np.int32))], (1, 4), DType.INT32,
                  scale32=True, rounding_mode=RoundingMode.SINGLE_ROUND, per_channel=False,
                  input_unsigned=False, output_unsigned=False)
    index = b.op(Op.CAST, [b.op(Op.ADD, [scaled, b.const(None, _i32(32767))])], dtype=DType.INT16)
    b.output(b.op(Op.TABLE, [index, b.const(None, TABLE)]))
    if also_copied:
        b.output(b.op(Op.IDENTITY, [index]))
    return b.build()


def _reciprocal_index_graph() -> Graph:
    """The converter's 1/(1 + x) index: the row's sum normalized, shifted down and recentred."""
    b = GraphBuilder()
    x = b.input("x", (1, 2), DType.INT32)
    normalized = b.op(Op.LOGICAL_LEFT_SHIFT, [b.op(Op.REDUCE_SUM, [x], axis=1), b.const(None, _i32(0))])
    shifted = b.op(Op.ARITHMETIC_RIGHT_SHIFT, [b.op(Op.SUB, [normalized, b.const(None, _i32(0))]),
                                               b.const(None, _i32(0))], round=True)
    index = b.op(Op.CAST, [b.op(Op.SUB, [shifted, b.const(None, _i32(32768))])], dtype=DType.INT16)
    b.output(b.op(Op.TABLE, [index, b.const(None, TABLE)]))
    return b.build()


def _run(graph: Graph, x: np.ndarray) -> np.ndarray:
    (out,) = npu_sim.execute(graph, {"x": x}).values()
    return out


def test_an_exp_index_past_the_table_saturates_instead_of_wrapping():
    graph = _exp_index_graph()
    x = np.array([[0, -65535, -70000, -1_000_000]], np.int32)   # indices -32768, then past it
    wrapped = _run(graph, x)
    assert wrapped[0, 2] != wrapped[0, 1] and wrapped[0, 3] != wrapped[0, 1]
    assert saturate_softmax_lookups(graph) == 1
    saturated = _run(graph, x)
    assert saturated[0, 0] == wrapped[0, 0] and saturated[0, 1] == wrapped[0, 1]
    assert saturated[0, 2] == saturated[0, 3] == saturated[0, 1] == int(TABLE[0]) * 128   # TABLE's first entry


def test_a_reciprocal_index_past_the_table_saturates_too():
    graph = _reciprocal_index_graph()
    top = _run(graph, np.array([[65535, 0]], np.int32))   # index 32767, the table's last entry
    assert _run(graph, np.array([[65536, 0]], np.int32)) != top   # 32768 wraps to -32768
    assert saturate_softmax_lookups(graph) == 1
    assert _run(graph, np.array([[65536, 0]], np.int32)) == top


def test_other_narrowing_casts_before_a_table_are_left_alone():
    b = GraphBuilder()   # an int32 index not made as a softmax makes it (TFLite's CAST wraps)
    x = b.input("x", (1, 4), DType.INT32)
    index = b.op(Op.CAST, [b.op(Op.ADD, [x, b.const(None, _i32(32767))])], dtype=DType.INT16)
    b.output(b.op(Op.TABLE, [index, b.const(None, TABLE)]))
    assert saturate_softmax_lookups(b.build()) == 0
    assert saturate_softmax_lookups(_exp_index_graph(also_copied=True)) == 0   # read by more than TABLEs


def _inputs(graph: npu_sim.Graph, count: int) -> list[np.ndarray]:
    """Full-range int16 logits: x16 they span about 32 real units, past the exp table's 10."""
    (t,) = graph.input_types.values()
    rng = np.random.default_rng(7)
    return [rng.integers(-32768, 32768, size=t.shape).astype(np.int16) for _ in range(count)]


def test_the_model_converts_with_both_indices_clamped():
    graph = converted_graph.tflite_graph(MODEL.read_bytes(), str(MODEL), use_cache=False)
    producer = {out: op for op in graph.main.operators for out in op.outputs}
    casts = [op for op in graph.main.operators
             if op.op is Op.CAST and graph.main.tensor(op.outputs[0]).dtype is DType.INT16]
    assert len(casts) == 2 and all(producer[c.inputs[0]].op is Op.MINIMUM for c in casts)


def test_without_the_clamp_the_model_would_miss_litert(monkeypatch):
    """(What the pass fixes: the converter's CASTs wrap the out-of-table indices.)"""
    monkeypatch.setattr(converted_graph, "saturate_softmax_lookups", lambda graph: 0)
    graph = converted_graph.tflite_graph(MODEL.read_bytes(), str(MODEL), use_cache=False)
    (x,) = _inputs(graph, 1)
    (want,) = litert_outputs(MODEL, [x], builtin=True)
    (got,) = npu_sim.execute(graph, {graph.main.inputs[0]: x}).values()
    assert np.abs(got.reshape(want.shape).astype(np.int32) - want).max() > 1000


@pytest.mark.parametrize("preset", PRESETS)
def test_the_scaled_softmax_gives_litert_outputs(preset):
    graph = load_graph(MODEL)
    xs = _inputs(graph, 2)
    for got, want in zip(npu_sim_outputs(graph, preset, xs), litert_outputs(MODEL, xs, builtin=True), strict=True):
        np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_arms_reference_model_runs_the_clamped_graph_to_the_same_bits(tmp_path):
    graph = load_graph(MODEL)
    (x,) = _inputs(graph, 1)
    theirs = reference_model_output(graph, x, tmp_path)
    (ours,) = npu_sim_outputs(graph, None, [x])
    np.testing.assert_array_equal(ours, theirs)
    (want,) = litert_outputs(MODEL, [x], builtin=True)
    np.testing.assert_array_equal(theirs.reshape(want.shape), want)
