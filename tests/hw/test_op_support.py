"""Which operators an NPU runs itself (npu_support.profile): Vela 5.2's TOSA rules for the Ethos-U."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.hw.op_support import OpFacts, unsupported_reason
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute


def _facts(op: Op, in_dtypes: tuple[DType, ...], out_dtype: DType, shape=(1, 8, 8, 16), weights=None,
           constants=(), fused=False, **attributes) -> OpFacts:
    inputs = [TensorType(shape, in_dtypes[0])]
    if weights is not None:
        inputs.append(TensorType(weights, in_dtypes[1]))
    inputs += [TensorType((4,), d) for d in in_dtypes[len(inputs):]]
    return OpFacts(op, make_attribute(op, **attributes), tuple(inputs), (TensorType(shape, out_dtype),),
                   tuple(constants), fused)


def _conv(dtype: DType, stride=(1, 1), kernel=3, op=Op.CONV2D) -> OpFacts:
    weights = (kernel, kernel, 16, 1) if op is Op.DEPTHWISE_CONV2D else (16, kernel, kernel, 16)
    extra = {} if op is Op.TRANSPOSE_CONV2D else {"pad": (1, 1, 1, 1), "dilation": (1, 1)}
    return _facts(op, (dtype, DType.INT8), DType.INT32, weights=weights, stride=stride, **extra)


def test_the_generic_profile_runs_everything():
    assert unsupported_reason("all", _facts(Op.ADD, (DType.FP32, DType.FP32), DType.FP32)) is None
    assert unsupported_reason("all", _facts(Op.GATHER, (DType.INT8, DType.INT32), DType.INT8)) is None


@pytest.mark.parametrize("profile", ["ethos-u55", "ethos-u65", "ethos-u85"])
def test_no_ethos_u_runs_floating_point_or_custom(profile):
    reason = unsupported_reason(profile, _facts(Op.ADD, (DType.FP32, DType.FP32), DType.FP32))
    assert reason is not None and reason.startswith("FP32 data: the NPU runs TOSA PRO-INT only")
    assert "SUPPORTED_OPS.md" in reason
    assert unsupported_reason(profile, _facts(Op.CAST, (DType.INT8,), DType.FP16)).startswith("FP16 data")
    assert unsupported_reason(profile, _facts(Op.CUSTOM, (DType.INT8,), DType.INT8)) == \
        "a CUSTOM operator runs on the host CPU"
    assert unsupported_reason(profile, _conv(DType.INT8)) is None


@pytest.mark.parametrize("op", [Op.GATHER, Op.SCATTER, Op.SELECT, Op.GREATER, Op.EQUAL, Op.BITWISE_AND,
                                Op.INTDIV, Op.LOGICAL_AND, Op.REDUCE_ANY])
def test_the_u55_and_u65_lack_what_vela_lists_as_not_supported(op):
    facts = _facts(op, (DType.INT32, DType.INT32), DType.INT32)
    assert unsupported_reason("ethos-u55", facts) == \
        f"{op.name} is not an Ethos-U55/U65 operator (Vela 5.2 SUPPORTED_OPS.md, Ethos-U55/U65 TOSA)"
    assert unsupported_reason("ethos-u65", facts) is not None
    assert unsupported_reason("ethos-u85", facts) is None


@pytest.mark.parametrize("facts, reason", [
    (_facts(Op.REDUCE_MAX, (DType.INT32,), DType.INT32, axis=3), "int32, needs int8 or int16 (a pooling operation)"),
    (_facts(Op.MATMUL, (DType.INT16, DType.INT16), DType.INT48), "int16 inputs, needs int8"),
    (_facts(Op.TABLE, (DType.INT16, DType.INT16), DType.INT32), "int16 table, int8 only"),
    (_facts(Op.CLZ, (DType.INT8,), DType.INT8), "int8 input, int32 only"),
    (_facts(Op.ARITHMETIC_RIGHT_SHIFT, (DType.INT32, DType.INT32), DType.INT32, round=False),
     "round false, needs round true"),
    (_facts(Op.CAST, (DType.INT32,), DType.INT8), "a down-cast from int32 is not supported"),
    (_facts(Op.REVERSE, (DType.INT8,), DType.INT8, axis=3), "axis 3, only H or W"),
    (_facts(Op.ARGMAX, (DType.INT8,), DType.INT32, shape=(1, 1, 1, 200), axis=3),
     "reduces over channels of at most 127 only"),
    (_facts(Op.RESCALE, (DType.INT48,), DType.INT8), "an int48 input only fused after an int16 convolution"),
    (_facts(Op.MAX_POOL2D, (DType.INT8,), DType.INT8, kernel=(2, 2), stride=(4, 4), pad=(0, 0, 0, 0)),
     "stride (4, 4), each 1..3"),
    (_conv(DType.INT8, stride=(4, 4)), "stride (4, 4), each 1..3"),
    (_conv(DType.INT8, stride=(1, 1), op=Op.TRANSPOSE_CONV2D), None),
    (_conv(DType.INT8, stride=(3, 3), op=Op.TRANSPOSE_CONV2D), "stride (3, 3), needs (1, 1) or (2, 2)"),
    (_conv(DType.INT16, op=Op.DEPTHWISE_CONV2D), None),
    (_conv(DType.INT8, kernel=65), "kernel 65x65, at most 64 high and 4096 elements"),
])
def test_the_u55_rules_per_operator(facts, reason):
    got = unsupported_reason("ethos-u55", facts)
    assert got == (None if reason is None else
                   f"{facts.op.name}: {reason} (Vela 5.2 SUPPORTED_OPS.md, Ethos-U55/U65 TOSA)")
    assert unsupported_reason("ethos-u85", facts) is None


def test_an_int48_rescale_fused_behind_an_int16_convolution_runs():
    assert unsupported_reason("ethos-u55", _facts(Op.RESCALE, (DType.INT48,), DType.INT8, fused=True)) is None


@pytest.mark.parametrize("scale, supported", [((2, 1, 2, 1), True), ((8, 1, 4, 1), True), ((3, 1, 3, 1), False),
                                              ((1, 2, 1, 2), False), ((1, 1, 1, 1), False)])
def test_the_u55_resizes_by_powers_of_two_up_to_8(scale, supported):
    facts = _facts(Op.RESIZE, (DType.INT8, DType.SHAPE, DType.SHAPE, DType.SHAPE), DType.INT8,
                   constants=(None, np.array(scale), None, None), mode="NEAREST")
    assert (unsupported_reason("ethos-u55", facts) is None) == supported


def test_a_stride_over_an_output_of_one_element_is_no_stride():
    """regor resets the stride along an output dimension of one element to 1: a global 8x8
    average pool of stride 8 (ResNet-8's head) runs on the U55; an 8x8 one with two outputs a row
    keeps its stride 8 and runs on the CPU."""
    def pool(out_hw: int) -> OpFacts:
        return OpFacts(Op.AVG_POOL2D, make_attribute(Op.AVG_POOL2D, kernel=(8, 8), stride=(8, 8), pad=(0, 0, 0, 0)),
                       (TensorType((1, 8 * out_hw, 8 * out_hw, 64), DType.INT8), TensorType((1,), DType.INT8),
                        TensorType((1,), DType.INT8)), (TensorType((1, out_hw, out_hw, 64), DType.INT8),))
    assert unsupported_reason("ethos-u55", pool(1)) is None
    assert unsupported_reason("ethos-u55", pool(2)) == \
        "AVG_POOL2D: stride (8, 8), each 1..3 (Vela 5.2 SUPPORTED_OPS.md, Ethos-U55/U65 TOSA)"


def test_a_tflite_conv2d_of_a_large_stride_without_padding_or_dilation_runs_on_the_u55():
    """SUPPORTED_OPS.md, Ethos-U55/U65 TFLite CONV_2D: "Stride>3 is only supported IF (dilation = 1
    AND padding = VALID)" (a ViT's patch embedding); its TOSA rule and TFLite DEPTHWISE_CONV_2D's
    keep 1..3."""
    def conv(op=Op.CONV2D, pad=(0, 0, 0, 0), dilation=(1, 1), tflite=True) -> OpFacts:
        weights = (4, 4, 16, 1) if op is Op.DEPTHWISE_CONV2D else (16, 4, 4, 16)
        facts = _facts(op, (DType.INT8, DType.INT8), DType.INT32, weights=weights, stride=(4, 4), pad=pad,
                       dilation=dilation)
        return OpFacts(facts.op, facts.attribute, facts.input_types, facts.output_types, tflite_source=tflite)

    assert unsupported_reason("ethos-u55", conv()) is None
    assert unsupported_reason("ethos-u65", conv()) is None
    for refused in (conv(tflite=False), conv(pad=(1, 1, 1, 1)), conv(dilation=(2, 2)), conv(Op.DEPTHWISE_CONV2D)):
        assert "stride (4, 4), each 1..3" in unsupported_reason("ethos-u55", refused)
