"""Scanning MLIR text: tokens, types and attribute values (what the TOSA MLIR reader needs).

A small hand-written scanner rather than a parser library: the subset of MLIR that TOSA
graphs use (one dialect, a handful of attribute forms) is regular enough to read with a
cursor and a few regular expressions, and a grammar library would be a new runtime
dependency. :mod:`npu_sim.tosa.mlir_reader` builds the graph from what this module reads.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from npu_sim.errors import TosaFormatError
from npu_sim.tosa.dtype import DType

_SPACE = re.compile(r"(?:\s+|//[^\n]*|loc\((?:[^()]|\([^()]*\))*\))+")
_LOCATION = re.compile(r"[ \t]*loc\(")
_LOCATION_ALIAS = re.compile(r"^(#loc[\w.$-]*)[ \t]*=[ \t]*loc\((.*)\)[ \t]*$", re.M)
_NAME_LOCATION = re.compile(r'"((?:[^"\\]|\\.)*)"\s*\(')
_ALIAS_USE = re.compile(r"#loc[\w.$-]*")
_IDENT = re.compile(r"[A-Za-z_][\w.$-]*")
_VALUE = re.compile(r"%[\w.$-]+(?::\d+)?(?:#\d+)?")
_SYMBOL = re.compile(r'@(?:"(?:[^"\\]|\\.)*"|[\w.$-]+)')
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NUMBER = re.compile(r"[-+]?(?:0x[0-9A-Fa-f]+|(?:\d+\.?\d*(?:[eE][-+]?\d+)?)|inf|nan)")

#: MLIR element types -> TOSA element types
ELEMENT_TYPES = {
    "i1": DType.BOOL, "i4": DType.INT4, "i8": DType.INT8, "i16": DType.INT16, "i32": DType.INT32,
    "i48": DType.INT48, "i64": DType.INT64, "f16": DType.FP16, "bf16": DType.BF16, "f32": DType.FP32,
    "f8E4M3FN": DType.FP8E4M3, "f8E5M2": DType.FP8E5M2, "index": DType.SHAPE,
}
#: Unsigned MLIR element types -> the TOSA storage type that carries their bits (TOSA 1.0 has no
#: unsigned types: a RESCALE with ``input_unsigned`` / ``output_unsigned`` reads or writes them)
UNSIGNED_ELEMENT_TYPES = {"ui8": DType.INT8, "ui16": DType.INT16}


_FLOATS = frozenset({DType.FP32, DType.FP16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2})


@dataclass(frozen=True)
class MlirType:
    """A ranked tensor type (``dims`` with -1 for ``?``) or a ``!tosa.shape<N>``."""

    dims: tuple[int, ...]
    dtype: DType
    is_shape: bool = False
    #: an unsigned integer type (``ui8``, ``ui16``) held in ``dtype``, its signed storage
    unsigned: bool = False


@dataclass(frozen=True)
class TypedValue:
    """An attribute value with its type: ``dense<...> : tensor<...>``, ``127 : i8``."""

    value: Any
    type_name: str
    mlir_type: MlirType | None = None


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (line breaks of quoted source included) one space."""
    return " ".join(text.split())


