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
``str``, ``[ubyte]`` vectors are ``bytes`` (long ones views of the buffer for
:func:`read_graph`, whose arrays copy them), other vectors are lists.

Reading is defensive: every offset is checked against the buffer length, every
element count against the bytes that remain, and the total amount of decoded
items is bounded by the buffer size, so truncated, random or malicious bytes
raise :class:`~npu_sim.errors.TosaFormatError` (never ``struct.error``,
``IndexError``, ``UnicodeDecodeError``, a hang or a huge allocation).
It is also quick: what to do per field is planned once per table from the schema,
and what a vtable says (which fields a table has, and where) is checked once per
buffer and shared by all the tables using it, so per field little work remains.

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
from collections.abc import Callable
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

import flatbuffers
from flatbuffers import number_types

from npu_sim.errors import NpuSimError, TosaFormatError
from npu_sim.tosa import fb_schema
from npu_sim.tosa.fb_schema import FILE_IDENTIFIER, ROOT_TABLE, Field
from npu_sim.tosa.serial_tree import graph_from_tree, graph_to_tree

if TYPE_CHECKING:
    from npu_sim.tosa.ir import Graph

Tree = dict[str, Any]


# --- reading ------------------------------------------------------------------
# The reader works from a plan per table, derived once from the schema description:
# per field its slot, what it holds (one of the codes below) and how to unpack it.
_SCALAR, _BOOL, _STRING, _TABLE, _UNION, _BYTES, _SCALARS, _STRINGS, _TABLES, _OTHER = range(10)

_I32 = struct.Struct("<i").unpack_from
_U16_PAIR = struct.Struct("<HH").unpack_from
_U32 = struct.Struct("<I").unpack_from


class _FieldPlan(NamedTuple):
    """How to read one field of a table (derived from its :class:`Field`)."""

    name: str
    slot: int
    code: int
    #: bytes the field takes inside its table (4 for an offset)
    inline_size: int
    #: ``Table.field``, the name errors give the field
    where: str
    #: _SCALAR/_BOOL: the struct unpacker; _SCALARS: the struct format letter
    unpack: Any = None
    #: _TABLE/_TABLES: the table; _UNION: the union; _SCALARS: (element size, type name);
    #: _OTHER: the element kind
    detail: Any = None
    #: _UNION: the key of its type tag (``<name>_type``)
    tag_key: str = ""
    #: struct format letter of the bytes the field takes inside its table (an offset: ``I``)
    letter: str = "I"


def _field_plan(table: str, field: Field) -> _FieldPlan:
    name, slot, where, kind = field.name, field.slot, f"{table}.{field.name}", field.kind
    if kind in ("scalar", "enum", "union_type"):
        type_name = fb_schema.scalar_type(field)
        fmt, size = fb_schema.SCALARS[type_name]
        return _FieldPlan(name, slot, _BOOL if type_name == "bool" else _SCALAR, size, where,
                          struct.Struct(fmt).unpack_from, letter=fmt[1])
    if kind == "string":
        return _FieldPlan(name, slot, _STRING, 4, where)
    if kind == "table":
        return _FieldPlan(name, slot, _TABLE, 4, where, detail=field.type)
    if kind == "union":
        return _FieldPlan(name, slot, _UNION, 4, where, detail=field.type,
                          tag_key=f"{name}_type")
    element = field.element_kind
    if element in ("scalar", "enum"):
        type_name = fb_schema.ENUM_BASE if element == "enum" else field.type
        fmt, size = fb_schema.SCALARS[type_name]
        if size == 1 and type_name in ("ubyte", "uint8"):
            return _FieldPlan(name, slot, _BYTES, 4, where)
        return _FieldPlan(name, slot, _SCALARS, 4, where, fmt[1], (size, type_name))
    if element == "string":
        return _FieldPlan(name, slot, _STRINGS, 4, where)
    if element == "table":
        return _FieldPlan(name, slot, _TABLES, 4, where, detail=field.type)
    return _FieldPlan(name, slot, _OTHER, 4, where, detail=element)  # pragma: no cover


@cache
def _table_plan(table: str) -> tuple[_FieldPlan, ...]:
    """The field plans of ``table`` in slot order."""
    return tuple(_field_plan(table, f) for f in fb_schema.fields(table))


