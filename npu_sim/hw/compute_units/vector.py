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

Where a config's output unit scales an elementwise operation's operands (``vector.scaled_ops``),
the RESCALEs around it cost nothing of their own (:func:`rescale_folds`).

Where a config lowers sums as Ethos-U does (``vector.transpose_reductions``), a REDUCE_SUM
over H or W is a transpose pass and a sum over the innermost axis
(:func:`lowered_sum_cycles`), and a widening RESCALE fused before it is folded into the sum
(:func:`body_cycles`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from functools import lru_cache
from math import prod
from typing import TYPE_CHECKING, Protocol

from npu_sim.hw.compute_units.mac_array import MAC_OPS, step_macs
from npu_sim.hw.compute_units.unit import (
    COMPUTE_OPS,
    ComputeUnit,
    ceil_div,
    micro_blocked_elements,
    out_elements,
    out_shape,
    step_dtype,
    transpose_shape_cycles,
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


#: What the output unit may reshape (Vela's DecomposeAsElementwise, regor/compiler/op_type.hpp):
#: elementwise operators, activations, RESCALE, TABLE and CAST.
RESHAPED_OPS = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.MAXIMUM, Op.MINIMUM, Op.INTDIV, Op.ARITHMETIC_RIGHT_SHIFT,
                          Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT, Op.BITWISE_AND, Op.BITWISE_OR,
                          Op.BITWISE_XOR, Op.LOGICAL_AND, Op.LOGICAL_OR, Op.LOGICAL_XOR, Op.EQUAL, Op.GREATER,
                          Op.GREATER_EQUAL, Op.ABS, Op.CLZ, Op.LOGICAL_NOT, Op.BITWISE_NOT, Op.NEGATE,
                          Op.CLAMP, Op.SIGMOID, Op.TANH, Op.RESCALE, Op.TABLE, Op.CAST})
#: Of those, the operators with two data operands (the others' later inputs are parameters:
#: a RESCALE's multipliers, a TABLE's table, a MUL's shift).
TWO_OPERAND_OPS = RESHAPED_OPS & (BINARY_OPS | {Op.LOGICAL_AND, Op.LOGICAL_OR, Op.LOGICAL_XOR})
#: Vela reshapes only outputs shallower than this and larger than the next (scheduler_packing.cpp:
#: maxDepth 8, minElements 16).
RESHAPE_BELOW_DEPTH, RESHAPE_ABOVE_ELEMENTS = 8, 16


def output_unit_shape(hw: HwConfig, step: KernelStep) -> tuple[int, ...]:
    """The output tile as the output unit walks it: where ``vector.depth_reshape_min_depth`` is set
    and the step is elementwise-like work with no broadcast operand and no per-channel scales, whose
    whole output is shallow (depth below 8, more than 16 elements), the tile reshaped to a depth of at least that many
    (Vela's ReshapeToIncreaseDepth, regor/compiler/scheduler_packing.cpp: a [1, 96, 96, 3] image
    runs as [72, 24, 16]), else its own shape."""
    shape = out_shape(step)
    whole = step.output_types[0].shape if step.output_types else ()
    min_depth = hw.vector.depth_reshape_min_depth
    if min_depth <= 0 or step.op not in RESHAPED_OPS or not whole or whole[-1] >= RESHAPE_BELOW_DEPTH \
            or prod(whole) <= RESHAPE_ABOVE_ELEMENTS or not _elementwise_operands(step):
        return shape
    return depth_reshaped(prod(shape), min_depth)   # (Vela decides for the operation; a tile runs its part)


def _elementwise_operands(step: KernelStep) -> bool:
    """True if every data operand of ``step`` is a scalar or of its output's shape, and a RESCALE
    scales by one multiplier."""
    full = step.output_types[0].shape if step.output_types else ()
    data = step.input_types[:2 if step.op in TWO_OPERAND_OPS else 1]
    if any(t.shape != full and prod(t.shape) != 1 for t in data):
        return False
    return step.op is not Op.RESCALE or len(step.input_types) < 2 or prod(step.input_types[1].shape) <= 1


