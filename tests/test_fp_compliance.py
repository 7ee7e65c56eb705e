"""The FP compliance helper itself: it must accept what the spec allows and reject the rest."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op
from tests.fp_compliance import (
    abs_error_bound,
    assert_fp_compliant,
    check_fp_ulp,
    compliance_mask,
    reference_ulp,
)
from tests.oracle import Operand, run_op

F16, BF16, F32, E4M3 = DType.FP16, DType.BF16, DType.FP32, DType.FP8E4M3


def test_reference_ulp_values():
    ref = np.array([1.0, 1.5, -3.0, 0.0, np.inf, np.nan, 2.0**-130, 5e-324])
    ulp = reference_ulp(ref, F32)
    assert ulp.tolist() == [2.0**-23, 2.0**-23, 2.0**-22, 0.0, 0.0, 0.0, 2.0**-126 * 2.0**-23, 0.0]
    assert reference_ulp(np.array([1.0]), F16)[0] == 2.0**-10
    assert reference_ulp(np.array([1.0]), BF16)[0] == 2.0**-7


def test_half_ulp_accepts_rounding_and_rejects_one_ulp():
    ref = np.array([1.0 + 2.0**-11, 1.0 + 2.0**-11])  # halfway between two fp16 values
    ours = np.array([1.0, 1.0 + 2.0**-10])
    assert check_fp_ulp(ours, ref, 0.5, F16).all()
    assert not check_fp_ulp(np.array([1.0 + 2.0**-9]), np.array([1.0]), 0.5, F16).any()
    with pytest.raises(AssertionError, match="ADD FP16: 1 non-compliant"):
        assert_fp_compliant(np.array([1.0, 1.0 + 2.0**-9], np.float16), np.array([1.0, 1.0]), F16, Op.ADD)


def test_nan_inf_zero_and_flush_rules():
    # NaN reference needs a NaN; a NaN where a number is expected fails
    assert check_fp_ulp(np.array([np.nan]), np.array([np.nan]), 0.5, F32).all()
    assert not check_fp_ulp(np.array([1.0]), np.array([np.nan]), 0.5, F32).any()
    assert not check_fp_ulp(np.array([np.nan]), np.array([1.0]), 0.5, F32).any()
    # infinity is exact; overflow beyond the largest normal may become infinity
    assert check_fp_ulp(np.array([np.inf]), np.array([np.inf]), 0.5, F32).all()
    assert check_fp_ulp(np.array([np.inf]), np.array([70000.0]), 0.5, F16).all()
    assert not check_fp_ulp(np.array([-np.inf]), np.array([70000.0]), 0.5, F16).any()
    # a subnormal result may be flushed to zero (bf16/fp16/fp32), a normal one may not
    assert check_fp_ulp(np.array([0.0]), np.array([2.0**-20]), 0.5, F16).all()
    assert not check_fp_ulp(np.array([0.0]), np.array([2.0**-13]), 0.5, F16).any()
    # fp8e4m3 has no infinity: NaN is the overflow result
    assert check_fp_ulp(np.array([np.nan]), np.array([1000.0]), 0.5, E4M3).all()
    assert not check_fp_ulp(np.array([np.nan]), np.array([400.0]), 0.5, E4M3).any()


def test_abs_error_bound_formula():
    # calcAbsErrorBound(out_ref=1.0, bounds_value=3, lower_bound=0, divisor=1) for fp32
    assert abs_error_bound(1.0, 3.0, 0.0, 1, F32) == pytest.approx(3 * 2.0**-23)
    # tiny magnitudes are raised to normal_min; lower_bound/bounds_value wins when larger
    assert abs_error_bound(0.0, 2.0, 0.0, 1, F16) == pytest.approx(2.0**-14 * 2.0**-10 * 2)
    assert abs_error_bound(0.0, 5.0, 0.5, 1, F16) == pytest.approx(0.1 * 2.0**-10 * 5)
    # an infinite bounds_value with zero magnitude gives no slack (exact results required)
    assert abs_error_bound(0.0, np.inf, 0.0, 1, F32) == 0.0


def test_input_dependent_bounds():
    x = np.array([10.0])
    ref = np.array([np.exp(10.0)])
    slack = abs_error_bound(ref, 3 + 2 * 10.0, 0, 1, F32)[0]
    assert compliance_mask(ref + slack * 0.9, ref, F32, Op.EXP, inputs=[x]).all()
    assert not compliance_mask(ref + slack * 1.5, ref, F32, Op.EXP, inputs=[x]).any()
    with pytest.raises(ValueError, match="no precision rule"):
        compliance_mask(ref, ref, F32, Op.CONV2D)


def test_cast_rules():
    # int -> float: 0.5 ulp; float -> float: round toward zero is allowed too
    ref = np.array([1.0 + 2.0**-11 * 1.5])  # 0.75 ulp above 1.0
    assert not compliance_mask(np.array([1.0]), ref, F16, Op.CAST, inputs=[np.array([7], np.int32)]).any()
    assert compliance_mask(np.array([1.0]), ref, F16, Op.CAST, inputs=[np.array([7.0], np.float32)]).all()
    assert not compliance_mask(np.array([-1.0]), ref, F16, Op.CAST, inputs=[np.array([7.0], np.float32)]).any()


def test_precise_run_op_returns_unrounded_reference():
    x = np.array([0.1, 2.0, -3.0], np.float16)
    ref = run_op(Op.EXP, [Operand(x, F16)], None, [TensorType((3,), F16)], precise=True)[0]
    assert ref.dtype == np.float64
    np.testing.assert_allclose(ref, np.exp(x.astype(np.float64)), rtol=1e-12)
    assert float(np.float16(ref[0])) != ref[0]  # not rounded to fp16
