import numpy as np
import pytest

from npu_sim.errors import UnsupportedFeatureError
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Operator
from npu_sim.tosa.ops import Op
from scheduler.ir.npu_ops import OpKind, ValueKind
from scheduler.passes.lowering import contiguous_slice_offset, lower
from tests.scheduler.graphs import small_cnn


def test_small_cnn_lowers_to_fused_compute_operations():
    lowered = lower(small_cnn())
    ops = lowered.main.ops
    assert [o.op_label for o in ops] == [
        "CONV2D+RESCALE+CLAMP", "DEPTHWISE_CONV2D+RESCALE+CLAMP", "RESCALE",
        "CONV2D+RESCALE+RESCALE+ADD+RESCALE", "MAX_POOL2D"]
    assert [o.unit for o in ops] == ["mac_array", "mac_array", "vector", "mac_array", "vector"]
    conv = ops[0]
    assert conv.macs == 16 * 16 * 8 * 3 * 3 * 4
    # chained steps hand their output on as "output 0 of step k"
    assert conv.steps[1].operands[0] == 0 and conv.steps[2].operands[0] == 1
    add = ops[3].steps[-2]
    assert 2 in add.operands and any(isinstance(o, str) for o in add.operands)
    kinds = {v.kind for v in lowered.values.values()}
    assert kinds == {ValueKind.INPUT, ValueKind.OUTPUT, ValueKind.CONSTANT, ValueKind.INTERMEDIATE}


def test_variables_reshape_and_control_flow():
    b = GraphBuilder()
    x = b.input("x", (2, 3), DType.INT32)
    c = b.input("c", (1,), DType.BOOL)
    v = b.variable("acc", (2, 3), DType.INT32, np.zeros((2, 3), np.int32))
    r = b.variable_read(v)
    s = b.op(Op.ADD, [r, x])
    b.variable_write(v, s)
    flat = b.op(Op.RESHAPE, [s, b.const_shape(None, [6])])
    (y,) = b.cond_if(c, [flat], lambda bb, a: bb.op(Op.ADD, [a, a]), lambda bb, a: a)
    b.output(y)
    lowered = lower(b.build())
    ops = lowered.main.ops
    assert [o.kind for o in ops] == [OpKind.COPY, OpKind.COMPUTE, OpKind.COPY, OpKind.COPY, OpKind.COND_IF]
    read, add, write, reshape, cond = ops
    assert read.sources == ("var:acc",) and write.outputs == ("var:acc",)
    assert lowered.values["var:acc"].kind is ValueKind.VARIABLE
    assert reshape.alias_ok is True
    then_block, else_block = cond.blocks
    assert all(k.startswith(then_block.name + "/") for k in then_block.inputs + then_block.outputs)
    assert lowered.values[then_block.inputs[0]].kind is ValueKind.BOUND
    assert else_block.inputs == else_block.outputs   # the else branch passes its argument through


def test_unsupported_operator_named():
    b = GraphBuilder()
    x = b.input("x", (2,), DType.INT32)
    b.output(b.op(Op.ABS, [x]))
    g = b.build()
    g.main.operators.append(Operator(Op.DIM, [x], ["d"]))
    with pytest.raises(UnsupportedFeatureError, match=r"DIM\(d\)"):
        lower(g)


# --- SLICE as an alias ------------------------------------------------------------------------------

def _slice_graph(shape, start, size, dtype=DType.INT8):   # unvalidated: bad slices reach the scheduler
    b = GraphBuilder()
    x = b.input("x", shape, dtype)
    y = b.op(Op.SLICE, [x, b.const_shape(None, list(start)), b.const_shape(None, list(size))], tuple(size), dtype)
    b.output(y)
    return b.build(validate=False)


@pytest.mark.parametrize("shape, start, size, offset", [
    ((1, 1, 1, 64), (0, 0, 0, 16), (1, 1, 1, 16), 16),       # an LSTM gate
    ((4, 6, 8), (2, 0, 0), (2, 6, 8), 96),                    # whole rows of the outer dimension
    ((4, 6, 8), (1, 3, 0), (1, 2, 8), 48 + 24),               # inner rows of one outer index
    ((4, 6, 8), (0, 0, 0), (4, 6, 8), 0),                     # everything
])
def test_contiguous_slice_offset(shape, start, size, offset):
    g = _slice_graph(shape, start, size)
    assert contiguous_slice_offset(g.main, g.main.operators[-1]) == offset


@pytest.mark.parametrize("shape, start, size", [
    ((4, 6, 8), (0, 0, 2), (4, 6, 2)),     # a channel slice: strided
    ((4, 6, 8), (1, 1, 0), (2, 2, 8)),     # two outer indices of a partial middle
    ((4, 6, 8), (3, 0, 0), (2, 6, 8)),     # out of bounds: the kernel reports it at run time
])
def test_non_contiguous_or_invalid_slices_stay_kernels(shape, start, size):
    g = _slice_graph(shape, start, size)
    assert contiguous_slice_offset(g.main, g.main.operators[-1]) is None