class Scanner:
    """A cursor over MLIR text; every ``expect``/``read`` failure names line and column."""

    def __init__(self, text: str, source: str):
        self.text = text
        self.pos = 0
        self.source = source

    # -- low level
    def error(self, what: str) -> TosaFormatError:
        line = self.text.count("\n", 0, self.pos) + 1
        column = self.pos - (self.text.rfind("\n", 0, self.pos) + 1) + 1
        return TosaFormatError(f"{self.source}:{line}:{column}: {one_line(what)}")

    def skip(self) -> None:
        match = _SPACE.match(self.text, self.pos)
        if match:
            self.pos = match.end()

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def peek(self, literal: str) -> bool:
        self.skip()
        return self.text.startswith(literal, self.pos)

    def accept(self, literal: str) -> bool:
        if self.peek(literal):
            self.pos += len(literal)
            return True
        return False

    def expect(self, literal: str) -> None:
        if not self.accept(literal):
            found = self.text[self.pos:self.pos + 24].split("\n")[0]
            raise self.error(f"expected {literal!r}, found {found!r}")

    def read(self, pattern: re.Pattern[str], what: str) -> str:
        self.skip()
        match = pattern.match(self.text, self.pos)
        if match is None:
            found = self.text[self.pos:self.pos + 24].split("\n")[0]
            raise self.error(f"expected {what}, found {found!r}")
        self.pos = match.end()
        return match.group(0)

    def maybe(self, pattern: re.Pattern[str]) -> str | None:
        self.skip()
        match = pattern.match(self.text, self.pos)
        if match is None:
            return None
        self.pos = match.end()
        return match.group(0)

    def ident(self) -> str:
        return self.read(_IDENT, "a name")

    def trailing_location(self) -> str | None:
        """The body of a ``loc(...)`` right after the cursor (spaces between allowed), read past;
        None if there is none (the scanner otherwise skips locations as spaces)."""
        match = _LOCATION.match(self.text, self.pos)
        if match is None:
            return None
        self.pos = match.end() - 1
        return self.balanced("(", ")")

    def value_name(self) -> str:
        return self.read(_VALUE, "a %value")

    def maybe_value(self) -> str | None:
        return self.maybe(_VALUE)

    def value_list(self) -> list[str]:
        """``%a, %b, ...`` (possibly none)."""
        values: list[str] = []
        while (value := self.maybe_value()) is not None:
            values.append(value)
            if not self.accept(","):
                break
        return values

    def symbol(self) -> str:
        text = self.read(_SYMBOL, "an @symbol")[1:]
        return _unquote(text) if text.startswith('"') else text

    def string(self) -> str:
        return _unquote(self.read(_STRING, "a string"))

    def balanced(self, open_: str, close: str) -> str:
        """Skip a bracketed span (strings respected); returns its text without the brackets.

        The cursor jumps from one bracket or quote to the next (a constant's megabytes of hex
        digits are one string, skipped in one search)."""
        self.expect(open_)
        text, start, depth = self.text, self.pos, 1
        marks = _marks(open_, close)
        while depth:
            found = marks.search(text, self.pos)
            if found is None:
                self.pos = len(text)
                raise self.error(f"unclosed {open_!r}")
            self.pos = found.start()
            char = text[self.pos]
            if char == '"':
                self.pos = self._string_end()
                continue
            depth += (char == open_) - (char == close)
            self.pos += 1
        return text[start:self.pos - 1]

    def _string_end(self) -> int:
        """Where the string literal at the cursor ends (just past its closing quote)."""
        text, pos = self.text, self.pos
        end = text.find('"', pos + 1)
        if end >= 0 and text.find("\\", pos + 1, end) < 0:   # no escape before it: that quote closes it
            return end + 1
        literal = _STRING.match(text, pos)
        if literal is None:
            raise self.error("unterminated string")
        return literal.end()

    # -- types
    def type_(self) -> MlirType:
        if self.accept("!tosa.shape<"):
            rank = int(self.read(re.compile(r"\d+"), "a shape rank"))
            self.expect(">")
            return MlirType((rank,), DType.SHAPE, is_shape=True)
        if not self.accept("tensor<"):
            raise self.error("expected a tensor type")
        if self.accept("*"):
            raise self.error("unranked tensors are not supported (give every tensor a rank)")
        dims = []
        while True:
            dim = self.maybe(re.compile(r"(\d+|\?)x"))
            if dim is None:
                break
            dims.append(-1 if dim[0] == "?" else int(dim[:-1]))
        element = self.read(re.compile(r"[!\w.]+"), "an element type")
        if element.startswith("!quant"):
            raise self.error(f"quantized element type {element!r}: TOSA graphs carry plain integer types")
        unsigned = element in UNSIGNED_ELEMENT_TYPES
        dtype = UNSIGNED_ELEMENT_TYPES[element] if unsigned else ELEMENT_TYPES.get(element)
        if dtype is None:
            raise self.error(f"element type {element!r} is not a TOSA type")
        if self.peek(","):   # an encoding: tensor<4xi8, #enc>
            self.balanced(",", ">")
        else:
            self.expect(">")
        return MlirType(tuple(dims), dtype, unsigned=unsigned)

    def type_list(self) -> list[MlirType]:
        """``T`` or ``(T, T, ...)``."""
        if not self.accept("("):
            return [self.type_()]
        types: list[MlirType] = []
        while not self.accept(")"):
            types.append(self.type_())
            self.accept(",")
        return types

    # -- attributes
    def attr_dict(self) -> dict[str, Any]:
        """``{name = value, flag, ...}`` (the ``{`` already next)."""
        self.expect("{")
        attrs: dict[str, Any] = {}
        while not self.accept("}"):
            name = self.string() if self.peek('"') else self.ident()
            attrs[name] = self.attr_value() if self.accept("=") else True
            self.accept(",")
        return attrs

    def attr_value(self) -> Any:
        for prefix, read in (("dense<", self._dense), ("dense_resource<", self._dense_resource),
                             ("array<", self._array), ("[", self._list), ("{", self.attr_dict),
                             ('"', self.string), ("@", self.symbol), ("#", self._opaque), ("!", self._opaque),
                             ("tensor<", self._type_attribute)):
            if self.peek(prefix):
                return read()
        number = self.maybe(_NUMBER)
        if number is not None:
            type_name = self.ident() if self.accept(":") else ""
            return TypedValue(number, type_name)
        word = self.ident()
        if word in ("true", "false"):
            return word == "true"
        return True if word == "unit" else word   # an enum case (DOUBLE_ROUND) or a type (i32)

    def _dense(self) -> TypedValue:
        self.expect("dense<")
        body = self.balanced_tail(">")
        self.expect(":")
        return TypedValue(body, "dense", self.type_())

    def _dense_resource(self) -> TypedValue:
        self.expect("dense_resource<")
        name = self.balanced_tail(">")
        self.expect(":")
        return TypedValue(("resource", name.strip()), "dense", self.type_())

    def _array(self) -> list[Any]:
        self.expect("array<")
        element = self.ident()
        values: list[str] = []
        if self.accept(":"):
            values = [v.strip() for v in self.read(re.compile(r"[^>]*"), "array values").split(",") if v.strip()]
        self.expect(">")
        return [float(v) if element.startswith("f") else int(v, 0) for v in values]

    def _list(self) -> list[Any]:
        items: list[Any] = []
        self.expect("[")
        while not self.accept("]"):
            items.append(self.attr_value())
            self.accept(",")
        return items

    def _type_attribute(self) -> str:
        """A type given as an attribute (``tensor<0x!quant.uniform<i8:f32, 0.1:3>>``): its text."""
        self.expect("tensor")
        return f"tensor<{self.balanced('<', '>')}>"

    def _opaque(self) -> None:
        """``#dialect.attr<...>`` or ``!dialect.type<...>``: nothing TOSA needs."""
        self.read(re.compile(r"[#!][\w.]+"), "an attribute")
        if self.peek("<"):
            self.balanced("<", ">")

    def balanced_tail(self, close: str) -> str:
        """The text up to the ``close`` matching an opening already read (``dense<``)."""
        self.pos -= 1
        opener = {">": "<", ")": "(", "}": "{", "]": "["}[close]
        return self.balanced(opener, close)


