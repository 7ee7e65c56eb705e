"""The JSON form of a TOSA graph, exactly as ``flatc --json --strict-json`` writes it.

``read_json(text) -> Graph`` and ``write_json(graph) -> str``. The JSON form is
the flatbuffer's tree printed by flatc from ``tosa.fbs`` (tosa-tools ships both;
``tosa-opt --tosa-serialize-json`` and the serialization library's
``SaveFileJson`` write the same): fields in schema order, enums by name, a union
as ``attribute_type`` (member name) plus ``attribute`` (the table), byte vectors
as lists of ints, scalars equal to their default left out. ``write_json(g)`` is
character for character what ``flatc --json --strict-json`` prints for
``write_graph(g)``.

Reading accepts what flatc accepts from such files: enum values by name or
number, fields in any order, absent fields meaning their defaults.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from npu_sim.errors import TosaFormatError, UnknownOperatorError
from npu_sim.tosa import fb_schema
from npu_sim.tosa.fb_schema import ROOT_TABLE, Field
from npu_sim.tosa.serial_tree import graph_from_tree, graph_to_tree

if TYPE_CHECKING:
    from npu_sim.tosa.ir import Graph

Tree = dict[str, Any]


# --- reading ------------------------------------------------------------------
def read_json_tree(text: str | bytes) -> Tree:
    """Parse the JSON form into a tree (the same tree the flatbuffer reader yields)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise TosaFormatError("the JSON graph is not valid UTF-8") from None
    if not text.strip():
        raise TosaFormatError("empty file: not a TOSA JSON graph")
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise TosaFormatError(f"not a TOSA JSON graph: {exc}") from None
    return _table(value, ROOT_TABLE, ROOT_TABLE)


def read_json(text: str | bytes) -> Graph:
    """Parse the JSON form into a :class:`~npu_sim.tosa.ir.Graph` (not yet validated)."""
    return graph_from_tree(read_json_tree(text))


def _table(value: Any, table: str, where: str) -> Tree:
    if not isinstance(value, dict):
        raise TosaFormatError(f"{where}: expected a JSON object for {table}")
    fields = {f.name: f for f in fb_schema.fields(table)}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise TosaFormatError(f"{where}: unknown field(s) {unknown} in {table}")
    tree: Tree = {}
    for field in fb_schema.fields(table):  # slot order: a union tag precedes its value
        if field.name in value:
            tree[field.name] = _value(value[field.name], field, tree, f"{where}.{field.name}")
    return tree


def _enum(value: Any, enum: str, where: str) -> int:
    if isinstance(value, str):
        try:
            return fb_schema.ENUM_VALUES[enum][value]
        except KeyError:
            error = UnknownOperatorError if enum == "Op" else TosaFormatError
            raise error(f"{where}: unknown {enum} {value!r}") from None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2 ** 32:
        return value
    raise TosaFormatError(f"{where}: {value!r} is not a {enum}")


def _scalar(value: Any, type_name: str, where: str) -> Any:
    if type_name == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise TosaFormatError(f"{where}: {value!r} is not a bool")
    if type_name in ("float", "float32", "double", "float64"):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise TosaFormatError(f"{where}: {value!r} is not a number")
    fmt, size = fb_schema.SCALARS[type_name]
    signed = fmt[1].islower()
    bits = 8 * size
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return value
    raise TosaFormatError(f"{where}: {value!r} is not a {type_name}")


def _value(value: Any, field: Field, siblings: Tree, where: str) -> Any:
    if field.kind == "union":
        member = fb_schema.union_member(field.type, siblings.get(f"{field.name}_type", 0))
        if member is None:
            raise TosaFormatError(f"{where}: a union value needs a valid {field.name}_type")
        return _table(value, member, where)
    return _VALUE_READERS[field.kind](value, field, where)


def _union_type(value: Any, field: Field, where: str) -> int:
    if not isinstance(value, str):
        return int(_scalar(value, "ubyte", where))
    if value == "NONE":
        return 0
    if value in fb_schema.UNIONS[field.type]:
        return fb_schema.union_tag(field.type, value)
    raise TosaFormatError(f"{where}: unknown {field.type} type {value!r}")


def _json_string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise TosaFormatError(f"{where}: expected a string")
    return value


