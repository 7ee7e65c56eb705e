"""Seeded test values for kernel tests: random values with the edge cases mixed in."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from npu_sim.tosa.dtype import DType


def int_values(dtype: DType, shape: tuple[int, ...], rng: np.random.Generator,
               lo: int | None = None, hi: int | None = None, edges: bool = True) -> np.ndarray:
    """Uniform integers in [lo, hi] (default: the dtype's range) with lo, hi, 0, +-1 planted."""
    tmin, tmax = dtype.int_range if dtype is not DType.BOOL else (0, 1)
    lo = tmin if lo is None else lo
    hi = tmax if hi is None else hi
    values = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64)
    if edges and values.size:
        flat = values.reshape(-1)
        specials = [v for v in (lo, hi, 0, 1, -1, lo + 1, hi - 1) if lo <= v <= hi]
        where = rng.choice(flat.size, size=min(len(specials), flat.size), replace=False)
        flat[where] = specials[: len(where)]
    return values.astype(dtype.numpy_dtype)


def fp_specials(dtype: DType) -> list[float]:
    """NaN, infinities (when the type has them), zeros, extremes, subnormals, simple values."""
    info = ml_dtypes.finfo(dtype.numpy_dtype)
    values = [np.nan, 0.0, -0.0, float(info.max), -float(info.max), float(info.smallest_normal),
              -float(info.smallest_normal), float(info.smallest_subnormal),
              -float(info.smallest_subnormal), 1.0, -1.0, 0.5, 2.0]
    if dtype is not DType.FP8E4M3:
        values += [np.inf, -np.inf]
    return values


def fp_values(dtype: DType, shape: tuple[int, ...], rng: np.random.Generator,
              lo_exp: float = -3.0, hi_exp: float = 3.0, positive: bool = False,
              specials: list[float] | None = None) -> np.ndarray:
    """Signed log-uniform magnitudes 10**[lo_exp, hi_exp] with ``specials`` planted (default: all)."""
    size = int(np.prod(shape)) if shape else 1
    values = 10.0 ** rng.uniform(lo_exp, hi_exp, size)
    if not positive:
        values *= rng.choice([-1.0, 1.0], size)
    specials = fp_specials(dtype) if specials is None else specials
    if specials:
        where = rng.choice(size, size=min(len(specials), size), replace=False)
        values[where] = specials[: len(where)]
    with np.errstate(over="ignore"):
        return values.astype(np.float32).astype(dtype.numpy_dtype).reshape(shape)
