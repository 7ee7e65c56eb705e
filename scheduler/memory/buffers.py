"""Symbolic buffers and views: the memory plan before offsets are known.

Passes that build the command stream place values and tiles in :class:`Buffer` s
(a memory and a size, no offset yet) and address them with :class:`BufView` s
(an offset *within* the buffer). The planners later give every buffer an
offset, and :meth:`BufView.resolve` turns views into :class:`npu_sim.program.View` s.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import NamedTuple

from npu_sim.memory_layout import contiguous_strides, element_size_bytes
from npu_sim.program import MemorySpace, View, _cached_property
from npu_sim.reference.kernel_api import Region
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType

_ids = itertools.count()


@dataclass(eq=False)
class Buffer:
    """A byte range of one memory, placed later. ``kind`` is the Allocation kind."""

    name: str
    memory: MemorySpace
    size_bytes: int
    kind: str = "activation"  # input | output | constant | activation | stripe | spill | variable | tile
    initial_data: bytes | None = None
    whole_program: bool = False   # live for the whole program (its lifetime is not computed)
    #: an arena buffer of the TCM the host writes before each invocation (a graph input: live
    #: from the start to its last reader) and/or reads after it (an output: from its first writer
    #: to the end); otherwise timed like an intermediate, as TFLite Micro's arena plans them
    host_writes: bool = False
    host_reads: bool = False
    op: int | None = None         # tile buffers: live over all commands of this operation (ping-pong)
    offset_bytes: int | None = None
    serial: int = field(default_factory=lambda: next(_ids))
    #: a block tensor (:mod:`scheduler.memory.block_tensors`): its blocks' offsets (its
    #: ``offset_bytes`` is then 0: views address its logical bytes)
    blocks: tuple[int, ...] | None = None
    block_bytes: int = 0
    pointer_table: Buffer | None = None   # a block tensor's: the buffer holding its pointer table

    @property
    def placed_offset(self) -> int:
        """Its offset, once the planners have placed it."""
        if self.offset_bytes is None:
            raise RuntimeError(f"{self!r} has no offset yet")
        return self.offset_bytes

    @property
    def end_bytes(self) -> int:
        """The offset after its last byte, once placed."""
        return self.placed_offset + self.size_bytes

    def __repr__(self) -> str:
        where = "?" if self.offset_bytes is None else self.offset_bytes
        return f"Buffer({self.name!r}, {self.memory.value}@{where}, {self.size_bytes}B, {self.kind})"


class BufView(NamedTuple):
    """A typed window of a buffer; ``buffer`` None is an empty view (no bytes).

    A NamedTuple rather than a frozen dataclass: emission makes one per operand of
    every tile and materialization hashes them, both several times cheaper on tuples.
    """

    buffer: Buffer | None
    offset_bytes: int
    shape: tuple[int, ...]
    dtype: DType
    strides_bytes: tuple[int, ...] | None = None

    @property
    def memory(self) -> MemorySpace:
        return self.buffer.memory if self.buffer is not None else MemorySpace.TCM

    @property
    def element_count(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def size_bytes(self) -> int:
        return self.element_count * element_size_bytes(self.dtype)

    @property
    def strides(self) -> tuple[int, ...]:
        if self.strides_bytes is not None:
            return self.strides_bytes
        return contiguous_strides(self.shape, element_size_bytes(self.dtype))

    def resolve(self) -> View:
        """The program view (the buffer must be placed)."""
        if self.buffer is None:
            return View(MemorySpace.TCM, 0, self.shape, self.dtype)
        if self.buffer.offset_bytes is None:
            raise RuntimeError(f"{self.buffer!r} has no offset yet")
        strides = None if self.strides_bytes is None or self.strides_bytes == contiguous_strides(
            self.shape, element_size_bytes(self.dtype)) else self.strides_bytes
        if self.buffer.blocks is not None:
            return View(self.buffer.memory, self.offset_bytes, self.shape, self.dtype, strides,
                        self.buffer.blocks, self.buffer.block_bytes)
        return View(self.buffer.memory, self.buffer.offset_bytes + self.offset_bytes, self.shape,
                    self.dtype, strides)


@dataclass(frozen=True)
class Placement:
    """Where a whole value lives: a contiguous row-major tensor at ``offset_bytes`` of ``buffer``."""

    buffer: Buffer
    offset_bytes: int
    type: TensorType

    @property
    def memory(self) -> MemorySpace:
        return self.buffer.memory

    @property
    def size_bytes(self) -> int:
        return self.type.element_count * element_size_bytes(self.type.dtype)

    def whole(self, shape: tuple[int, ...] | None = None) -> BufView:
        """The whole value as a contiguous view (optionally reinterpreted with another shape)."""
        return BufView(self.buffer, self.offset_bytes, tuple(self.type.shape if shape is None else shape),
                       self.type.dtype)

    @_cached_property
    def strides(self) -> tuple[int, ...]:
        """Row-major byte strides of the value (computed once: every tile's window needs them)."""
        return contiguous_strides(tuple(self.type.shape), element_size_bytes(self.type.dtype))

    @_cached_property
    def _windows(self) -> dict[Region, BufView]:
        """The views :meth:`window` gave, by region: the tiles of an operation ask again for the
        same windows (weights, a loaded input's rows), and so does every compile attempt."""
        return {}

    def window(self, region: Region) -> BufView:
        """The strided view of ``region`` of the value (empty regions give an empty view)."""
        windows = self._windows
        view = windows.get(region)
        if view is None:
            view = windows[region] = self._window(region)
        return view

    def _window(self, region: Region) -> BufView:
        shape = tuple([b - a if b > a else 0 for a, b in region])
        if 0 in shape:
            return BufView(None, 0, shape, self.type.dtype)
        strides = self.strides
        offset = self.offset_bytes
        for (a, _), s in zip(region, strides):
            offset += a * s
        return BufView(self.buffer, offset, shape, self.type.dtype, strides)

    def retyped(self, type_: TensorType) -> Placement:
        """The same bytes seen as another tensor type of the same size (RESHAPE aliasing)."""
        return Placement(self.buffer, self.offset_bytes, type_)

    def shifted(self, offset_bytes: int, type_: TensorType) -> Placement:
        """The value of type ``type_`` starting ``offset_bytes`` into this one (SLICE aliasing);
        this one itself where that is all of it (its windows, cached, serve every compile attempt)."""
        if offset_bytes == 0 and type_ == self.type:
            return self
        return Placement(self.buffer, self.offset_bytes + offset_bytes, type_)


def tile_view(buffer: Buffer, shape: tuple[int, ...], dtype: DType) -> BufView:
    """A contiguous view of ``shape`` at the start of a tile buffer."""
    if any(d == 0 for d in shape):
        return BufView(None, 0, shape, dtype)
    return BufView(buffer, 0, tuple(shape), dtype)
