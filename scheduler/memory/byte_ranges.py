"""Exact byte ranges of strided views, as sorted disjoint ``[start, end)`` runs.

A tile of an NHWC tensor touches some rows of its span and skips the others;
dependency analysis and the plan verifier need the bytes themselves, not the
span, or neighbouring tiles would look as if they overlapped.

Two forms of the same sets: ``Ranges`` numpy arrays (the verifier), and
:class:`ByteSet` s of plain ints (dependency tracking, where most views are one
run and numpy's per-call overhead would dominate).
"""

from __future__ import annotations

import bisect
import math
from typing import Literal

import numpy as np

from npu_sim.memory_layout import block_ranges
from npu_sim.program import View

Ranges = np.ndarray  # shape (k, 2), int64, sorted, disjoint, non-adjacent

EMPTY: Ranges = np.zeros((0, 2), dtype=np.int64)


def _runs(view: View) -> tuple[list[tuple[int, int]], int]:
    """A strided view as ``(dims, run)``: ``dims`` (count, stride) outermost first, after merging
    dimensions contiguous with the next, each start of a ``run``-byte run of bytes."""
    eb = view.element_bytes
    merged: list[list[int]] = []
    for n, s in zip(view.shape, view.strides):
        if n == 1:
            continue
        if merged and merged[-1][1] == n * s:
            merged[-1][0] *= n
            merged[-1][1] = s
        else:
            merged.append([n, s])
    run = eb
    if merged and merged[-1][1] == eb:
        run = merged[-1][0] * eb
        merged.pop()
    return [(n, s) for n, s in merged], run


def view_ranges(view: View) -> Ranges:
    """The bytes ``view`` touches."""
    if view.element_count == 0:
        return EMPTY
    if view.blocks is not None:   # a block tensor's: its logical bytes, found in their blocks
        logical = view_ranges(view.logical())
        return normalize(block_ranges(logical[:, 0], logical[:, 1], view.blocks, view.block_bytes))
    if view.strides_bytes is None:  # contiguous: one range (the common case)
        lo, hi = view.span
        return np.array([[lo, hi]], dtype=np.int64)
    dims, run = _runs(view)
    starts = np.array([view.offset_bytes], dtype=np.int64)
    for n, s in dims:
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


def difference(a: Ranges, b: Ranges) -> Ranges:
    """Bytes of ``a`` not in ``b``, normalized: the elementary segments between all run
    boundaries that lie in a run of ``a`` and in none of ``b``, neighbours merged."""
    points = np.unique(np.concatenate([a.ravel(), b.ravel()]))
    lo, hi = points[:-1], points[1:]

    def inside(r: Ranges) -> np.ndarray:   # segment [lo, hi) lies in a run of r
        return np.searchsorted(r[:, 0], lo, side="right") > np.searchsorted(r[:, 1], lo, side="right")

    keep = inside(a) & ~inside(b)
    lo, hi = lo[keep], hi[keep]
    if len(lo) == 0:
        return np.empty((0, 2), dtype=np.int64)
    breaks = np.flatnonzero(lo[1:] != hi[:-1]) + 1
    return np.stack([lo[np.r_[0, breaks]], hi[np.r_[breaks - 1, len(hi) - 1]]], axis=1)


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
        k = int(np.searchsorted(many[:, 0], hi, side="left")) - 1
        return k >= 0 and int(many[k, 1]) > lo
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


# --------------------------------------------------------------------------- ByteSet

#: Above this many runs in both operands, overlap and cover tests go through numpy.
_NUMPY_RUNS = 16
#: Pages of sets with more runs than this are computed with numpy.
_NUMPY_PAGE_RUNS = 64
#: above this many runs, a set's lattice is found with numpy
_NUMPY_LATTICE_RUNS = 64
#: above this many runs of the smaller set inside the common span, _runs_meet works on numpy arrays
_NUMPY_MEET_RUNS = 24
#: above this many runs of both sets inside each other's span, set_difference works on numpy arrays
_NUMPY_DIFFERENCE_RUNS = 256


