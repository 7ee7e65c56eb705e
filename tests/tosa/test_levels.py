"""npu_sim.tosa.levels: TOSA level 8K's maxima refuse a graph at load; level "none" allows it."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.errors import GraphValidationError, InputError
from npu_sim.reference.session import execute
from npu_sim.tosa import DType, GraphBuilder, Op
from npu_sim.tosa.levels import LEVELS, check_level, level_named
from npu_sim.tosa.loader import load_graph, save_graph


def _add(rank: int):
    b = GraphBuilder()
    x = b.input("x", (2,) * rank, DType.INT32)
    b.output(b.op(Op.ADD, [x, x], name="y"))
    return b.build()


def _conv(kernel: int, dilation: int = 1, stride: int = 1, pad: int = 0):
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 1), DType.INT8)
    w = b.const("w", np.zeros((1, kernel, 1, 1), np.int8))
    bias = b.const("bias", np.zeros(1, np.int32))
    zp = b.const("zp", 0, DType.INT8)
    out_h = (8 + 2 * pad - (kernel - 1) * dilation - 1) // stride + 1
    b.output(b.op(Op.CONV2D, [x, w, bias, zp, zp], (1, out_h, 8, 1), DType.INT32, pad=(pad, pad, 0, 0),
                  stride=(stride, 1), dilation=(dilation, 1), acc_type=DType.INT32))
    return b.build(validate=False)


def test_the_two_levels_of_the_specification():
    assert (LEVELS["8K"].max_rank, LEVELS["8K"].max_kernel, LEVELS["8K"].max_scale) == (6, 8192, 256)
    assert (LEVELS["none"].max_rank, LEVELS["none"].max_tensor_list_size) == (32, 256)
    assert level_named("8k") is LEVELS["8K"]
    with pytest.raises(InputError, match="unknown TOSA level '9K' \\(levels: 8K, none\\)"):
        level_named("9K")


def test_rank_beyond_max_rank(tmp_path):
    check_level(_add(6), "8K")
    with pytest.raises(GraphValidationError, match=r"ADD\(y\): the rank of 'x' is 7, more than MAX_RANK = 6 "
                                                   r"of TOSA level 8K \(level 'none' allows it\)"):
        check_level(_add(7), "8K")
    check_level(_add(7), "none")
    save_graph(_add(7), tmp_path / "rank7.tosa")
    with pytest.raises(GraphValidationError, match="MAX_RANK"):
        load_graph(tmp_path / "rank7.tosa")   # the default level is 8K
    graph = load_graph(tmp_path / "rank7.tosa", level="none")
    x = np.arange(128, dtype=np.int32).reshape((2,) * 7)
    np.testing.assert_array_equal(execute(graph, [x])["y"], 2 * x)


@pytest.mark.parametrize("kwargs, message", [
    (dict(kernel=3, dilation=2731), "dilation \\* kernel size on axis 0 is 8193, more than MAX_KERNEL = 8192"),
    (dict(kernel=1, stride=8193), "the stride is 8193, more than MAX_STRIDE = 8192"),
    (dict(kernel=1, pad=8193), "the pad is 8193, more than MAX_KERNEL = 8192"),
])
def test_convolution_arguments_beyond_the_level(kwargs, message):
    check_level(_conv(kernel=3, dilation=2730), "8K")  # 8190 taps wide: within
    with pytest.raises(GraphValidationError, match=message):
        check_level(_conv(**kwargs), "8K")
    check_level(_conv(**kwargs), "none")


def test_pool_resize_and_list_limits():
    b = GraphBuilder()
    x = b.input("x", (1, 2, 2, 1), DType.INT8)
    b.output(b.op(Op.RESIZE, [x, b.const_shape("scale", [257, 1, 513, 2]), b.const_shape("offset", [0, 0]),
                              b.const_shape("border", [0, 0])], (1, 258, 3, 1), DType.INT8, mode=1))
    graph = b.build(validate=False)
    with pytest.raises(GraphValidationError, match="scale_y is 257, more than MAX_SCALE = 256"):
        check_level(graph, "8K")
    check_level(graph, "none")

    b = GraphBuilder()
    parts = [b.input(f"x{i}", (1,), DType.INT32) for i in range(65)]
    b.output(b.op(Op.CONCAT, parts, (65,), axis=0))
    graph = b.build(validate=False)
    with pytest.raises(GraphValidationError, match="input list length is 65, more than MAX_TENSOR_LIST_SIZE = 64"):
        check_level(graph, "8K")
    check_level(graph, "none")

    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 1), DType.FP32)
    b.output(b.op(Op.MAX_POOL2D, [x], (1, 1, 1, 1), kernel=(8193, 1), stride=(1, 1), pad=(0, 0, 0, 0)))
    with pytest.raises(GraphValidationError, match="MAX_POOL2D.*kernel size is 8193"):
        check_level(b.build(validate=False), "8K")
