"""Exact byte ranges of strided views, as sorted disjoint ``[start, end)`` arrays.

A tile of an NHWC tensor touches some rows of its span and skips the others;
dependency analysis and the plan verifier need the bytes themselves, not the
span, or neighbouring tiles would look as if they overlapped.
"""

from __future__ import annotations

import numpy as np

from npu_sim.program import View

Ranges = np.ndarray  # shape (k, 2), int64, sorted, disjoint, non-adjacent

EMPTY: Ranges = np.zeros((0, 2), dtype=np.int64)


def view_ranges(view: View) -> Ranges:
    """The bytes ``view`` touches."""
    if view.element_count == 0:
        return EMPTY
    if view.strides_bytes is None:  # contiguous: one range (the common case)
        lo, hi = view.span
        return np.array([[lo, hi]], dtype=np.int64)
    eb = view.element_bytes
    dims = [(n, s) for n, s in zip(view.shape, view.strides) if n != 1]
    # merge dimensions that are contiguous with the next one
    merged: list[list[int]] = []
    for n, s in dims:
        if merged and merged[-1][1] == n * s:
            merged[-1][0] *= n
            merged[-1][1] = s
        else:
            merged.append([n, s])
    run = eb
    if merged and merged[-1][1] == eb:
        run = merged[-1][0] * eb
        merged.pop()
    starts = np.array([view.offset_bytes], dtype=np.int64)
    for n, s in merged:
        starts = (starts[:, None] + np.arange(n, dtype=np.int64)[None, :] * s).reshape(-1)
    return normalize(np.stack([starts, starts + run], axis=1))


def normalize(ranges: np.ndarray) -> Ranges:
    """Sort and merge overlapping or touching ranges."""
    if len(ranges) <= 1:
        return ranges.astype(np.int64).reshape(-1, 2)
    order = np.argsort(ranges[:, 0], kind="stable")
    r = ranges[order]
    ends = np.maximum.accumulate(r[:, 1])
    new = np.ones(len(r), dtype=bool)
    new[1:] = r[1:, 0] > ends[:-1]
    group = np.cumsum(new) - 1
    starts = r[new, 0]
    merged_ends = np.zeros(len(starts), dtype=np.int64)
    np.maximum.at(merged_ends, group, ends)
    return np.stack([starts, merged_ends], axis=1)


def union(a: Ranges, b: Ranges) -> Ranges:
    if len(a) == 0:
        return b
    if len(b) == 0:
        return a
    return normalize(np.concatenate([a, b]))


def overlaps(a: Ranges, b: Ranges) -> bool:
    """True if any byte is in both."""
    na, nb = len(a), len(b)
    if na == 0 or nb == 0:
        return False
    if a[-1, 1] <= b[0, 0] or b[-1, 1] <= a[0, 0]:
        return False
    if na == 1 or nb == 1:
        one, many = (a, b) if na == 1 else (b, a)
        lo, hi = int(one[0, 0]), int(one[0, 1])
        if len(many) == 1:
            return True  # the bounding boxes overlap
        j = int(np.searchsorted(many[:, 0], hi, side="left")) - 1
        return j >= 0 and int(many[j, 1]) > lo
    j = np.searchsorted(b[:, 0], a[:, 1], side="left") - 1
    ok = j >= 0
    return bool(np.any(b[j[ok], 1] > a[ok, 0]))


def covered(a: Ranges, by: Ranges) -> bool:
    """True if every byte of ``a`` is in ``by``."""
    if len(a) == 0:
        return True
    if len(by) == 0 or a[0, 0] < by[0, 0] or a[-1, 1] > by[-1, 1]:
        return False
    if len(by) == 1:
        return True  # inside the only range
    j = np.searchsorted(by[:, 0], a[:, 0], side="right") - 1
    if np.any(j < 0):
        return False
    return bool(np.all(by[j, 1] >= a[:, 1]))


def pages(ranges: Ranges, page_bytes: int) -> set[int]:
    """Page numbers the ranges touch."""
    if len(ranges) == 1:
        return set(range(int(ranges[0, 0]) // page_bytes, (int(ranges[0, 1]) - 1) // page_bytes + 1))
    first = ranges[:, 0] // page_bytes
    last = (ranges[:, 1] - 1) // page_bytes
    if len(ranges) and int((last - first).max()) <= 1:  # short runs: each on one or two pages
        return set(first.tolist()) | set(last.tolist())
    out: set[int] = set()
    for start, end in zip(first.tolist(), last.tolist()):
        out.update(range(start, end + 1))
    return out
