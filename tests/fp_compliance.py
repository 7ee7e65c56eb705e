"""Floating-point compliance checks of the TOSA 1.0 spec, for tests.

The spec (chapters/introduction.adoc "Floating-Point Precision Requirements",
pseudocode/library/tosa_reference_check.tosac and numeric_accuracy_helpers.tosac)
judges an implementation's output against ``out_ref``, the result computed in
fp64 arithmetic; each operator states its error bound (in ulp, or an absolute
bound from ``calcAbsErrorBound``). This module implements those functions
vectorized; ``out_ref`` comes from the reference model in precise (fp64) mode
(``tests.oracle.run_op(..., precise=True)``).

Typical use::

    ref = run_op(Op.EXP, operands, None, [TensorType(shape, DType.FP16)], precise=True)[0]
    assert_fp_compliant(ours, ref, DType.FP16, Op.EXP, inputs=[x])

Operators not in ``OP_BOUNDS`` can pass ``num_ulp=`` or ``err_bnd=`` directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op

# --------------------------------------------------------------------------- spec constants
NORMAL_FRAC = {DType.FP32: 23, DType.BF16: 7, DType.FP16: 10, DType.FP8E4M3: 3, DType.FP8E5M2: 2}
NORMAL_MIN = {DType.FP32: 2.0**-126, DType.BF16: 2.0**-126, DType.FP16: 2.0**-14,
              DType.FP8E4M3: 2.0**-6, DType.FP8E5M2: 2.0**-14}
NORMAL_MAX = {DType.FP32: 2.0**128 - 2.0**104, DType.BF16: 2.0**128 - 2.0**120,
              DType.FP16: 2.0**16 - 2.0**5, DType.FP8E4M3: 2.0**9 - 2.0**6,
              DType.FP8E5M2: 2.0**16 - 2.0**13}
_FLUSHABLE = (DType.FP32, DType.BF16, DType.FP16)


def _f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def reference_ulp(ref: np.ndarray, dtype: DType) -> np.ndarray:
    """tosa_reference_ulp<dtype>(ref): one ulp at ``ref`` (0 for zero, inf, NaN, fp64 subnormals)."""
    ref = np.abs(_f64(ref))
    normal = np.isfinite(ref) & (ref >= np.finfo(np.float64).smallest_normal)
    safe = np.where(normal, ref, 1.0)
    _, exponent = np.frexp(safe)  # safe = m * 2**e with 0.5 <= m < 1
    pow2 = np.maximum(np.ldexp(1.0, exponent - 1), NORMAL_MIN[dtype])
    return np.where(normal, pow2 * 2.0 ** -NORMAL_FRAC[dtype], 0.0)


def abs_error_bound(bound_magnitude: np.ndarray, bounds_value: np.ndarray, lower_bound: np.ndarray,
                    normal_divisor: float, dtype: DType) -> np.ndarray:
    """calcAbsErrorBound<dtype>(bound_magnitude, bounds_value, lower_bound, normal_divisor)."""
    mag, bval, low = np.broadcast_arrays(np.abs(_f64(bound_magnitude)), _f64(bounds_value),
                                         _f64(lower_bound))
    with np.errstate(all="ignore"):
        value_bound = np.maximum(mag, NORMAL_MIN[dtype])
        value_bound = np.where(low > 0, np.maximum(low / bval, value_bound), value_bound)
        err = 2.0 ** (-NORMAL_FRAC[dtype] / normal_divisor) * value_bound * bval
    active = np.isfinite(bval) | (mag != 0)
    return np.where(active, err, 0.0)


def check_fp_bnd(test: np.ndarray, ref: np.ndarray, err_bnd: np.ndarray, dtype: DType) -> np.ndarray:
    """tosa_reference_check_fp_bnd, elementwise: True where ``test`` is compliant."""
    test, ref, err = np.broadcast_arrays(_f64(test), _f64(ref), _f64(err_bnd))
    ref_nan = np.isnan(ref)
    unbounded = ~np.isfinite(err)
    negative = ref < 0
    ref_abs = np.where(negative, -ref, ref)
    test_s = np.where(negative, -test, test)
    with np.errstate(all="ignore"):
        ref_max = ref_abs + err
        ref_min = ref_abs - err
    limit = NORMAL_MAX[dtype]
    ref_max = np.where(ref_max > limit, np.inf, ref_max)
    ref_min = np.where(ref_min > limit, np.inf, ref_min)
    ref_min = np.where(ref_min < -limit, -np.inf, ref_min)
    in_range = (test_s >= ref_min) & (test_s <= ref_max)
    if dtype in _FLUSHABLE:
        in_range = np.where(test_s == 0, ref_min < NORMAL_MIN[dtype], in_range)
    if dtype is DType.FP8E4M3:
        in_range = np.where(np.isnan(test_s), ref_max == np.inf, in_range)
    return np.where(ref_nan, np.isnan(test), unbounded | in_range)


def check_fp_ulp(test: np.ndarray, ref: np.ndarray, num_ulp: float, dtype: DType) -> np.ndarray:
    """tosa_reference_check_fp: within ``num_ulp`` ulp of ``ref``."""
    return check_fp_bnd(test, ref, reference_ulp(ref, dtype) * num_ulp, dtype)


# --------------------------------------------------------------------------- per-operator bounds
BoundFn = Callable[[np.ndarray, Sequence[np.ndarray], DType], np.ndarray]


def _ulps(n: float) -> BoundFn:
    return lambda ref, inputs, dtype: reference_ulp(ref, dtype) * n


def _err_base(dtype: DType) -> float:
    return 3.0 if dtype is DType.FP32 else 1.0


def _exp_bound(ref, inputs, dtype):
    x = _f64(inputs[0])
    return abs_error_bound(ref, _err_base(dtype) + 2 * np.abs(x), 0, 1, dtype)


def _log_bound(ref, inputs, dtype):
    return abs_error_bound(ref, 5, 0.5, 1, dtype)


def _sin_bound(ref, inputs, dtype):
    x = _f64(inputs[0])
    return np.maximum(abs_error_bound(x, 2, 0, 2, dtype), np.pi * NORMAL_MIN[dtype])


def _cos_bound(ref, inputs, dtype):
    x = _f64(inputs[0])
    return abs_error_bound(1 + np.abs(x), 1, 0, 2, dtype)


def _sigmoid_bound(ref, inputs, dtype):
    x = _f64(inputs[0])
    return abs_error_bound(ref, 2 * (1 + np.abs(x)), 0, 1, dtype)


def _tanh_bound(ref, inputs, dtype):
    x = _f64(inputs[0])
    return abs_error_bound(ref, 4 * (_err_base(dtype) + 2 * np.abs(x)), 0.5, 1, dtype)


def _pow_bound(ref, inputs, dtype):
    x, y = np.broadcast_arrays(_f64(inputs[0]), _f64(inputs[1]))
    ref = _f64(ref)
    with np.errstate(all="ignore"):
        ylogx = y * np.log(x)
        mul_err = abs_error_bound(ylogx, 5.5, np.abs(0.55 * y), 1, dtype)
        exp_err = abs_error_bound(ref, _err_base(dtype) + 2 * np.abs(ylogx + mul_err), 0, 1, dtype)
        bound = ref * np.expm1(mul_err) + exp_err
    exact = ((x == 0) & (y > 0)) | ((x > 0) & (y == 0))  # results 0 and 1 are exact
    return np.where(exact, 0.0, bound)


#: op -> error bound, from each operator's "Precision Requirements"
OP_BOUNDS: dict[Op, BoundFn] = {
    Op.ADD: _ulps(0.5), Op.SUB: _ulps(0.5), Op.MUL: _ulps(0.5), Op.CEIL: _ulps(0.5),
    Op.FLOOR: _ulps(0.5), Op.RECIPROCAL: _ulps(1), Op.RSQRT: _ulps(2), Op.ERF: _ulps(5),
    Op.EXP: _exp_bound, Op.LOG: _log_bound, Op.SIN: _sin_bound, Op.COS: _cos_bound,
    Op.SIGMOID: _sigmoid_bound, Op.TANH: _tanh_bound, Op.POW: _pow_bound,
    # exact operators (zero sign and subnormal flushing are handled by check_fp_bnd)
    Op.ABS: _ulps(0), Op.NEGATE: _ulps(0), Op.MAXIMUM: _ulps(0), Op.MINIMUM: _ulps(0),
    Op.CLAMP: _ulps(0), Op.SELECT: _ulps(0),
}


def _cast_fp_compliant(test: np.ndarray, ref: np.ndarray, in_value: np.ndarray, dtype: DType) -> np.ndarray:
    """CAST precision rule: int -> float within 0.5 ulp; float -> float per the CAST text."""
    from_int = np.asarray(in_value).dtype.kind in "iub"
    test, ref, x = np.broadcast_arrays(_f64(test), _f64(ref), _f64(in_value))
    ok = check_fp_ulp(test, ref, 0.5, dtype)
    if from_int:
        return ok
    # float -> float: out_ref - ulp <= |out| <= out_ref + 0.5 ulp (round to zero or nearest),
    # for inputs inside the output range; outside it, ref (inf/NaN per OCP rules) must match.
    ulp = reference_ulp(ref, dtype)
    magnitude_ok = (np.abs(ref) - ulp <= np.abs(test)) & (np.abs(test) <= np.abs(ref) + 0.5 * ulp)
    sign_ok = (np.signbit(test) == np.signbit(ref)) | (test == 0)
    finite = np.isfinite(ref) & np.isfinite(test)
    return np.where(np.isnan(ref), np.isnan(test), ok | (finite & magnitude_ok & sign_ok))


def compliance_mask(ours: np.ndarray, ref: np.ndarray, dtype: DType, op: Op | None = None, *,
                    inputs: Sequence[np.ndarray] = (), num_ulp: float | None = None,
                    err_bnd: np.ndarray | None = None) -> np.ndarray:
    """Elementwise compliance of ``ours`` against the fp64 reference ``ref``."""
    ours = _f64(ours)
    ref = _f64(ref)
    if err_bnd is not None:
        return check_fp_bnd(ours, ref, err_bnd, dtype)
    if num_ulp is not None:
        return check_fp_ulp(ours, ref, num_ulp, dtype)
    if op == Op.CAST:
        return _cast_fp_compliant(ours, ref, inputs[0], dtype)
    try:
        bound = OP_BOUNDS[op](ref, [np.asarray(i) for i in inputs], dtype)
    except KeyError:
        raise ValueError(f"no precision rule known for {op}; pass num_ulp= or err_bnd=") from None
    return check_fp_bnd(ours, ref, bound, dtype)


def assert_fp_compliant(ours: np.ndarray, ref: np.ndarray, dtype: DType, op: Op | None = None, *,
                        inputs: Sequence[np.ndarray] = (), num_ulp: float | None = None,
                        err_bnd: np.ndarray | None = None) -> None:
    """Fail (listing the first offenders) unless every element of ``ours`` is compliant."""
    ours_a = np.asarray(ours)
    ref_a = np.broadcast_to(np.asarray(ref), ours_a.shape)
    mask = compliance_mask(ours_a, ref_a, dtype, op, inputs=inputs, num_ulp=num_ulp, err_bnd=err_bnd)
    if not np.all(mask):
        bad = np.argwhere(~np.broadcast_to(mask, ours_a.shape))[:8]
        rows = []
        for idx in bad:
            idx = tuple(idx)
            ins = [float(np.broadcast_to(np.asarray(i), ours_a.shape)[idx]) for i in inputs]
            rows.append(f"  at {idx}: ours={float(ours_a[idx])!r} ref={float(ref_a[idx])!r} inputs={ins}")
        name = op.name if op is not None else "op"
        raise AssertionError(f"{name} {dtype.name}: {int((~mask).sum())} non-compliant element(s)\n"
                             + "\n".join(rows))


__all__ = ["NORMAL_FRAC", "NORMAL_MAX", "NORMAL_MIN", "OP_BOUNDS", "abs_error_bound",
           "assert_fp_compliant", "check_fp_bnd", "check_fp_ulp", "compliance_mask",
           "reference_ulp"]
