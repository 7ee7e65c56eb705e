"""CPU fallback: operations the preset's NPU cannot run move to the host CPU unit.

The NPU's support (``npu_support.profile``, :mod:`npu_sim.hw.op_support`) is checked for every
step of every compute operation; an operation with a step outside it runs on the ``cpu`` unit
as a whole (a fused epilogue goes with its operator), and is recorded as a
:class:`~npu_sim.program.CpuFallback` with the reason. With ``npu_support.strict`` (``npu-sim
run --strict-npu``) such an operator is an error naming it instead.

What stays on the NPU whatever the profile: a fused composite (the preset declares its datapath),
a table lookup the LUT unit runs (:mod:`scheduler.passes.table_lookup`: its GATHER indexes
the LUT, it is no gather of the NPU's), and a TFLite SOFTMAX compiled as Vela's TFLite reader
does (:mod:`scheduler.passes.source_softmax`: Vela runs it on the NPU of every Ethos-U; its
TOSA form's int32 REDUCE_MAX and TABLEs are not what the hardware runs).
"""

from __future__ import annotations

from npu_sim.errors import UnsupportedFeatureError
from npu_sim.hw.compute_units import CPU, LUT, MAC_ARRAY
from npu_sim.hw.compute_units.lut import INDEX_OPS, LOOKUP_OPS
from npu_sim.hw.compute_units.vector import is_source_softmax
from npu_sim.hw.config import HwConfig
from npu_sim.hw.op_support import OpFacts, unsupported_reason
from npu_sim.program import CpuFallback
from scheduler.ir.npu_ops import LoweredGraph, NpuOp, OpKind, Step, Value, ValueKind


def assign_cpu_fallbacks(lowered: LoweredGraph, hw: HwConfig) -> list[CpuFallback]:
    """Move the operations ``hw``'s NPU cannot run to the CPU (in place); what moved and why.

    Raises :class:`UnsupportedFeatureError` naming the operator if ``npu_support.strict``."""
    profile = hw.npu_support.profile
    moved: list[CpuFallback] = []
    if profile == "all":
        return moved
    for block in lowered.main.walk_blocks():
        for op in block.ops:
            if op.kind is not OpKind.COMPUTE or op.composite is not None or op.unit == CPU.name or _lookup(op) \
                    or is_source_softmax(hw, op.steps):
                continue
            found = _first_unsupported(hw, op, lowered.values)
            if found is None:
                continue
            step, reason = found
            if hw.npu_support.strict:
                raise UnsupportedFeatureError(f"{step.name}: {reason}; {hw.name or 'this NPU'} runs it on no "
                                              "NPU unit (strict NPU support: no CPU fallback)")
            moved.append(CpuFallback(op.name, op.op_label, step.name, _dtype_name(step), reason, op.unit))
            op.unit = CPU.name
    return moved


def _lookup(op: NpuOp) -> bool:
    """A table lookup on the LUT unit: its GATHER and index arithmetic are the LUT's addressing."""
    return op.unit == LUT.name and any(s.op in LOOKUP_OPS for s in op.steps) and \
        all(s.op in LOOKUP_OPS or s.op in INDEX_OPS for s in op.steps)


def _first_unsupported(hw: HwConfig, op: NpuOp, values: dict[str, Value]) -> tuple[Step, str] | None:
    """The first step of ``op`` the NPU of ``hw`` cannot run, with the reason."""
    for index, step in enumerate(op.steps):
        reason = unsupported_reason(hw.npu_support.profile, _facts(hw, op, index, step, values))
        if reason is not None:
            return step, reason
    return None


def _facts(hw: HwConfig, op: NpuOp, index: int, step: Step, values: dict[str, Value]) -> OpFacts:
    """The facts of step ``index`` of ``op``: its constants' values, fused behind a MAC step or not,
    from a TFLite operator compiled as Vela's TFLite reader does or not."""
    constants = tuple([values[o].data if isinstance(o, str) and values[o].kind is ValueKind.CONSTANT else None
                       for o in step.operands])
    return OpFacts(step.op, step.attribute, step.input_types, step.output_types, constants,
                   fused=index > 0 and op.unit == MAC_ARRAY.name,
                   tflite_source=bool(step.origin) and hw.npu_support.source_operators)


def _dtype_name(step: Step) -> str:
    """The step's data type as configs spell it: the widest of its first input and output."""
    types = [t.dtype for t in (*step.input_types[:1], *step.output_types[:1])]
    return max(types, key=lambda d: d.bits).name.lower() if types else ""