@lru_cache(maxsize=4096)
def depth_reshaped(elements: int, min_depth: int) -> tuple[int, int, int]:
    """``[H, W, C]`` of ``elements``: its prime factors, smallest first, multiplied into C until it
    reaches ``min_depth``, the rest dealt to H and W (H first, W whenever it is the smaller), H
    the larger (Vela's ReshapeToIncreaseDepth, regor/compiler/shape_util.hpp)."""
    factors: list[int] = []
    rest = elements
    factor = 2
    while rest > 1 and factor * factor <= rest:
        while rest % factor == 0:
            factors.append(factor)
            rest //= factor
        factor += 1 if factor == 2 else 2
    if rest > 1:
        factors.append(rest)
    depth, index = 1, 0
    while index < len(factors) and depth < min_depth:
        depth *= factors[index]
        index += 1
    height = width = 1
    for factor in factors[index:]:
        if width < height:
            width *= factor
        else:
            height *= factor
    return (max(height, width), min(height, width), depth)


def brick_elements(hw: HwConfig, step: KernelStep) -> int:
    """Elements of the step's output tile as the output unit walks it (:func:`output_unit_shape`),
    the last dimension rounded up to ``vector.channel_granule`` (channel bricks)."""
    shape = output_unit_shape(hw, step)
    granule = hw.vector.channel_granule
    if granule <= 1 or not shape:
        return prod(shape)
    return prod(shape[:-1]) * ceil_div(shape[-1], granule) * granule


def concat_brick_elements(hw: HwConfig, step: KernelStep) -> int:
    """Elements a CONCAT's tile writes where the config copies each input apart
    (``vector.concat_copy_per_input``) and it joins along the innermost axis: every input's channels
    rounded up to ``vector.channel_granule`` over all output positions (Vela 5.2 lowers a concatenation
    to one MemoryCopy per input, costed over its output slice in whole 16-channel bricks: a 96x96x1
    grayscale image tripled, three copies of 147,456 elements, 36,961 cycles each on the U55), a tile
    paying its share by output elements; else :func:`brick_elements`."""
    full = step.output_types[0].shape if step.output_types else ()
    axis = getattr(step.attribute, "axis", -1)
    if not hw.vector.concat_copy_per_input or step.op is not Op.CONCAT or not full or \
            axis not in (-1, len(full) - 1):
        return brick_elements(hw, step)
    granule = max(1, hw.vector.channel_granule)
    written = prod(full[:-1]) * sum(ceil_div(t.shape[-1], granule) * granule for t in step.input_types if t.shape)
    return math.ceil(written * out_elements(step) / max(1, prod(full)))


def rescale_cycles(hw: HwConfig, step: KernelStep) -> int | None:
    """A RESCALE where the config times it apart (``rescale_int<bits>`` in
    ``vector.cycles_per_element``, per output element of ``vector.rescale_micro_block``s: the
    Ethos-U85 runs it on its pooling path, micro-block by micro-block), else None."""
    if step.op is not Op.RESCALE or not step.input_types:
        return None
    per_element = hw.vector.cycles_per_element.get(f"rescale_int{step.input_types[0].dtype.bits}")
    if per_element is None:
        return None
    return math.ceil(micro_blocked_elements(output_unit_shape(hw, step), hw.vector.rescale_micro_block)
                     * per_element)


def per_channel_rescale_bytes(hw: HwConfig, step: KernelStep) -> int:
    """Bytes a per-channel RESCALE reads of its multipliers per output element where the output unit
    cannot scale by channel (``vector.per_channel_rescale_read_bytes``; 0 by default, and for
    any other step)."""
    per_element = hw.vector.per_channel_rescale_read_bytes
    if per_element <= 0 or step.op is not Op.RESCALE or len(step.input_types) < 2 or \
            prod(step.input_types[1].shape) <= 1:
        return 0
    return out_elements(step) * per_element


def transpose_cycles(hw: HwConfig, step: KernelStep) -> int | None:
    """A TRANSPOSE where the config runs it on the pooling path (``vector.transpose_micro_block``),
    else None: the output in micro-blocks of that ``[H, W, C]``, each costing
    ``vector.transpose_cycles_per_micro_block_bit`` cycles per bit of the input's element. On the
    Ethos-U85-256 a transpose is a 1x1 pooling whose output is written transposed; regor's
    EstimateMacCyclesPerBlock charges ``max(4, kernel elements) * ifm bits / 2`` cycles per
    1x2x16 micro-block, so an output of one channel pays for 16, two cycles per bit (16 for int8)."""
    if step.op is not Op.TRANSPOSE or not hw.vector.transpose_micro_block or not step.input_types:
        return None
    return transpose_shape_cycles(hw, out_shape(step), step.input_types[0].dtype.bits)