@lru_cache(maxsize=256)
def _vector_unpacker(count: int, letter: str) -> Callable:
    """``unpack_from`` of ``count`` little-endian elements of struct type ``letter``."""
    return struct.Struct(f"<{count}{letter}").unpack_from


class _Layout(NamedTuple):
    """What a vtable says about a table of a given type (shared by all tables using it)."""

    #: the table's size in bytes
    obj_size: int
    #: the fields present, in slot order, up to ``bad``: (index of its inline value in what
    #: ``unpack`` returns, offset in the table, name, code, where, unpack, detail, tag key)
    fields: tuple[tuple[int, int, str, int, str, Any, Any, str], ...]
    #: the first present field that does not lie inside the table, if any
    bad: _FieldPlan | None
    #: ``unpack(data, table position)``: the inline values of every field (scalars and offsets)
    unpack: Callable[[bytes, int], tuple]


def _inline_unpacker(fields: list[tuple[int, _FieldPlan]]) -> tuple[Callable[[bytes, int], tuple], list[int]]:
    """One ``unpack_from`` reading every field's inline bytes of a table, in offset order
    (one call per table rather than one per field), and where each field's value lands.
    Fields sharing bytes (only a crafted file has them) are read one by one instead."""
    order = sorted(range(len(fields)), key=lambda k: fields[k][0])
    fmt, end, index = ["<"], 0, [0] * len(fields)
    for n, k in enumerate(order):
        offset, plan = fields[k]
        if offset < end:
            break
        if offset > end:
            fmt.append(f"{offset - end}x")
        fmt.append(plan.letter)
        end = offset + plan.inline_size
        index[k] = n
    else:
        return struct.Struct("".join(fmt)).unpack_from, index
    each = [(offset, struct.Struct("<" + plan.letter).unpack_from) for offset, plan in fields]
    return (lambda data, pos: tuple([unpack(data, pos + offset)[0] for offset, unpack in each])), \
        list(range(len(fields)))


#: byte vectors this long or longer are read as views where the reader is asked to
_VIEW_BYTES = 4096


