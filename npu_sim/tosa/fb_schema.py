"""The TOSA flatbuffer schema as data: field slots, kinds and defaults per table.

Built from :mod:`npu_sim.tosa.schema_generated` (tables with their fields in
declaration order, unions, enums). Flatbuffers lays a table's fields out in
vtable slots in declaration order; a union field takes two slots, its type tag
(``<name>_type``, a ubyte) first and its value second. The binary reader/writer
(:mod:`npu_sim.tosa.flatbuffer_io`) and the JSON form (:mod:`npu_sim.tosa.json_io`)
are both driven by the :class:`Field` lists built here, so they agree with each
other and with tosa-tools by construction.

Two facts the generated description does not carry are kept here and checked
against ``tosa.fbs`` by the tests: every enum of the schema is a ``uint32``, and
the few scalar fields whose default is not zero (the version tables).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from npu_sim.tosa import schema_generated as generated

ROOT_TABLE = "TosaGraph"
FILE_IDENTIFIER = b"TOSA"

#: scalar type name -> (struct format, size in bytes)
SCALARS: dict[str, tuple[str, int]] = {
    "bool": ("<B", 1), "byte": ("<b", 1), "int8": ("<b", 1), "ubyte": ("<B", 1), "uint8": ("<B", 1),
    "short": ("<h", 2), "int16": ("<h", 2), "ushort": ("<H", 2), "uint16": ("<H", 2),
    "int": ("<i", 4), "int32": ("<i", 4), "uint": ("<I", 4), "uint32": ("<I", 4),
    "long": ("<q", 8), "int64": ("<q", 8), "ulong": ("<Q", 8), "uint64": ("<Q", 8),
    "float": ("<f", 4), "float32": ("<f", 4), "double": ("<d", 8), "float64": ("<d", 8),
}

#: underlying type of every enum in tosa.fbs (all are declared ``enum X:uint32``)
ENUM_BASE = "uint32"

#: (table, field) -> default, for the scalar fields whose default is not 0/false
NONZERO_DEFAULTS: dict[tuple[str, str], int | bool] = {
    ("Version", "_major"): -1, ("Version", "_minor"): -1, ("Version", "_patch"): -1,
    ("Version", "_draft"): True,
    ("SoftwareVersion", "_major"): -1, ("SoftwareVersion", "_minor"): -1,
    ("SoftwareVersion", "_micro"): -1,
}

ENUMS: dict[str, dict[int, str]] = {name: {v: k for k, v in members}
                                    for name, members in generated.ENUMS.items()}
ENUM_VALUES: dict[str, dict[str, int]] = {name: dict(members)
                                          for name, members in generated.ENUMS.items()}
UNIONS: dict[str, list[str]] = generated.UNIONS
TABLES: dict[str, list[tuple[str, str]]] = generated.TABLES


@dataclass(frozen=True)
class Field:
    """One vtable slot of a table.

    ``kind`` is one of: ``scalar``, ``enum``, ``string``, ``table``, ``union_type``
    (the tag of a union), ``union``, or ``vector`` (then ``element_kind`` says of what).
    ``type`` names the scalar, enum, table or union.
    """

    name: str
    slot: int
    kind: str
    type: str
    element_kind: str = ""
    default: int | bool | float = 0

    @property
    def vtable_offset(self) -> int:
        """Byte offset of this field's entry in the vtable (4 + 2 * slot)."""
        return 4 + 2 * self.slot


def _classify(type_name: str) -> tuple[str, str]:
    """(kind, type) of a schema type name that is not a vector."""
    if type_name == "string":
        return "string", "string"
    if type_name in SCALARS:
        return "scalar", type_name
    if type_name in ENUMS:
        return "enum", type_name
    if type_name in UNIONS:
        return "union", type_name
    if type_name in TABLES:
        return "table", type_name
    raise KeyError(f"schema type {type_name!r} is unknown")


@cache
def fields(table: str) -> tuple[Field, ...]:
    """The fields of ``table`` in slot order (a union contributes its tag and its value)."""
    result: list[Field] = []
    slot = 0
    for name, type_name in TABLES[table]:
        if type_name.startswith("["):
            kind, inner = _classify(type_name[1:-1])
            result.append(Field(name, slot, "vector", inner, element_kind=kind))
        else:
            kind, inner = _classify(type_name)
            if kind == "union":
                result.append(Field(f"{name}_type", slot, "union_type", inner))
                slot += 1
            default = NONZERO_DEFAULTS.get((table, name), False if inner == "bool" else 0)
            result.append(Field(name, slot, kind, inner, default=default))
        slot += 1
    return tuple(result)


def scalar_type(field: Field) -> str:
    """The scalar type stored in the slot of a scalar, enum or union-tag field."""
    if field.kind == "enum":
        return ENUM_BASE
    if field.kind == "union_type":
        return "ubyte"
    return field.type


def union_member(union: str, tag: int) -> str | None:
    """Table name for a union tag (1-based), or None if the tag is out of range."""
    members = UNIONS[union]
    return members[tag - 1] if 1 <= tag <= len(members) else None


def union_tag(union: str, table: str) -> int:
    """The union tag of member ``table`` (1-based)."""
    return UNIONS[union].index(table) + 1