class ByteSet:
    """Sorted, disjoint, non-adjacent byte runs ``[starts[k], ends[k])`` (at least one).

    ``lo``/``hi`` bound them; pages are computed once per page size (sets are shared
    by every access to the same view).
    """

    __slots__ = ("starts", "ends", "lo", "hi", "_array", "_pages", "_lattice")

    def __init__(self, starts: tuple[int, ...], ends: tuple[int, ...], array: Ranges | None = None):
        self.starts = starts
        self.ends = ends
        self.lo = starts[0]
        self.hi = ends[-1]
        self._array = array
        self._pages: tuple[int, set[int]] | None = None
        self._lattice: tuple[int, int, int] | None | Literal[False] = False   # False: not computed yet

    @classmethod
    def of(cls, ranges: Ranges) -> ByteSet | None:
        """The set of a normalized ``Ranges`` array (None if empty)."""
        if len(ranges) == 0:
            return None
        return cls(tuple(ranges[:, 0].tolist()), tuple(ranges[:, 1].tolist()), ranges)

    def __len__(self) -> int:
        return len(self.starts)

    def array(self) -> Ranges:
        if self._array is None:
            self._array = np.array([self.starts, self.ends], dtype=np.int64).T.copy()
        return self._array

    def pages(self, page_bytes: int) -> set[int]:
        """Page numbers the runs touch (do not modify the result: it is cached)."""
        cached = self._pages
        if cached is not None and cached[0] == page_bytes:
            return cached[1]
        if len(self.starts) == 1 or self.hi <= page_bytes:   # (one run, or all on the first page)
            result = set(range(self.lo // page_bytes, (self.hi - 1) // page_bytes + 1))
        elif len(self.starts) <= _NUMPY_PAGE_RUNS:
            result = set()
            for s, e in zip(self.starts, self.ends):
                result.update(range(s // page_bytes, (e - 1) // page_bytes + 1))
        else:
            result = pages(self.array(), page_bytes)
        self._pages = (page_bytes, result)
        return result

    def lattice(self) -> tuple[int, int, int] | None:
        """``(period, phase, run)`` if every run is ``run`` bytes long and starts at
        ``phase`` modulo ``period`` (the gcd of the distances between starts), else None
        (one run, or runs of different lengths). Cached: sets are shared by views."""
        found = self._lattice
        if found is False:
            starts, ends = self.starts, self.ends
            run = ends[0] - starts[0]
            found = None
            if len(starts) > _NUMPY_LATTICE_RUNS:
                array = self.array()
                if bool(np.all(array[:, 1] - array[:, 0] == run)):
                    period = int(np.gcd.reduce(array[1:, 0] - starts[0]))
                    found = (period, starts[0] % period, run)
            elif len(starts) > 1 and all(e - s == run for s, e in zip(starts, ends)):
                period = math.gcd(*[s - starts[0] for s in starts])
                found = (period, starts[0] % period, run)
            self._lattice = found
        return found


def _lattices_apart(a: ByteSet, b: ByteSet) -> bool:
    """True if ``a`` and ``b`` share no byte because their runs sit at different phases of
    a common period (tiles of different channels or columns of one tensor): each set lies in
    the bytes whose offset modulo ``p = gcd(periods)`` is in ``[phase, phase + run)``, and
    those two windows of the circle of size ``p`` do not meet. False means "maybe"."""
    la, lb = a.lattice(), b.lattice()
    return la is not None and lb is not None and _windows_apart(la, lb)


def _windows_apart(la: tuple[int, int, int], lb: tuple[int, int, int]) -> bool:
    """:func:`_lattices_apart` of two sets' lattices (symmetric)."""
    period = math.gcd(la[0], lb[0])
    if la[2] + lb[2] > period:
        return False
    distance = (lb[1] - la[1]) % period   # where b's window starts, a's starting at 0
    return distance >= la[2] and distance + lb[2] <= period


def many_runs_overlap(a: ByteSet, b: ByteSet, b_lattice: tuple[int, int, int] | None) -> bool:
    """:func:`set_overlaps` of two sets of several runs each whose spans meet, ``b``'s lattice
    given (a caller testing one set against many finds it once)."""
    la = a._lattice
    if la is False:
        la = a.lattice()
    if la is not None and b_lattice is not None and _windows_apart(la, b_lattice):
        return False
    return _runs_meet(a, b)


#: Strided views with up to this many runs are expanded in Python (numpy above).
_PYTHON_RUNS = 512


def view_byte_set(view: View) -> ByteSet | None:
    """The bytes ``view`` touches (None if none)."""
    if view.element_count == 0:
        return None
    if view.strides_bytes is None:
        lo, hi = view.span
        return ByteSet((lo,), (hi,))
    dims, run = _runs(view)
    if math.prod(n for n, _ in dims) > _PYTHON_RUNS:
        return ByteSet.of(view_ranges(view))
    starts = [view.offset_bytes]
    for n, s in dims:
        starts = [a + k * s for a in starts for k in range(n)]
    if _ascending(dims, run):
        return ByteSet(tuple(starts), tuple([a + run for a in starts]))
    merged: list[list[int]] = []
    for a in sorted(starts):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], a + run)
        else:
            merged.append([a, a + run])
    return ByteSet(tuple([a for a, _ in merged]), tuple([b for _, b in merged]))


def _ascending(dims: list[tuple[int, int]], run: int) -> bool:
    """True if the runs of ``dims`` come out sorted with gaps between them: each stride
    exceeds the extent of everything inside it."""
    extent = run
    for n, s in reversed(dims):
        if s <= extent:
            return False
        extent += (n - 1) * s
    return True


def set_union(a: ByteSet, b: ByteSet) -> ByteSet:
    """Bytes in either (several outputs of one command in one memory: rare)."""
    return ByteSet.of(union(a.array(), b.array()))   # type: ignore[return-value]


def set_overlaps(a: ByteSet, b: ByteSet) -> bool:
    """True if any byte is in both."""
    if a.hi <= b.lo or b.hi <= a.lo:
        return False
    if len(a.starts) > len(b.starts):
        a, b = b, a
    if len(b.starts) == 1:
        return True   # the bounding boxes overlap and both are single runs
    if len(a.starts) > 1 and _lattices_apart(a, b):
        return False
    return _runs_meet(a, b)


def _runs_meet(a: ByteSet, b: ByteSet) -> bool:
    """True if a run of ``a`` meets a run of ``b``: only the runs inside the common span are
    looked at, those of the set with fewer there each against the other's by bisection, up to
    the first that meets (a tile against a tensor's row or column tile: a few runs of each)."""
    lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)
    a_first, a_end = bisect.bisect_right(a.ends, lo), bisect.bisect_left(a.starts, hi)
    b_first, b_end = bisect.bisect_right(b.ends, lo), bisect.bisect_left(b.starts, hi)
    if a_end - a_first > b_end - b_first:
        a, b, a_first, a_end, b_first, b_end = b, a, b_first, b_end, a_first, a_end
    if a_end - a_first > _NUMPY_MEET_RUNS:   # (the same test on arrays: the runs of a at once)
        a_runs, b_runs = a.array()[a_first:a_end], b.array()[b_first:b_end]
        before = np.searchsorted(b_runs[:, 0], a_runs[:, 1], side="left") - 1
        ok = before >= 0
        return bool(np.any(b_runs[before[ok], 1] > a_runs[ok, 0]))
    starts, ends = b.starts, b.ends
    for k in range(a_first, a_end):
        s, e = a.starts[k], a.ends[k]
        j = bisect.bisect_left(starts, e, b_first, b_end) - 1   # the last run of b starting before e
        if j >= b_first and ends[j] > s:
            return True
    return False


def set_covered(a: ByteSet, by: ByteSet) -> bool:
    """True if every byte of ``a`` is in ``by``."""
    if a.lo < by.lo or a.hi > by.hi:
        return False
    if len(by.starts) == 1:
        return True
    if len(a.starts) > _NUMPY_RUNS and len(by.starts) > _NUMPY_RUNS:
        return covered(a.array(), by.array())
    starts, ends = by.starts, by.ends
    for s, e in zip(a.starts, a.ends):
        j = bisect.bisect_right(starts, s) - 1   # the run of ``by`` that could hold [s, e)
        if j < 0 or ends[j] < e:
            return False
    return True


def set_difference(a: ByteSet, b: ByteSet) -> ByteSet | None:
    """Bytes of ``a`` not in ``b`` (None if none): what is left of a record a write partly covered.
    Only the runs of each inside the other's span are compared; ``a``'s others stay as they are."""
    if a.hi <= b.lo or b.hi <= a.lo:
        return a
    if set_covered(a, b):   # the usual case: the write covers what is left of the record
        return None
    first, end = bisect.bisect_right(a.ends, b.lo), bisect.bisect_left(a.starts, b.hi)
    b_first, b_end = bisect.bisect_right(b.ends, a.lo), bisect.bisect_left(b.starts, a.hi)
    if end - first + b_end - b_first > _NUMPY_DIFFERENCE_RUNS:
        return ByteSet.of(difference(a.array(), b.array()))
    mid_starts, mid_ends = _runs_minus(a.starts[first:end], a.ends[first:end],
                                       b.starts[b_first:b_end], b.ends[b_first:b_end])
    starts = a.starts[:first] + tuple(mid_starts) + a.starts[end:]
    ends = a.ends[:first] + tuple(mid_ends) + a.ends[end:]
    return ByteSet(starts, ends) if starts else None


def _runs_minus_one(a_starts: tuple[int, ...], a_ends: tuple[int, ...], lo: int, hi: int
                    ) -> tuple[list[int], list[int]]:
    """:func:`_runs_minus` of one run ``[lo, hi)``: the runs it meets found by bisection, the
    first and last of them cut at its ends."""
    first, end = bisect.bisect_right(a_ends, lo), bisect.bisect_left(a_starts, hi)
    starts, ends = list(a_starts[:first]), list(a_ends[:first])
    if first < end:
        if a_starts[first] < lo:
            starts.append(a_starts[first])
            ends.append(lo)
        if a_ends[end - 1] > hi:
            starts.append(hi)
            ends.append(a_ends[end - 1])
    starts += a_starts[end:]
    ends += a_ends[end:]
    return starts, ends


def _runs_minus(a_starts: tuple[int, ...], a_ends: tuple[int, ...], b_starts: tuple[int, ...],
                b_ends: tuple[int, ...]) -> tuple[list[int], list[int]]:
    """The runs of ``a`` less those of ``b`` (both sorted and disjoint), in one merge."""
    if len(b_starts) == 1:
        return _runs_minus_one(a_starts, a_ends, b_starts[0], b_ends[0])
    starts: list[int] = []
    ends: list[int] = []
    count = len(b_starts)
    j = 0
    for s, e in zip(a_starts, a_ends):
        while j < count and b_ends[j] <= s:
            j += 1
        k = j
        while k < count:
            b_start = b_starts[k]
            if b_start >= e:
                break
            if b_start > s:
                starts.append(s)
                ends.append(b_start)
            b_end = b_ends[k]
            if b_end > s:
                s = b_end
            if b_end >= e:
                break
            k += 1
        if s < e:
            starts.append(s)
            ends.append(e)
        j = k
    return starts, ends
