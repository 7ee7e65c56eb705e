"""TOSA element types, their numpy storage types and their byte encodings.

Every TOSA value lives in a numpy array of a *storage* dtype:

=========  ==================  =========================================
DType      numpy storage       notes
=========  ==================  =========================================
BOOL       bool_
INT4       int8                values in [-8, 7]; packed 2/byte in files
INT8       int8
INT16      int16
INT32      int32
INT48      int64               values in [-2**47, 2**47); 6 bytes in files
INT64      int64
SHAPE      int64               CONST_SHAPE values
FP16       float16
BF16       ml_dtypes.bfloat16
FP32       float32
FP8E4M3    ml_dtypes.float8_e4m3fn
FP8E5M2    ml_dtypes.float8_e5m2
=========  ==================  =========================================

``encode``/``decode`` convert arrays to and from the byte layout of the TOSA
flatbuffer format (little-endian; INT4 packed low nibble first; INT48 as 6 bytes).
The simulator's memories use the same layout.
"""

from __future__ import annotations

import math
import sys
from enum import IntEnum

import ml_dtypes
import numpy as np

from npu_sim.errors import TosaFormatError

# The TOSA byte layout is little-endian; numpy views below rely on the host being too.
assert sys.byteorder == "little", "npu-sim needs a little-endian host"


class DType(IntEnum):
    """TOSA element type, numbered as in the flatbuffer schema."""

    UNKNOWN = 0
    BOOL = 1
    INT4 = 2
    INT8 = 3
    INT16 = 4
    INT32 = 5
    INT48 = 6
    FP32 = 7
    FP16 = 8
    BF16 = 9
    SHAPE = 10
    FP8E4M3 = 11
    FP8E5M2 = 12
    FP6E2M3 = 13
    FP6E3M2 = 14
    FP4E2M1 = 15
    FP8UE8M0 = 16
    INT64 = 17
    MXINT8 = 18

    @property
    def numpy_dtype(self) -> np.dtype:
        """The numpy dtype our arrays of this type use."""
        try:
            return _STORAGE[self]
        except KeyError:
            raise TosaFormatError(f"dtype {self.name} has no numpy representation") from None

    @property
    def bits(self) -> int:
        """Element width in the TOSA sense (INT48 is 48, BOOL is 8 in memory)."""
        return _BITS[self]

    @property
    def is_integer(self) -> bool:
        return self in _INTEGER

    @property
    def is_float(self) -> bool:
        return self in _FLOAT

    @property
    def is_tosa_1_0(self) -> bool:
        """True for the types TOSA 1.0 defines (the 1.1 draft adds FP6/FP4/MX types)."""
        return DType.UNKNOWN < self <= DType.FP8E5M2   # (int comparisons: no enum property lookups)

    @property
    def int_range(self) -> tuple[int, int]:
        """Inclusive (min, max) of a signed integer type."""
        if not self.is_integer or self is DType.BOOL:
            raise ValueError(f"{self.name} is not a signed integer type")
        b = self.bits
        return -(1 << (b - 1)), (1 << (b - 1)) - 1

    def nbytes(self, element_count: int) -> int:
        """Bytes that ``element_count`` elements occupy in the flatbuffer/memory layout."""
        if self is DType.INT4:
            return (element_count + 1) // 2
        return element_count * _BITS[self] // 8 if self is not DType.BOOL else element_count


_STORAGE: dict[DType, np.dtype] = {
    DType.BOOL: np.dtype(np.bool_),
    DType.INT4: np.dtype(np.int8),
    DType.INT8: np.dtype(np.int8),
    DType.INT16: np.dtype(np.int16),
    DType.INT32: np.dtype(np.int32),
    DType.INT48: np.dtype(np.int64),
    DType.INT64: np.dtype(np.int64),
    DType.SHAPE: np.dtype(np.int64),
    DType.FP16: np.dtype(np.float16),
    DType.BF16: np.dtype(ml_dtypes.bfloat16),
    DType.FP32: np.dtype(np.float32),
    DType.FP8E4M3: np.dtype(ml_dtypes.float8_e4m3fn),
    DType.FP8E5M2: np.dtype(ml_dtypes.float8_e5m2),
}

