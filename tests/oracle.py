"""The oracle: Arm's TOSA reference model (tosa-tools), driven from tests.

``run_op`` builds a one-operator graph with tosa-tools' own Python serializer
(not our writer, so the oracle never depends on our code) and returns the
outputs in our storage dtypes, or raises :class:`OracleError` when the model
refuses the graph (ERROR_IF / UNPREDICTABLE status, or a failed run).

It runs the graph in the model's Python binding (``tosa_reference_model.run``)
when it can. The binding cannot pass INT4/INT48 tensors in or out, nor return
the precise-mode (fp64) results, so those graphs run in the
``tosa_reference_model`` executable instead (:func:`run_executable`, a
subprocess, which also survives REQUIREs that abort the model).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tosa_reference_model
from serializer import tosa_serializer as ts

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op, attribute_class

REFERENCE_MODEL = Path(sys.executable).with_name("tosa_reference_model")
_SER_DTYPE = {d: getattr(ts.DType, d.name) for d in DType if hasattr(ts.DType, d.name)}
#: runtime inputs / outputs of these types only pass through the executable
_EXECUTABLE_ONLY = (DType.INT4, DType.INT48)
#: the binding reads these inputs as raw unsigned words
_UINT_VIEW = {DType.BF16: np.uint16, DType.FP8E4M3: np.uint8, DType.FP8E5M2: np.uint8}


class OracleError(Exception):
    """The reference model refused the graph (status names why)."""

    def __init__(self, status: str):
        self.status = status
        super().__init__(f"reference model status {status}")


@dataclass
class Operand:
    """One operator input: a runtime graph input, or a CONST/CONST_SHAPE if ``const``.

    ``value`` is stored in the dtype's storage type (SHAPE operands usually must be const).
    """

    value: np.ndarray
    dtype: DType
    const: bool = False

    def __post_init__(self) -> None:
        self.value = np.asarray(self.value, dtype=self.dtype.numpy_dtype)


def run_op(op: Op, operands: list[Operand], attribute: Attribute | None, outputs: list[TensorType],
           *, precise: bool = False, isolated: bool = False) -> list[np.ndarray]:
    """Run one TOSA operator in the reference model and return its outputs.

    With ``precise`` the model computes floating point in fp64 and the outputs are
    fp64 arrays: the spec's ``reference_fp64()`` results (``out_ref``). ``isolated``
    runs the model in a subprocess, for graphs that might make it abort.
    """
    attribute = attribute if attribute is not None else attribute_class(op)()
    runtime = [o for o in operands if not o.const]
    needs_executable = precise or isolated or any(o.dtype in _EXECUTABLE_ONLY for o in runtime) or any(
        t.dtype in _EXECUTABLE_ONLY for t in outputs)
    with tempfile.TemporaryDirectory() as tmp:
        ser = ts.TosaSerializer(tmp)
        names, input_names = [], []
        for operand in operands:
            shape = list(np.shape(operand.value))
            if operand.const:
                tensor = ser.addConst(shape, _SER_DTYPE[operand.dtype], _const_value(operand))
            else:
                tensor = ser.addPlaceholder(shape, _SER_DTYPE[operand.dtype], None)
                input_names.append(tensor.name)
            names.append(tensor.name)
        output_names = [ser.addOutput(list(t.shape), _SER_DTYPE[t.dtype]).name for t in outputs]
        ser.addOperator(getattr(ts.TosaOp.Op(), op.name), names, output_names,
                        _ser_attribute(attribute, ser))
        binary = bytes(ser.serialize())
        if not needs_executable:
            return run_graph_bytes(binary, [_binding_input(o) for o in runtime], outputs)
        work = Path(tmp)
        (work / "graph.tosa").write_bytes(binary)
        desc = {"tosa_file": "graph.tosa", "ifm_name": input_names, "ifm_file": [],
                "ofm_name": output_names, "ofm_file": [f"out{k}.npy" for k in range(len(outputs))]}
        for k, operand in enumerate(runtime):
            np.save(work / f"in{k}.npy", _npy_input(operand))
            desc["ifm_file"].append(f"in{k}.npy")
        results = run_executable(work, desc, precise=precise)
    if precise:
        return [r.astype(np.float64).reshape(t.shape) for r, t in zip(results, outputs)]
    return [to_storage(r, t) for r, t in zip(results, outputs)]


def run_graph_bytes(binary: bytes, inputs: list[np.ndarray],
                    outputs: list[TensorType]) -> list[np.ndarray]:
    """Run a serialized graph in the binding; outputs converted to our storage dtypes and shapes."""
    results, status = tosa_reference_model.run(binary, list(inputs))
    if status != tosa_reference_model.GraphStatus.TOSA_VALID:
        raise OracleError(status.name)
    return [to_storage(array, t) for array, t in zip(results, outputs)]


def run_executable(work: Path, desc: dict, *, precise: bool = False, extra_args: tuple[str, ...] = (),
                   timeout_s: float = 300.0) -> list[np.ndarray]:
    """Run the ``tosa_reference_model`` executable on the test descriptor ``desc``.

    ``desc`` names files in ``work`` (the graph, input and output .npy files). Level
    limits are not checked (``--tosa_level NONE``, as in the binding). Returns the
    output arrays as loaded; raises :class:`OracleError` if the model fails.
    """
    desc_path = work / "desc.json"
    desc_path.write_text(json.dumps(desc))
    command = [str(REFERENCE_MODEL), "--test_desc", str(desc_path), "--tosa_level", "NONE",
               "--precise_mode", "1" if precise else "0", *extra_args]
    # PATH without gdb: the model otherwise attaches a debugger (slowly) when it refuses a graph.
    env = dict(os.environ, PATH=str(REFERENCE_MODEL.parent))
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env)
    out_files = [work / f for f in desc["ofm_file"]]
    if done.returncode != 0 or not all(f.exists() for f in out_files):
        raise OracleError(f"exit {done.returncode}: {(done.stdout + done.stderr).strip()[-2000:]}")
    return [np.load(f) for f in out_files]


def to_storage(array: np.ndarray, t: TensorType) -> np.ndarray:
    """A model output (raw words for bf16/fp8, int64 for INT48) in our storage dtype and shape."""
    array = np.asarray(array)
    storage = t.dtype.numpy_dtype
    if array.dtype != storage:
        if array.dtype.itemsize == storage.itemsize and array.dtype.kind in "uV":
            array = array.view(storage)
        else:
            array = array.astype(storage)
    return array.reshape(t.shape)


def _binding_input(operand: Operand) -> np.ndarray:
    """The binding reads bf16/fp8 inputs only as raw unsigned words."""
    if operand.dtype in _UINT_VIEW:
        return np.ascontiguousarray(operand.value).view(_UINT_VIEW[operand.dtype])
    return operand.value


def _npy_input(operand: Operand) -> np.ndarray:
    """Arrays as the executable reads them from .npy: fp8e5m2 as raw bytes (numpy saves it
    as '<f1', which the model rejects); bf16/fp8e4m3 as ml_dtypes saves them ('<V2'/'<V1')."""
    value = np.ascontiguousarray(operand.value)
    return value.view(np.uint8) if operand.dtype is DType.FP8E5M2 else value


def _const_value(operand: Operand) -> np.ndarray:
    return operand.value.view(np.uint8) if operand.dtype is DType.FP8E5M2 else operand.value


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


__all__ = ["REFERENCE_MODEL", "Operand", "OracleError", "run_executable", "run_graph_bytes", "run_op",
           "to_storage"]