class _Reader:
    """Bounds-checked access to a flatbuffer; raises TosaFormatError on any inconsistency.

    Every offset is checked before it is used (``struct`` would read a negative
    position from the end of the buffer). Checks that an earlier check implies are
    left out: a field inside a table inside the buffer needs no check of its own,
    nor do the elements of a vector whose extent was checked. Tables sharing a
    vtable (flatbuffers deduplicates them) share its checked :class:`_Layout`.
    """

    def __init__(self, data: bytes, byte_views: bool = False):
        self.data = data
        self.size = len(data)
        #: where byte vectors of _VIEW_BYTES or more are cut from: with ``byte_views``, a view
        #: of ``data`` (no copy of a model's weights; the IR's arrays are decoded from it)
        self.large_bytes: bytes | memoryview = memoryview(data) if byte_views else data
        # Work budget: a valid buffer never needs more decoded items (tables, vector
        # elements) or data bytes than a small multiple of its size. Shared sub-objects
        # in a crafted buffer could otherwise amplify a small file into a huge tree.
        self.items_left = 4 * self.size + 1024
        self.bytes_left = 2 * self.size + 1024
        self.layouts: dict[tuple[int, str], _Layout] = {}

    def fail(self, what: str) -> TosaFormatError:
        return TosaFormatError(f"corrupt or truncated TOSA flatbuffer: {what}")

    def outside(self, pos: int, size: int, what: str) -> TosaFormatError:
        return self.fail(f"{what} at byte {pos} (+{size}) lies outside the "
                         f"{self.size}-byte buffer")

    def too_much(self, what: str) -> TosaFormatError:
        return self.fail(f"{what} refers to more data than the buffer can hold")

    def indirect(self, pos: int, what: str) -> int:
        """Follow the uoffset stored at ``pos`` (which lies in the buffer)."""
        target = pos + _U32(self.data, pos)[0]
        if target + 4 > self.size:
            raise self.outside(target, 4, what)
        return target

    # -- tables
    def layout(self, vtable: int, name: str) -> _Layout:
        """Check the vtable at ``vtable`` for a ``name`` table and note which fields it has."""
        size = self.size
        if vtable < 0 or vtable + 2 > size:
            raise self.outside(vtable, 2, f"{name} vtable")
        if vtable + 4 > size:
            raise self.outside(vtable + 2, 2, f"{name} vtable")
        vt_size, obj_size = _U16_PAIR(self.data, vtable)
        if vt_size < 4 or vt_size % 2:
            raise self.fail(f"{name} vtable has invalid size {vt_size}")
        if vtable + vt_size > size:
            raise self.outside(vtable, vt_size, f"{name} vtable")
        slots = (vt_size - 4) >> 1
        offsets = struct.unpack_from(f"<{slots}H", self.data, vtable + 4)
        fields, bad = [], None
        for plan in _table_plan(name):
            if plan.slot >= slots:
                break
            field_offset = offsets[plan.slot]
            if not field_offset:
                continue
            if field_offset < 4 or field_offset + plan.inline_size > obj_size:
                bad = plan
                break
            fields.append((field_offset, plan))
        unpack, index = _inline_unpacker(fields)
        entries = tuple((i, offset, plan.name, plan.code, plan.where, plan.unpack, plan.detail, plan.tag_key)
                        for i, (offset, plan) in zip(index, fields))
        layout = self.layouts[(vtable, name)] = _Layout(obj_size, entries, bad, unpack)
        return layout

    def table(self, pos: int, name: str) -> Tree:
        self.items_left -= 1
        if self.items_left < 0:
            raise self.too_much(name)
        data, size = self.data, self.size
        if pos < 0 or pos + 4 > size:
            raise self.outside(pos, 4, f"{name} table")
        vtable = pos - _I32(data, pos)[0]
        layout = self.layouts.get((vtable, name)) or self.layout(vtable, name)
        if pos + layout.obj_size > size:
            raise self.outside(pos, layout.obj_size, f"{name} table")
        result: Tree = {}
        values = layout.unpack(data, pos)
        for index, field_offset, field, code, where, unpack, detail, tag_key in layout.fields:
            value = values[index]
            if code == _SCALAR:
                result[field] = value
                continue
            if code == _BOOL:
                result[field] = bool(value)
                continue
            target = pos + field_offset + value  # an offset field: follow it
            if target + 4 > size:
                raise self.outside(target, 4, where)
            if code == _STRING:
                result[field] = self.string(target, where)
            elif code == _TABLE:
                result[field] = self.table(target, detail)
            elif code == _UNION:
                tag = result.get(tag_key, 0)
                member = fb_schema.union_member(detail, tag)
                if member is None:
                    raise TosaFormatError(f"{where}: unknown {detail} type tag {tag}")
                result[field] = self.table(target, member)
            else:
                result[field] = self.vector(target, code, where, unpack, detail)
        if layout.bad is not None:
            raise self.fail(f"{layout.bad.where} lies outside its table")
        return result

    def string(self, pos: int, where: str) -> str:
        """The string at ``pos`` (its 4-byte length lies in the buffer)."""
        length = _U32(self.data, pos)[0]
        start = pos + 4
        if start + length > self.size:
            raise self.outside(start, length, where)
        self.bytes_left -= length
        if self.bytes_left < 0:
            raise self.too_much(where)
        try:
            return self.data[start:start + length].decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{where} is not valid UTF-8") from None

    def vector(self, pos: int, code: int, where: str, unpack: Any, detail: Any) -> Any:
        """The vector at ``pos`` (its 4-byte count lies in the buffer) of a field planned
        as ``code``, ``unpack``, ``detail`` (see :class:`_FieldPlan`)."""
        count = _U32(self.data, pos)[0]
        start = pos + 4
        if code == _BYTES:
            return self.byte_vector(start, count, where)
        if code == _SCALARS:
            return self.scalar_vector(start, count, where, unpack, detail)
        offsets = self.offset_vector(start, count, where)
        if not offsets:
            return []
        if code == _STRINGS:
            return self.string_vector(start, offsets, where)
        if code == _TABLES:
            return self.table_vector(start, offsets, where, detail)
        self.indirect(start, f"{where}[0]")  # pragma: no cover - the TOSA schema has no other vector kinds
        raise TosaFormatError(f"{where}: vectors of {detail} are not supported")  # pragma: no cover

    def byte_vector(self, start: int, count: int, where: str) -> bytes | memoryview:
        if start + count > self.size:
            raise self.outside(start, count, where)
        self.bytes_left -= count
        if self.bytes_left < 0:
            raise self.too_much(where)
        if count >= _VIEW_BYTES:
            return self.large_bytes[start:start + count]
        return self.data[start:start + count]

    def scalar_vector(self, start: int, count: int, where: str, letter: str,
                      detail: tuple[int, str]) -> list[Any]:
        element_size, type_name = detail
        if start + count * element_size > self.size:
            raise self.outside(start, count * element_size, where)
        self.items_left -= count
        if self.items_left < 0:
            raise self.too_much(where)
        values = _vector_unpacker(count, letter)(self.data, start)
        return [bool(v) for v in values] if type_name == "bool" else list(values)

    def offset_vector(self, start: int, count: int, where: str) -> tuple[int, ...]:
        """The ``count`` uoffsets from ``start`` (counted against the item budget)."""
        if start + count * 4 > self.size:
            raise self.outside(start, count * 4, where)
        self.items_left -= count
        if self.items_left < 0:
            raise self.too_much(where)
        if not count:
            return ()
        return _vector_unpacker(count, "I")(self.data, start)

    def string_vector(self, start: int, offsets: tuple[int, ...], where: str) -> list[str]:
        data, size = self.data, self.size
        items: list[str] = []
        bytes_left = self.bytes_left
        for i, offset in enumerate(offsets):
            target = start + 4 * i + offset
            if target + 4 > size:
                raise self.outside(target, 4, f"{where}[{i}]")
            length = _U32(data, target)[0]
            target += 4
            if target + length > size:
                raise self.outside(target, length, f"{where}[{i}]")
            bytes_left -= length
            if bytes_left < 0:
                raise self.too_much(f"{where}[{i}]")
            try:
                items.append(data[target:target + length].decode("utf-8"))
            except UnicodeDecodeError:
                raise self.fail(f"{where}[{i}] is not valid UTF-8") from None
        self.bytes_left = bytes_left
        return items

    def table_vector(self, start: int, offsets: tuple[int, ...], where: str, name: str) -> list[Tree]:
        size, table = self.size, self.table
        items: list[Tree] = []
        for i, offset in enumerate(offsets):
            target = start + 4 * i + offset
            if target + 4 > size:
                raise self.outside(target, 4, f"{where}[{i}]")
            items.append(table(target, name))
        return items