@functools.cache
def _marks(open_: str, close: str) -> re.Pattern[str]:
    """What :meth:`Scanner.balanced` stops at: either bracket or a quote."""
    return re.compile("[" + re.escape(open_ + close) + '"]')


_ESCAPE = re.compile(r"\\([0-9A-Fa-f]{2}|.)", re.S)
_NAMED_ESCAPES = {"n": b"\n", "t": b"\t", "\\": b"\\", '"': b'"'}


def _unquote(quoted: str) -> str:
    """A string literal's text: MLIR escapes are ``\\XX`` (a byte in hex), ``\\n``, ``\\t``,
    ``\\\\`` and ``\\"``."""
    body = quoted[1:-1]
    if "\\" not in body:
        return body
    raw = bytearray()
    last = 0
    for match in _ESCAPE.finditer(body):
        raw += body[last:match.start()].encode("utf-8")
        code = match.group(1)
        raw += bytes([int(code, 16)]) if len(code) == 2 else _NAMED_ESCAPES.get(code, code.encode("utf-8"))
        last = match.end()
    raw += body[last:].encode("utf-8")
    return raw.decode("utf-8", errors="replace")


# --- dense element data ----------------------------------------------------------------

def dense_array(body: str, t: MlirType, resources: dict[str, bytes], where: str) -> np.ndarray:
    """The array a ``dense<body> : t`` holds, in the storage type of ``t``'s element type."""
    if any(d < 0 for d in t.dims):
        raise TosaFormatError(f"{where}: a constant of unknown shape {list(t.dims)}")
    storage = np.dtype(np.int64) if t.dtype is DType.SHAPE else t.dtype.numpy_dtype
    count = int(np.prod(t.dims, dtype=np.int64))
    if isinstance(body, tuple):   # dense_resource<name>
        raw = resources.get(body[1])
        if raw is None:
            raise TosaFormatError(f"{where}: no dialect resource named {body[1]!r}")
        return _from_bytes(raw[4:] if len(raw) - 4 == count * storage.itemsize else raw, storage, t, where)
    text = body.strip()
    if text.startswith('"0x') or text.startswith('"0X'):
        return _from_hex(text[3:-1], storage, t, where)
    numbers = re.findall(r"[-+]?(?:0x[0-9A-Fa-f]+|\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)|true|false", text)
    values = [_number(n, t.dtype) for n in numbers]
    if "(" in text:
        raise TosaFormatError(f"{where}: complex constants are not TOSA")
    if len(values) == 1 and count != 1:
        return _splat(np.array([values[0]]).astype(storage)[0], storage, t, where)
    if len(values) != count:
        raise TosaFormatError(f"{where}: {len(values)} values for a tensor of {count} elements")
    return _cast(values, storage, t).reshape(t.dims)


