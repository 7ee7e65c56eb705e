"""TOSA operators: the Op enum, typed attribute classes, and operator signatures.

Op numbers, attribute tables and their field order come from the flatbuffer
schema (``schema_generated.py``), so the reader, writer and JSON form agree with
tosa-tools by construction. Each operator has one frozen attribute dataclass,
e.g. ``Conv2dAttribute(pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1),
local_bound=False, acc_type=DType.INT32)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from npu_sim.errors import GraphValidationError, UnknownOperatorError
from npu_sim.tosa import schema_generated as schema
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.schema_generated import BlockSize, NanPropagationMode, Op, ResizeMode, RoundingMode

#: Operators TOSA 1.0 defines; later ones are TOSA 1.1 draft (known, unsupported).
TOSA_1_0_OPS = frozenset(op for op in Op if Op.UNKNOWN < op <= Op.CONST_SHAPE)

_ENUM_TYPES: dict[str, type[IntEnum]] = {
    "DType": DType,
    "NanPropagationMode": NanPropagationMode,
    "RoundingMode": RoundingMode,
    "ResizeMode": ResizeMode,
    "BlockSize": BlockSize,
}

#: schema field type -> default value
_FIELD_DEFAULTS: dict[str, object] = {
    "int32": 0,
    "bool": False,
    "[int32]": (),
    "[ubyte]": b"",
    "string": "",
}


class Attribute:
    """Base of the per-operator attribute dataclasses."""

    schema_name: str = ""
    field_kinds: dict[str, str] = {}

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.field_kinds}

    if TYPE_CHECKING:
        # The subclasses are built from the schema at import time, so their fields are
        # known only at run time: a checker sees each field as Any.
        def __getattr__(self, name: str) -> Any: ...


def _to_enum(kind: str, value: object, where: str) -> IntEnum:
    enum = _ENUM_TYPES[kind]
    if isinstance(value, str):
        try:
            return enum[value]
        except KeyError:
            raise GraphValidationError(f"{where}: unknown {kind} {value!r}") from None
    try:
        return enum(int(value))  # type: ignore[call-overload]
    except (ValueError, TypeError):
        raise GraphValidationError(f"{where}: {value!r} is not a valid {kind}") from None


def _to_int_tuple(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in value)


def _to_bytes(value: Any) -> bytes:
    return bytes(bytearray(value))


def _to_bool(value: object) -> bool:
    if not isinstance(value, (bool, int)) or isinstance(value, int) and value not in (0, 1):
        raise TypeError
    return bool(value)


def _to_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError
    return int(value)


def _to_str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError
    return value


#: schema field type -> converter raising TypeError/ValueError on a value of the wrong kind
_CONVERTERS: dict[str, Callable[[Any], object]] = {
    "int32": _to_int,
    "bool": _to_bool,
    "[int32]": _to_int_tuple,
    "[ubyte]": _to_bytes,
    "string": _to_str,
}


def _convert(kind: str, value: object, where: str) -> object:
    if kind in _ENUM_TYPES:
        return _to_enum(kind, value, where)
    try:
        return _CONVERTERS[kind](value)
    except (TypeError, ValueError):
        raise GraphValidationError(f"{where}: expected {kind}, got {value!r}") from None


def _make_attribute_class(table: str, fields: list[tuple[str, str]]) -> type[Attribute]:
    specs = []
    for name, kind in fields:
        default = _ENUM_TYPES[kind](0) if kind in _ENUM_TYPES else _FIELD_DEFAULTS[kind]
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


class _AttributeClasses(dict[str, type[Attribute]]):
    """Schema table name -> attribute class, each made when first asked for: making a frozen
    dataclass compiles its methods, and a run meets a handful of the ~75 operators."""

    def __missing__(self, table: str) -> type[Attribute]:
        if table not in schema.UNIONS["Attribute"]:
            raise KeyError(table)
        cls = self[table] = _make_attribute_class(table, schema.TABLES[table])
        return cls


#: schema table name -> attribute class, for every member of the Attribute union (made on demand)
ATTRIBUTE_CLASSES = _AttributeClasses()


def __getattr__(name: str) -> type[Attribute]:
    """``ops.Conv2dAttribute`` and the like (and what unpickling an attribute asks for)."""
    try:
        return ATTRIBUTE_CLASSES[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def attribute_class(op: Op) -> type[Attribute]:
    """The attribute class of ``op`` (the union member at the op's position)."""
    cls = _CLASS_OF_OP.get(op) if type(op) is Op else None
    if cls is not None:
        return cls
    if op == Op.UNKNOWN:
        raise UnknownOperatorError("operator code 0 (UNKNOWN)")
    cls = ATTRIBUTE_CLASSES[schema.UNIONS["Attribute"][op.value - 1]]
    if type(op) is Op:
        _CLASS_OF_OP[op] = cls
    return cls


#: Op -> its attribute class, as attribute_class found it
_CLASS_OF_OP: dict[Op, type[Attribute]] = {}


def make_attribute(op: Op, **fields: Any) -> Attribute:
    """Build the attribute of ``op`` from keyword fields (unknown names rejected)."""
    cls = attribute_class(op)
    extra = set(fields) - set(cls.field_kinds)
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


_OPS = {int(op): op for op in Op}


def op_from_code(code: int) -> Op:
    op = _OPS.get(code) if type(code) is int else None
    if op is not None and op != Op.UNKNOWN:
        return op
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