def _vector(value: Any, field: Field, where: str) -> Any:
    if not isinstance(value, list):
        raise TosaFormatError(f"{where}: expected a JSON list")
    element = field.element_kind
    if element == "scalar":
        items = [_scalar(v, field.type, f"{where}[{i}]") for i, v in enumerate(value)]
        return bytes(items) if field.type in ("ubyte", "uint8") else items
    if element == "enum":
        return [_enum(v, field.type, f"{where}[{i}]") for i, v in enumerate(value)]
    if element == "string":
        return [_json_string(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return [_table(v, field.type, f"{where}[{i}]") for i, v in enumerate(value)]


#: field kind -> reader of a JSON value of that kind (unions need their tag: see _value)
_VALUE_READERS: dict[str, Callable[[Any, Field, str], Any]] = {
    "scalar": lambda value, field, where: _scalar(value, field.type, where),
    "enum": lambda value, field, where: _enum(value, field.type, where),
    "union_type": _union_type,
    "string": lambda value, field, where: _json_string(value, where),
    "table": lambda value, field, where: _table(value, field.type, where),
    "vector": _vector,
}


# --- writing (flatc's text generator, reproduced) -------------------------------
def write_json_tree(tree: Tree) -> str:
    """Print a tree the way ``flatc --json --strict-json`` prints the flatbuffer."""
    lines: list[str] = []
    _print_table(tree, ROOT_TABLE, 0, lines, prefix="")
    return "\n".join(lines) + "\n"


def write_json(graph: Graph) -> str:
    """The JSON form of a :class:`~npu_sim.tosa.ir.Graph`."""
    return write_json_tree(graph_to_tree(graph))


def _string(text: str) -> str:
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif code < 0x20:
            out.append(f"\\u{code:04X}")
        elif code < 0x7F:
            out.append(ch)
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04X}")
        else:
            high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
            out.append(f"\\u{high:04X}\\u{low:04X}")
    out.append('"')
    return "".join(out)


def _scalar_text(value: Any, field: Field, element: bool = False) -> str:
    kind = field.element_kind if element else field.kind
    if kind == "enum":
        return _string(fb_schema.ENUMS[field.type][value]) \
            if value in fb_schema.ENUMS[field.type] else str(int(value))
    if kind == "union_type":
        member = fb_schema.union_member(field.type, value)
        return _string(member) if member else str(int(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _print_table(tree: Tree, table: str, indent: int, lines: list[str], prefix: str) -> None:
    pad = "  " * indent
    entries = []
    for field in fb_schema.fields(table):
        if field.name not in tree:
            continue
        value = tree[field.name]
        if field.kind in ("scalar", "enum", "union_type") and value == field.default \
                and type(value) is not float:
            continue  # the writer does not store defaults; flatc prints what is stored
        entries.append((field, value))
    lines.append(prefix + "{")
    for i, (field, value) in enumerate(entries):
        comma = "," if i < len(entries) - 1 else ""
        head = f'{pad}  "{field.name}": '
        if field.kind in ("scalar", "enum", "union_type"):
            lines.append(head + _scalar_text(value, field) + comma)
        elif field.kind == "string":
            lines.append(head + _string(value) + comma)
        elif field.kind in ("table", "union"):
            _print_table(value, _table_name(field, tree), indent + 1, lines, prefix=head)
            lines[-1] += comma
        else:
            _print_vector(value, field, indent + 1, lines, head)
            lines[-1] += comma
    lines.append(pad + "}")


def _table_name(field: Field, tree: Tree) -> str:
    """The table a table or union field of ``tree`` holds."""
    if field.kind == "table":
        return field.type
    member = fb_schema.union_member(field.type, tree.get(f"{field.name}_type", 0))
    if member is None:
        raise TosaFormatError(f"{field.name}: a union value needs a valid {field.name}_type")
    return member


def _print_vector(values: Any, field: Field, indent: int, lines: list[str], head: str) -> None:
    pad = "  " * indent
    items = list(values)
    lines.append(head + "[")
    if not items:
        lines.append("")
    for i, value in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if field.element_kind in ("scalar", "enum"):
            lines.append(f"{pad}  {_scalar_text(value, field, element=True)}{comma}")
        elif field.element_kind == "string":
            lines.append(f"{pad}  {_string(value)}{comma}")
        else:
            _print_table(value, field.type, indent + 1, lines, prefix=f"{pad}  ")
            lines[-1] += comma
    lines.append(pad + "]")


__all__ = ["read_json", "read_json_tree", "write_json", "write_json_tree"]
