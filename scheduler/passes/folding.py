"""Constant folding: operations whose operands are all constants are computed at compile time.

Converters emit RESHAPEs and TRANSPOSEs of weights, and shape arithmetic on
constants; run on the NPU they would copy weights through TCM on every
invocation and hide from later passes that the result is a constant (which
the constant pool and staging rely on). The folded value comes from the same
reference kernels the NPU runs, so the bits are the same. An operation whose
kernel raises (a TOSA ERROR_IF) is left alone: the error must appear when the
graph runs, as it does in the reference executor. Results larger than
MAX_FOLDED_BYTES, and results that are graph outputs, block results or
variables, are not folded; nor is a CAST that widens a constant (fp16 weights
cast to fp32): the narrow constant moves, half the bytes, and the NPU casts it.
"""

from __future__ import annotations

import numpy as np

from npu_sim.errors import NpuSimError
from npu_sim.reference.kernel_api import KernelArgs, run_kernel
from npu_sim.tosa.ops import Op
from scheduler.ir.npu_ops import LoweredBlock, LoweredGraph, NpuOp, OpKind, Step, Value, ValueKind

#: Larger results stay computed at run time (folding would only grow the constant data).
MAX_FOLDED_BYTES = 1 << 20


def _constant(values: dict[str, Value], key: str) -> np.ndarray | None:
    value = values.get(key)
    return value.data if value is not None and value.kind is ValueKind.CONSTANT else None


def _fold(op: NpuOp, values: dict[str, Value]) -> list[np.ndarray] | None:
    """The op's results if every operand is a constant and the kernels succeed, else None."""
    outputs = [values[k] for k in op.outputs]
    if any(v.kind is not ValueKind.INTERMEDIATE or v.size_bytes > MAX_FOLDED_BYTES for v in outputs):
        return None
    if op.kind is OpKind.COPY:
        return _fold_copy(op, values, outputs[0])
    if op.kind is not OpKind.COMPUTE or op.composite is not None or any(s.op == Op.CUSTOM for s in op.steps):
        return None
    if any(_widening_cast(s) for s in op.steps):
        return None
    return _fold_steps(op, values)


def _widening_cast(step: Step) -> bool:
    """A CAST to a wider type (fp16 -> fp32): folded, its constant would move at the wide width."""
    return step.op is Op.CAST and step.output_types[0].dtype.bits > step.input_types[0].dtype.bits


def _fold_copy(op: NpuOp, values: dict[str, Value], output: Value) -> list[np.ndarray] | None:
    """A COPY of a constant (a SLICE copy: the run of the source it takes)."""
    data = _constant(values, op.sources[0])
    if data is None or values[op.sources[0]].type.dtype != output.type.dtype:
        return None
    start = op.slice_offset_elements or 0
    run = np.asarray(data).reshape(-1)[start:start + output.type.element_count]
    return [run.reshape(output.type.shape)]


def _fold_steps(op: NpuOp, values: dict[str, Value]) -> list[np.ndarray] | None:
    """The last step's results, computed by the reference kernels (None if an operand is not
    constant or a kernel refuses: the error must come when the graph runs)."""
    results: list[list[np.ndarray]] = []
    for step in op.steps:
        inputs = []
        for operand in step.operands:
            data = results[operand][0] if isinstance(operand, int) else _constant(values, operand)
            if data is None:
                return None
            inputs.append(data)
        try:
            results.append(run_kernel(KernelArgs(step.op, step.attribute, inputs, list(step.input_types),
                                                 list(step.output_types), name=step.name)))
        except (NpuSimError, ValueError, ArithmeticError):
            return None
    return results[-1]


def fold_block(block: LoweredBlock, values: dict[str, Value]) -> int:
    """Fold what can be folded in ``block`` (and its nested blocks); return how many operations went."""
    kept, folded = [], 0
    for op in block.ops:
        for sub in op.blocks:
            folded += fold_block(sub, values)
        results = _fold(op, values)
        if results is None:
            kept.append(op)
            continue
        for key, data in zip(op.outputs, results):
            old = values[key]
            values[key] = Value(key, old.type, ValueKind.CONSTANT,
                                np.asarray(data, dtype=old.type.dtype.numpy_dtype).reshape(old.type.shape), old.name)
        folded += 1
    block.ops = kept
    return folded


def fold_constants(lowered: LoweredGraph) -> int:
    """Fold constant operations in every block; returns the number of operations removed."""
    return fold_block(lowered.main, lowered.values)
