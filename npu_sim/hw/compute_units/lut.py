"""The LUT/activation unit: table lookups and transcendental functions, ``elements_per_cycle`` results a cycle."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from npu_sim.hw.compute_units.unit import ComputeUnit, ceil_div, out_elements, summed_step_cycles
from npu_sim.program import KernelStep
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op

if TYPE_CHECKING:
    from npu_sim.hw.config import HwConfig


class TableStep(Protocol):
    """What a table load's cost depends on: a kernel step's operator and input types (a
    :class:`KernelStep`, or the scheduler's step before it is placed)."""

    @property
    def op(self) -> Op: ...

    @property
    def input_types(self) -> Sequence[TensorType]: ...


#: Operators the LUT unit evaluates by table lookup.
LUT_OPS = frozenset({Op.TABLE, Op.SIGMOID, Op.TANH, Op.ERF, Op.EXP, Op.LOG, Op.RECIPROCAL,
                     Op.RSQRT, Op.SIN, Op.COS, Op.POW})
#: A lookup written as TOSA operators (:mod:`scheduler.passes.table_lookup`: the value cast to
#: an index, offset, reshaped, a GATHER of a constant table with an entry per value, reshaped
#: back) runs here when the scheduler groups it: the unit indexes its table with the value
#: itself, so the index arithmetic and reshapes are its addressing and cost nothing.
LOOKUP_OPS = frozenset({Op.GATHER})
INDEX_OPS = frozenset({Op.CAST, Op.ADD, Op.RESHAPE, Op.IDENTITY})


def lut_cycles(element_count: int, elements_per_cycle: int) -> int:
    return ceil_div(max(element_count, 0), elements_per_cycle)


def table_load_cycles(hw: HwConfig, step: TableStep) -> int:
    """Cycles to reload the LUT memory before a table operation (Vela reloads per TABLE): a
    memory-to-memory copy, as long as the slower of its ends, the LUT memory written at
    ``lut.table_load_bytes_per_cycle`` and, with ``lut.table_source_latency_cycles``, the
    source read from the DDR (its latency plus the bytes at its bandwidth; Vela's
    MemToMemCycles: 64 + 256 = 320 cycles for an int8 table on the U55, 500 + 22 on the U65)."""
    rate = hw.lut.table_load_bytes_per_cycle
    if rate <= 0 or not step.input_types or (step.op not in LUT_OPS and step.op not in LOOKUP_OPS):
        return 0
    table_bytes = hw.lut.table_int16_bytes if _wide_table(step) else hw.lut.table_int8_bytes
    written = math.ceil(table_bytes / rate)
    latency = hw.lut.table_source_latency_cycles
    if latency <= 0:
        return written
    return max(written, latency + math.ceil(table_bytes / hw.ddr.bandwidth_bytes_per_cycle))


def _wide_table(step: TableStep) -> bool:
    """True for a table of 16-bit inputs (a TABLE of int16, a lookup of more than 256 entries)."""
    if step.op in LOOKUP_OPS:
        return step.input_types[0].shape[1] > 256
    return step.input_types[0].dtype == DType.INT16


def step_cycles(hw: HwConfig, step: KernelStep) -> int:
    """A lookup's elements, and its table's load on the operation's first tile only: the LUT
    memory keeps the table over the tiles of one operation (Vela loads it once per operation).
    A lookup's index arithmetic and the elementwise steps chained after it
    (:mod:`scheduler.passes.chaining`) cost nothing of their own."""
    if step.op not in LUT_OPS and step.op not in LOOKUP_OPS:
        return 0
    return lookup_cycles(hw, step) + (table_load_cycles(hw, step) if first_tile(step) else 0)


def first_tile_table_load_cycles(hw: HwConfig, steps: Sequence[KernelStep]) -> int:
    """The table loads :func:`step_cycles` charges a command's steps (on an operation's first tile)."""
    return sum(table_load_cycles(hw, s) for s in steps if first_tile(s))


def first_tile(step: KernelStep) -> bool:
    """True for a whole step or the tile at the origin of its output (tiles run from there)."""
    return step.out_region is None or all(start == 0 for start, _ in step.out_region)


def lookup_cycles(hw: HwConfig, step: KernelStep) -> int:
    """The lookups of a step: ``lut.cycles_per_element`` per element (``wide_cycles_per_element``
    for a 16-bit table) where the config gives one, else ``elements_per_cycle`` a cycle."""
    per_element = hw.lut.cycles_per_element
    if step.input_types and _wide_table(step) and hw.lut.wide_cycles_per_element > 0:
        per_element = hw.lut.wide_cycles_per_element
    if per_element > 0:
        return math.ceil(out_elements(step) * per_element)
    return lut_cycles(out_elements(step), hw.lut.elements_per_cycle)


class SourcedStep(Protocol):
    """A step with the source operator it comes from (``KernelStep.origin``; "" if none of its own)."""

    @property
    def origin(self) -> str: ...


def computes_built_in(hw: HwConfig, lut_function: str, steps: Sequence[SourcedStep]) -> bool:
    """Whether a lookup of ``lut_function`` runs as the unit's built-in function (``lut.builtin_functions``):
    without ``lut.builtin_functions_in_source_operators``, only a lookup with no source operator of
    its own (an LSTM's gate, lowered from one fused operator) does."""
    if not lut_function or lut_function not in hw.lut.builtin_functions:
        return False
    return hw.lut.builtin_functions_in_source_operators or not any(step.origin for step in steps)


def builtin_lookup_cycles(hw: HwConfig, steps: Sequence[KernelStep]) -> int:
    """A lookup of a function the unit computes built in (``lut.builtin_functions``): its
    elements at the unit's rate, no table load."""
    return sum(lut_cycles(out_elements(s), hw.lut.elements_per_cycle) for s in steps if s.op in LOOKUP_OPS)


UNIT = ComputeUnit("lut", LUT_OPS, step_cycles, summed_step_cycles(step_cycles),
                   label="the lut unit", required_step="a table-lookup step", accepted_ops=LOOKUP_OPS)