_BITS: dict[DType, int] = {
    DType.UNKNOWN: 0, DType.BOOL: 8, DType.INT4: 4, DType.INT8: 8, DType.INT16: 16,
    DType.INT32: 32, DType.INT48: 48, DType.FP32: 32, DType.FP16: 16, DType.BF16: 16,
    DType.SHAPE: 64, DType.FP8E4M3: 8, DType.FP8E5M2: 8, DType.FP6E2M3: 6,
    DType.FP6E3M2: 6, DType.FP4E2M1: 4, DType.FP8UE8M0: 8, DType.INT64: 64,
    DType.MXINT8: 8,
}

_INTEGER = {DType.BOOL, DType.INT4, DType.INT8, DType.INT16, DType.INT32, DType.INT48,
            DType.INT64, DType.SHAPE}
_FLOAT = {DType.FP16, DType.BF16, DType.FP32, DType.FP8E4M3, DType.FP8E5M2, DType.FP6E2M3,
          DType.FP6E3M2, DType.FP4E2M1, DType.FP8UE8M0}


def outside_storage_range(array: np.ndarray, dtype: DType) -> tuple[int, int] | None:
    """The (min, max) of ``dtype`` when ``array`` holds values its numpy storage allows but the
    type does not (INT4 in int8, INT48 in int64); None when every value fits."""
    if dtype not in (DType.INT4, DType.INT48) or not array.size:
        return None
    lo, hi = dtype.int_range
    return None if lo <= int(array.min()) and int(array.max()) <= hi else (lo, hi)


def encode(array: np.ndarray, dtype: DType) -> bytes:
    """Bytes of ``array`` (any shape, row-major) in the TOSA flatbuffer layout."""
    flat = np.ascontiguousarray(array, dtype=dtype.numpy_dtype).reshape(-1)
    if dtype is DType.INT4:
        nibbles = flat.astype(np.uint8) & 0x0F
        if nibbles.size % 2:
            nibbles = np.append(nibbles, np.uint8(0))
        return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8).tobytes()
    if dtype is DType.INT48:
        raw = flat.astype("<i8").view(np.uint8).reshape(-1, 8)[:, :6]
        return raw.tobytes()
    return flat.tobytes()


def decode(data: bytes | memoryview | np.ndarray, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Array of ``shape`` decoded from the TOSA byte layout; raises on a size mismatch."""
    count = math.prod(shape)
    contiguous = isinstance(data, (bytes, bytearray)) or (isinstance(data, memoryview) and data.contiguous)
    raw = np.frombuffer(data if contiguous else bytes(data), dtype=np.uint8)   # every result below is a copy
    need = dtype.nbytes(count)
    if raw.size < need:
        raise TosaFormatError(
            f"{dtype.name} data of shape {list(shape)} needs {need} bytes, found {raw.size}"
        )
    raw = raw[:need]
    if dtype is DType.INT4:
        lo = (raw & 0x0F).astype(np.int8)
        hi = (raw >> 4).astype(np.int8)
        both = np.stack([lo, hi], axis=1).reshape(-1)[:count]
        values = np.where(both > 7, both - 16, both).astype(np.int8)
        return values.reshape(shape)
    if dtype is DType.INT48:
        six = raw.reshape(-1, 6)
        pad = np.where(six[:, 5:6] & 0x80, 0xFF, 0x00).astype(np.uint8)
        eight = np.concatenate([six, pad, pad], axis=1)
        return eight.copy().view("<i8").reshape(shape).astype(np.int64)
    if dtype is DType.BOOL:
        return (raw != 0).reshape(shape)
    return raw.copy().view(dtype.numpy_dtype).reshape(shape)
