"""Read the parts of a ``.tflite`` flatbuffer the recurrent legalization needs.

A lazy reader over TFLite's schema (``tensorflow/lite/schema/schema.fbs``): tables are
reached through their vtables field by field, and only the subgraphs, tensors, operators
and buffers asked for are decoded. Every offset is checked against the buffer, so a
truncated or damaged model raises :class:`~npu_sim.errors.TosaFormatError`, never
``struct.error`` or ``IndexError``.

Field slots used (schema.fbs, vtable order): Model(version 0, operator_codes 1,
subgraphs 2, description 3, buffers 4); SubGraph(tensors 0, inputs 1, outputs 2,
operators 3, name 4); Tensor(shape 0, type 1, buffer 2, name 3, quantization 4,
is_variable 5); QuantizationParameters(min 0, max 1, scale 2, zero_point 3);
Operator(opcode_index 0, inputs 1, outputs 2, builtin_options_type 3, builtin_options 4,
intermediates 8); OperatorCode(deprecated_builtin_code 0, custom_code 1, version 2,
builtin_code 3); Buffer(data 0, offset 1, size 2).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from npu_sim.errors import TosaFormatError

#: TensorType codes (schema.fbs) -> numpy dtypes of the element types npu-sim reads.
TENSOR_TYPES: dict[int, np.dtype] = {0: np.dtype(np.float32), 1: np.dtype(np.float16), 2: np.dtype(np.int32),
                                     3: np.dtype(np.uint8), 4: np.dtype(np.int64), 6: np.dtype(np.bool_),
                                     7: np.dtype(np.int16), 9: np.dtype(np.int8)}
TYPE_NAMES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string", 6: "bool",
              7: "int16", 9: "int8", 10: "float64", 13: "resource", 17: "int4"}

#: BuiltinOperator codes of the operators the legalization and the rounding pass handle.
FULLY_CONNECTED = 9
UNIDIRECTIONAL_SEQUENCE_LSTM = 44
BIDIRECTIONAL_SEQUENCE_LSTM = 52
#: BuiltinOptions union tags of their options tables.
UNIDIRECTIONAL_LSTM_OPTIONS = 71
BIDIRECTIONAL_LSTM_OPTIONS = 69

_U8, _I8, _U16, _I32, _U32, _I64, _U64, _F32 = (struct.Struct(f"<{c}") for c in "BbHiIqQf")


class _View:
    """Bounds-checked reads of one flatbuffer."""

    def __init__(self, data: bytes, source: str):
        self.data, self.size, self.source = data, len(data), source

    def fail(self, what: str) -> TosaFormatError:
        return TosaFormatError(f"{self.source}: corrupt or truncated .tflite: {what}")

    def unpack(self, fmt: struct.Struct, pos: int, what: str) -> int | float:
        if pos < 0 or pos + fmt.size > self.size:
            raise self.fail(f"{what} at byte {pos} lies outside the {self.size}-byte file")
        value: int | float = fmt.unpack_from(self.data, pos)[0]
        return value

    def indirect(self, pos: int, what: str) -> int:
        return pos + int(self.unpack(_U32, pos, what))


class _Table:
    """One table: its fields by vtable slot."""

    def __init__(self, view: _View, pos: int, name: str):
        self.view, self.pos, self.name = view, pos, name
        vtable = pos - int(view.unpack(_I32, pos, f"{name} table"))
        vt_size = int(view.unpack(_U16, vtable, f"{name} vtable"))
        if vt_size < 4 or vt_size % 2:
            raise view.fail(f"{name} vtable has invalid size {vt_size}")
        view.unpack(_U16, vtable + vt_size - 2, f"{name} vtable")
        self.vtable, self.slots = vtable, (vt_size - 4) // 2

    def _field(self, slot: int) -> int:
        """Position of field ``slot``, 0 when absent."""
        if slot >= self.slots:
            return 0
        offset = int(self.view.unpack(_U16, self.vtable + 4 + 2 * slot, f"{self.name} vtable"))
        return self.pos + offset if offset else 0

    def scalar(self, slot: int, fmt: struct.Struct, default: int | float = 0) -> int | float:
        at = self._field(slot)
        return self.view.unpack(fmt, at, f"{self.name} field {slot}") if at else default

    def table(self, slot: int, name: str) -> _Table | None:
        at = self._field(slot)
        return _Table(self.view, self.view.indirect(at, f"{self.name}.{name}"), name) if at else None

    def _vector(self, slot: int, element_size: int, what: str) -> tuple[int, int]:
        """(start, count) of a vector field ((0, 0) when absent)."""
        at = self._field(slot)
        if not at:
            return 0, 0
        start = self.view.indirect(at, what)
        count = int(self.view.unpack(_U32, start, what))
        if start + 4 + count * element_size > self.view.size:
            raise self.view.fail(f"{what} ({count} elements) runs past the end of the file")
        return start + 4, count

    def numbers(self, slot: int, dtype: str, what: str) -> np.ndarray:
        item = np.dtype(dtype)
        start, count = self._vector(slot, item.itemsize, f"{self.name}.{what}")
        return np.frombuffer(self.view.data, item.newbyteorder("<"), count, start) if count else np.zeros(0, item)

    def raw(self, slot: int, what: str) -> bytes:
        start, count = self._vector(slot, 1, f"{self.name}.{what}")
        return self.view.data[start:start + count]

    def string(self, slot: int, what: str) -> str:
        return self.raw(slot, what).decode("utf-8", errors="replace")

    def tables(self, slot: int, name: str) -> list[_Table]:
        start, count = self._vector(slot, 4, f"{self.name}.{name}s")
        return [_Table(self.view, self.view.indirect(start + 4 * i, f"{name} {i}"), name) for i in range(count)]


@dataclass(frozen=True)
class Quantization:
    """Per-tensor (or per-channel) affine quantization: real = scale * (q - zero_point)."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]

    @property
    def per_tensor(self) -> tuple[float, int]:
        """The one (scale, zero point) of a per-tensor quantized tensor."""
        return self.scale[0], (self.zero_point[0] if self.zero_point else 0)


