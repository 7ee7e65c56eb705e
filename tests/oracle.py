"""The oracle: Arm's TOSA reference model (tosa-tools), driven from tests.

``run_op`` builds a one-operator graph with tosa-tools' own Python serializer
(not our writer, so the oracle never depends on our code), runs it in
``tosa_reference_model.run`` and returns the outputs decoded into our storage
dtypes, or raises :class:`OracleError` when the reference model reports an
ERROR_IF / UNPREDICTABLE status.
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass

import numpy as np
import tosa_reference_model
from serializer import tosa_serializer as ts

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op

_SER_DTYPE = {d: getattr(ts.DType, d.name) for d in DType if hasattr(ts.DType, d.name)}


class OracleError(Exception):
    """The reference model refused the graph (status names why)."""

    def __init__(self, status: str):
        self.status = status
        super().__init__(f"reference model status {status}")


@dataclass
class Operand:
    """One operator input: a runtime graph input, or a CONST/CONST_SHAPE if ``const``."""

    value: np.ndarray
    dtype: DType
    const: bool = False


def _ser_attribute(attribute: Attribute, ser: ts.TosaSerializer) -> ts.TosaSerializerAttribute:
    attr = ts.TosaSerializerAttribute()
    fields = attribute.to_dict()
    method = getattr(attr, attribute.schema_name)
    values = []
    for name, kind in attribute.field_kinds.items():
        value = fields[name]
        if kind == "[ubyte]":
            values.append(list(value))
        elif isinstance(value, tuple):
            values.append(list(value))
        elif hasattr(value, "value"):
            values.append(int(value))
        else:
            values.append(value)
    if attribute.schema_name in ("ClampAttribute", "CustomAttribute"):
        values.insert(0, ser.builder)
    method(*values)
    return attr


def _ser_value(value: np.ndarray, dtype: DType) -> np.ndarray:
    if dtype is DType.FP8E5M2:
        return np.asarray(value).view(np.uint8)
    return np.asarray(value)


def run_op(op: Op, operands: list[Operand], attribute: Attribute | None,
           outputs: list[TensorType]) -> list[np.ndarray]:
    """Run one TOSA operator in the reference model and return its outputs."""
    from npu_sim.tosa.ops import attribute_class

    attribute = attribute if attribute is not None else attribute_class(op)()
    with tempfile.TemporaryDirectory() as tmp:
        ser = ts.TosaSerializer(tmp)
        names, runtime_inputs = [], []
        for operand in operands:
            shape = list(np.shape(operand.value))
            if operand.const:
                tensor = ser.addConst(shape, _SER_DTYPE[operand.dtype],
                                      _ser_value(operand.value, operand.dtype))
            else:
                tensor = ser.addPlaceholder(shape, _SER_DTYPE[operand.dtype], None)
                runtime_inputs.append(_to_reference_input(operand.value, operand.dtype))
            names.append(tensor.name)
        out_names = [ser.addOutput(list(t.shape), _SER_DTYPE[t.dtype]).name for t in outputs]
        ser.addOperator(getattr(ts.TosaOp.Op(), op.name) if hasattr(ts, "TosaOp") else int(op),
                        names, out_names, _ser_attribute(attribute, ser))
        binary = bytes(ser.serialize())
    return run_graph_bytes(binary, runtime_inputs, outputs)


def _to_reference_input(value: np.ndarray, dtype: DType) -> np.ndarray:
    """Arrays as the reference model's python binding expects them."""
    value = np.asarray(value, dtype=dtype.numpy_dtype)
    if dtype is DType.INT48:
        return value.astype(np.int64)
    if dtype is DType.BF16:  # the binding takes bf16 as raw 16-bit words
        return value.view(np.uint16)
    if dtype in (DType.FP8E4M3, DType.FP8E5M2):
        return value.view(np.uint8)
    return value


def run_graph_bytes(binary: bytes, inputs: list[np.ndarray],
                    outputs: list[TensorType]) -> list[np.ndarray]:
    """Run a serialized graph; outputs converted to our storage dtypes and shapes."""
    results, status = tosa_reference_model.run(binary, list(inputs))
    if status != tosa_reference_model.GraphStatus.TOSA_VALID:
        raise OracleError(status.name)
    converted = []
    for array, t in zip(results, outputs):
        array = np.asarray(array)
        if array.dtype != t.dtype.numpy_dtype:
            if array.dtype.itemsize == t.dtype.numpy_dtype.itemsize and array.dtype.kind in "uV":
                array = array.view(t.dtype.numpy_dtype)
            else:
                array = array.astype(t.dtype.numpy_dtype)
        converted.append(array.reshape(t.shape))
    return converted


__all__ = ["Operand", "OracleError", "run_op", "run_graph_bytes", "dataclasses"]
