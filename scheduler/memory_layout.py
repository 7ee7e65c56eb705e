"""Bytes of a value in the simulated memories (see :func:`npu_sim.program.element_size_bytes`).

Little-endian, row-major; unlike the file format, INT4 takes one byte per
element (sign-extended) and BOOL one byte (0 or 1); INT48 takes 6 bytes.
"""

from __future__ import annotations

import numpy as np

from npu_sim.tosa.dtype import DType, encode


def memory_bytes(array: np.ndarray, dtype: DType) -> bytes:
    """``array`` as the simulated memories hold it."""
    if dtype is DType.INT4:
        return np.ascontiguousarray(array, dtype=np.int8).tobytes()
    if dtype is DType.BOOL:
        return np.ascontiguousarray(array, dtype=np.bool_).astype(np.uint8).tobytes()
    return encode(array, dtype)
