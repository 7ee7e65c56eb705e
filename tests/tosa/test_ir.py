"""IR value types: TensorType sizes, Tensor and Operator normalising their fields."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_sim.tosa import DType, Op, Operator, Tensor, TensorType
from npu_sim.tosa.ops import attribute_class

_DIMS = st.one_of(st.integers(-4, 70_000), st.integers(-2**31, 2**31 - 1),
                  st.integers(-2**62, 2**62))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(_DIMS, max_size=6))
def test_element_count_is_the_int64_product_numpy_gives(shape):
    assert TensorType(tuple(shape), DType.INT8).element_count == \
        int(np.prod(shape, dtype=np.int64))


def test_element_count_of_scalars_numpy_dims_and_overflowing_shapes():
    assert TensorType((), DType.FP32).element_count == 1
    assert TensorType((np.int64(3), np.int32(5)), DType.FP32).element_count == 15
    huge = (2**31 - 1,) * 4  # 2**124-ish: wraps around in int64 like numpy's product
    assert TensorType(huge, DType.INT8).element_count == int(np.prod(huge, dtype=np.int64))
    assert TensorType((2**40, 2**40), DType.INT8).element_count == 0  # 2**80 mod 2**64
    assert TensorType((1, 2, 3), DType.INT16).size_bytes == 12


def test_tensor_and_operator_normalise_their_fields():
    t = Tensor("t", np.array([2, 3]), 5)
    assert t.shape == (2, 3) and all(type(d) is int for d in t.shape)
    assert t.dtype is DType.INT32 and t.element_count == 6
    inputs = ["a", "b"]
    op = Operator(int(Op.ADD), inputs, ("c",))
    assert op.op is Op.ADD and op.outputs == ["c"]
    assert op.inputs == inputs and op.inputs is not inputs  # the operator owns its lists
    assert isinstance(op.attribute, attribute_class(Op.ADD))
