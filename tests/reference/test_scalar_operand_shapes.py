"""Operands tosa.xml gives the shape [1] (zero points, MUL's shift, PAD's pad_const): a rank-0
or longer tensor in their place breaks an ERROR_IF, as the conformance generator's negative
tests (e.g. MUL ``InputRank1WrongRank``) expect; the same graph with shape [1] runs."""

from __future__ import annotations

import re

import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError
from npu_sim.reference.session import execute
from npu_sim.tosa import DType, GraphBuilder, Op


def _mul(shape):
    b = GraphBuilder()
    x = b.input("x", (4,), DType.INT32)
    b.output(b.op(Op.MUL, [x, x, b.const("shift", np.zeros(shape, np.int8), shape=shape)], name="y"))
    return b.build()


def _negate(shape):
    b = GraphBuilder()
    x = b.input("x", (4,), DType.INT8)
    zp = b.const("zp", np.zeros(shape, np.int8), shape=shape)
    b.output(b.op(Op.NEGATE, [x, zp, b.const("out_zp", 0, DType.INT8)], name="y"))
    return b.build()


def _pad(shape):
    b = GraphBuilder()
    x = b.input("x", (4,), DType.INT8)
    b.output(b.op(Op.PAD, [x, b.const_shape("padding", [1, 1]), b.const("value", np.full(shape, 7, np.int8), shape=shape)],
                  name="y"))
    return b.build()


@pytest.mark.parametrize("build, name, expected", [
    (_mul, "shift", lambda x: x * x),
    (_negate, "input1_zp", lambda x: -x),
    (_pad, "pad_const", lambda x: np.concatenate([[7], x, [7]])),
])
def test_scalar_operands_must_have_shape_one(build, name, expected):
    x = np.array([1, -2, 3, 4], np.int32 if build is _mul else np.int8)
    np.testing.assert_array_equal(execute(build((1,)), [x])["y"], expected(x))
    for shape in [(), (2,), (1, 1)]:
        message = re.escape(f"{name} must have shape [1], got {list(shape)}")
        with pytest.raises(TosaRuntimeError, match=message):
            execute(build(shape), [x])
