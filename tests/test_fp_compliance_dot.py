"""tests/fp_compliance_dot.py against Arm's own implementation of the same spec check.

tosa-tools ships the spec's compliance checks as a C library
(``libtosa_reference_verify_lib.so``, mode DOT_PRODUCT); our Python version must
give the same verdicts on the same (implementation, fp64 reference, bound) data.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from npu_sim.tosa.dtype import DType
from tests.fp_compliance_dot import dot_compliant, ksb, pro_fp_data, set_data

verifier = pytest.importorskip("checker.verifier")


@pytest.fixture(scope="module")
def verify_library():
    import tosa_reference_model

    return verifier.VerifierLibrary(Path(tosa_reference_model.__file__).parent / "libtosa_reference_verify_lib.so")


def _arm_verdict(library, ours: np.ndarray, ref: np.ndarray, bnd: np.ndarray, out_t: DType, k: int) -> bool:
    config = {"version": "1.0", "tensors": {"out": {
        "mode": "DOT_PRODUCT", "data_type": out_t.name, "shape": list(ours.shape),
        "dot_product_info": {"s": -1, "ksb": k, "abs_bound": 2 * k, "variance_error_bound": 4 * 0.4 * k}}}}
    return bool(library.verify_data("out", config, ours, ref, bnd))


@pytest.mark.parametrize("out_t", [DType.FP16, DType.FP32], ids=lambda t: t.name)
@pytest.mark.parametrize("scenario", ["small", "variance", "outlier", "nan", "zero-bound", "overflow"])
def test_verdicts_agree_with_arms_verify_library(verify_library, out_t: DType, scenario: str) -> None:
    rng = np.random.default_rng([int(out_t), len(scenario)])
    shape, ks = (30, 40), 9
    k = ksb(ks, out_t, out_t, has_bias=True)
    frac = 10 if out_t is DType.FP16 else 23
    for trial in range(8):
        ref = rng.standard_normal(shape) * 8
        bnd = np.abs(ref) * 2 + rng.random(shape)
        unit = bnd * 2.0 ** (-1 - frac)
        size = {"small": 0.5, "variance": 3.0, "outlier": 1.0, "nan": 0.5, "zero-bound": 0.5,
                "overflow": 0.5}[scenario] * (1 + trial / 8)
        ours = ref + size * unit * rng.choice([-1.0, 1.0], shape)
        if scenario == "outlier":
            ours[3, 4] = ref[3, 4] + (2 * k + trial - 3) * unit[3, 4]
        if scenario == "nan":
            ref[1, 1] = np.nan
            ours[1, 1] = np.nan if trial % 2 else 0.0
        if scenario == "zero-bound":
            bnd[2, 2] = ref[2, 2] = 0.0
            ours[2, 2] = 0.0 if trial % 2 else 2.0 ** -20
        if scenario == "overflow":
            bnd[0, 0] = 1e300
            ours[0, 0] = 0.0
        ours = ours.astype(out_t.numpy_dtype)
        mine = dot_compliant(ours, ref, bnd, out_t, out_t, ks, True)
        assert mine == _arm_verdict(verify_library, ours, ref, bnd, out_t, k), (scenario, trial, mine)


def test_ksb_follows_the_accumulator_precision() -> None:
    assert ksb(100, DType.FP16, DType.FP16, has_bias=False) == 100
    assert ksb(100, DType.FP16, DType.FP32, has_bias=True) == 2 + 1      # ceil(100 / 2**6.5) + 1
    assert ksb(7, DType.FP32, DType.FP32, has_bias=True) == 8


def test_set_data_follows_the_recurrence() -> None:
    """set_data(S, i): r = m + 1, then r = r*m + 1 per index (mod 2**32), scaled to [-1, 1]."""
    m = (9 * 0x705A5E75) & 0xFFFFFFFF                      # set 1
    r0 = (m + 1) & 0xFFFFFFFF
    r1 = (r0 * m + 1) & 0xFFFFFFFF
    values = set_data(1, 2)
    for r, value in zip((r0, r1), values):
        magnitude = np.float32(r & 0x7FFFFFFF) / np.float32(0x7FFFFFFF)
        assert value == (magnitude if r >> 31 == 0 else -magnitude)
    assert np.all(np.abs(set_data(5, 1000)) <= 1)


def test_data_set_generators_follow_appendix_a() -> None:
    ks, b = 16, 255.875
    index = np.arange(64)
    k = index % ks
    s0_in, s0_w = pro_fp_data(0, ks, 0, k, index, b), pro_fp_data(0, ks, 1, k, index, b)
    assert np.all((s0_in == 0) | (s0_w == 0))                 # S=0: every product is zero
    s2 = pro_fp_data(2, ks, 0, k, index, b)
    assert np.all(s2[k == 0] == 1.0) and np.all(np.abs(s2[k != 0]) <= 1 / 4)
    s3 = pro_fp_data(3, ks, 1, k, index, b)
    assert np.all(np.abs(s3[k == 0]) == 16.0)
    s4_in, s4_w = pro_fp_data(4, ks, 0, k, index, b), pro_fp_data(4, ks, 1, k, index, b)
    middle = k == ks // 2
    assert np.all(s4_in[middle] * s4_w[middle] == -0.25)
    assert np.all((s4_in[~middle] == 0) | (s4_w[~middle] == 0))
    assert np.all(np.abs(pro_fp_data(5, ks, 0, k, index, b)) <= b / 4)
    assert np.all(pro_fp_data(1, ks, 2, k, index, b) != 0)     # S=1 is the only set with a bias
