"""Byte-array memories (DDR, TCM, variable SRAM) that hold the real bytes of a simulation.

A :class:`Memory` is a ``uint8`` array plus a same-sized ``written`` mask (one
bool per byte: cheap, and a strided view of it checks a strided read in one numpy
call). Reading a byte never written raises :class:`MemoryAccessError`; so does any
access outside the memory. Messages name the view; callers prefix who accessed it
(:func:`named`), e.g. ``command 12 (load x) source: reads ddr[0x40] ...``.

Accesses go through a :class:`ViewAccess`: a :class:`~npu_sim.program.View` bound
to a memory once (equal views share one), holding numpy views of the bytes and of
the mask, so that each later read or write is a single numpy operation (this is
the simulator's hot path). Elements are little-endian,
:func:`~npu_sim.memory_layout.element_size_bytes` bytes each (INT4 one sign-extended
byte, INT48 six bytes, BOOL one byte 0/1).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from npu_sim.errors import MemoryAccessError
from npu_sim.memory_layout import block_byte_index
from npu_sim.program import MemorySpace, View
from npu_sim.tosa.dtype import DType

_UNBOUND = object()


class Memory:
    """One memory space: ``size_bytes`` bytes, all initially unwritten."""

    def __init__(self, space: MemorySpace, size_bytes: int, read_only: bool = False):
        if size_bytes < 0:
            raise ValueError(f"memory size must be >= 0, got {size_bytes}")
        self.space = space
        self.size_bytes = size_bytes
        self.read_only = read_only   # flash: its initial data is loaded, nothing writes it
        self.data = np.zeros(size_bytes, dtype=np.uint8)
        self.written = np.zeros(size_bytes, dtype=np.bool_)
        #: where the accesses to this memory's block tensors find their pointer tables (None: none)
        self.pointer_tables: PointerTables | None = None
        # (offset, shape, dtype, strides) of a view of this memory -> its binding: the view's
        # fields but its memory, hashed and compared in C (a View's own hash and == are Python)
        self._accesses: dict[tuple, ViewAccess] = {}

    def access(self, view: View) -> ViewAccess:
        """``view`` bound to this memory (bounds checked once; equal views share the binding)."""
        if view.memory is not self.space:  # (a view of another memory never shares a binding)
            return ViewAccess(self, view)  # raises
        if view.blocks is not None:
            return BlockViewAccess(self, view)
        key = (view.offset_bytes, view.shape, view.dtype, view.strides_bytes)
        try:
            access = self._accesses.get(key)
        except TypeError:  # an unhashable view (a list shape): bind it without sharing
            return ViewAccess(self, view)
        if access is None:
            access = self._accesses[key] = ViewAccess(self, view)
        return access

    def bound_extent(self) -> int:
        """The end of the highest byte a view bound so far (:meth:`access`) reaches."""
        return max((access.view.span[1] for access in self._accesses.values()), default=0)

    def forget_accesses(self) -> None:
        """Drop the bindings made so far (they refer back to this memory: a reference cycle)."""
        self._accesses.clear()

    def load(self, offset_bytes: int, data: bytes) -> None:
        """Host write of raw bytes (constants, initial values) at ``offset_bytes``."""
        end = offset_bytes + len(data)
        if offset_bytes < 0 or end > self.size_bytes:
            raise MemoryAccessError(f"bytes [{offset_bytes}, {end}) outside "
                                    f"{self.space.value} of {self.size_bytes} bytes")
        self.data[offset_bytes:end] = np.frombuffer(data, dtype=np.uint8)
        self.written[offset_bytes:end] = True  # (views only ever learn they are written: no reset needed)


@contextmanager
def named(who: str) -> Iterator[None]:
    """Prefix ``who`` to the message of a :class:`MemoryAccessError` raised inside."""
    try:
        yield
    except MemoryAccessError as exc:
        raise MemoryAccessError(f"{who}: {exc}") from None


class ViewAccess:
    """A view bound to a memory: typed reads and writes with written-ness checks.

    ``raw``/``mask`` are numpy views of the bytes and of their written flags: flat byte
    ranges for contiguous views (the common case, cheapest to make and copy), else the
    view's shape plus a last axis of its element bytes; ``typed`` aliases the bytes as
    the storage dtype (None for INT48, which has no 6-byte numpy type, and empty views).
    """

    __slots__ = ("view", "memory", "raw", "mask", "_typed", "dtype", "shape", "storage", "known_written")

    def __init__(self, memory: Memory, view: View):
        if view.memory is not memory.space:
            raise MemoryAccessError(f"view {view} is not in {memory.space.value}")
        lo, hi = view.span
        if lo < 0 or hi > memory.size_bytes:
            raise MemoryAccessError(f"view {view} spans bytes [{lo}, {hi}) outside "
                                    f"{memory.space.value} of {memory.size_bytes} bytes")
        self.view, self.memory = view, memory
        self.dtype, self.shape = view.dtype, tuple(view.shape)
        self.storage = view.dtype.numpy_dtype
        self._typed: Any = _UNBOUND  # bound on first typed access (DMAs never need it)
        # Bytes never become unwritten again, so once a view was seen fully written its
        # later checks (and mask updates) can be skipped: the hot path stays one numpy call.
        self.known_written = False
        shape, eb = self.shape, view.element_bytes
        if view.element_count == 0:
            self.raw = np.zeros(shape + (eb,), np.uint8)
            self.mask = np.ones(shape + (eb,), np.bool_)
        elif view.is_contiguous:
            start = view.offset_bytes
            stop = start + view.size_bytes
            self.raw = memory.data[start:stop]
            self.mask = memory.written[start:stop]
        else:
            byte_strides = tuple(view.strides) + (1,)
            self.raw = np.ndarray(shape + (eb,), np.uint8, memory.data, view.offset_bytes, byte_strides)
            self.mask = np.ndarray(shape + (eb,), np.bool_, memory.written, view.offset_bytes,
                                   byte_strides)

    @property
    def typed(self) -> np.ndarray | None:
        """The bytes aliased as the storage dtype (None for INT48 and empty views)."""
        typed = self._typed
        if typed is _UNBOUND:
            view = self.view
            if view.dtype is DType.INT48 or view.element_count == 0:
                typed = None
            elif view.is_contiguous:
                start = view.offset_bytes
                typed = self.memory.data[start:start + view.size_bytes].view(self.storage).reshape(self.shape)
            else:
                typed = np.ndarray(self.shape, self.storage, self.memory.data, view.offset_bytes,
                                   tuple(view.strides))
            self._typed = typed
        return typed

    @property
    def size_bytes(self) -> int:
        return self.view.size_bytes

    @property
    def is_written(self) -> bool:
        if not self.known_written and self.mask.all():
            self.known_written = True
        return self.known_written

    def check_written(self) -> None:
        """Raise unless every byte of the view has been written."""
        if self.known_written:
            return
        if not self.mask.all():
            eb = self.view.element_bytes
            first = int(np.flatnonzero(~self.mask.reshape(self.shape + (eb,)))[0]) // eb
            index = [int(i) for i in np.unravel_index(first, self.shape)] if self.shape else []
            raise MemoryAccessError(f"reads {self.view} element {index}, which was never written")
        self.known_written = True

    def read(self) -> np.ndarray:
        """A fresh array (storage dtype, view shape) of the view's elements."""
        if not self.known_written:
            self.check_written()
        typed = self._typed if self._typed is not _UNBOUND else self.typed
        if typed is not None:
            return typed.copy()
        if self.dtype is DType.INT48:
            six = self.raw.reshape(-1, 6)
            sign = np.where(six[:, 5:6] & 0x80, 0xFF, 0).astype(np.uint8)
            eight = np.concatenate([six, sign, sign], axis=1)
            return eight.view("<i8").reshape(self.shape).astype(np.int64)
        return np.zeros(self.shape, self.storage)

    def read_bytes(self) -> bytes:
        """The view's bytes, in view order (raises as :meth:`read` does): what identifies its
        value (a key), without making the typed array."""
        if not self.known_written:
            self.check_written()
        return self.raw.tobytes()

    def _refuse_write(self) -> None:
        raise MemoryAccessError(f"writes {self.view}, but the {self.memory.space.value} is read-only (flash)")

    def write(self, array: np.ndarray) -> None:
        """Store ``array`` (the view's storage dtype; same element count) into the view."""
        if self.memory.read_only:
            self._refuse_write()
        if array.dtype != self.storage:
            raise MemoryAccessError(f"writes {array.dtype} data into {self.view} (expects {self.storage})")
        if array.shape != self.shape:
            if array.size != self.view.element_count:
                raise MemoryAccessError(f"writes shape {list(array.shape)} into {self.view}")
            array = array.reshape(self.shape)
        typed = self._typed if self._typed is not _UNBOUND else self.typed
        if typed is not None:
            typed[...] = array
        elif self.dtype is DType.INT48:
            raw8 = np.ascontiguousarray(array, dtype="<i8").view(np.uint8).reshape(self.shape + (8,))
            self.raw[...] = raw8[..., :6].reshape(self.raw.shape)
        if not self.known_written:
            self.mask[...] = True
            self.known_written = True

    def copy_from(self, src: ViewAccess) -> None:
        """Byte copy ``src`` -> this view (a DMA): same shape and element size."""
        if self.memory.read_only:
            self._refuse_write()
        if not src.known_written:
            src.check_written()
        raw, source = self.raw, src.raw
        if raw.shape == source.shape:
            raw[...] = source
        else:  # one side strided: copy element bytes in view order
            raw[...] = source.reshape(raw.shape)
        if not self.known_written:
            self.mask[...] = True
            self.known_written = True


