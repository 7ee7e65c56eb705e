"""GraphBuilder: graphs it builds are valid, follow the IR conventions, and run in the reference model."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.errors import GraphValidationError
from npu_sim.tosa import DType, GraphBuilder, Op, TensorType, read_graph, validate, write_graph
from npu_sim.tosa.ops import RoundingMode
from tests.tosa import tosa_tools_io as tt


def test_elementwise_output_type_is_inferred_and_runs():
    b = GraphBuilder()
    x = b.input("x", (2, 1, 3), DType.INT32)
    c = b.const("c", np.array([[[1], [2]]], np.int32).reshape(1, 2, 1))
    y = b.op(Op.SUB, [x, c])
    ge = b.op(Op.GREATER_EQUAL, [y, x])
    b.output(y, ge)
    g = b.build()
    assert g.main.tensors[y].type == ((2, 2, 3), DType.INT32)  # broadcast
    assert g.main.tensors[ge].type == ((2, 2, 3), DType.BOOL)
    assert [o.op for o in g.main.operators] == [Op.CONST, Op.SUB, Op.GREATER_EQUAL]
    x_value = np.arange(6, dtype=np.int32).reshape(2, 1, 3)
    got = tt.run_reference(write_graph(g), [x_value])
    np.testing.assert_array_equal(got[0], x_value - np.array([1, 2]).reshape(1, 2, 1))


def test_conv_rescale_chain_with_inferred_sizes_runs():
    rng = np.random.default_rng(1)
    b = GraphBuilder()
    x = b.input("x", (1, 5, 5, 2), DType.INT8)
    w = b.const("w", rng.integers(-5, 5, (3, 3, 3, 2)).astype(np.int8))
    bias = b.const("bias", np.array([1, 2, 3], np.int32))
    zp = b.const("zp", 0, DType.INT8)
    acc = b.op(Op.CONV2D, [x, w, bias, zp, zp], pad=(1, 1, 1, 1), stride=(2, 2),
               dilation=(1, 1), acc_type=DType.INT32)
    assert b.type_of(acc) == TensorType((1, 3, 3, 3), DType.INT32)
    out = b.op(Op.RESCALE, [acc, b.const("m", 1 << 30, DType.INT32), b.const("s", 33, DType.INT8),
                            b.const("izp", 0, DType.INT32), zp], dtype=DType.INT8, scale32=True,
               rounding_mode=RoundingMode.SINGLE_ROUND)
    assert b.type_of(out) == TensorType((1, 3, 3, 3), DType.INT8)
    b.output(out)
    g = b.build()
    assert g.main.tensors[zp].shape == (1,)  # a scalar constant is a [1] tensor
    x_value = rng.integers(-128, 128, (1, 5, 5, 2)).astype(np.int8)
    (got,) = tt.run_reference(write_graph(g), [x_value])
    assert got.shape == (1, 3, 3, 3) and got.dtype == np.int8


@pytest.mark.parametrize("layout", ["regions", "main"])
def test_cond_if_blocks_and_layouts(layout):
    b = GraphBuilder(layout=layout)
    flag = b.input("flag", (), DType.BOOL)
    x = b.input("x", (4,), DType.INT32)
    y = b.input("y", (4,), DType.INT32)
    (r,) = b.cond_if(flag, [x, y], lambda bb, p, q: bb.op(Op.ADD, [p, q]),
                     lambda bb, p, q: bb.op(Op.SUB, [p, q]), names=["r"])
    b.output(r)
    g = b.build()
    cond_if = g.main.operators[0]
    then_block = g.block(cond_if.attribute.then_graph)
    if layout == "regions":
        assert [r.name for r in g.regions][1:] == [cond_if.attribute.then_graph,
                                                   cond_if.attribute.else_graph]
    else:
        assert len(g.regions) == 1 and len(g.regions[0].blocks) == 3
    assert [o.op for o in then_block.operators] == [Op.ADD]
    assert [then_block.tensors[n].type for n in then_block.inputs] == [((4,), DType.INT32)] * 2
    data = write_graph(g)
    # written files put each branch in a region of its own: tosa-tools 2026.8's reference
    # model looks branches up by region name and refuses the README's main-region layout
    written = read_graph(data)
    assert [r.name for r in written.regions] == ["main", cond_if.attribute.then_graph,
                                                 cond_if.attribute.else_graph]
    assert [b.name for b in written.blocks()] == [b.name for b in g.blocks()]
    x_value, y_value = np.array([5, 6, 7, 8], np.int32), np.array([1, 2, 3, 4], np.int32)
    np.testing.assert_array_equal(tt.run_reference(data, [np.array(True), x_value, y_value])[0],
                                  x_value + y_value)
    np.testing.assert_array_equal(tt.run_reference(data, [np.array(False), x_value, y_value])[0],
                                  x_value - y_value)


def test_while_loop_runs():
    b = GraphBuilder()
    n = b.input("n", (1,), DType.INT32)
    i0 = b.const("i0", 0, DType.INT32)
    acc0 = b.const("acc0", np.zeros(3, np.int32))
    step = b.input("step", (3,), DType.INT32)

    def cond(bb, i, limit, acc, s):
        return bb.op(Op.GREATER, [limit, i])

    def body(bb, i, limit, acc, s):
        return [bb.op(Op.ADD, [i, bb.const(None, 1, DType.INT32)]), limit,
                bb.op(Op.ADD, [acc, s]), s]

    i_final, _, acc_final, _ = b.while_loop([i0, n, acc0, step], cond, body)
    b.output(acc_final, i_final)
    data = write_graph(b.build())
    got = tt.run_reference(data, [np.array([4], np.int32), np.array([1, -2, 3], np.int32)])
    np.testing.assert_array_equal(got[0], [4, -8, 12])
    np.testing.assert_array_equal(got[1], [4])


def test_variables_in_main_and_in_a_branch():
    b = GraphBuilder()
    x = b.input("x", (1, 4), DType.INT8)
    flag = b.input("flag", (1,), DType.BOOL)
    state = b.variable("state", (1, 4), DType.INT8, [[1, 2, 3, 4]], variable_name="lstm/h")

    def then(bb, v):
        old = bb.variable_read(state)
        bb.variable_write(state, v)
        return old

    (r,) = b.cond_if(flag, [x], then, lambda bb, v: v)
    b.output(r)
    g = b.build()
    assert list(g.variables()) == ["lstm/h"]
    then_block = g.block(g.main.operators[0].attribute.then_graph)
    assert then_block.tensors[state].variable and then_block.tensors[state].variable_key == "lstm/h"
    assert [o.op for o in then_block.operators] == [Op.VARIABLE_READ, Op.VARIABLE_WRITE]
    x_value = np.array([[9, 9, 9, 9]], np.int8)
    data = write_graph(g)
    np.testing.assert_array_equal(tt.run_reference(data, [x_value, np.array([True])])[0],
                                  [[1, 2, 3, 4]])
    np.testing.assert_array_equal(tt.run_reference(data, [x_value, np.array([False])])[0],
                                  x_value)


def test_generated_names_are_unique():
    b = GraphBuilder()
    x = b.input(None, (2,), DType.INT32)
    names = [b.op(Op.ADD, [x, x]) for _ in range(5)] + [b.const(None, np.ones(2, np.int32))]
    assert len(set(names + [x])) == 7


def test_builder_errors():
    b = GraphBuilder()
    x = b.input("x", (2,), DType.INT32)
    with pytest.raises(GraphValidationError, match="'nope' does not exist"):
        b.op(Op.ADD, [x, "nope"])
    with pytest.raises(GraphValidationError, match="already has a tensor 'x'"):
        b.input("x", (2,), DType.INT32)
    with pytest.raises(GraphValidationError, match="dtype"):
        b.op(Op.CAST, [x])  # CAST's output type is the caller's choice
    with pytest.raises(GraphValidationError, match="do not broadcast"):
        b.op(Op.ADD, [x, b.const("c3", np.ones(3, np.int32))])
    with pytest.raises(GraphValidationError, match="give the TOSA dtype"):
        b.const("big", np.ones(2, np.int64))
    with pytest.raises(GraphValidationError, match="outside the INT8 range"):
        b.const("c", [300], DType.INT8)
    with pytest.raises(GraphValidationError, match="no variable named"):
        b.variable_read(x)
    with pytest.raises(GraphValidationError, match="unknown attribute field"):
        b.op(Op.ADD, [x, x], shape_of_things=3)
    with pytest.raises(GraphValidationError, match="then block returns"):
        b.cond_if(b.input("f", (1,), DType.BOOL), [x], lambda bb, v: v,
                  lambda bb, v: bb.op(Op.EQUAL, [v, v]))


def test_build_validates_unless_asked_not_to():
    b = GraphBuilder()
    x = b.input("x", (2,), DType.INT32)
    y = b.tensor("y", (2,), DType.INT32)  # declared, never produced
    b.output(x, y)
    with pytest.raises(GraphValidationError, match="'y' is never produced"):
        b.build()
    g = b.build(validate=False)
    with pytest.raises(GraphValidationError):
        validate(g)