@dataclass(frozen=True)
class TfliteTensor:
    index: int
    name: str
    shape: tuple[int, ...]
    type_code: int
    quantization: Quantization | None
    is_variable: bool
    data: np.ndarray | None   # constant data, in its shape; None for activations and variables

    @property
    def type_name(self) -> str:
        return TYPE_NAMES.get(self.type_code, f"type {self.type_code}")


@dataclass(frozen=True)
class TfliteOperator:
    index: int
    code: int                      # BuiltinOperator
    inputs: tuple[int, ...]        # tensor indices, -1 for an omitted optional input
    outputs: tuple[int, ...]
    intermediates: tuple[int, ...]
    options_type: int
    options: _Table | None


class TfliteModel:
    """A ``.tflite`` model, read on demand."""

    def __init__(self, data: bytes, source: str = "model.tflite"):
        self.view = _View(bytes(data), source)
        self.source = source
        if len(data) < 8:
            raise self.view.fail("too short")
        self.root = _Table(self.view, self.view.indirect(0, "root offset"), "Model")
        self._tensors: dict[int, list[_Table]] = {}

    @cached_property
    def _codes(self) -> list[int]:
        codes = []
        for code in self.root.tables(1, "OperatorCode"):
            deprecated = int(code.scalar(0, _I8))
            codes.append(max(deprecated, int(code.scalar(3, _I32))))
        return codes

    @cached_property
    def _subgraphs(self) -> list[_Table]:
        return self.root.tables(2, "SubGraph")

    @cached_property
    def _buffers(self) -> list[_Table]:
        return self.root.tables(4, "Buffer")

    @property
    def subgraph_count(self) -> int:
        return len(self._subgraphs)

    def operators(self, subgraph: int = 0) -> list[TfliteOperator]:
        """The operators of a subgraph, in execution order."""
        table = self._subgraph(subgraph)
        result = []
        for i, op in enumerate(table.tables(3, "Operator")):
            opcode = int(op.scalar(0, _U32))
            if opcode >= len(self._codes):
                raise self.view.fail(f"operator {i} has opcode index {opcode} of {len(self._codes)}")
            result.append(TfliteOperator(i, self._codes[opcode], _ints(op, 1, "inputs"), _ints(op, 2, "outputs"),
                                         _ints(op, 8, "intermediates"), int(op.scalar(3, _U8)),
                                         op.table(4, "BuiltinOptions")))
        return result

    def tensor(self, index: int, subgraph: int = 0) -> TfliteTensor:
        tensors = self._tensor_tables(subgraph)
        if not 0 <= index < len(tensors):
            raise self.view.fail(f"tensor index {index} of {len(tensors)}")
        t = tensors[index]
        shape = tuple(int(d) for d in t.numbers(0, "i4", "shape"))
        type_code = int(t.scalar(1, _I8))
        quant = t.table(4, "QuantizationParameters")
        quantization = None
        if quant is not None:
            scale = tuple(float(s) for s in quant.numbers(2, "f4", "scale"))
            zero_point = tuple(int(z) for z in quant.numbers(3, "i8", "zero_point"))
            quantization = Quantization(scale, zero_point) if scale else None
        return TfliteTensor(index, t.string(3, "name"), shape, type_code, quantization, bool(t.scalar(5, _U8)),
                            self._data(int(t.scalar(2, _U32)), shape, type_code))

    def _subgraph(self, subgraph: int) -> _Table:
        if not 0 <= subgraph < len(self._subgraphs):
            raise self.view.fail(f"subgraph {subgraph} of {len(self._subgraphs)}")
        return self._subgraphs[subgraph]

    def _tensor_tables(self, subgraph: int) -> list[_Table]:
        if subgraph not in self._tensors:
            self._tensors[subgraph] = self._subgraph(subgraph).tables(0, "Tensor")
        return self._tensors[subgraph]

    def _data(self, buffer: int, shape: tuple[int, ...], type_code: int) -> np.ndarray | None:
        """A tensor's constant data (None when its buffer is empty)."""
        if buffer == 0 or buffer >= len(self._buffers) or type_code not in TENSOR_TYPES:
            return None
        table = self._buffers[buffer]
        raw = table.raw(0, "data")
        if not raw:
            offset, size = int(table.scalar(1, _U64)), int(table.scalar(2, _U64))
            if offset <= 1 or size == 0:
                return None
            if offset + size > self.view.size:
                raise self.view.fail(f"buffer {buffer} ({size} bytes at {offset}) runs past the end of the file")
            raw = self.view.data[offset:offset + size]
        dtype = TENSOR_TYPES[type_code].newbyteorder("<")
        count = int(np.prod(shape)) if shape else 1
        if len(raw) != count * dtype.itemsize:
            raise self.view.fail(f"buffer {buffer} holds {len(raw)} bytes for a {shape} tensor of "
                                 f"{TYPE_NAMES[type_code]}")
        return np.frombuffer(raw, dtype).reshape(shape).astype(dtype.newbyteorder("="))


def operators_by_output(model: TfliteModel, code: int) -> Iterator[tuple[str, TfliteOperator]]:
    """Each operator of builtin ``code`` in every subgraph, with the name of its (first) output
    tensor: the location Arm's converter gives the TOSA operators it becomes."""
    for subgraph in range(model.subgraph_count):
        for op in model.operators(subgraph):
            if op.code == code and op.outputs and op.outputs[0] >= 0:
                yield model.tensor(op.outputs[0], subgraph).name, op


def _ints(table: _Table, slot: int, what: str) -> tuple[int, ...]:
    return tuple(int(v) for v in table.numbers(slot, "i4", what))


def option(table: _Table | None, slot: int, kind: str, default: int | float | bool = 0) -> int | float | bool:
    """A scalar field of an operator's options table: ``kind`` is ``bool``, ``int8``, ``float``."""
    if table is None:
        return default
    fmt = {"bool": _U8, "int8": _I8, "float": _F32, "int32": _I32}[kind]
    value = table.scalar(slot, fmt, default)
    return bool(value) if kind == "bool" else value
