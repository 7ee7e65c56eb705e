"""Rescales before reshapes: a product's per-tensor RESCALE moves ahead of the RESHAPE the converter
puts between them (a TFLite BATCH_MATMUL's rank-3 MATMUL, RESHAPE, RESCALE), so the product's
epilogue scales its result as Vela's output unit does; nothing else moves, and the bits stay."""

from __future__ import annotations

import numpy as np

import npu_sim
from npu_sim.hw.config import load_hw_config
from npu_sim.program import ComputeCommand
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.loader import save_graph
from npu_sim.tosa.ops import Op
from scheduler.passes.reshape_rescales import rescale_before_reshape
from tests.oracle import run_graph_bytes
from tests.scheduler.graphs import _rescale, _zp, check_end_to_end


def _attention_scores(channels: int = 1, readers: int = 1, product: bool = True):
    """Q [4, 64, 24] x K^T [4, 24, 64] (int8) to int32 scores, reshaped to [1, 4, 64, 64] and
    rescaled to int8 (``channels`` multipliers); ``readers`` 2 also outputs the int32 reshape;
    ``product`` False reshapes an input instead of the product."""
    b = GraphBuilder()
    q = b.input("q", (4, 64, 24), DType.INT8)
    k = b.input("k", (4, 24, 64), DType.INT8)
    scores = b.op(Op.MATMUL, [q, k, _zp(b), _zp(b)]) if product else b.input("s", (4, 64, 64), DType.INT32)
    shaped = b.op(Op.RESHAPE, [scores, b.const_shape(None, (1, 4, 64, 64))])
    b.output(_rescale(b, shaped, DType.INT8, channels=channels, multiplier=1 << 30, shift=40))
    if readers == 2:
        b.output(shaped)
    return b.build()


def _ops(graph) -> list[str]:
    return [op.op.name for op in graph.main.operators if op.op not in (Op.CONST, Op.CONST_SHAPE)]


def test_the_rescale_moves_ahead_of_the_reshape_and_the_result_keeps_its_name():
    graph = _attention_scores()
    moved = rescale_before_reshape(graph)
    assert _ops(graph) == ["MATMUL", "RESHAPE", "RESCALE"]
    assert _ops(moved) == ["MATMUL", "RESCALE", "RESHAPE"]
    assert moved.main.outputs == graph.main.outputs
    (rescale,) = [op for op in moved.main.operators if op.op is Op.RESCALE]
    assert moved.main.tensor(rescale.outputs[0]).shape == (4, 64, 64)
    assert moved.main.tensor(rescale.outputs[0]).dtype is DType.INT8


def test_nothing_moves_where_the_swap_would_not_keep_the_graph():
    """A per-channel RESCALE, a reshaped value with another reader, and a reshape of an input (no
    product to take the RESCALE) stay as they are: the same graph comes back."""
    for graph in (_attention_scores(channels=64), _attention_scores(readers=2), _attention_scores(product=False)):
        assert rescale_before_reshape(graph) is graph


def test_the_product_scales_its_result_with_the_reference_bits(tmp_path):
    """On the U85 the MATMUL's epilogue takes the RESCALE: one operation per tile, and no int32 map of
    the scores in the TCM (64 KiB, where the peak was above it); the outputs of the rewritten plan
    are those of Arm's TOSA reference model run on the graph as written, bit for bit."""
    graph = _attention_scores()
    rng = np.random.default_rng(9)
    inputs = {"q": rng.integers(-128, 128, (4, 64, 24), dtype=np.int8),
              "k": rng.integers(-128, 128, (4, 24, 64), dtype=np.int8)}
    save_graph(graph, tmp_path / "scores.tosa")
    (want,) = run_graph_bytes((tmp_path / "scores.tosa").read_bytes(), [inputs["q"], inputs["k"]],
                              list(graph.output_types.values()))
    (got,) = npu_sim.simulate(graph, "ethos-u85-256", inputs).outputs.values()
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    program, _ = check_end_to_end(graph, load_hw_config("ethos-u85-256"))
    names = {c.name.split(":")[0] for c in program.walk() if isinstance(c, ComputeCommand)}
    assert names == {"MATMUL(matmul_2)+RESCALE(rescale_9_scaled)"}
    assert program.stats.peak_tcm_bytes < 4 * 64 * 64 * 4