class PointerTables:
    """The pointer tables of a memory's block tensors, where the hardware finds them: in the
    bytes of another memory (the variable SRAM). ``tables`` maps a tensor's block offsets (as
    the plan lists them) to its table's offset there and its bytes per entry (little-endian)."""

    def __init__(self, memory: Memory, tables: dict[tuple[int, ...], tuple[int, int]]):
        self.memory, self.tables = memory, tables

    def walk(self, blocks: tuple[int, ...]) -> tuple[int, ...]:
        """The block offsets the table of the tensor planned at ``blocks`` holds now (read from
        the memory's bytes); ``blocks`` itself for a tensor without a table here."""
        found = self.tables.get(blocks)
        if found is None:
            return blocks
        offset, pointer_bytes = found
        end = offset + len(blocks) * pointer_bytes
        if end > self.memory.size_bytes or not self.memory.written[offset:end].all():
            raise MemoryAccessError(f"the pointer table at {self.memory.space.value}[{offset}:{end}) "
                                    "was never written")
        raw = self.memory.data[offset:end].reshape(len(blocks), pointer_bytes).astype(np.int64)
        entries = (raw << (8 * np.arange(pointer_bytes, dtype=np.int64))).sum(axis=1)
        return tuple(int(e) for e in entries)


class BlockViewAccess(ViewAccess):
    """A view of a block tensor bound to a memory: reads gather its bytes from the blocks its
    pointer table names, writes scatter them back. The first access walks the table (in the
    memory's :class:`PointerTables`, else the view's own ``blocks``) and keeps the physical
    address of each byte of the view (view order, element bytes last)."""

    __slots__ = ("addresses", "_index")

    def __init__(self, memory: Memory, view: View):   # (not ViewAccess's: no numpy view of its bytes)
        logical = view.logical()
        lo, hi = view.span
        if lo < 0 or hi > memory.size_bytes or logical.logical_span[0] < 0 or \
                logical.logical_span[1] > len(view.blocks or ()) * view.block_bytes:
            raise MemoryAccessError(f"view {view} spans bytes [{lo}, {hi}) outside "
                                    f"{memory.space.value} of {memory.size_bytes} bytes or its blocks")
        self.view, self.memory = view, memory
        self.dtype, self.shape = view.dtype, tuple(view.shape)
        self.storage = view.dtype.numpy_dtype
        self.known_written = False
        eb = view.element_bytes
        addresses = np.zeros(self.shape + (eb,), np.int64) + logical.offset_bytes
        for axis, stride in enumerate(logical.strides):
            extent = [1] * (len(self.shape) + 1)
            extent[axis] = self.shape[axis]
            addresses += np.arange(self.shape[axis], dtype=np.int64).reshape(extent) * stride
        self.addresses = addresses + np.arange(eb, dtype=np.int64)   # logical
        self._index: np.ndarray | None = None
        self._typed = None

    @property
    def index(self) -> np.ndarray:
        """Physical addresses of the view's bytes, from its pointer table (walked once)."""
        if self._index is None:
            view, tables = self.view, self.memory.pointer_tables
            blocks = view.blocks or ()
            if tables is not None:
                blocks = tables.walk(blocks)
            index = block_byte_index(self.addresses, blocks, view.block_bytes)
            if index.size and (index.min() < 0 or index.max() >= self.memory.size_bytes):
                raise MemoryAccessError(f"the pointer table of {view} names a block outside "
                                        f"{self.memory.space.value} of {self.memory.size_bytes} bytes")
            self._index = index
        return self._index

    @property
    def raw(self) -> np.ndarray:   # type: ignore[override]
        """A gathered copy of the view's bytes (view shape, element bytes last)."""
        return self.memory.data[self.index]

    @property
    def mask(self) -> np.ndarray:   # type: ignore[override]
        return self.memory.written[self.index]

    @property
    def typed(self) -> np.ndarray | None:
        return None

    def read(self) -> np.ndarray:
        """A fresh array (storage dtype, view shape) gathered from the blocks."""
        if not self.known_written:
            self.check_written()
        raw = self.raw
        if self.dtype is DType.INT48:
            six = raw.reshape(-1, 6)
            sign = np.where(six[:, 5:6] & 0x80, 0xFF, 0).astype(np.uint8)
            return np.concatenate([six, sign, sign], axis=1).view("<i8").reshape(self.shape).astype(np.int64)
        return np.ascontiguousarray(raw).reshape(-1).view(self.storage).reshape(self.shape)

    def write(self, array: np.ndarray) -> None:
        """Scatter ``array`` (storage dtype, the view's element count) into the blocks."""
        if self.memory.read_only:
            self._refuse_write()
        if array.dtype != self.storage or array.size != self.view.element_count:
            raise MemoryAccessError(f"writes {array.dtype} {list(array.shape)} into {self.view}")
        eb = self.view.element_bytes
        if self.dtype is DType.INT48:
            data = np.ascontiguousarray(array, dtype="<i8").view(np.uint8).reshape(-1, 8)[:, :6]
        else:
            data = np.ascontiguousarray(array).reshape(-1).view(np.uint8).reshape(-1, eb)
        self._store(data.reshape(self.index.shape))

    def copy_from(self, src: ViewAccess) -> None:
        """Byte copy ``src`` -> the blocks (a DMA)."""
        if self.memory.read_only:
            self._refuse_write()
        if not src.known_written:
            src.check_written()
        self._store(np.asarray(src.raw).reshape(self.index.shape))

    def _store(self, data: np.ndarray) -> None:
        self.memory.data[self.index] = data
        self.memory.written[self.index] = True
        self.known_written = True
