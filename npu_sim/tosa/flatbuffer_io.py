"""Read and write TOSA flatbuffer files (``.tosa``).

``read_graph(data) -> Graph`` and ``write_graph(graph) -> bytes``.

No generated bindings: a small generic codec walks the schema description of
:mod:`npu_sim.tosa.fb_schema` (tables, field slots, unions, enums) and turns a
buffer into a *tree* of plain Python values, or a tree into a buffer with
``flatbuffers.Builder``. :mod:`npu_sim.tosa.serial_tree` maps trees to and from
the IR; the JSON form (:mod:`npu_sim.tosa.json_io`) uses the same trees.

Tree form: a table is a dict holding only the fields present in the buffer;
scalars and enums are ints (bools for ``bool``), a union is two keys
(``attribute_type``: the tag, ``attribute``: the member table), strings are
``str``, ``[ubyte]`` vectors are ``bytes``, other vectors are lists.

Reading is defensive: every offset is checked against the buffer length, every
element count against the bytes that remain, and the total amount of decoded
items is bounded by the buffer size, so truncated, random or malicious bytes
raise :class:`~npu_sim.errors.TosaFormatError` (never ``struct.error``,
``IndexError``, ``UnicodeDecodeError``, a hang or a huge allocation).

Versions: files written by tosa-tools 2026.8 (schema 1.1.0 draft) and files
declaring TOSA 1.0.x read alike: the 1.0 schema of the serialization library is
a strict prefix of the 1.1 draft one (same enum numbering, same union order,
fields only appended), which we checked against the ``tosa_1.0.fbs`` that
tracks serialization_lib v1.0. Pre-release 1.0 schemas (v1.0.0-rc0 and earlier
drafts, which wrote "1.0.0d") numbered DType differently (UINT8 = 2, ...) and
kept zero points in attributes; like tosa-tools we read "1.0.0d" with the final
numbering, so such a file fails validation or data-size checks rather than
reading right.
"""

from __future__ import annotations

import struct
from typing import Any

import flatbuffers
from flatbuffers import number_types

from npu_sim.errors import NpuSimError, TosaFormatError
from npu_sim.tosa import fb_schema
from npu_sim.tosa.fb_schema import FILE_IDENTIFIER, ROOT_TABLE, Field

Tree = dict[str, Any]


