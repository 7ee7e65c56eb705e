"""An elementwise function remembered per element value (npu_sim.hw.value_memo)."""

from __future__ import annotations

import numpy as np
import pytest

import npu_sim.hw.value_memo as value_memo
from npu_sim.hw.value_memo import ValueMemo


class _Counted:
    """round(x * 3) (NaN as 7, clipped) +-100 by x's sign as int32: -0.0 and 0.0 differ."""

    def __init__(self):
        self.tensors = 0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.tensors += 1
        finite = np.clip(np.nan_to_num(x, nan=7.0), -1e6, 1e6)
        return (np.rint(finite * 3) + np.copysign(100, x)).astype(np.int32)


def test_known_values_are_looked_up_and_new_ones_computed_with_the_same_results():
    compute = _Counted()
    memo = ValueMemo(compute)
    rng = np.random.default_rng(0)
    pool = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 3e38], np.float32)
    for k in range(40):
        x = rng.choice(pool, size=(2, 3)).astype(np.float32)
        (got,) = memo([x])
        want = _Counted()(x)
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), k
    assert compute.tensors < 10    # the pool's 8 values soon all known: the rest looked up
    assert memo([np.array(-0.0, np.float32)])[0] == -100   # -0.0 is not 0.0 (its bits differ)


def test_past_the_limit_every_call_computes(monkeypatch):
    monkeypatch.setattr(value_memo, "MAX_ENTRIES", 4)
    compute = _Counted()
    memo = ValueMemo(compute)
    memo([np.arange(2, dtype=np.float32)])
    memo([np.arange(2, dtype=np.float32)])    # known: looked up
    assert compute.tensors == 1
    memo([np.arange(6, dtype=np.float32)])    # 6 known now (remembered while fewer than 4 were)
    (again,) = memo([np.arange(6, dtype=np.float32)[::-1].copy()])
    assert compute.tensors == 3 and np.array_equal(again, _Counted()(np.arange(6, dtype=np.float32)[::-1]))
    memo([np.arange(10, 12, dtype=np.float32)])
    assert compute.tensors == 4 and len(memo.known) == 6


def test_an_error_of_the_function_is_raised_and_nothing_is_remembered():
    def failing(x: np.ndarray) -> np.ndarray:
        if (x > 1).any():
            raise ValueError("too big")
        return x.astype(np.int32)

    memo = ValueMemo(failing)
    with pytest.raises(ValueError, match="too big"):
        memo([np.array([0.0, 2.0], np.float32)])
    assert not memo.known and memo.result_type is None
    assert np.array_equal(memo([np.array([0.0, 1.0], np.float32)])[0], [0, 1])
