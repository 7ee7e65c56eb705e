"""The compute-unit registry: which unit runs each TOSA operator, lookups by name."""

from __future__ import annotations

import pytest

from npu_sim.errors import ProgramError
from npu_sim.hw import compute_units
from npu_sim.hw.compute_units import NO_UNIT_OPS, unit, unit_for_op, unit_names
from npu_sim.tosa.ops import TOSA_1_0_OPS, Op
from tests.hw.hw_programs import make_hw


@pytest.mark.parametrize("op, name", [
    (Op.CONV2D, "mac_array"), (Op.DEPTHWISE_CONV2D, "mac_array"), (Op.TRANSPOSE_CONV2D, "mac_array"),
    (Op.CONV3D, "mac_array"), (Op.MATMUL, "mac_array"), (Op.FFT2D, "mac_array"), (Op.RFFT2D, "mac_array"),
    (Op.TABLE, "lut"), (Op.SIGMOID, "lut"), (Op.TANH, "lut"), (Op.EXP, "lut"), (Op.RSQRT, "lut"),
    (Op.POW, "lut"), (Op.ADD, "vector"), (Op.RESCALE, "vector"), (Op.REDUCE_SUM, "vector"),
    (Op.MAX_POOL2D, "vector"), (Op.GATHER, "vector"), (Op.RESIZE, "vector"), (Op.TRANSPOSE, "vector"),
    (Op.CUSTOM, "vector"), (Op.IDENTITY, "vector"),
])
def test_unit_table(op, name):
    assert unit_for_op(op).name == name


def test_every_tosa_1_0_operator_has_a_unit_or_needs_none():
    for op in TOSA_1_0_OPS:
        assert (unit_for_op(op) is None) == (op in NO_UNIT_OPS), op.name
    assert unit_for_op(Op.VARIABLE_READ) is None
    assert unit_for_op(Op.MATMUL_T) is None   # a TOSA 1.1 draft operator


def test_units_in_trace_order_and_by_name():
    assert unit_names() == ("mac_array", "vector", "lut", "cpu")
    assert unit("lut") is compute_units.LUT
    assert unit("cpu") is compute_units.CPU
    with pytest.raises(ProgramError, match=r"unknown compute unit 'gpu' \(units: mac_array, vector, lut, cpu\)"):
        unit("gpu")


def test_setup_cycles_come_from_the_unit_section():
    hw = make_hw()
    assert [unit(name).setup_cycles(hw) for name in unit_names()] == [5, 8, 3, 200]


def test_the_vector_unit_runs_any_step_the_others_only_their_own():
    assert compute_units.VECTOR.fallback and Op.CONV2D in compute_units.VECTOR.ops
    assert not compute_units.MAC_ARRAY.fallback and Op.ADD not in compute_units.MAC_ARRAY.ops
