"""validate(): every structural error is a GraphValidationError naming the culprit."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.errors import GraphValidationError, UnsupportedFeatureError
from npu_sim.tosa import DType, GraphBuilder, Op, Operator, Tensor, check_supported, validate
from npu_sim.tosa.ops import make_attribute


def _add_graph():
    """x + c -> y, then y + x -> z (outputs z)."""
    b = GraphBuilder()
    x = b.input("x", (1, 4), DType.INT32)
    c = b.const("c", np.arange(4, dtype=np.int32).reshape(1, 4))
    y = b.op(Op.ADD, [x, c], name="y")
    z = b.op(Op.ADD, [y, x], name="z")
    b.output(z)
    return b.build()


def test_a_valid_graph_passes():
    validate(_add_graph())


def test_dangling_tensor_reference():
    g = _add_graph()
    g.main.operators[1].inputs[1] = "ghost"
    with pytest.raises(GraphValidationError, match=r"ADD\(y\): input tensor 'ghost' does not exist"):
        validate(g)


def test_dangling_block_output():
    g = _add_graph()
    g.main.outputs.append("ghost")
    with pytest.raises(GraphValidationError, match="block output 'ghost' does not exist"):
        validate(g)


def test_wrong_operator_arity():
    g = _add_graph()
    g.main.operators[1].inputs.append("x")
    with pytest.raises(GraphValidationError, match=r"ADD\(y\): takes 2 input\(s\), has 3"):
        validate(g)
    g = _add_graph()
    g.main.operators[1].outputs.append("c")
    with pytest.raises(GraphValidationError, match=r"produces 1 output\(s\), has 2"):
        validate(g)


def test_operator_cycle():
    g = _add_graph()
    y_op, z_op = g.main.operators[1], g.main.operators[2]
    y_op.inputs[1] = "z"  # y = x + z, z = y + x
    with pytest.raises(GraphValidationError, match=r"operator cycle ADD\(y\) -> ADD\(z\) -> ADD\(y\)"):
        validate(g)
    assert z_op.inputs == ["y", "x"]


def test_output_never_produced():
    g = _add_graph()
    g.main.tensors["w"] = Tensor("w", (1, 4), DType.INT32)
    g.main.outputs.append("w")
    with pytest.raises(GraphValidationError, match="output 'w' is never produced"):
        validate(g)


def test_input_never_produced():
    g = _add_graph()
    g.main.tensors["w"] = Tensor("w", (1, 4), DType.INT32)
    g.main.operators[2].inputs[0] = "w"
    with pytest.raises(GraphValidationError, match=r"ADD\(z\): input tensor 'w' is never produced"):
        validate(g)


def test_use_before_production():
    g = _add_graph()
    g.main.operators[1], g.main.operators[2] = g.main.operators[2], g.main.operators[1]
    with pytest.raises(GraphValidationError, match=r"ADD\(z\): uses tensor 'y' before ADD\(y\)"):
        validate(g)


def test_tensor_produced_twice():
    g = _add_graph()
    g.main.operators[2].outputs[0] = "y"
    with pytest.raises(GraphValidationError, match="'y' is already produced by ADD"):
        validate(g)


def test_wrong_attribute_class():
    g = _add_graph()
    g.main.operators[1].attribute = make_attribute(Op.SUB)
    with pytest.raises(GraphValidationError, match="attribute is SubAttribute, expected AddAttribute"):
        validate(g)


def test_shape_rules():
    g = _add_graph()
    g.main.tensors["c"] = Tensor("c", (1, 3), DType.INT32, np.zeros((1, 3), np.int32))
    with pytest.raises(GraphValidationError, match=r"ADD\(y\): shapes \[1, 4\] and \[1, 3\] do not "
                                                   "broadcast"):
        validate(g)
    g = _add_graph()
    g.main.tensors["z"] = Tensor("z", (2, 4), DType.INT32)
    with pytest.raises(GraphValidationError, match=r"output 'z' has shape \[2, 4\], the "
                                                   r"specification gives \[1, 4\]"):
        validate(g)


def _conv(weight_shape=(8, 3, 3, 4), out_shape=(1, 4, 4, 8)):
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 4), DType.INT8)
    w = b.const("w", np.zeros(weight_shape, np.int8))
    bias = b.const("bias", np.zeros(8, np.int32))
    zp = b.const("zp", 0, DType.INT8)
    b.output(b.op(Op.CONV2D, [x, w, bias, zp, zp], out_shape, DType.INT32, pad=(1, 0, 1, 0),
                  stride=(2, 2), dilation=(1, 1), acc_type=DType.INT32))
    return b.build(validate=False)


def test_convolution_rules():
    validate(_conv())
    with pytest.raises(GraphValidationError, match="expects 3 input channels, the input"):
        validate(_conv(weight_shape=(8, 3, 3, 3)))
    with pytest.raises(GraphValidationError, match=r"shape \[1, 5, 4, 8\], the specification "
                                                   r"gives \[1, 4, 4, 8\]"):
        validate(_conv(out_shape=(1, 5, 4, 8)))


def test_element_type_combination_no_profile_supports():
    b = GraphBuilder()
    x = b.input("x", (4,), DType.INT8)
    b.output(b.op(Op.ADD, [x, x]))
    with pytest.raises(GraphValidationError, match=r"ADD.*no TOSA 1.0 profile supports this "
                                                   "element type combination.*INT8"):
        b.build()


def _cond_graph(cond_shape=(1,), cond_dtype=DType.BOOL):
    b = GraphBuilder()
    flag = b.input("flag", cond_shape, cond_dtype)
    x = b.input("x", (4,), DType.INT32)
    (r,) = b.cond_if(flag, [x], lambda bb, v: bb.op(Op.ADD, [v, v]), lambda bb, v: v,
                     names=["r"], block_names=("then", "else"))
    b.output(r)
    return b.build(validate=False)


def test_cond_if_rules():
    validate(_cond_graph())
    validate(_cond_graph(cond_shape=()))
    with pytest.raises(GraphValidationError, match=r"condition must be a one-element BOOL tensor, "
                                                   r"is BOOL\[2\]"):
        validate(_cond_graph(cond_shape=(2,)))
    with pytest.raises(GraphValidationError, match="condition must be a one-element BOOL tensor, "
                                                   "is INT32"):
        validate(_cond_graph(cond_dtype=DType.INT32))
    g = _cond_graph()
    g.main.operators[0].attribute = make_attribute(Op.COND_IF, then_graph="then",
                                                   else_graph="elsewhere")
    with pytest.raises(GraphValidationError, match="names block 'elsewhere', which does not exist"):
        validate(g)
    g = _cond_graph()
    else_block = g.block("else")
    else_block.tensors[else_block.inputs[0]] = Tensor(else_block.inputs[0], (4,), DType.INT16)
    with pytest.raises(GraphValidationError, match=r"operands \[INT32\[4\]\] do not match the "
                                                   r"inputs \[INT16\[4\]\] of else_graph 'else'"):
        validate(g)


def _while_graph():
    b = GraphBuilder()
    i = b.input("i", (1,), DType.INT32)
    b.output(*b.while_loop([i], lambda bb, v: bb.op(Op.GREATER, [bb.const(None, 5, DType.INT32), v]),
                           lambda bb, v: bb.op(Op.ADD, [v, bb.const(None, 1, DType.INT32)]),
                           block_names=("cond", "body")))
    return b.build(validate=False)


def test_while_loop_rules():
    validate(_while_graph())
    g = _while_graph()
    cond = g.block("cond")
    cond.tensors[cond.outputs[0]].dtype = DType.INT32
    cond.operators[-1].op = Op.ADD
    cond.operators[-1].attribute = make_attribute(Op.ADD)
    with pytest.raises(GraphValidationError, match="cond_graph 'cond' must output one one-element "
                                                   "BOOL tensor"):
        validate(g)
    g = _while_graph()
    body = g.block("body")
    body.tensors[body.outputs[0]] = Tensor(body.outputs[0], (2,), DType.INT32)
    with pytest.raises(GraphValidationError):
        validate(g)


def test_control_flow_recursion():
    g = _while_graph()
    body = g.block("body")
    i = body.inputs[0]
    body.operators.insert(0, Operator(Op.WHILE_LOOP, [i], ["again"],
                                      make_attribute(Op.WHILE_LOOP, cond_graph="cond",
                                                     body_graph="body")))
    body.tensors["again"] = Tensor("again", (1,), DType.INT32)
    with pytest.raises(GraphValidationError, match="control flow recursion: body -> body"):
        validate(g)


def _variable_graph():
    b = GraphBuilder()
    x = b.input("x", (1, 4), DType.INT8)
    v = b.variable("v", (1, 4), DType.INT8, np.zeros((1, 4), np.int8))
    old = b.variable_read(v, name="old")
    b.variable_write(v, x)
    b.output(old)
    return b.build(validate=False)


def test_variable_rules():
    validate(_variable_graph())
    g = _variable_graph()
    g.main.operators.append(Operator(Op.CLAMP, ["v"], ["old2"], make_attribute(
        Op.CLAMP, min_val=b"\x80", max_val=b"\x7f")))
    g.main.tensors["old2"] = Tensor("old2", (1, 4), DType.INT8)
    with pytest.raises(GraphValidationError, match="reads variable 'v' directly"):
        validate(g)
    g = _variable_graph()
    g.main.tensors["x"] = Tensor("x", (1, 3), DType.INT8)
    with pytest.raises(GraphValidationError, match=r"value INT8\[1, 3\] does not match variable 'v'"):
        validate(g)
    g = _variable_graph()
    g.main.operators[0].inputs[0] = "x"
    with pytest.raises(GraphValidationError, match="'x' is not a variable tensor"):
        validate(g)
    g = _variable_graph()
    g.main.operators.insert(0, Operator(Op.VARIABLE, [], ["v"]))
    with pytest.raises(GraphValidationError, match="not with VARIABLE operators"):
        validate(g)


def test_variable_of_a_branch_must_be_declared_in_main():
    g = _cond_graph()
    g.block("then").tensors["stray"] = Tensor("stray", (4,), DType.INT8, variable=True)
    with pytest.raises(GraphValidationError, match="'stray' is not declared in the main block"):
        validate(g)


def test_draft_operators_validate_but_are_not_supported():
    b = GraphBuilder(version=(1, 1, 0, True))
    x = b.input("x", (1, 2, 3), DType.FP32)
    y = b.input("y", (1, 4, 3), DType.FP32)
    b.output(b.op(Op.MATMUL_T, [x, y], (1, 2, 4), DType.FP32))
    g = b.build()
    with pytest.raises(UnsupportedFeatureError, match="MATMUL_T is a TOSA 1.1 draft operator"):
        check_supported(g)
    check_supported(_add_graph())


def test_dynamic_shapes_are_not_supported():
    g = _add_graph()
    g.main.tensors["x"].shape = (-1, 4)
    validate(g)  # no static rule applies to it
    with pytest.raises(UnsupportedFeatureError, match="dynamic shape"):
        check_supported(g)


def test_profile_check_tells_apart_operators_that_differ_only_in_their_attribute():
    """Two CONV2D with the same element types: only the one whose acc_type no row allows fails
    (validation remembers supported combinations; the attribute is part of what it remembers)."""
    b = GraphBuilder()
    x = b.input("x", (1, 4, 4, 2), DType.INT8)
    w = b.const("w", np.zeros((2, 1, 1, 2), np.int8))
    bias = b.const("bias", np.zeros(2, np.int32))
    zp = b.const("zp", 0, DType.INT8)
    conv = dict(pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1))
    first = b.op(Op.CONV2D, [x, w, bias, zp, zp], (1, 4, 4, 2), DType.INT32, name="ok",
                 acc_type=DType.INT32, **conv)
    second = b.op(Op.CONV2D, [x, w, bias, zp, zp], (1, 4, 4, 2), DType.INT32, name="bad",
                  acc_type=DType.INT48, **conv)
    b.output(first, second)
    g = b.build(validate=False)
    with pytest.raises(GraphValidationError, match=r"CONV2D\(bad\): no TOSA 1.0 profile "
                                                   r"supports.*acc_t=INT48"):
        validate(g)
    g.main.operators.pop()  # without the second convolution the graph is valid
    g.main.outputs.remove("bad")
    del g.main.tensors["bad"]
    validate(g)


def test_operator_cycle_through_a_later_operator_is_found_in_any_order():
    """Operators in dependency order need no cycle search; any other order still gets one."""
    g = _add_graph()
    ops = g.main.operators
    ops[1].inputs[1] = "z"  # y = x + z, z = y + x: a cycle
    ops[1], ops[2] = ops[2], ops[1]  # listed z first
    with pytest.raises(GraphValidationError, match=r"operator cycle ADD\(z\) -> ADD\(y\) -> "
                                                   r"ADD\(z\)"):
        validate(g)


def test_operator_listed_before_its_producer_is_named():
    g = _add_graph()
    ops = g.main.operators
    ops[1], ops[2] = ops[2], ops[1]  # z = y + x listed before y = x + c
    with pytest.raises(GraphValidationError, match=r"ADD\(z\): uses tensor 'y' before ADD\(y\) "
                                                   "produces it"):
        validate(g)


def _rescale_graph(in_dtype: DType, scale32: bool, multiplier_dtype: DType) -> object:
    """A RESCALE of an ``in_dtype`` input to int16 with the given scale32 and multiplier type."""
    b = GraphBuilder()
    x = b.input("x", (1, 4, 4, 8), in_dtype)
    multiplier = b.const(None, np.full((1,), 1 << 14, dtype=multiplier_dtype.numpy_dtype), multiplier_dtype)
    shift = b.const(None, np.full((1,), 15, dtype=np.int8), DType.INT8)
    zp_in = b.const(None, np.zeros((1,), in_dtype.numpy_dtype), in_dtype)
    zp_out = b.const(None, np.zeros((1,), np.int16), DType.INT16)
    b.output(b.op(Op.RESCALE, [x, multiplier, shift, zp_in, zp_out], dtype=DType.INT16, shape=(1, 4, 4, 8),
                  scale32=scale32, rounding_mode="SINGLE_ROUND", per_channel=False))
    return b.build(validate=False)


def test_the_static_error_ifs_of_rescale_refuse_the_graph_before_any_kernel_runs():
    """A RESCALE whose attributes and types break an ERROR_IF (scale32 with an int48 input; a
    multiplier of the other width) is refused at validation, so a timing-only run, which runs no
    kernel, refuses it as the full run does."""
    validate(_rescale_graph(DType.INT48, scale32=False, multiplier_dtype=DType.INT16))
    with pytest.raises(GraphValidationError, match=r"ERROR_IF\(scale32 && is_same<in_t,i48_t>\(\)\)"):
        validate(_rescale_graph(DType.INT48, scale32=True, multiplier_dtype=DType.INT32))
    with pytest.raises(GraphValidationError, match="multiplier must be INT32 when scale32 is True"):
        validate(_rescale_graph(DType.INT16, scale32=True, multiplier_dtype=DType.INT16))
