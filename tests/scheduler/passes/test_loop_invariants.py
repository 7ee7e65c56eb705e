"""Loop-invariant code motion out of WHILE_LOOP bodies: what moves, what must not, same bits."""

import numpy as np
import pytest

from npu_sim.reference.session import execute
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.passes.loop_invariants import hoist_loop_invariants
from tests.scheduler.graphs import check_end_to_end, machine


def _loop_graph(start: int, *, bound_from_input: bool = False):
    """acc += round(x * 0.5) as int32, T times: x's dequantize-like chain is invariant."""
    b = GraphBuilder()
    x = b.input("x", (4, 8), DType.FP32)
    n = b.input("n", (1, 1), DType.INT32) if bound_from_input else b.const("n", np.array([[3]], np.int32))
    acc0 = b.const("acc0", np.zeros((4, 8), np.int32))

    def cond_fn(bb, i, acc, nn, xx):
        return bb.op(Op.GREATER, [nn, i])

    def body_fn(bb, i, acc, nn, xx):
        half = bb.const(None, np.full((1, 1), 0.5, np.float32))
        scaled = bb.op(Op.MUL, [xx, half, bb.const(None, np.array([0], np.int8))])
        as_int = bb.op(Op.CAST, [scaled], dtype=DType.INT32)
        step = bb.op(Op.ADD, [as_int, i])   # reads the counter: stays in the loop
        return [bb.op(Op.ADD, [i, bb.const(None, np.array([[1]], np.int32))]), bb.op(Op.ADD, [acc, step]), nn, xx]
    _, acc, _, _ = b.while_loop([b.const(None, np.array([[start]], np.int32)), acc0, n, x], cond_fn, body_fn)
    b.output(acc)
    return b.build()


def _body(graph):
    return next(block for block in graph.blocks() if block.name.endswith("_body"))


def test_invariant_chain_moves_before_the_loop():
    graph = _loop_graph(0)
    hoisted = hoist_loop_invariants(graph)
    body = _body(hoisted)
    assert [op.op for op in body.operators if op.op not in (Op.CONST, Op.CONST_SHAPE)] == [Op.ADD, Op.ADD, Op.ADD]
    main_ops = [op.op for op in hoisted.main.operators if op.op not in (Op.CONST, Op.CONST_SHAPE)]
    assert main_ops == [Op.MUL, Op.CAST, Op.WHILE_LOOP]
    loop = next(op for op in hoisted.main.operators if op.op is Op.WHILE_LOOP)
    # x, only carried once its chain moved out, leaves the loop; the moved result comes in
    assert len(loop.inputs) == len(loop.outputs) == 4 == len(body.inputs) == len(body.outputs)
    assert "x" not in loop.inputs and loop.inputs[-1].endswith("cast_14")
    assert body.inputs[-1] == body.outputs[-1]   # the moved result is carried unchanged
    # the original graph is untouched
    assert [op.op for op in _body(graph).operators if op.op not in (Op.CONST, Op.CONST_SHAPE)] == \
        [Op.MUL, Op.CAST, Op.ADD, Op.ADD, Op.ADD]
    x = (np.arange(32, dtype=np.float32).reshape(4, 8) - 9.0) * 0.75
    want = execute(graph, {"x": x})
    got = execute(hoisted, {"x": x})
    assert np.array_equal(got[hoisted.main.outputs[0]], want[graph.main.outputs[0]])


def test_values_a_loop_only_carries_leave_it_and_the_others_stay():
    """A value the body hands back unchanged leaves the loop only if nothing reads it: the counter
    bound n is read by the condition, x by the body (the loop may not run: nothing moved out)."""
    graph = _loop_graph(5)
    assert hoist_loop_invariants(graph) is graph
    b = GraphBuilder()
    x = b.input("x", (4, 8), DType.INT32)
    unused = b.input("unused", (2, 2), DType.INT32)
    n = b.const("n", np.array([[3]], np.int32))

    def cond_fn(bb, i, nn, xx, uu):
        return bb.op(Op.GREATER, [nn, i])

    def body_fn(bb, i, nn, xx, uu):
        return [bb.op(Op.ADD, [i, bb.const(None, np.array([[1]], np.int32))]), nn, bb.op(Op.ADD, [xx, xx]), uu]
    _, _, out, _ = b.while_loop([b.const(None, np.array([[0]], np.int32)), n, x, unused], cond_fn, body_fn)
    b.output(out)
    graph = b.build()
    dropped = hoist_loop_invariants(graph)
    loop = next(op for op in dropped.main.operators if op.op is Op.WHILE_LOOP)
    assert "unused" not in loop.inputs and len(loop.inputs) == len(_body(dropped).inputs) == 3
    inputs = {"x": np.arange(32, dtype=np.int32).reshape(4, 8), "unused": np.ones((2, 2), np.int32)}
    assert np.array_equal(execute(dropped, inputs)[dropped.main.outputs[0]],
                          execute(graph, inputs)[graph.main.outputs[0]])


def test_a_loop_that_may_not_run_keeps_its_body():
    graph = _loop_graph(5)   # 3 > 5 is false: the body never runs, so nothing may move out of it
    assert hoist_loop_invariants(graph) is graph
    graph = _loop_graph(0, bound_from_input=True)   # the trip count is data: not proven
    assert hoist_loop_invariants(graph) is graph


@pytest.mark.parametrize("hw_name", ["tiny", "edge"])
def test_scheduled_loop_keeps_the_bits_and_runs_the_chain_once(hw_name):
    graph = _loop_graph(0)
    program, _ = check_end_to_end(graph, machine(hw_name))
    muls = [o for o in program.stats.operations if o.op.startswith("MUL")]
    assert len(muls) == 1 and muls[0].block == "main"
