"""TOSA operators: the Op enum, typed attribute classes, and operator signatures.

Op numbers, attribute tables and their field order come from the flatbuffer
schema (``schema_generated.py``), so the reader, writer and JSON form agree with
tosa-tools by construction. Each operator has one frozen attribute dataclass,
e.g. ``Conv2dAttribute(pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1),
local_bound=False, acc_type=DType.INT32)``.
"""

from __future__ import annotations

import dataclasses
from enum import IntEnum
from typing import Any

from npu_sim.errors import GraphValidationError, UnknownOperatorError
from npu_sim.tosa import schema_generated as schema
from npu_sim.tosa.dtype import DType

Op = IntEnum("Op", schema.ENUMS["Op"], module=__name__)
Op.__doc__ = "TOSA operator, numbered as in the flatbuffer schema."
NanPropagationMode = IntEnum("NanPropagationMode", schema.ENUMS["NanPropagationMode"], module=__name__)
RoundingMode = IntEnum("RoundingMode", schema.ENUMS["RoundingMode"], module=__name__)
ResizeMode = IntEnum("ResizeMode", schema.ENUMS["ResizeMode"], module=__name__)
BlockSize = IntEnum("BlockSize", schema.ENUMS["BlockSize"], module=__name__)

#: Operators TOSA 1.0 defines; later ones are TOSA 1.1 draft (known, unsupported).
TOSA_1_0_OPS = frozenset(op for op in Op if Op.UNKNOWN < op <= Op.CONST_SHAPE)

_ENUM_TYPES: dict[str, type[IntEnum]] = {
    "DType": DType,
    "NanPropagationMode": NanPropagationMode,
    "RoundingMode": RoundingMode,
    "ResizeMode": ResizeMode,
    "BlockSize": BlockSize,
}

#: schema field type -> (python type, default)
_FIELD_KINDS: dict[str, tuple[type, Any]] = {
    "int32": (int, 0),
    "bool": (bool, False),
    "[int32]": (tuple, ()),
    "[ubyte]": (bytes, b""),
    "string": (str, ""),
}


class Attribute:
    """Base of the per-operator attribute dataclasses."""

    schema_name: str = ""
    field_kinds: dict[str, str] = {}

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def _convert(kind: str, value: Any, where: str) -> Any:
    if kind in _ENUM_TYPES:
        enum = _ENUM_TYPES[kind]
        if isinstance(value, str):
            try:
                return enum[value]
            except KeyError:
                raise GraphValidationError(f"{where}: unknown {kind} {value!r}") from None
        try:
            return enum(int(value))
        except (ValueError, TypeError):
            raise GraphValidationError(f"{where}: {value!r} is not a valid {kind}") from None
    py_type, _ = _FIELD_KINDS[kind]
    try:
        if py_type is tuple:
            return tuple(int(v) for v in value)
        if py_type is bytes:
            return bytes(bytearray(value))
        if py_type is bool:
            if not isinstance(value, (bool, int)) or isinstance(value, int) and value not in (0, 1):
                raise TypeError
            return bool(value)
        if py_type is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError
            return int(value)
        if py_type is str:
            if not isinstance(value, str):
                raise TypeError
            return value
    except (TypeError, ValueError):
        raise GraphValidationError(f"{where}: expected {kind}, got {value!r}") from None
    raise AssertionError(kind)


def _make_attribute_class(table: str, fields: list[tuple[str, str]]) -> type[Attribute]:
    specs = []
    for name, kind in fields:
        default = 0 if kind in _ENUM_TYPES else _FIELD_KINDS[kind][1]
        if kind in _ENUM_TYPES:
            default = _ENUM_TYPES[kind](0)
        specs.append((name, Any, dataclasses.field(default=default)))

    def __post_init__(self: Attribute) -> None:
        for fname, fkind in self.field_kinds.items():
            object.__setattr__(self, fname, _convert(fkind, getattr(self, fname), f"{table}.{fname}"))

    cls = dataclasses.make_dataclass(
        table, specs, bases=(Attribute,), frozen=True,
        namespace={"__post_init__": __post_init__, "schema_name": table,
                   "field_kinds": dict(fields), "__module__": __name__},
    )
    return cls


#: schema table name -> attribute class, for every member of the Attribute union
ATTRIBUTE_CLASSES: dict[str, type[Attribute]] = {
    table: _make_attribute_class(table, schema.TABLES[table]) for table in schema.UNIONS["Attribute"]
}
globals().update(ATTRIBUTE_CLASSES)


def attribute_class(op: Op) -> type[Attribute]:
    """The attribute class of ``op`` (the union member at the op's position)."""
    if op == Op.UNKNOWN:
        raise UnknownOperatorError("operator code 0 (UNKNOWN)")
    return ATTRIBUTE_CLASSES[schema.UNIONS["Attribute"][op.value - 1]]


