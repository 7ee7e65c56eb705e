"""The vector unit: SIMD lanes for elementwise, reduction, pooling and data-layout work.
``ceil(work / elements_per_cycle[dtype])`` cycles per step, the steps of a command one
after the other; ``work`` is the output elements, the input elements for reductions,
``out * kernel window`` for pooling and M*N*K for a MAC operator (see
:func:`work_elements`). It runs every computing operator: those no other unit claims,
and the MAC operators of a dtype the MAC array has no rate for.

A config may instead give elementwise cycles per output element by kind of work
(``vector.cycles_per_element``; :func:`elementwise_kinds`), over the output with its last
dimension rounded up to ``vector.channel_granule`` (the Ethos-U presets: Vela's output-unit
figures over 16-channel bricks).
"""

from __future__ import annotations

import math
from math import prod
from typing import TYPE_CHECKING

from npu_sim.hw.compute_units.mac_array import MAC_OPS, step_macs
from npu_sim.hw.compute_units.unit import (
    COMPUTE_OPS,
    ComputeUnit,
    ceil_div,
    out_elements,
    out_shape,
    step_dtype,
    summed_step_cycles,
)
from npu_sim.program import KernelStep, View
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op

if TYPE_CHECKING:
    from npu_sim.hw.config import HwConfig

POOL_OPS = frozenset({Op.AVG_POOL2D, Op.MAX_POOL2D})
REDUCE_OPS = frozenset({Op.REDUCE_ALL, Op.REDUCE_ANY, Op.REDUCE_MAX, Op.REDUCE_MIN,
                        Op.REDUCE_PRODUCT, Op.REDUCE_SUM, Op.ARGMAX})


def vector_cycles(element_count: int, elements_per_cycle: int) -> int:
    return ceil_div(max(element_count, 0), elements_per_cycle)


def elements_per_cycle(hw: HwConfig, dtype: DType) -> int:
    """Vector lanes for ``dtype``; unlisted dtypes fall back on the int8 lanes scaled by width."""
    table = hw.vector.elements_per_cycle
    key = dtype.name.lower()
    if key in table:
        return table[key]
    width_bytes = max(1, dtype.bits // 8) if dtype is not DType.BOOL else 1
    return max(1, table["int8"] // width_bytes)


def reduced_elements(step: KernelStep) -> int:
    """The input a reduction reads: its operand view (the simulator's command; an earlier
    step's result counts whole), else, for a step planned without views, the output region
    times the reduced axis, else the whole input."""
    if step.operands:
        operand = step.operands[0]
        if isinstance(operand, View):
            return operand.element_count
        return prod(step.input_types[0].shape)
    shape = step.input_types[0].shape
    if step.out_region is None:
        return prod(shape)
    axis = getattr(step.attribute, "axis", 0)
    return out_elements(step) * (shape[axis] if 0 <= axis < len(shape) else 1)


def work_elements(step: KernelStep) -> int:
    """Elements the vector unit processes for ``step`` (see the module doc)."""
    if step.op in MAC_OPS:
        return step_macs(step)
    if step.op in REDUCE_OPS:
        return reduced_elements(step)
    if step.op in POOL_OPS:
        kh, kw = (tuple(step.attribute.kernel) + (1, 1))[:2]
        return out_elements(step) * kh * kw
    return out_elements(step)


#: Elementwise operators of two operands (their cost kind is binary with a 32-bit input).
BINARY_OPS = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.MAXIMUM, Op.MINIMUM, Op.INTDIV, Op.ARITHMETIC_RIGHT_SHIFT,
                        Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT, Op.BITWISE_AND, Op.BITWISE_OR,
                        Op.BITWISE_XOR, Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL, Op.POW})


def elementwise_kinds(step: KernelStep) -> tuple[str, ...]:
    """The passes of elementwise work a step takes (keys of ``vector.cycles_per_element``), none
    for other work. As Ethos-U's output unit counts them: a 32-bit input costs more, a binary
    one more again; a multiply is its own kind. A RESCALE is a multiply-shift of a 32-bit
    value; from an 8/16-bit input it first widens it, subtracting its zero point (an add): two
    passes, as Vela lowers it."""
    op = step.op
    if op in REDUCE_OPS or op in POOL_OPS or op in MAC_OPS or not step.input_types or not step.output_types:
        return ()
    in_bits, out_bits = step.input_types[0].dtype.bits, step.output_types[0].dtype.bits
    if op is Op.RESCALE:
        return ("binary_int32",) if in_bits == 32 else ("add", "binary_int32")
    if in_bits == 32 and not step.input_types[0].dtype.is_float:
        return ("binary_int32",) if op in BINARY_OPS else ("unary_int32",)
    if op is Op.MUL:
        return ("mul_int32",) if out_bits == 32 else ("mul",)
    if op in (Op.ADD, Op.SUB):
        return ("add",)
    return ("other",)


def channel_rounded_elements(step: KernelStep, granule: int) -> int:
    """Output elements with the last dimension rounded up to ``granule`` (channel bricks)."""
    shape = out_shape(step)
    if granule <= 1 or not shape:
        return prod(shape)
    return prod(shape[:-1]) * ceil_div(shape[-1], granule) * granule


def rescale_cycles(hw: HwConfig, step: KernelStep) -> int | None:
    """A RESCALE where the config times it apart (``rescale_int<bits>`` in
    ``vector.cycles_per_element``, per output element of ``vector.rescale_micro_block``s: the
    Ethos-U85 runs it on its pooling path, micro-block by micro-block), else None."""
    if step.op is not Op.RESCALE or not step.input_types:
        return None
    per_element = hw.vector.cycles_per_element.get(f"rescale_int{step.input_types[0].dtype.bits}")
    if per_element is None:
        return None
    shape = (1, 1, 1, *out_shape(step))[-3:]
    block = (1, 1, 1, *hw.vector.rescale_micro_block)[-3:]
    elements = prod(ceil_div(n, b) * b for n, b in zip(shape, block))
    return math.ceil(elements * per_element)


def step_cycles(hw: HwConfig, step: KernelStep) -> int:
    rescale = rescale_cycles(hw, step)
    if rescale is not None:
        return rescale
    table = hw.vector.cycles_per_element
    kinds = elementwise_kinds(step) if table else ()
    if kinds and all(kind in table for kind in kinds):
        per_element = sum(table[kind] for kind in kinds)
        return math.ceil(channel_rounded_elements(step, hw.vector.channel_granule) * per_element)
    return vector_cycles(work_elements(step), elements_per_cycle(hw, step_dtype(step)))


UNIT = ComputeUnit("vector", COMPUTE_OPS, step_cycles, summed_step_cycles(step_cycles), fallback=True,
                   label="the vector unit")