def read_tree(data: bytes | bytearray | memoryview, byte_views: bool = False) -> Tree:
    """Decode a TOSA flatbuffer into a tree (no interpretation beyond the schema).
    ``byte_views``: long byte vectors are memoryviews of the buffer rather than bytes."""
    data = bytes(data)
    if not data:
        raise TosaFormatError("empty file: not a TOSA flatbuffer")
    if len(data) < 8:
        raise TosaFormatError(f"only {len(data)} bytes: too short to be a TOSA flatbuffer")
    if data[4:8] != FILE_IDENTIFIER:
        raise TosaFormatError(f"not a TOSA flatbuffer: file identifier is {data[4:8]!r}, "
                              f"expected {FILE_IDENTIFIER!r}")
    reader = _Reader(data, byte_views)
    try:
        return reader.table(reader.indirect(0, "root offset"), ROOT_TABLE)
    except NpuSimError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError, MemoryError,
            RecursionError) as exc:
        raise reader.fail(f"{type(exc).__name__}: {exc}") from None


def read_graph(data: bytes | bytearray | memoryview) -> Graph:
    """Parse a TOSA flatbuffer into a :class:`~npu_sim.tosa.ir.Graph` (not yet validated)."""
    return graph_from_tree(read_tree(data, byte_views=True))


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


def write_graph(graph: Graph) -> bytes:
    """Serialize a :class:`~npu_sim.tosa.ir.Graph` as a TOSA flatbuffer.

    The file runs in tosa-tools' reference model: variables are written the way
    ``tosa-opt`` writes them, SHAPE tensors as the block's ``shapes``. See
    :func:`npu_sim.tosa.serial_tree.graph_to_tree`.
    """
    return write_tree(graph_to_tree(graph))
