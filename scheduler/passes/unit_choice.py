"""Unit choice: a MAC operator whose dtype the MAC array has no rate for runs on the vector unit.

Lowering names the unit the registry assigns each operator (:mod:`scheduler.ir.support`);
this pass corrects it where the configured MAC array cannot run the operands' dtype.
"""

from __future__ import annotations

from npu_sim.hw.compute_units import MAC_ARRAY, VECTOR, mac_array
from npu_sim.hw.config import HwConfig
from scheduler.ir.npu_ops import LoweredGraph, OpKind


def assign_units(lowered: LoweredGraph, hw: HwConfig) -> None:
    """Move MAC operations the MAC array of ``hw`` cannot run to the vector unit (in place)."""
    for block in lowered.main.walk_blocks():
        for op in block.ops:
            if op.kind is OpKind.COMPUTE and op.unit == MAC_ARRAY.name and \
                    not mac_array.supports(hw, op.steps[0].input_types[0].dtype):
                op.unit = VECTOR.name