# --- reading ------------------------------------------------------------------
class _Reader:
    """Bounds-checked access to a flatbuffer; raises TosaFormatError on any inconsistency."""

    def __init__(self, data: bytes):
        self.data = data
        self.size = len(data)
        # Work budget: a valid buffer never needs more decoded items (tables, vector
        # elements) or data bytes than a small multiple of its size. Shared sub-objects
        # in a crafted buffer could otherwise amplify a small file into a huge tree.
        self.items_left = 4 * self.size + 1024
        self.bytes_left = 2 * self.size + 1024

    def fail(self, what: str) -> TosaFormatError:
        return TosaFormatError(f"corrupt or truncated TOSA flatbuffer: {what}")

    def need(self, pos: int, size: int, what: str) -> None:
        if pos < 0 or size < 0 or pos + size > self.size:
            raise self.fail(f"{what} at byte {pos} (+{size}) lies outside the "
                            f"{self.size}-byte buffer")

    def scalar(self, fmt: str, size: int, pos: int, what: str) -> Any:
        self.need(pos, size, what)
        return struct.unpack_from(fmt, self.data, pos)[0]

    def u32(self, pos: int, what: str) -> int:
        return self.scalar("<I", 4, pos, what)

    def spend(self, items: int, what: str) -> None:
        self.items_left -= items
        if self.items_left < 0:
            raise self.fail(f"{what} refers to more data than the buffer can hold")

    def indirect(self, pos: int, what: str) -> int:
        """Follow the uoffset stored at ``pos``."""
        target = pos + self.u32(pos, what)
        self.need(target, 4, what)
        return target

    # -- tables
    def table(self, pos: int, name: str) -> Tree:
        self.spend(1, name)
        soffset = self.scalar("<i", 4, pos, f"{name} table")
        vtable = pos - soffset
        vt_size = self.scalar("<H", 2, vtable, f"{name} vtable")
        obj_size = self.scalar("<H", 2, vtable + 2, f"{name} vtable")
        if vt_size < 4 or vt_size % 2:
            raise self.fail(f"{name} vtable has invalid size {vt_size}")
        self.need(vtable, vt_size, f"{name} vtable")
        self.need(pos, obj_size, f"{name} table")
        result: Tree = {}
        for field in fb_schema.fields(name):
            if field.vtable_offset >= vt_size:
                continue
            field_offset = self.scalar("<H", 2, vtable + field.vtable_offset, f"{name} vtable")
            if field_offset == 0:
                continue
            where = f"{name}.{field.name}"
            inline_size = 4 if field.kind in ("string", "table", "union", "vector") else \
                fb_schema.SCALARS[fb_schema.scalar_type(field)][1]
            if field_offset < 4 or field_offset + inline_size > obj_size:
                raise self.fail(f"{where} lies outside its table")
            result[field.name] = self.field(pos + field_offset, field, result, where)
        return result

    def field(self, pos: int, field: Field, siblings: Tree, where: str) -> Any:
        kind = field.kind
        if kind in ("scalar", "enum", "union_type"):
            type_name = fb_schema.scalar_type(field)
            fmt, size = fb_schema.SCALARS[type_name]
            value = self.scalar(fmt, size, pos, where)
            return bool(value) if type_name == "bool" else value
        target = self.indirect(pos, where)
        if kind == "string":
            return self.string(target, where)
        if kind == "table":
            return self.table(target, field.type)
        if kind == "union":
            tag = siblings.get(f"{field.name}_type", 0)
            member = fb_schema.union_member(field.type, tag)
            if member is None:
                raise TosaFormatError(f"{where}: unknown {field.type} type tag {tag}")
            return self.table(target, member)
        return self.vector(target, field, where)

    def string(self, pos: int, where: str) -> str:
        length = self.u32(pos, where)
        self.need(pos + 4, length, where)
        self.bytes_left -= length
        if self.bytes_left < 0:
            raise self.fail(f"{where} refers to more data than the buffer can hold")
        try:
            return self.data[pos + 4:pos + 4 + length].decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{where} is not valid UTF-8") from None

    def vector(self, pos: int, field: Field, where: str) -> Any:
        count = self.u32(pos, where)
        start = pos + 4
        kind = field.element_kind
        if kind in ("scalar", "enum"):
            type_name = fb_schema.ENUM_BASE if kind == "enum" else field.type
            fmt, size = fb_schema.SCALARS[type_name]
            self.need(start, count * size, where)
            if size == 1 and type_name in ("ubyte", "uint8"):
                self.bytes_left -= count
                if self.bytes_left < 0:
                    raise self.fail(f"{where} refers to more data than the buffer can hold")
                return bytes(self.data[start:start + count])
            self.spend(count, where)
            values = struct.unpack_from(f"<{count}{fmt[1]}", self.data, start)
            return [bool(v) for v in values] if type_name == "bool" else list(values)
        self.need(start, count * 4, where)
        self.spend(count, where)
        items = []
        for i in range(count):
            target = self.indirect(start + 4 * i, f"{where}[{i}]")
            if kind == "string":
                items.append(self.string(target, f"{where}[{i}]"))
            elif kind == "table":
                items.append(self.table(target, field.type))
            else:  # pragma: no cover - the TOSA schema has no other vector kinds
                raise TosaFormatError(f"{where}: vectors of {kind} are not supported")
        return items


def read_tree(data: bytes | bytearray | memoryview) -> Tree:
    """Decode a TOSA flatbuffer into a tree (no interpretation beyond the schema)."""
    data = bytes(data)
    if not data:
        raise TosaFormatError("empty file: not a TOSA flatbuffer")
    if len(data) < 8:
        raise TosaFormatError(f"only {len(data)} bytes: too short to be a TOSA flatbuffer")
    if data[4:8] != FILE_IDENTIFIER:
        raise TosaFormatError(f"not a TOSA flatbuffer: file identifier is {data[4:8]!r}, "
                              f"expected {FILE_IDENTIFIER!r}")
    reader = _Reader(data)
    try:
        return reader.table(reader.indirect(0, "root offset"), ROOT_TABLE)
    except NpuSimError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError, MemoryError,
            RecursionError) as exc:
        raise reader.fail(f"{type(exc).__name__}: {exc}") from None


def read_graph(data: bytes | bytearray | memoryview):
    """Parse a TOSA flatbuffer into a :class:`~npu_sim.tosa.ir.Graph` (not yet validated)."""
    from npu_sim.tosa.serial_tree import graph_from_tree

    return graph_from_tree(read_tree(data))


