"""Seeded test values for kernel tests: random values with the edge cases mixed in.

Edge values go in one of two ways: planted once each at random positions (the
default), or, with a ``*_fraction``, each element replaced by a random one of
them with that probability.
"""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np

from npu_sim.tosa.dtype import DType


def int_values(dtype: DType, shape: Sequence[int], rng: np.random.Generator,
               lo: int | None = None, hi: int | None = None, *, edges: bool = True,
               edge_fraction: float | None = None) -> np.ndarray:
    """Uniform integers in [lo, hi] (default: the dtype's range; BOOL is 0/1) with the edge
    values lo, hi, 0, +-1, lo + 1, hi - 1 mixed in (unless ``edges`` is False)."""
    tmin, tmax = dtype.int_range if dtype is not DType.BOOL else (0, 1)
    lo = tmin if lo is None else lo
    hi = tmax if hi is None else hi
    values = rng.integers(lo, hi, size=tuple(shape), endpoint=True, dtype=np.int64)
    if edges:
        specials = [v for v in (lo, hi, 0, 1, -1, lo + 1, hi - 1) if lo <= v <= hi]
        _mix_in(values, specials, edge_fraction, rng)
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


def fp_values(dtype: DType, shape: Sequence[int], rng: np.random.Generator,
              lo_exp: float = -3.0, hi_exp: float = 3.0, *, scale: float | None = None,
              positive: bool = False, specials: Sequence[float] | None = None,
              special_fraction: float | None = None) -> np.ndarray:
    """Values of a float ``dtype`` (rounded once, via fp32): signed log-uniform magnitudes
    10**[lo_exp, hi_exp], or normal(0, ``scale``) when a scale is given; ``specials``
    (default: :func:`fp_specials`; ``[]`` for none) mixed in."""
    shape = tuple(shape)
    size = int(np.prod(shape)) if shape else 1
    if scale is None:
        values = 10.0 ** rng.uniform(lo_exp, hi_exp, size)
        if not positive:
            values *= rng.choice([-1.0, 1.0], size)
    else:
        values = rng.standard_normal(size) * scale
        if positive:
            values = np.abs(values)
    _mix_in(values, fp_specials(dtype) if specials is None else list(specials), special_fraction, rng)
    with np.errstate(over="ignore"):
        return values.astype(np.float32).astype(dtype.numpy_dtype).reshape(shape)


def random_values(dtype: DType, shape: Sequence[int], rng: np.random.Generator, *,
                  edges: bool = True, scale: float = 4.0) -> np.ndarray:
    """Values of any ``dtype``: uniform integers or normal(0, ``scale``) floats, with 10% edge
    values (integer extremes, 0, +-1; float specials) unless ``edges`` is False."""
    if dtype is DType.BOOL or dtype.is_integer:
        return int_values(dtype, shape, rng, edges=edges, edge_fraction=0.1)
    return fp_values(dtype, shape, rng, scale=scale, specials=None if edges else [],
                     special_fraction=0.1)


def random_bits(dtype: DType, shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    """Arbitrary bit patterns of ``dtype`` (NaN payloads included) for data movement."""
    storage = dtype.numpy_dtype
    if dtype is DType.BOOL or dtype.is_integer:
        return random_values(dtype, shape, rng)
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * storage.itemsize, dtype=np.uint8)
    return raw.view(storage).reshape(tuple(shape))


def _mix_in(values: np.ndarray, specials: list, fraction: float | None,
            rng: np.random.Generator) -> None:
    """Put ``specials`` into ``values`` (in place): once each, or each element with ``fraction``."""
    flat = values.reshape(-1)
    if not specials or not flat.size:
        return
    if fraction is None:
        where = rng.choice(flat.size, size=min(len(specials), flat.size), replace=False)
        flat[where] = specials[: len(where)]
    else:
        mask = rng.random(flat.size) < fraction
        flat[mask] = rng.choice(np.array(specials, dtype=flat.dtype), size=int(mask.sum()))
