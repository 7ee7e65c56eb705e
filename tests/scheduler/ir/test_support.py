import pytest

from npu_sim.errors import UnsupportedFeatureError
from npu_sim.tosa.ir import Operator
from npu_sim.tosa.ops import Op
from scheduler.ir import support


def test_unit_of_names_the_registry_unit():
    assert support.unit_of(Operator(Op.CONV2D, ["a"], ["b"])) == "mac_array"
    assert support.unit_of(Operator(Op.CUSTOM, ["a"], ["b"])) == "vector"


def test_draft_operator_is_refused_by_name():
    with pytest.raises(UnsupportedFeatureError, match=r"MATMUL_T\(y\).*not a TOSA 1.0 operator"):
        support.check_operator(Operator(Op.MATMUL_T, ["a", "b"], ["y"]))


def test_operators_without_unit():
    for op in (Op.CONST, Op.VARIABLE_READ, Op.COND_IF):
        support.check_operator(Operator(op, [], ["y"]))
        with pytest.raises(UnsupportedFeatureError, match="runs on no compute unit"):
            support.unit_of(Operator(op, [], ["y"]))