def transpose_fetched_elements(hw: HwConfig, step: KernelStep, read_bits: int = 0) -> int:
    """Input elements the transpose pass before a REDUCE_SUM over an axis other than the innermost
    fetches, for the whole operation, where ``vector.transpose_reductions`` says the NPU lowers it
    so (Vela's RewriteReduceSum: the input as ``[A, R, C]`` around the reduced axis R, transposed
    to ``[A, C, R]``, then summed along its last axis); else 0. The transpose writes its output in
    blocks of ``vector.transpose_block_bytes`` along C (``block`` positions; or
    ``vector.transpose_block_positions`` of the width), and every block
    fetches the whole input depth of the ``min(R, block)`` rows it spans (the pooling path's fetch,
    Vela's MeasureElementAccess): ``A * ceil(C / block) * min(R, block) * C`` elements. Without a
    block size it reads its input once. ``read_bits``: the width the values are read at, if not
    the input's (a folded widening RESCALE, see :func:`body_cycles`)."""
    if not hw.vector.transpose_reductions or step.op is not Op.REDUCE_SUM or not step.input_types:
        return 0
    shape = step.input_types[0].shape
    axis = getattr(step.attribute, "axis", len(shape) - 1)
    if not 0 <= axis < len(shape) - 1:
        return 0
    outer, reduced, inner = prod(shape[:axis]), shape[axis], prod(shape[axis + 1:])
    width_bytes = max(1, (read_bits or step.input_types[0].dtype.bits) // 8)
    block = hw.vector.transpose_block_bytes and hw.vector.transpose_block_positions.get(
        f"int{width_bytes * 8}", max(1, hw.vector.transpose_block_bytes // width_bytes))
    if block > 0:
        return outer * ceil_div(inner, block) * min(reduced, block) * inner
    return outer * reduced * inner


def reduction_transpose_cycles(hw: HwConfig, step: KernelStep, read_bits: int = 0) -> int:
    """The transpose pass before a REDUCE_SUM over an axis other than the innermost (its fetches,
    :func:`transpose_fetched_elements`, read at ``vector.transpose_read_bytes_per_cycle``, the TCM
    bandwidth if 0), else 0. The blocks are the whole operation's; a tile of it pays its share
    by output elements."""
    fetched = transpose_fetched_elements(hw, step, read_bits)
    if not fetched:
        return 0
    width_bytes = max(1, (read_bits or step.input_types[0].dtype.bits) // 8)
    share = out_elements(step) / max(1, prod(step.output_types[0].shape))
    rate = hw.vector.transpose_read_bytes_per_cycle or hw.tcm.bandwidth_bytes_per_cycle
    return math.ceil(fetched * share * width_bytes / rate)


def lowered_sum_cycles(hw: HwConfig, step: KernelStep, read_bits: int = 0) -> int:
    """A REDUCE_SUM where the NPU lowers sums (``vector.transpose_reductions``): the transpose
    (:func:`reduction_transpose_cycles`, for a sum over H or W), then the sum over the innermost
    axis, which reads its input through the lanes and writes each result as a brick of its own
    (its output's last dimension, 1, rounded up to ``vector.channel_granule``) at the
    output-unit rate of its dtype (``unary_int32`` for int32, else ``other``; Vela: about 8
    cycles per int32 result on the U55/U65)."""
    lanes = vector_cycles(work_elements(step), elements_per_cycle(hw, step_dtype(step)))
    kind = "unary_int32" if step.output_types[0].dtype is DType.INT32 else "other"
    per_element = hw.vector.cycles_per_element.get(kind)
    written = math.ceil(out_elements(step) * hw.vector.channel_granule * per_element) if per_element else 0
    return reduction_transpose_cycles(hw, step, read_bits) + max(lanes, written)


#: Reductions that keep an extreme (``reduce_minmax_int32`` in ``vector.cycles_per_element``).
MINMAX_OPS = frozenset({Op.REDUCE_MAX, Op.REDUCE_MIN})


def step_cycles(hw: HwConfig, step: KernelStep) -> int:
    return max(_step_cycles(hw, step), multiplier_fetch_cycles(hw, step))


def multiplier_fetch_cycles(hw: HwConfig, step: KernelStep) -> int:
    """Cycles a RESCALE by one 32-bit multiplier spends reading it from the constants' memory where
    the output unit cannot hold it (``vector.rescale_multiplier_fetch_bytes``; 0 by default, and for
    other steps): Vela 5.2 runs such a RESCALE on the U55 as a MUL by the int32 scalar in flash, and
    counts its 64 B at the burst efficiency of the output's rows (a [1, 16] int32 output: half a
    128-byte burst, 128 cycles at 1 B/cycle; [1, 64]: 64 cycles, below its 72 of work)."""
    per_op = hw.vector.rescale_multiplier_fetch_bytes
    if per_op <= 0 or step.op is not Op.RESCALE or len(step.input_types) < 2:
        return 0
    multiplier = step.input_types[1]
    if prod(multiplier.shape) != 1 or multiplier.dtype.bits != 32:
        return 0
    shape = output_unit_shape(hw, step)
    row_bytes = (shape[-1] if shape else 1) * 4
    efficiency = min(1.0, row_bytes / hw.ddr.burst_size_bytes)
    return math.ceil(per_op / efficiency / hw.ddr.bandwidth_bytes_per_cycle)


def _step_cycles(hw: HwConfig, step: KernelStep) -> int:
    if hw.vector.transpose_reductions and step.op is Op.REDUCE_SUM:
        return lowered_sum_cycles(hw, step)
    minmax = hw.vector.cycles_per_element.get("reduce_minmax_int32")
    if minmax is not None and step.op in MINMAX_OPS and step_dtype(step) is DType.INT32:
        return math.ceil(work_elements(step) * minmax)   # per element read
    apart = rescale_cycles(hw, step)
    if apart is None:
        apart = transpose_cycles(hw, step)
    if apart is not None:
        return apart
    table = hw.vector.cycles_per_element
    kinds = elementwise_kinds(step) if table else ()
    if kinds and all(kind in table for kind in kinds):
        per_element = sum(table[kind] for kind in kinds)
        return math.ceil(concat_brick_elements(hw, step) * per_element)
    return vector_cycles(work_elements(step), elements_per_cycle(hw, step_dtype(step)))


def folded_prologue(hw: HwConfig, steps: Sequence[KernelStep], index: int) -> KernelStep | None:
    """The widening RESCALE (an earlier step of the command) whose result REDUCE_SUM step
    ``index`` sums, where the NPU folds it into the sum (``vector.transpose_reductions``: the
    sum reads the narrow values and subtracts their zero point once per result, as Vela
    lowers it); else None."""
    step = steps[index]
    if not hw.vector.transpose_reductions or step.op is not Op.REDUCE_SUM or not step.operands:
        return None
    source = step.operands[0]
    if not isinstance(source, int) or not 0 <= source < index:
        return None
    rescale = steps[source]
    if rescale.op is not Op.RESCALE or rescale.input_types[0].dtype.bits >= rescale.output_types[0].dtype.bits:
        return None
    return rescale


#: Elementwise operators whose input and output RESCALEs of their own source operator the output
#: unit applies where a preset compiles as Vela's TFLite reader (``npu_support.source_operators``).
SOURCE_SCALED_OPS = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.MAXIMUM, Op.MINIMUM})


def rescale_folds(hw: HwConfig, steps: Sequence[KernelStep]) -> tuple[set[int], dict[int, KernelStep]]:
    """Where the output unit scales an elementwise operation's operands itself
    (``vector.scaled_ops``; Vela's GraphIrOptimiser::FuseRescale): the indices of the steps that
    cost nothing of their own (a RESCALE whose only reader is a scaled step, the RESCALE that
    alone reads that step's result, and a CLAMP on it, an activation of the same pass), and each
    scaled step as the unit runs it: its inputs and output of those far ends' types. With
    ``npu_support.source_operators`` an operator of :data:`SOURCE_SCALED_OPS` is scaled too, by
    the RESCALEs and CLAMP of its own source operator (:attr:`KernelStep.origin`)."""
    scaled_ops = {Op[name] for name in hw.vector.scaled_ops}
    by_source = hw.npu_support.source_operators
    if not scaled_ops and not by_source:
        return set(), {}
    uses = _reader_counts(steps)
    folded: set[int] = set()
    scaled: dict[int, KernelStep] = {}
    for i, step in enumerate(steps):
        origin = _scaling_origin(step, scaled_ops, by_source)
        if origin is None:
            continue
        inputs = _folded_inputs(steps, i, uses, origin)
        outputs = _folded_outputs(steps, i, uses, origin)
        folded.update(index for chain in inputs.values() for index in chain)
        folded.update(outputs)
        if inputs or outputs:
            ins = [steps[inputs[k][0]].input_types[0] if k in inputs else t for k, t in enumerate(step.input_types)]
            outs = [steps[outputs[-1]].output_types[0], *step.output_types[1:]] if outputs else list(step.output_types)
            scaled[i] = dataclasses.replace(step, input_types=tuple(ins), output_types=tuple(outs))
    return folded, scaled


def _scaling_origin(step: KernelStep, scaled_ops: set[Op], by_source: bool) -> str | None:
    """The source operator whose RESCALEs the output unit folds into ``step``: "" for any
    (``scaled_ops``), its own origin (``npu_support.source_operators``), None if it scales none."""
    if step.op in scaled_ops:
        return ""
    if by_source and step.origin and step.op in SOURCE_SCALED_OPS:
        return step.origin
    return None


def _reader_counts(steps: Sequence[KernelStep]) -> list[int]:
    """How many times later steps read each step's result."""
    uses = [0] * len(steps)
    for step in steps:
        for operand in step.operands:
            if isinstance(operand, int) and 0 <= operand < len(steps):
                uses[operand] += 1
    return uses


def _folded_inputs(steps: Sequence[KernelStep], index: int, uses: list[int], origin: str) -> dict[int, list[int]]:
    """Operand position -> the RESCALE step that step ``index`` alone reads there, the far end
    first; with an ``origin`` (not ""), the chain of RESCALEs of that origin each alone reading
    the one before (TFLite's ADD scales an input in two: widened, then scaled; a 16x8 one's
    widened by a CAST and a shift first)."""
    found: dict[int, list[int]] = {}
    for k, operand in enumerate(steps[index].operands[:len(steps[index].input_types)]):
        chain: list[int] = []
        while _folded_rescale(steps, operand, index if not chain else chain[0], uses, origin):
            chain.insert(0, operand)
            if not origin:
                break
            operand = steps[operand].operands[0] if steps[operand].operands else None
        if chain:
            found[k] = chain
    return found


#: What else scales a source operator's input before its RESCALEs: TFLite's 16x8 ADD and SUB
#: reach TOSA with one input widened by a CAST to int32 and a LOGICAL_LEFT_SHIFT (by 15) before
#: its RESCALE, which the Ethos-U output unit applies as that input's scale like the other's.
SOURCE_INPUT_SCALING = frozenset({Op.RESCALE, Op.CAST, Op.LOGICAL_LEFT_SHIFT})


def _folded_rescale(steps: Sequence[KernelStep], operand: object, reader: int, uses: list[int], origin: str) -> bool:
    """True if ``operand`` is a RESCALE step before ``reader`` that only it reads (of ``origin``
    unless ""; with an ``origin``, a CAST or LOGICAL_LEFT_SHIFT of it as well:
    :data:`SOURCE_INPUT_SCALING`)."""
    if not isinstance(operand, int) or not 0 <= operand < reader or uses[operand] != 1:
        return False
    step = steps[operand]
    if not origin:
        return step.op is Op.RESCALE
    return step.origin == origin and step.op in SOURCE_INPUT_SCALING


def _folded_outputs(steps: Sequence[KernelStep], index: int, uses: list[int], origin: str) -> list[int]:
    """The RESCALE alone reading step ``index``'s result, and a CLAMP alone reading that's (of
    ``origin`` unless "")."""
    chain, last = [], index
    for op in (Op.RESCALE, Op.CLAMP):
        nxt = _sole_reader(steps, last, uses, op)
        if nxt is not None and origin and steps[nxt].origin != origin:
            break
        if nxt is not None:
            chain.append(nxt)
            last = nxt
    return chain


def _sole_reader(steps: Sequence[KernelStep], index: int, uses: list[int], op: Op) -> int | None:
    """The step of kind ``op`` that alone reads step ``index``'s result, as its first operand."""
    if uses[index] != 1:
        return None
    return next((j for j in range(index + 1, len(steps)) if steps[j].op is op and steps[j].operands[:1] == (index,)),
                None)


def body_cycles(hw: HwConfig, steps: Sequence[KernelStep]) -> int:
    """The steps one after the other (:func:`step_cycles`), except that a widening RESCALE
    folded into the REDUCE_SUM it feeds (:func:`folded_prologue`) costs nothing of its own:
    the sum's transpose reads the narrow values, and the zero point is subtracted from each
    result (an int32 elementwise pass); nor do the rescales the output unit folds into an
    elementwise operation (:func:`rescale_folds`), which runs at the rate of the narrow data."""
    source = source_operator_cycles(hw, steps)
    if source is not None:
        return source
    folded = {id(p) for i in range(len(steps)) if (p := folded_prologue(hw, steps, i)) is not None}
    scaling, scaled = rescale_folds(hw, steps)
    total = 0
    for index, step in enumerate(steps):
        if id(step) in folded or index in scaling:
            continue
        step = scaled.get(index, step)
        prologue = folded_prologue(hw, steps, index)
        if prologue is None:
            total += step_cycles(hw, step)
            continue
        total += lowered_sum_cycles(hw, step, prologue.input_types[0].dtype.bits) + zero_point_cycles(hw, step)
    return total


def source_operator_cycles(hw: HwConfig, steps: Sequence[KernelStep]) -> int | None:
    """The steps as the TFLite operator they came from, where the preset compiles it as one
    (a softmax, a squared difference, a mean, an activation: :func:`source_softmax_cycles`,
    :func:`source_squared_difference_cycles`, :func:`source_mean_cycles`, :func:`source_activation_cycles`);
    None where they run as TOSA operations."""
    source = source_softmax_cycles(hw, steps)
    if source is None:
        source = source_squared_difference_cycles(hw, steps)
    if source is None:
        source = source_mean_cycles(hw, steps)
    if source is None:
        source = source_activation_cycles(hw, steps)
    return source


def source_mean_cycles(hw: HwConfig, steps: Sequence[KernelStep]) -> int | None:
    """A TFLite MEAN compiled as Vela's TFLite reader does (:mod:`scheduler.passes.source_means`):
    ``vector.cycles_per_element.source_mean`` per element its first sum reads (of the tile: the
    widening RESCALE's output before it); None for other steps (no sum, a lone step, steps of
    several source operators, a softmax's sum, or no such rate)."""
    rate = _one_source_rate(hw, steps, "source_mean")
    if rate is None:
        return None
    first_sum = next((step for step in steps if step.op is Op.REDUCE_SUM), None)
    if first_sum is None or any(step.op is Op.REDUCE_MAX for step in steps):   # (a softmax's sum)
        return None
    first = steps[0]
    return math.ceil((reduced_elements(first) if first.op is Op.REDUCE_SUM else out_elements(first)) * rate)


class StepFacts(Protocol):
    """What the source-operator checks read of a step: a kernel step, or a scheduler's step."""

    @property
    def op(self) -> Op: ...

    @property
    def origin(self) -> str: ...


#: The operators a TFLite activation that requantizes (RELU, RELU6) becomes: its RESCALE and CLAMP.
ACTIVATION_OPS = frozenset({Op.RESCALE, Op.CLAMP})


def source_activation_cycles(hw: HwConfig, steps: Sequence[KernelStep]) -> int | None:
    """A TFLite activation operator that requantizes (a RELU whose output scale is not its input's:
    the converter's RESCALE and CLAMP of one source operator, nothing else), or a QUANTIZE that
    requantizes (:func:`is_source_requantize`), as Vela runs it: an average-pool no-op on the
    pooling path (regor ArchEthosU55::UseAvgPoolNop: activations and quantizes; 4 x ifmBits / 2
    cycles per OFM micro-block), ``vector.cycles_per_element.source_activation`` per output element
    of 8-bit input (twice that for 16-bit); None for other steps."""
    if len(steps) == 1 and is_source_requantize(hw, steps[0]):
        rate: float | None = hw.vector.cycles_per_element["source_activation"]
    else:
        rate = _one_source_rate(hw, steps, "source_activation")
        if rate is not None and not ({step.op for step in steps} <= ACTIVATION_OPS
                                     and any(step.op is Op.CLAMP for step in steps)):
            rate = None
    if rate is None or not steps[0].input_types:
        return None
    width = max(1, steps[0].input_types[0].dtype.bits // 8)
    block = hw.vector.source_activation_micro_block
    last = steps[-1]
    if block:   # (the operation's micro-blocks: a tile pays its share by output elements)
        whole = tuple(last.output_types[0].shape)
        elements = micro_blocked_elements(whole, block) * out_elements(last) / max(1, prod(whole))
    else:
        elements = brick_elements(hw, last)
    return math.ceil(elements * rate * width)


def is_source_requantize(hw: HwConfig, step: KernelStep) -> bool:
    """True for a RESCALE of a TFLite operator (its origin) from 8 or 16 bits to 8 or 16 bits on a
    preset that compiles as Vela's TFLite reader (``npu_support.source_operators``, with a
    ``source_activation`` rate): the converter's whole form of a QUANTIZE that requantizes (a 16x8
    model's before each CONCATENATION whose inputs' scales differ), which Vela runs as an average-pool
    no-op (a U-Net 16x8's [1, 64, 64, 32] Quantize 131,552 cycles on the U55-256, Vela 5.2). The
    RESCALEs of other TFLite operators widen to or narrow from 32 or 48 bits."""
    if step.op is not Op.RESCALE or not step.origin or not hw.npu_support.source_operators \
            or "source_activation" not in hw.vector.cycles_per_element:
        return False
    if not step.input_types or not step.output_types:
        return False
    return step.input_types[0].dtype.bits <= 16 and step.output_types[0].dtype.bits <= 16


#: The operators that make a source operator's TOSA form a softmax's (TFLite's int8 SOFTMAX as
#: the converter writes it: a REDUCE_MAX, exp TABLEs, a REDUCE_SUM, ...).
SOFTMAX_MARKS = frozenset({Op.REDUCE_MAX, Op.TABLE, Op.REDUCE_SUM})


def source_softmax_cycles(hw: HwConfig, steps: Sequence[KernelStep]) -> int | None:
    """A TFLite SOFTMAX compiled as Vela's TFLite reader does (:mod:`scheduler.passes.source_softmax`):
    ``vector.cycles_per_element.source_softmax`` per element of its input (the first step's
    output: the input widened; ``source_softmax_int16`` where that input is int16, a 16x8 model's);
    None for other steps (no REDUCE_MAX, TABLE and REDUCE_SUM among steps of one source operator,
    or no such rate)."""
    if not is_source_softmax(hw, steps):
        return None
    rates = hw.vector.cycles_per_element
    wide = bool(steps[0].input_types) and steps[0].input_types[0].dtype is DType.INT16 \
        and "source_softmax_int16" in rates
    return math.ceil(out_elements(steps[0]) * rates["source_softmax_int16" if wide else "source_softmax"])


def source_softmax_bytes(hw: HwConfig, steps: Sequence[KernelStep]) -> int:
    """Bytes a TFLite SOFTMAX run as one operation reads from the constants' memory
    (``vector.source_softmax_read_bytes`` per element of its input; 0 by default, or for other steps)."""
    per_element = hw.vector.source_softmax_read_bytes
    if per_element <= 0 or not is_source_softmax(hw, steps):
        return 0
    return out_elements(steps[0]) * per_element


def source_operator_bytes(hw: HwConfig, steps: Sequence[KernelStep]) -> int:
    """Bytes a TFLite operator run as one operation reads from the constants' memory: a softmax's
    (:func:`source_softmax_bytes`) and a squared difference's zero constant
    (``vector.source_squared_difference_read_bytes`` per output element, where
    :func:`squared_difference_broadcasts`)."""
    per_element = hw.vector.source_squared_difference_read_bytes
    if per_element > 0 and is_source_squared_difference(hw, steps) and squared_difference_broadcasts(hw, steps):
        return out_elements(steps[-1]) * per_element
    return source_softmax_bytes(hw, steps)


#: The operators of TFLite's SQUARED_DIFFERENCE as the converter writes it (the inputs widened, their
#: difference, its square, the result scaled back; :mod:`scheduler.passes.source_squared_difference`).
SQUARED_DIFFERENCE_OPS = frozenset({Op.RESCALE, Op.SUB, Op.MUL, Op.RESHAPE})


def source_squared_difference_cycles(hw: HwConfig, steps: Sequence[KernelStep]) -> int | None:
    """A TFLite SQUARED_DIFFERENCE compiled as Vela's TFLite reader does:
    ``vector.cycles_per_element.source_squared_difference`` per output element in channel bricks (its
    casts, scaling MULs, SUB and square), and ``source_squared_difference_broadcast`` per output element
    where :func:`squared_difference_broadcasts`; None for other steps (no SUB and MUL among steps of one
    source operator, another operator among them, or no such rate)."""
    if not is_source_squared_difference(hw, steps):
        return None
    last = steps[-1]
    cycles = brick_elements(hw, last) * hw.vector.cycles_per_element["source_squared_difference"]
    if squared_difference_broadcasts(hw, steps):
        cycles += out_elements(last) * hw.vector.cycles_per_element["source_squared_difference_broadcast"]
    return math.ceil(cycles)


def squared_difference_broadcasts(hw: HwConfig, steps: Sequence[KernelStep]) -> bool:
    """Whether Vela adds its broadcast pass to a squared difference: on an NPU without double broadcast
    (a ``source_squared_difference_broadcast`` rate), an operator of fewer than four dimensions (a
    LayerNormalization over [1, 64, 96] gets the pass, 8 cycles an element on the U55-256; over
    [1, 8, 8, 32], and a FusedBatchNormV3 form over [1, 64, 1, 49], none, Vela 5.2)."""
    return "source_squared_difference_broadcast" in hw.vector.cycles_per_element and \
        len(steps[-1].output_types[0].shape) < 4


def is_source_squared_difference(hw: HwConfig, steps: Sequence[StepFacts]) -> bool:
    """True if ``steps`` are a TFLite SQUARED_DIFFERENCE ``hw`` compiles as Vela's TFLite reader does."""
    ops = {step.op for step in steps}
    return _one_source_rate(hw, steps, "source_squared_difference") is not None and \
        {Op.SUB, Op.MUL} <= ops <= SQUARED_DIFFERENCE_OPS


def is_source_softmax(hw: HwConfig, steps: Sequence[StepFacts]) -> bool:
    """True if ``steps`` are a TFLite SOFTMAX that ``hw`` compiles as Vela's TFLite reader does
    (:func:`source_softmax_cycles` times them): Vela's TFLite support runs it on the NPU of every
    Ethos-U, whatever its TOSA support says of the int32 steps of the converter's form."""
    return _one_source_rate(hw, steps, "source_softmax") is not None and \
        SOFTMAX_MARKS <= {step.op for step in steps}


def _one_source_rate(hw: HwConfig, steps: Sequence[StepFacts], kind: str) -> float | None:
    """``vector.cycles_per_element[kind]`` for two or more steps of one source operator (their
    shared, non-empty origin) on a preset that compiles as Vela's TFLite reader; else None."""
    rate = hw.vector.cycles_per_element.get(kind)
    if rate is None or not hw.npu_support.source_operators or len(steps) < 2 or not steps[0].origin:
        return None
    return rate if all(step.origin == steps[0].origin for step in steps) else None


def zero_point_cycles(hw: HwConfig, step: KernelStep) -> int:
    """An int32 elementwise pass over ``step``'s output (subtracting a folded zero point)."""
    per_element = hw.vector.cycles_per_element.get("binary_int32")
    if per_element is None:
        return vector_cycles(out_elements(step), elements_per_cycle(hw, DType.INT32))
    return math.ceil(brick_elements(hw, step) * per_element)


UNIT = ComputeUnit("vector", COMPUTE_OPS, step_cycles, body_cycles, fallback=True, label="the vector unit")
