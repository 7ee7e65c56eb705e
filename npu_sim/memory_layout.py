"""How values lie in the simulated memories: element sizes, bytes, strides, alignment.

Little-endian, row-major. Unlike the file format, INT4 takes one byte per element
(sign-extended) and BOOL one byte (0 or 1); INT48 takes 6 bytes. The scheduler lays
values out with these helpers and the simulator reads them back the same way
(:mod:`npu_sim.hw.memory`).
"""

from __future__ import annotations

import numpy as np

from npu_sim.tosa.dtype import DType, encode

_ELEMENT_BYTES: dict[DType, int] = {}


def element_size_bytes(dtype: DType) -> int:
    """Bytes one element occupies in the simulated memories."""
    size = _ELEMENT_BYTES.get(dtype)
    if size is None:
        if dtype in (DType.BOOL, DType.INT4):
            size = 1
        elif dtype is DType.INT48:
            size = 6
        else:
            size = dtype.numpy_dtype.itemsize
        _ELEMENT_BYTES[dtype] = size
    return size


def memory_bytes(array: np.ndarray, dtype: DType) -> bytes:
    """``array`` as the simulated memories hold it."""
    if dtype is DType.INT4:
        return np.ascontiguousarray(array, dtype=np.int8).tobytes()
    if dtype is DType.BOOL:
        return np.ascontiguousarray(array, dtype=np.bool_).astype(np.uint8).tobytes()
    return encode(array, dtype)


def contiguous_strides(shape: tuple[int, ...], element_bytes: int) -> tuple[int, ...]:
    """Row-major byte strides of ``shape`` (an empty dimension counts as one for the strides outside it)."""
    strides, step = [], element_bytes
    for dim in reversed(shape):
        strides.append(step)
        step *= max(1, dim)
    return tuple(reversed(strides))


def align_up(value: int, alignment: int) -> int:
    """``value`` rounded up to a multiple of ``alignment`` (unchanged for an alignment of 0 or 1)."""
    return -(-value // alignment) * alignment if alignment > 1 else value


def block_ranges(starts: np.ndarray, ends: np.ndarray, blocks: tuple[int, ...],
                 block_bytes: int) -> np.ndarray:
    """Logical byte runs ``[starts, ends)`` of a block tensor (seed 002's discontiguous tensor:
    fixed-size blocks anywhere in one memory, reached through a pointer table) as physical
    ``(k, 2)`` runs: each run cut at the block boundaries, each piece moved to its block's
    offset ``blocks[logical // block_bytes]``. Sorted by physical start, not merged."""
    pieces = []
    for lo, hi in zip(starts.tolist(), ends.tolist()):
        while lo < hi:
            index, within = divmod(lo, block_bytes)
            take = min(hi - lo, block_bytes - within)
            start = blocks[index] + within
            pieces.append((start, start + take))
            lo += take
    if not pieces:
        return np.zeros((0, 2), dtype=np.int64)
    out = np.array(sorted(pieces), dtype=np.int64)
    return out


def block_byte_index(logical: np.ndarray, blocks: tuple[int, ...], block_bytes: int) -> np.ndarray:
    """Physical byte addresses of the logical byte addresses ``logical`` of a block tensor."""
    table = np.asarray(blocks, dtype=np.int64)
    return table[logical // block_bytes] + logical % block_bytes
