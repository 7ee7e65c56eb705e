import pytest

from npu_sim.errors import UnsupportedFeatureError
from npu_sim.tosa.ir import Operator
from npu_sim.tosa.ops import TOSA_1_0_OPS, Op
from scheduler import support


@pytest.mark.parametrize("op, unit", [
    (Op.CONV2D, "mac_array"), (Op.DEPTHWISE_CONV2D, "mac_array"), (Op.TRANSPOSE_CONV2D, "mac_array"),
    (Op.CONV3D, "mac_array"), (Op.MATMUL, "mac_array"), (Op.FFT2D, "mac_array"), (Op.RFFT2D, "mac_array"),
    (Op.TABLE, "lut"), (Op.SIGMOID, "lut"), (Op.TANH, "lut"), (Op.EXP, "lut"), (Op.RSQRT, "lut"),
    (Op.POW, "lut"), (Op.ADD, "vector"), (Op.RESCALE, "vector"), (Op.REDUCE_SUM, "vector"),
    (Op.MAX_POOL2D, "vector"), (Op.GATHER, "vector"), (Op.RESIZE, "vector"), (Op.TRANSPOSE, "vector"),
])
def test_unit_table(op, unit):
    assert support.unit_of(Operator(op, ["a"], ["b"])) == unit


def test_every_tosa_1_0_operator_has_a_home():
    for op in TOSA_1_0_OPS:
        assert op in support.UNIT_OF or op in support.NO_UNIT, op.name


def test_draft_operator_is_refused_by_name():
    with pytest.raises(UnsupportedFeatureError, match=r"MATMUL_T\(y\).*not a TOSA 1.0 operator"):
        support.check_operator(Operator(Op.MATMUL_T, ["a", "b"], ["y"]))


def test_operators_without_unit():
    for op in (Op.CONST, Op.VARIABLE_READ, Op.COND_IF):
        support.check_operator(Operator(op, [], ["y"]))
        with pytest.raises(UnsupportedFeatureError, match="runs on no compute unit"):
            support.unit_of(Operator(op, [], ["y"]))