#: The most elements a splat constant may stand for (it is kept as one value, broadcast).
MAX_SPLAT_ELEMENTS = 1 << 31


def _splat(value: Any, storage: np.dtype, t: MlirType, where: str) -> np.ndarray:
    """One value broadcast to the shape of ``t`` (a read-only view: no memory per element)."""
    count = int(np.prod(t.dims, dtype=np.int64)) if all(d < MAX_SPLAT_ELEMENTS for d in t.dims) else -1
    if not 0 <= count <= MAX_SPLAT_ELEMENTS:
        raise TosaFormatError(f"{where}: a constant of shape {list(t.dims)} is beyond what npu-sim holds "
                              f"({MAX_SPLAT_ELEMENTS} elements)")
    return np.broadcast_to(np.array(value, dtype=storage), t.dims)


def _from_hex(digits: str, storage: np.dtype, t: MlirType, where: str) -> np.ndarray:
    try:
        raw = bytes.fromhex(digits)
    except ValueError:
        raise TosaFormatError(f"{where}: the hex constant holds characters other than hex digits") from None
    count = int(np.prod(t.dims, dtype=np.int64))
    if len(raw) == _packed_bytes(t.dtype, storage) and count != 1:   # a splat written in hex
        return _splat(_from_bytes(raw, storage, MlirType((1,), t.dtype), where)[0], storage, t, where)
    return _from_bytes(raw, storage, t, where)


def _number(token: str, dtype: DType) -> Any:
    if token in ("true", "false"):
        return token == "true"
    if token.lower().startswith(("0x", "-0x", "+0x")) and dtype in (DType.FP32, DType.FP16, DType.BF16):
        bits = int(token, 16)   # a float written as its bit pattern (NaN, infinity)
        width = {DType.FP32: np.uint32, DType.FP16: np.uint16, DType.BF16: np.uint16}[dtype]
        return np.array([bits], width).view(dtype.numpy_dtype)[0]
    if dtype in _FLOATS:
        return float(token)
    return int(token, 0) if "." not in token and "e" not in token.lower() else float(token)


