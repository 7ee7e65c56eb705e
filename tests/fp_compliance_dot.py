"""The TOSA 1.0 dot-product accuracy check, for tests of CONV*, MATMUL, AVG_POOL2D and FFT.

Implements ``tosa_reference_check_dotproduct`` (pseudocode/library/
tosa_reference_check_dotproduct.tosac; chapters/introduction.adoc "Dot product
accuracy requirements"). It needs two fp64 tensors from the reference model's
precise mode:

* ``ref``: the operator on the real operands (``reference_fp64``);
* ``bnd``: the operator on :func:`bound_operand` versions of the operands
  (absolute values, at least ``normal_min<in_t>``; with ``local_bound`` false the
  input is replaced everywhere by its largest absolute value).

KS (the dot-product length) is defined per operator in the spec's Appendix A.
The per-element check allows ``ABS_BOUND = 2 * ksb`` errors of size
``bnd * 2**(-1 - normal_frac<out_t>)``; the summed squared error must stay
under ``VARIANCE_ERROR_BOUND * T = 4 * 0.4 * ksb * T``.
"""

from __future__ import annotations

import math

import numpy as np

from npu_sim.tosa.dtype import DType
from tests.fp_compliance import NORMAL_FRAC, NORMAL_MIN


def bound_operand(value: np.ndarray, in_t: DType, local_bound: bool = True) -> np.ndarray:
    """``max(abs(value), normal_min<in_t>)`` elementwise; all set to the maximum unless local_bound."""
    dtype = np.asarray(value).dtype
    magnitude = np.maximum(np.abs(np.asarray(value).astype(np.float64)), NORMAL_MIN[in_t])
    if not local_bound and magnitude.size:
        magnitude = np.full_like(magnitude, magnitude.max())
    return magnitude.astype(dtype)


def ksb(ks: int, out_t: DType, acc_t: DType, has_bias: bool) -> int:
    """ceil(KS / 2**((normal_frac<acc_t> - normal_frac<out_t>) / 2)) + (1 if a bias is added)."""
    scale = 2.0 ** ((NORMAL_FRAC[acc_t] - NORMAL_FRAC[out_t]) / 2)
    return math.ceil(ks / scale) + (1 if has_bias else 0)