def make_attribute(op: Op, **fields: Any) -> Attribute:
    """Build the attribute of ``op`` from keyword fields (unknown names rejected)."""
    cls = attribute_class(op)
    known = {f.name for f in dataclasses.fields(cls)}
    extra = set(fields) - known
    if extra:
        raise GraphValidationError(f"{op.name}: unknown attribute field(s) {sorted(extra)}")
    return cls(**fields)


def op_from_name(name: str) -> Op:
    """``Op`` by name (case-insensitive, accepts a ``tosa.`` prefix)."""
    key = name.upper().removeprefix("TOSA.")
    try:
        return Op[key]
    except KeyError:
        raise UnknownOperatorError(f"unknown TOSA operator {name!r}") from None


def op_from_code(code: int) -> Op:
    try:
        op = Op(code)
    except ValueError:
        raise UnknownOperatorError(f"unknown TOSA operator code {code}") from None
    if op == Op.UNKNOWN:
        raise UnknownOperatorError("operator code 0 (UNKNOWN)")
    return op


# --- signatures: (min inputs, max inputs or None, min outputs, max outputs or None)
_UNARY = (1, 1, 1, 1)
_BINARY = (2, 2, 1, 1)
ARITY: dict[Op, tuple[int, int | None, int, int | None]] = {
    Op.ARGMAX: _UNARY, Op.AVG_POOL2D: (3, 3, 1, 1), Op.CONV2D: (5, 5, 1, 1),
    Op.CONV3D: (5, 5, 1, 1), Op.DEPTHWISE_CONV2D: (5, 5, 1, 1), Op.FFT2D: (2, 2, 2, 2),
    Op.MATMUL: (4, 4, 1, 1), Op.MAX_POOL2D: _UNARY, Op.RFFT2D: (1, 1, 2, 2),
    Op.TRANSPOSE_CONV2D: (5, 5, 1, 1), Op.CLAMP: _UNARY, Op.ERF: _UNARY, Op.SIGMOID: _UNARY,
    Op.TANH: _UNARY, Op.ADD: _BINARY, Op.ARITHMETIC_RIGHT_SHIFT: _BINARY,
    Op.BITWISE_AND: _BINARY, Op.BITWISE_OR: _BINARY, Op.BITWISE_XOR: _BINARY,
    Op.INTDIV: _BINARY, Op.LOGICAL_AND: _BINARY, Op.LOGICAL_LEFT_SHIFT: _BINARY,
    Op.LOGICAL_RIGHT_SHIFT: _BINARY, Op.LOGICAL_OR: _BINARY, Op.LOGICAL_XOR: _BINARY,
    Op.MAXIMUM: _BINARY, Op.MINIMUM: _BINARY, Op.MUL: (3, 3, 1, 1), Op.POW: _BINARY,
    Op.SUB: _BINARY, Op.TABLE: _BINARY, Op.ABS: _UNARY, Op.BITWISE_NOT: _UNARY,
    Op.CEIL: _UNARY, Op.CLZ: _UNARY, Op.COS: _UNARY, Op.EXP: _UNARY, Op.FLOOR: _UNARY,
    Op.LOG: _UNARY, Op.LOGICAL_NOT: _UNARY, Op.NEGATE: (3, 3, 1, 1), Op.RECIPROCAL: _UNARY,
    Op.RSQRT: _UNARY, Op.SIN: _UNARY, Op.SELECT: (3, 3, 1, 1), Op.EQUAL: _BINARY,
    Op.GREATER: _BINARY, Op.GREATER_EQUAL: _BINARY, Op.REDUCE_ALL: _UNARY,
    Op.REDUCE_ANY: _UNARY, Op.REDUCE_MAX: _UNARY, Op.REDUCE_MIN: _UNARY,
    Op.REDUCE_PRODUCT: _UNARY, Op.REDUCE_SUM: _UNARY, Op.CONCAT: (1, None, 1, 1),
    Op.PAD: (3, 3, 1, 1), Op.RESHAPE: (2, 2, 1, 1), Op.REVERSE: _UNARY,
    Op.SLICE: (3, 3, 1, 1), Op.TILE: (2, 2, 1, 1), Op.TRANSPOSE: _UNARY,
    Op.GATHER: (2, 2, 1, 1), Op.SCATTER: (3, 3, 1, 1), Op.RESIZE: (4, 4, 1, 1),
    Op.CAST: _UNARY, Op.RESCALE: (5, 5, 1, 1), Op.CONST: (0, 0, 1, 1),
    Op.IDENTITY: _UNARY, Op.CUSTOM: (0, None, 0, None), Op.COND_IF: (1, None, 0, None),
    Op.WHILE_LOOP: (0, None, 0, None), Op.CONST_SHAPE: (0, 0, 1, 1),
    # Variable operators in the IR's form (npu_sim.tosa.ir): READ [variable] -> [value],
    # WRITE [variable, value] -> []. Readers normalize both file encodings to it; the IR
    # holds no VARIABLE operator (a variable is declared by a variable tensor).
    Op.VARIABLE: (0, None, 0, None), Op.VARIABLE_WRITE: (2, 2, 0, 0),
    Op.VARIABLE_READ: (1, 1, 1, 1),
}