def _cast(values: list[Any], storage: np.dtype, t: MlirType) -> np.ndarray:
    if storage.kind in "iub" and storage != np.bool_:
        info = np.iinfo(storage)
        if t.dtype is DType.INT48:
            low, high = -(1 << 47), (1 << 47) - 1
        else:
            low, high = int(info.min), int(info.max)
        if any(not low <= int(v) <= high for v in values):
            # an unsigned literal of a signless type (MLIR prints i8 255 as -1, but others may not)
            bits = 48 if t.dtype is DType.INT48 else storage.itemsize * 8
            values = [int(v) - (1 << bits) if int(v) > high else int(v) for v in values]
    return np.array(values).astype(storage)


def _packed_bytes(dtype: DType, storage: np.dtype) -> int:
    """Bytes an element takes in MLIR's raw data: its bit width rounded up to whole bytes (an i48
    takes 6, held here in an int64), else the storage's."""
    return 6 if dtype is DType.INT48 else storage.itemsize


def _from_bytes(raw: bytes, storage: np.dtype, t: MlirType, where: str) -> np.ndarray:
    count = int(np.prod(t.dims, dtype=np.int64))
    if t.dtype is DType.BOOL:
        storage = np.dtype(np.bool_)
    width = _packed_bytes(t.dtype, storage)
    if len(raw) != count * width:
        raise TosaFormatError(f"{where}: {len(raw)} bytes of data for {count} elements of {t.dtype.name}")
    if width == storage.itemsize:
        return np.frombuffer(raw, storage).reshape(t.dims).copy()
    # little-endian elements of ``width`` bytes, sign-extended into the wider storage
    packed = np.frombuffer(raw, np.uint8).reshape(count, width)
    sign = np.where(packed[:, -1:] >= 0x80, 0xFF, 0).astype(np.uint8)
    wide = np.concatenate([packed, np.repeat(sign, storage.itemsize - width, axis=1)], axis=1)
    return wide.reshape(-1).view(storage.newbyteorder("<")).astype(storage).reshape(t.dims)


def parse_resources(text: str) -> dict[str, bytes]:
    """The blobs of a ``{-# dialect_resources: {builtin: {name: "0x..."}} #-}`` trailer."""
    start = text.find("{-#")
    if start < 0:
        return {}
    return {name: bytes.fromhex(blob) for name, blob in
            re.findall(r'([\w.$-]+)\s*:\s*"0x([0-9A-Fa-f]*)"', text[start:])}


# --- source locations --------------------------------------------------------------------

def location_aliases(text: str) -> tuple[str, dict[str, str]]:
    """``text`` without its ``#locN = loc(...)`` definitions (each line left empty, so line numbers
    hold), and those definitions: alias -> the body of its ``loc(...)``."""
    aliases: dict[str, str] = {}
    kept: list[str] = []
    last = 0
    for start in _alias_line_starts(text):   # (the pattern matches whole lines starting "#loc" only)
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        match = _LOCATION_ALIAS.match(text, start, end)
        if match is not None:
            aliases[match.group(1)] = match.group(2)
            kept.append(text[last:start])
            last = end
    if not aliases:
        return text, {}
    kept.append(text[last:])
    return "".join(kept), aliases


def _alias_line_starts(text: str) -> list[int]:
    """Where the lines starting ``#loc`` start (a search of the text for them, not a regex
    tried at every position of megabytes)."""
    starts = [0] if text.startswith("#loc") else []
    at = text.find("\n#loc")
    while at >= 0:
        starts.append(at + 1)
        at = text.find("\n#loc", at + 1)
    return starts


def location_name(body: str, aliases: dict[str, str]) -> str:
    """The name a location body gives (``"model/dense/MatMul"(#loc)`` -> ``model/dense/MatMul``),
    through aliases and the first part of a ``fused[...]`` one; "" for a file position or
    ``unknown``."""
    for _ in range(8):   # aliases name aliases: a chain this deep is a damaged file
        body = body.strip()
        alias = _ALIAS_USE.fullmatch(body)
        if alias is None and body.startswith("fused"):
            first = _ALIAS_USE.search(body)
            named = _NAME_LOCATION.search(body)
            if named is not None and (first is None or named.start() < first.start()):
                return _unquote(f'"{named.group(1)}"')
            alias = first
        if alias is None:
            named = _NAME_LOCATION.match(body)
            return _unquote(f'"{named.group(1)}"') if named is not None else ""
        body = aliases.get(alias.group(0), "")
    return ""
