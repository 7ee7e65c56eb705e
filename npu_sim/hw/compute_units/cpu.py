"""The host CPU: a Cortex-M55/M85-class core running the operators its NPU cannot (CPU fallback).

No operator is the CPU's by default: the scheduler gives it the operations outside the
preset's NPU support (:mod:`npu_sim.hw.op_support`, :mod:`scheduler.passes.cpu_fallback`).
It reads and writes its operands in the TCM (the SRAM it shares with the NPU), moved there by
the same DMA paths, so its memory traffic is the run's. A step costs, by operator class and
data type (``cpu`` section of the HwConfig, in CPU cycles, the CPU clocked as the NPU):

* multiply-accumulate operators: ``cycles_per_mac[dtype]`` per MAC;
* transcendental functions (EXP, TANH, SIGMOID, ...) of floating-point data:
  ``transcendental_cycles_per_element[dtype]`` per output element;
* data movement (TRANSPOSE, CONCAT, GATHER, PAD, RESIZE, ...): ``data_cycles_per_byte`` per
  output byte;
* reductions and pooling: ``elementwise_cycles_per_element[dtype]`` per element read;
* every other operator: ``elementwise_cycles_per_element[dtype]`` per output element.

A data type without an entry takes the entry of the nearest listed one of its kind (integer
or floating point) at least as wide, else the widest of its kind.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from npu_sim.hw.compute_units.lut import LUT_OPS
from npu_sim.hw.compute_units.mac_array import MAC_OPS, step_macs
from npu_sim.hw.compute_units.unit import COMPUTE_OPS, ComputeUnit, out_elements, step_dtype, summed_step_cycles
from npu_sim.hw.compute_units.vector import POOL_OPS, REDUCE_OPS, work_elements
from npu_sim.memory_layout import element_size_bytes
from npu_sim.program import KernelStep
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op

if TYPE_CHECKING:
    from npu_sim.hw.config import HwConfig

#: Operators that only move or index data: costed per byte they write.
DATA_OPS = frozenset({Op.TRANSPOSE, Op.CONCAT, Op.SLICE, Op.PAD, Op.TILE, Op.GATHER, Op.SCATTER, Op.RESIZE,
                      Op.REVERSE, Op.RESHAPE, Op.IDENTITY})


def rate(table: dict[str, float], dtype: DType) -> float:
    """``table``'s entry for ``dtype``: its own, else the nearest listed type of its kind
    (integer or floating point) at least as wide, else the widest of its kind, else the widest."""
    key = dtype.name.lower()
    if key in table:
        return table[key]
    same_kind = sorted((DType[k.upper()].bits, v) for k, v in table.items()
                       if DType[k.upper()].is_float == dtype.is_float)
    pool = same_kind or sorted((DType[k.upper()].bits, v) for k, v in table.items())
    wider = [v for bits, v in pool if bits >= dtype.bits]
    return wider[0] if wider else pool[-1][1]


def step_cycles(hw: HwConfig, step: KernelStep) -> int:
    """Cycles of one step on the CPU (see the module doc)."""
    cpu = hw.cpu
    dtype = step_dtype(step)
    if step.op in MAC_OPS:
        return math.ceil(step_macs(step) * rate(cpu.cycles_per_mac, step.input_types[0].dtype))
    if step.op in LUT_OPS and dtype.is_float:
        return math.ceil(out_elements(step) * rate(cpu.transcendental_cycles_per_element, dtype))
    if step.op in DATA_OPS:
        out_type = step.output_types[0].dtype if step.output_types else dtype
        return math.ceil(out_elements(step) * element_size_bytes(out_type) * cpu.data_cycles_per_byte)
    if step.op in REDUCE_OPS or step.op in POOL_OPS:
        return math.ceil(work_elements(step) * rate(cpu.elementwise_cycles_per_element, dtype))
    return math.ceil(out_elements(step) * rate(cpu.elementwise_cycles_per_element, dtype))


UNIT = ComputeUnit("cpu", frozenset(), step_cycles, summed_step_cycles(step_cycles),
                   label="the host cpu", accepted_ops=COMPUTE_OPS)