def dot_errors(ours: np.ndarray, ref: np.ndarray, bnd: np.ndarray, out_t: DType,
               acc_t: DType, ks: int, has_bias: bool) -> tuple[np.ndarray, np.ndarray, float]:
    """(per-element pass mask, normalised errors, ABS_BOUND) of the dot-product check."""
    imp = np.asarray(ours).astype(np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    bnd = np.asarray(bnd, dtype=np.float64)
    abs_bound = 2.0 * ksb(ks, out_t, acc_t, has_bias)
    frac = NORMAL_FRAC[out_t]
    out_np = out_t.numpy_dtype
    with np.errstate(all="ignore"):
        widened = (bnd * (1 + abs_bound * 2.0 ** (-1 - frac))).astype(np.float64)
        overflow = np.isinf(widened.astype(out_np).astype(np.float64))  # static_cast<out_t>
        err_bnd = np.maximum(bnd * 2.0 ** (-1 - frac), NORMAL_MIN[out_t])
        err = (imp - ref) / err_bnd
    ok = np.ones(imp.shape, dtype=bool)
    errors = np.zeros(imp.shape, dtype=np.float64)
    ref_nan = np.isnan(ref)
    ok[ref_nan] = np.isnan(imp[ref_nan])
    free = ~ref_nan & (np.isnan(bnd) | overflow)
    zero = ~ref_nan & ~free & (bnd == 0)
    ok[zero] = (ref[zero] == 0) & (imp[zero] == 0)
    normal = ~ref_nan & ~free & ~zero
    ok[normal] = np.abs(err[normal]) <= abs_bound
    errors[normal] = np.where(np.isfinite(err[normal]), err[normal], np.inf)
    return ok, errors, abs_bound


def dot_compliant(ours: np.ndarray, ref: np.ndarray, bnd: np.ndarray, out_t: DType, acc_t: DType,
                  ks: int, has_bias: bool, data_set: int | None = None) -> bool:
    """True when ``ours`` passes tosa_reference_check_dotproduct (see assert_dot_compliant)."""
    try:
        assert_dot_compliant(ours, ref, bnd, out_t, acc_t, ks, has_bias, data_set)
    except AssertionError:
        return False
    return True


def assert_dot_compliant(ours: np.ndarray, ref: np.ndarray, bnd: np.ndarray, out_t: DType,
                         acc_t: DType, ks: int, has_bias: bool, data_set: int | None = None) -> None:
    """Fail unless ``ours`` passes tosa_reference_check_dotproduct.

    Checks every element against ABS_BOUND and the summed squared error against
    VARIANCE_ERROR_BOUND; for the Appendix A data sets 3-5 (``data_set``) also the
    error bias.
    """
    ok, errors, abs_bound = dot_errors(ours, ref, bnd, out_t, acc_t, ks, has_bias)
    if not np.all(ok):
        bad = np.argwhere(~ok)[:6]
        rows = [f"  at {tuple(i)}: ours={float(np.asarray(ours)[tuple(i)])!r} "
                f"ref={float(ref[tuple(i)])!r} bnd={float(bnd[tuple(i)])!r}" for i in bad]
        raise AssertionError(f"{int((~ok).sum())} element(s) outside {abs_bound} error bounds\n"
                             + "\n".join(rows))
    count = errors.size
    variance_bound = 4 * 0.4 * (abs_bound / 2)  # VARIANCE_ERROR_BOUND = 4 * 0.4 * ksb
    sumsq = float(np.sum(errors * errors))
    assert sumsq <= variance_bound * count, f"error variance {sumsq} exceeds {variance_bound * count}"
    if data_set is not None and 3 <= data_set <= 5:
        total = abs(float(np.sum(errors)))
        limit = math.sqrt(10 * variance_bound * count)
        assert total <= limit, f"error bias {total} exceeds {limit}"


# --------------------------------------------------------------------------- Appendix A data
#: B: the largest value with B*B within the output range, per (input type, output type)
TEST_DATA_B: dict[tuple[DType, DType], float] = {
    (DType.FP8E4M3, DType.FP16): 240.0, (DType.FP8E4M3, DType.FP32): 448.0,
    (DType.FP8E5M2, DType.FP16): 224.0, (DType.FP8E5M2, DType.FP32): 57344.0,
    (DType.FP16, DType.FP16): 255.875, (DType.FP16, DType.FP32): 65504.0,
    (DType.BF16, DType.BF16): 2.0**64 - 2.0**56, (DType.BF16, DType.FP32): 2.0**64 - 2.0**56,
    (DType.FP32, DType.FP32): 2.0**64 - 2.0**40,
}


def set_data(data_set: int, count: int) -> np.ndarray:
    """set_data(set, i) for i in [0, count): the spec's pseudo-random values in [-1, 1]."""
    m = ((8 * data_set + 1) * 0x705A5E75) & 0xFFFFFFFF
    r = (m + 1) & 0xFFFFFFFF
    values = np.empty(count, dtype=np.uint32)
    for i in range(count):
        values[i] = r
        r = (r * m + 1) & 0xFFFFFFFF
    magnitude = (values & 0x7FFFFFFF).astype(np.float32) / np.float32(0x7FFFFFFF)
    return np.where(values >> 31 == 0, magnitude, -magnitude).astype(np.float64)


def pro_fp_data(data_set: int, ks: int, p: int, k: np.ndarray, i: np.ndarray, b: float) -> np.ndarray:
    """tosa_pro_fp_data(S, KS, p, k, i) of Appendix A, elementwise over index arrays k and i (fp64)."""
    s = data_set
    k = np.asarray(k, dtype=np.int64)
    i = np.asarray(i, dtype=np.int64)
    top = int(2 * i.max() + 2) if i.size else 1

    def sd(set_number: int, index: np.ndarray) -> np.ndarray:
        return set_data(set_number, top)[index]

    if s == 0:
        if p == 2:
            return np.zeros(i.shape)
        select, value = sd(0, i) < 0, sd(1, i)
        return np.where(select, 0.0, value) if p == 0 else np.where(select, value, 0.0)
    if s == 1:
        scale = b / math.sqrt(ks + 1) if p < 2 else b * b / (ks + 1)
        return scale * (np.where(sd(3 + p, 2 * i) < 0, -0.75, 0.75) + 0.25 * sd(3 + p, 2 * i + 1))
    if p == 2:
        return np.zeros(i.shape)
    if s == 2:
        return np.where(k == 0, 1.0, sd(6 + p, i) / math.sqrt(ks))
    if s == 3:
        first = np.where(sd(9 + p, 2 * i) < 0, -16.0, 16.0)
        return np.where(k == 0, first, np.exp(2 * sd(9 + p, 2 * i)) * sd(9 + p, 2 * i + 1))
    if s == 4:
        negative = sd(12, i) < 0
        value = (b / math.sqrt(ks)) * sd(13, i)
        if p == 0:
            middle = np.where(negative, -0.5, 0.5)
            other = np.where(negative, 0.0, value)
        else:
            middle = np.where(negative, 0.5, -0.5)
            other = np.where(negative, value, 0.0)
        return np.where(k == ks // 2, middle, other)
    if s == 5:
        return (b / math.sqrt(ks)) * sd(15 + p, i)
    raise ValueError(f"no Appendix A data set {s}")


__all__ = ["TEST_DATA_B", "assert_dot_compliant", "bound_operand", "dot_compliant", "dot_errors", "ksb",
           "pro_fp_data", "set_data"]