# --- writing ------------------------------------------------------------------
_FLAGS = {
    "bool": number_types.BoolFlags, "byte": number_types.Int8Flags, "int8": number_types.Int8Flags,
    "ubyte": number_types.Uint8Flags, "uint8": number_types.Uint8Flags,
    "short": number_types.Int16Flags, "int16": number_types.Int16Flags,
    "ushort": number_types.Uint16Flags, "uint16": number_types.Uint16Flags,
    "int": number_types.Int32Flags, "int32": number_types.Int32Flags,
    "uint": number_types.Uint32Flags, "uint32": number_types.Uint32Flags,
    "long": number_types.Int64Flags, "int64": number_types.Int64Flags,
    "ulong": number_types.Uint64Flags, "uint64": number_types.Uint64Flags,
    "float": number_types.Float32Flags, "float32": number_types.Float32Flags,
    "double": number_types.Float64Flags, "float64": number_types.Float64Flags,
}

#: byte vectors (constant data) are aligned as the schema's ``force_align: 8`` asks
_BYTE_VECTOR_ALIGN = 8


class _Writer:
    def __init__(self) -> None:
        self.builder = flatbuffers.Builder(1024)

    def table(self, name: str, tree: Tree) -> int:
        fields = fb_schema.fields(name)
        offsets: dict[str, int] = {}
        for field in fields:  # children first: flatbuffers cannot nest objects
            if field.name not in tree or field.kind in ("scalar", "enum", "union_type"):
                continue
            value = tree[field.name]
            if field.kind == "string":
                offsets[field.name] = self.builder.CreateString(value)
            elif field.kind == "table":
                offsets[field.name] = self.table(field.type, value)
            elif field.kind == "union":
                tag = tree.get(f"{field.name}_type", 0)
                member = fb_schema.union_member(field.type, tag)
                if member is None:
                    raise TosaFormatError(f"{name}.{field.name}: invalid union tag {tag}")
                offsets[field.name] = self.table(member, value)
            else:
                offsets[field.name] = self.vector(field, value)
        b = self.builder
        b.StartObject(len(fields) and fields[-1].slot + 1)
        for field in fields:
            if field.name not in tree:
                continue
            if field.name in offsets:
                b.PrependUOffsetTRelativeSlot(field.slot, offsets[field.name], 0)
            else:
                flags = _FLAGS[fb_schema.scalar_type(field)]
                value = tree[field.name]
                b.PrependSlot(flags, field.slot, value, field.default)
        return b.EndObject()

    def vector(self, field: Field, values: Any) -> int:
        b = self.builder
        kind = field.element_kind
        if kind in ("scalar", "enum"):
            type_name = fb_schema.ENUM_BASE if kind == "enum" else field.type
            fmt, size = fb_schema.SCALARS[type_name]
            if type_name in ("ubyte", "uint8"):
                raw = bytes(values)
                b.StartVector(1, len(raw), _BYTE_VECTOR_ALIGN)
                b.head = b.head - len(raw)
                b.Bytes[b.head:b.head + len(raw)] = raw
                return b.EndVector()
            raw = struct.pack(f"<{len(values)}{fmt[1]}", *values)
            b.StartVector(size, len(values), size)
            b.head = b.head - len(raw)
            b.Bytes[b.head:b.head + len(raw)] = raw
            return b.EndVector()
        if kind == "string":
            children = [b.CreateString(v) for v in values]
        elif kind == "table":
            children = [self.table(field.type, v) for v in values]
        else:  # pragma: no cover
            raise TosaFormatError(f"vectors of {kind} are not supported")
        b.StartVector(4, len(children), 4)
        for child in reversed(children):
            b.PrependUOffsetTRelative(child)
        return b.EndVector()


def write_tree(tree: Tree) -> bytes:
    """Encode a tree as a TOSA flatbuffer (file identifier ``TOSA``)."""
    writer = _Writer()
    root = writer.table(ROOT_TABLE, tree)
    writer.builder.Finish(root, file_identifier=FILE_IDENTIFIER)
    return bytes(writer.builder.Output())


def write_graph(graph) -> bytes:
    """Serialize a :class:`~npu_sim.tosa.ir.Graph` as a TOSA flatbuffer.

    The file runs in tosa-tools' reference model: variables are written the way
    ``tosa-opt`` writes them, SHAPE tensors as the block's ``shapes``. See
    :func:`npu_sim.tosa.serial_tree.graph_to_tree`.
    """
    from npu_sim.tosa.serial_tree import graph_to_tree

    return write_tree(graph_to_tree(graph))
