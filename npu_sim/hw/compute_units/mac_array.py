"""The MAC array: an output-stationary systolic array of ``rows x cols`` processing elements.

A multiply-accumulate step (:data:`MAC_OPS`) of an ``M x N`` output with reduction depth
``K`` works through ``ceil(M/rows) * ceil(N/cols)`` output blocks of ``K*k_step`` cycles
each plus the skew of the operands across the PEs in use, ``k_step =
pe_cycles_per_mac[dtype]`` (1 for int8; a dtype the config does not list cannot run on the
array); with double-buffered accumulators consecutive blocks overlap (see
:func:`mac_array_cycles`); see :func:`mac_dims` for M, N, K of each operator (FFT2D/RFFT2D
run as DFT matrix products). Other steps of the command are the fused epilogue (RESCALE,
CLAMP, ADD, TABLE): the array drains ``cols`` results a cycle, so the epilogue streams
``ceil(out_elements / cols)`` cycles plus one per extra fused operator (its stages form one
output pipeline), pipelined with the array (see :func:`body_cycles`): it costs only its
drain beyond the MAC time, unless it is the slower stage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from math import prod
from typing import TYPE_CHECKING

from npu_sim.errors import ProgramError
from npu_sim.hw.compute_units import lut
from npu_sim.hw.compute_units.unit import ComputeUnit, ceil_div, out_elements, out_shape, transpose_shape_cycles
from npu_sim.program import KernelStep
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op

if TYPE_CHECKING:
    from npu_sim.hw.config import HwConfig

#: Operators the MAC array runs (multiply-accumulate reductions).
MAC_OPS = frozenset({Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.TRANSPOSE_CONV2D, Op.MATMUL,
                     Op.FFT2D, Op.RFFT2D})


def mac_array_cycles(m: int, n: int, k: int, rows: int, cols: int, k_step_cycles: int = 1,
                     accumulator_buffers: int = 1) -> int:
    """Cycles of an ``m x n`` output with reduction depth ``k`` on an output-stationary array.

    The output is cut into ``blocks = ceil(m/rows) * ceil(n/cols)`` blocks. A block
    takes ``k*k_step + skew`` cycles: its reduction, plus the skew of the operands
    across the PEs in use until the farthest one has its last pair,
    ``skew = min(m, rows) + min(n, cols) - 2`` (``rows + cols - 2`` on a full array; a
    matrix-vector product, ``m = 1``, only crosses the columns).

    * One accumulator per PE: blocks run one after the other, each paying the skew:
      ``blocks * (k*k_step + skew)``.
    * Two (double-buffered): a finished block moves to the shadow registers and shifts
      out, ``cols`` results a cycle (``min(m, rows)`` cycles), while the next block
      accumulates. The next block's operands follow the previous ones without a gap,
      so a block costs ``max(k*k_step, min(m, rows))`` and only the last block pays
      the skew: ``(blocks - 1) * max(k*k_step, min(m, rows)) + k*k_step + skew``.
    """
    if m <= 0 or n <= 0 or k <= 0:
        return 0
    blocks = ceil_div(m, rows) * ceil_div(n, cols)
    used_rows = min(m, rows)
    reduce_cycles = k * k_step_cycles
    block_cycles = reduce_cycles + used_rows + min(n, cols) - 2
    if accumulator_buffers < 2:
        return blocks * block_cycles
    return (blocks - 1) * max(reduce_cycles, used_rows) + block_cycles


def supports(hw: HwConfig, dtype: DType) -> bool:
    """True if the array has a rate for ``dtype`` operands (else the operator runs on the vector unit)."""
    return dtype.name.lower() in hw.mac_array.macs_per_cycle


def k_step_cycles(hw: HwConfig, dtype: DType) -> int:
    """Cycles per K step of the MAC array for ``dtype`` operands (1 for int8)."""
    cycles = hw.mac_array.pe_cycles_per_mac.get(dtype.name.lower())
    if cycles is None:
        raise ProgramError(f"the mac_array of {hw.name or 'this config'} has no {dtype.name} rate "
                           f"(configured: {', '.join(sorted(hw.mac_array.pe_cycles_per_mac))})")
    return cycles


def mac_dims(step: KernelStep) -> tuple[int, int, int]:
    """``(M, N, K)`` of a MAC operator: output rows x output channels x reduction depth."""
    out = out_shape(step)
    op = step.op
    if op is Op.CONV2D:  # weights [OC, KH, KW, IC]
        _, kh, kw, ic = step.input_types[1].shape
        return out[0] * out[1] * out[2], out[3], kh * kw * ic
    if op is Op.CONV3D:  # weights [OC, KD, KH, KW, IC]
        _, kd, kh, kw, ic = step.input_types[1].shape
        return out[0] * out[1] * out[2] * out[3], out[4], kd * kh * kw * ic
    if op is Op.DEPTHWISE_CONV2D:  # weights [KH, KW, C, M]: one PE column per output channel
        kh, kw, _, _ = step.input_types[1].shape
        return out[0] * out[1] * out[2], out[3], kh * kw
    if op is Op.TRANSPOSE_CONV2D:  # each output sees ceil(KH/sy)*ceil(KW/sx) taps of each IC
        _, kh, kw, ic = step.input_types[1].shape
        sy, sx = (tuple(step.attribute.stride) + (1, 1))[:2]
        return out[0] * out[1] * out[2], out[3], ceil_div(kh, max(sy, 1)) * ceil_div(kw, max(sx, 1)) * ic
    if op is Op.MATMUL:  # A [N, H, C] x B [N, C, W]
        return out[0] * out[1], out[2], step.input_types[0].shape[2]
    if op in (Op.FFT2D, Op.RFFT2D):  # a DFT as a matrix product: every output sums H*W inputs
        _, h, w = step.input_types[0].shape[:3]
        real_macs_per_term = 4 if op is Op.FFT2D else 2  # complex x complex, or real x complex
        return out[0] * out[1], out[2], real_macs_per_term * h * w
    raise ProgramError(f"{step.name or op.name}: {op.name} is not a multiply-accumulate operator")


def step_macs(step: KernelStep) -> int:
    """Multiply-accumulates a step performs (0 for non-MAC operators), on whatever unit."""
    if step.op not in MAC_OPS:
        return 0
    m, n, k = mac_dims(step)
    return m * n * k


def depthwise_floor_cycles(hw: HwConfig, step: KernelStep) -> int:
    """Depthwise convolutions use few of the array's MACs (one input channel per output):
    at least ``macs / depthwise_macs_per_cycle`` cycles where that rate is configured, the
    rate of int8 operands: a wider dtype takes its ``pe_cycles_per_mac`` times as long (Vela's
    U55 depthwise: 4 x ifmBits / 8 cycles per micro-block and kernel step)."""
    rate = hw.mac_array.depthwise_macs_per_cycle
    if rate <= 0 or step.op is not Op.DEPTHWISE_CONV2D:
        return 0
    return ceil_div(step_macs(step) * k_step_cycles(hw, step.input_types[0].dtype), rate)


def depth_multiplier(step: KernelStep) -> int:
    """The depth multiplier M of a DEPTHWISE_CONV2D (weights ``[KH, KW, C, M]``); 1 for other steps."""
    if step.op is not Op.DEPTHWISE_CONV2D or len(step.input_types) < 2 or len(step.input_types[1].shape) != 4:
        return 1
    return step.input_types[1].shape[3]


def split_transpose_shapes(m: int, h: int, w: int, c: int) -> tuple[tuple[int, int, int], ...]:
    """The output shapes of the seven 3-D transposes that take an ``[M, H, W, C]`` map to
    ``[H, W, C, M]`` as Vela 5.2 decomposes that permutation (regor scheduler_decompose.cpp,
    DecomposeTranspose: a selection sort of the axes, each swap of two axes of a 4-D shape made of
    3-D swaps, SwapAxes): M past H (1), M past W (2-6: M to the front, W to the back, the edges
    swapped, each moved back) and M past C (7)."""
    return ((h, m, w * c), (m, h, w * c), (m * h, c, w), (w, h * c, m), (w * h, m, c), (h, w, m * c),
            (h * w, c, m))


def depth_multiplier_split_cycles(hw: HwConfig, step: KernelStep) -> int:
    """The transposes a depthwise convolution of depth multiplier M > 1 over C > 1 channels adds where
    the config splits it (``mac_array.depth_multiplier_split``; 0 otherwise). Vela 5.2 runs it as M
    depthwise convolutions of C channels each (the same MACs as ours: their cost is the step's)
    writing an ``[M, H, W, C]`` map, then transposes that to the output's ``[H, W, C, M]`` order in
    seven 3-D transposes (:func:`split_transpose_shapes`), each of every element of the output, per
    batch: on the vector unit's transpose path where it has one (``vector.transpose_micro_block``),
    else at ``depth_multiplier_transpose_cycles_per_element`` of the map's dtype (the input's). With C = 1 Vela
    makes it a CONV2D instead (graphir_optimiser.cpp): nothing to add. A tile pays its share by
    output elements."""
    m = depth_multiplier(step)
    if not hw.mac_array.depth_multiplier_split or m <= 1 or not step.output_types:
        return 0
    full = step.output_types[0].shape
    if len(full) != 4 or full[3] // m <= 1:
        return 0
    batches, h, w, c = full[0], full[1], full[2], full[3] // m
    dtype = step.input_types[0].dtype   # the rescaled map's: as wide as the input (int8, int16)
    per_element = hw.mac_array.depth_multiplier_transpose_cycles_per_element.get(dtype.name.lower())
    shapes = split_transpose_shapes(m, h, w, c)
    if per_element is not None:
        whole = len(shapes) * prod(full) * per_element
    else:
        whole = batches * sum(transpose_shape_cycles(hw, shape, dtype.bits) for shape in shapes)
    return math.ceil(whole * out_elements(step) / prod(full))


def cycle_dims(hw: HwConfig, step: KernelStep) -> tuple[int, int, int]:
    """``(M, N, K)`` as the array spends cycles on them: a TRANSPOSE_CONV2D's whole kernel where
    ``mac_array.transpose_conv_upsampled`` (Vela upsamples its input on the U55/U65 and decomposes
    its stride on the U85, both over every output position); a convolution's input channels
    rounded up to ``mac_array.ifm_depth_granule`` (the channels it reads per group), or where
    that wastes more, its kernel elements rounded up to ``mac_array.part_kernel_elements`` and
    its channels to ``part_kernel_depth_granule`` (:func:`part_kernel_depth`)."""
    m, n, k = mac_dims(step)
    if step.op in (Op.CONV2D, Op.CONV3D) and hw.mac_array.ofm_micro_block:
        m = micro_blocked_positions(hw.mac_array.ofm_micro_block, step, m)
    if step.op is Op.TRANSPOSE_CONV2D and hw.mac_array.transpose_conv_upsampled:
        k = prod(step.input_types[1].shape[1:])   # every tap of the kernel for every output
    granule = ifm_depth_granule(hw, step.input_types[0].dtype)
    if granule > 1 and step.op in (Op.CONV2D, Op.CONV3D):
        channels = step.input_types[1].shape[-1]
        elements = k // channels
        depth_first = elements * ceil_div(channels, granule) * granule
        k = part_kernel_depth(hw, elements, channels, granule, step.input_types[0].dtype) or depth_first
    return m, n, k


def ifm_depth_granule(hw: HwConfig, dtype: DType) -> int:
    """The group of input channels a convolution of ``dtype`` input reads at a time
    (``mac_array.ifm_depth_granule_by_dtype``, else ``ifm_depth_granule``)."""
    return hw.mac_array.ifm_depth_granule_by_dtype.get(dtype.name.lower(), hw.mac_array.ifm_depth_granule)


def micro_blocked_positions(block: Sequence[int], step: KernelStep, positions: int) -> int:
    """``positions`` output positions of a convolution step as the array computes them in
    ``[H, W]`` micro-blocks: the operation's whole output rounded up to whole micro-blocks, a tile
    paying its share (Vela's U55/U65: 2x2x8 OFM micro-blocks, EstimateMacCyclesPerBlock; a
    25x5 output is computed as 26x6). Where the block is 2 high, a one-row output of even width
    from a one-row kernel is computed in blocks one high and twice as wide (GetOfmMicroBlock).
    A matrix-vector product (one output position) is bound by its weights, not its
    micro-blocks: it keeps its one position."""
    whole = step.output_types[0].shape if step.output_types else ()
    if len(whole) < 3 or prod(whole[:-1]) <= 1:
        return positions
    height, width = prod(whole[:-2]), whole[-2]
    block_h, block_w = block[0], block[-1]
    one_row_kernel = step.op is Op.CONV2D and len(step.input_types) > 1 and step.input_types[1].shape[1] == 1
    if block_h == 2 and height == 1 and width % 2 == 0 and one_row_kernel:
        block_h, block_w = 1, 2 * block_w
    rounded = ceil_div(height, block_h) * block_h * ceil_div(width, block_w) * block_w
    return math.ceil(positions * rounded / max(1, height * width))


def part_kernel_depth(hw: HwConfig, elements: int, channels: int, granule: int | None = None,
                      dtype: DType | None = None) -> int:
    """The reduction depth of a part-kernel-first convolution of ``elements`` kernel elements over
    ``channels`` input channels, where the config has that traversal and chooses it
    (``mac_array.part_kernel_choice``, :func:`_part_kernel_chosen`; 0 otherwise): its kernel
    elements in steps of ``part_kernel_elements`` (of ``dtype``'s, where
    ``part_kernel_elements_by_dtype`` gives one), its channels in blocks of
    ``part_kernel_ifm_block_depth`` each in groups of ``part_kernel_depth_granule``. Vela's
    EstimateMacCyclesPerBlock steps over 4 kernel elements at a time (U55/U65; the U85 over 4 of an
    8-bit input, 2 of a 16-bit one, and 16-channel IFM blocks)."""
    config = hw.mac_array
    per_step = config.part_kernel_elements_by_dtype.get(dtype.name.lower(), config.part_kernel_elements) \
        if dtype is not None else config.part_kernel_elements
    depth = config.part_kernel_depth_granule
    if config.part_kernel_elements <= 0 or not _part_kernel_chosen(hw, elements, channels, granule):
        return 0
    block = config.part_kernel_ifm_block_depth or channels
    slots = ceil_div(channels, block) * ceil_div(min(channels, block), depth) * depth
    return ceil_div(elements, per_step) * per_step * slots


def _part_kernel_chosen(hw: HwConfig, elements: int, channels: int, granule: int | None) -> bool:
    """Whether the config traverses a convolution of ``elements`` kernel elements over ``channels``
    input channels part-kernel first (``mac_array.part_kernel_choice``):

    * ``ifm_groups`` (regor ethos_u55.cpp ChooseKernelMethod): for 8 channels or fewer, or when the
      channels' use of their groups of ``part_kernel_depth_granule`` times the kernel elements' use of
      their groups of ``part_kernel_elements`` is at least the channels' use of their groups of
      ``granule`` (32 for 8 bits);
    * ``kernel_first`` (regor ethos_u85.cpp ChooseKernelFirst, dense weights): when the channels' use of
      groups of 16 times ``elements / k_rnd`` (``k_rnd``: the elements in steps of 5, a remainder
      counted as at least 2) is at least the channels' use of groups of 64: every 3x3 convolution of
      16, 32, 48 or 64 channels and more, none of 1x1."""
    config = hw.mac_array
    if config.part_kernel_choice == "kernel_first":
        k_rnd = (elements // 5) * 5 + max(elements % 5, 2)
        kernel_first = channels / (ceil_div(channels, 16) * 16) * elements / k_rnd
        return kernel_first >= channels / (ceil_div(channels, 64) * 64)
    per_step, depth = config.part_kernel_elements, config.part_kernel_depth_granule
    granule = granule or config.ifm_depth_granule
    part_use = channels / (ceil_div(channels, depth) * depth) * elements / (ceil_div(elements, per_step) * per_step)
    return channels <= depth or part_use >= channels / (ceil_div(channels, granule) * granule)


#: Operators that re-read their output channels' scales and biases (and, where the config gives
#: OFM blocks, depthwise convolutions too; see :func:`channel_parameter_cycles`).
PARAMETER_OPS = frozenset({Op.CONV2D, Op.CONV3D})
BLOCKED_PARAMETER_OPS = PARAMETER_OPS | {Op.DEPTHWISE_CONV2D}


def ofm_blocks(hw: HwConfig, step: KernelStep) -> int:
    """OFM blocks (in H x W) the array walks a step's output in: a block holds
    ``mac_array.ofm_block_elements`` results over ``min(channels, ofm_block_max_depth)``
    channels, so ``elements // depth`` output positions; 1 where the config gives no block
    size (a command is one block). Deeper blocks cover all channels of their positions in
    turn, so only the H x W blocks count. Where a block of ``ofm_block_min_depth`` channels
    holds all of the operation's output positions, they are one block (Vela gives a small map,
    a 7x7 layer or a 49-token sequence, blocks covering it whole: [7, 8, 32]). The block shape
    is the operation's (its whole output's channels), however the scheduler tiles it."""
    capacity = hw.mac_array.ofm_block_elements
    if capacity <= 0:
        return 1
    out = out_shape(step)
    full = step.output_types[0].shape if step.output_types else out
    shallowest = hw.mac_array.ofm_block_min_depth
    if shallowest > 0 and prod(full[:-1]) * shallowest <= capacity:
        return 1
    channels = full[-1] if full else 1
    cap = hw.mac_array.ofm_block_max_depth
    depth = min(channels, cap) if cap > 0 else channels
    return ceil_div(prod(out[:-1]), max(1, capacity // max(depth, 1)))


def channel_parameter_cycles(hw: HwConfig, step: KernelStep) -> int:
    """Cycles a convolution spends reading its output channels' scales and biases:
    ``mac_array.channel_parameter_read_cycles`` per output channel and OFM block
    (:func:`ofm_blocks`; 0 by default). The hardware re-reads them for every block from the
    constants' memory, a stream beside the MAC work (:func:`body_cycles` takes the longer of
    the two). Depthwise convolutions pay only where the config gives a block size: Vela
    charges them too, but per command our depthwise tiles are far smaller than its blocks
    (MobileNetV2's depthwise layers on the U65: 1.63x Vela with, 1.08x without)."""
    rate = hw.mac_array.channel_parameter_read_cycles
    paying = BLOCKED_PARAMETER_OPS if hw.mac_array.ofm_block_elements > 0 else PARAMETER_OPS
    if rate <= 0 or step.op not in paying:
        return 0
    return math.ceil(rate * out_shape(step)[-1] * ofm_blocks(hw, step))


def channel_parameter_bytes(hw: HwConfig, step: KernelStep) -> int:
    """Bytes a convolution's tile reads again of its output channels' scales and biases
    (``mac_array.channel_parameter_bytes`` per output channel, once per operation: a tile pays its
    share by output elements; 0 by default), from the constants' memory while it computes."""
    per_channel = hw.mac_array.channel_parameter_bytes
    if per_channel <= 0 or step.op not in BLOCKED_PARAMETER_OPS or not step.output_types:
        return 0
    full = step.output_types[0].shape
    whole = prod(full)
    share = out_elements(step) / whole if whole else 1.0
    return math.ceil(per_channel * (full[-1] if full else 1) * share)


#: Convolutions that run one output position at a time beyond ``mac_array.max_stride``.
STRIDED_OPS = frozenset({Op.CONV2D, Op.DEPTHWISE_CONV2D})


def decomposed_positions(hw: HwConfig, step: KernelStep) -> int:
    """Output positions (H x W) of a convolution's tile where its stride exceeds
    ``mac_array.max_stride``, else 0. Such a convolution runs as one operation per output
    position, over all its channels (regor's DecomposeConv2D, scheduler_decompose.cpp: Vela 5.2
    compiles a 4x4 stride-4 patch embedding of an 8x8 output as 64 operations, a 1x5 stride-5
    convolution of an 8x40 output as 320)."""
    limit = hw.mac_array.max_stride
    if limit <= 0 or step.op not in STRIDED_OPS:
        return 0
    stride = getattr(step.attribute, "stride", ())
    if not stride or max(stride) <= limit:
        return 0
    return prod(out_shape(step)[:-1])


def weight_stream_bytes(step: KernelStep) -> int:
    """Bytes of a convolution's weight stream: its weights and its biases (operands 1 and 2)."""
    return sum(t.size_bytes for t in step.input_types[1:3])


def decomposed_cycles(hw: HwConfig, step: KernelStep) -> int:
    """Cycles of a convolution's tile run one output position at a time
    (:func:`decomposed_positions`): each position's operation fetches the whole weight stream,
    ``mac_array.decomposed_fetch_latency_cycles`` and then its bytes at
    ``mac_array.decomposed_fetch_bytes_per_cycle``; 0 for other steps."""
    positions = decomposed_positions(hw, step)
    if not positions:
        return 0
    fetch = hw.mac_array.decomposed_fetch_latency_cycles + \
        weight_stream_bytes(step) / hw.mac_array.decomposed_fetch_bytes_per_cycle
    return math.ceil(positions * fetch)


def decomposed_read_bytes(hw: HwConfig, step: KernelStep) -> int:
    """Off-chip bytes a convolution's tile reads again where it runs one output position at a time:
    every position fetches the weight stream, the plan loads it once (a tile pays its share of
    the other positions' fetches); 0 for other steps."""
    positions = decomposed_positions(hw, step)
    if not positions:
        return 0
    full = step.output_types[0].shape
    total = prod(full[:-1])
    return math.ceil(weight_stream_bytes(step) * positions * (total - 1) / total) if total > 1 else 0


#: Operators whose weights (operand 1, a constant) go through the weight decoder.
DECODED_WEIGHT_OPS = frozenset({Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.TRANSPOSE_CONV2D})


def weight_decode_cycles(hw: HwConfig, step: KernelStep) -> int:
    """Cycles the weight decoder takes for a convolution's weights
    (``mac_array.weight_decode_weights_per_cycle``; 0 by default): the operation's weights are
    decoded once, a tile pays its share by output elements. It streams beside the MAC work
    (:func:`body_cycles` takes the longer). Vela's U85: 8 weights a cycle for weights with
    at most half zeros (WeightDecodeCycles)."""
    rate = hw.mac_array.weight_decode_weights_per_cycle
    if rate <= 0 or step.op not in DECODED_WEIGHT_OPS or len(step.input_types) < 2:
        return 0
    whole = prod(step.output_types[0].shape) if step.output_types else 0
    share = out_elements(step) / whole if whole else 1.0
    return math.ceil(prod(step.input_types[1].shape) * share / rate)


def step_cycles(hw: HwConfig, step: KernelStep) -> int:
    """A MAC step on the array; an epilogue step alone drains ``cols`` results a cycle."""
    if step.op is Op.MATMUL and hw.mac_array.matmul_by_columns:
        return matmul_by_columns_cycles(hw, step)
    if step.op in MAC_OPS:
        m, n, k = cycle_dims(hw, step)
        cycles = mac_array_cycles(m, n, k, hw.mac_array.rows, hw.mac_array.cols,
                                  k_step_cycles(hw, step.input_types[0].dtype),
                                  hw.mac_array.accumulator_buffers)
        return max(cycles, depthwise_floor_cycles(hw, step)) + depth_multiplier_split_cycles(hw, step)
    return ceil_div(out_elements(step), hw.mac_array.cols)


def matmul_by_columns_cycles(hw: HwConfig, step: KernelStep) -> int:
    """A MATMUL ``A [N, H, C] x B [N, C, W]`` as an NPU without such a product runs it
    (``mac_array.matmul_by_columns``): per output column, A times that column of B broadcast
    (an int32 MUL over A's elements at ``vector.cycles_per_element.mul_int32``) and the sum of
    each row over C (``cols`` results a cycle). The transformer attention of a keyword model
    on Vela's U55: 370,088 cycles for its four products of 2 x 49 x 32 x 49 MACs."""
    n, h, w = out_shape(step)[:3]
    a_elements = n * h * step.input_types[0].shape[2]
    mul_rate = hw.vector.cycles_per_element.get("mul_int32", 1.0)
    return w * (math.ceil(a_elements * mul_rate) + ceil_div(a_elements, hw.mac_array.cols))


def body_cycles(hw: HwConfig, steps: Sequence[KernelStep]) -> int:
    """Cycles of a MAC-array command's steps, the epilogue pipelined behind the array.

    The fused epilogue operators are stages of one output pipeline: every result goes
    through all of them in turn, ``cols`` results a cycle (each stage keeps that rate),
    so the epilogue streams an output of ``out`` elements in ``ceil(out / cols)`` cycles
    plus one cycle per stage after the first (its depth), not once per operator. (Vela's
    Ethos-U model likewise takes the slowest of its output and activation stages per
    element, not their sum.)

    The array works through ``ceil(M/rows) * ceil(N/cols)`` output blocks of
    ``rows x cols`` results; each block drains into the epilogue as soon as it is done,
    so the two run as a two-stage pipeline over those blocks:

        body = max(mac + epilogue_block, mac_block + epilogue)

    ``mac`` is the MAC step cycles, ``epilogue`` the epilogue's cycles over the whole
    output and ``epilogue_block`` over one output block (``min(rows*cols, out)``
    results): the drain of the last block after the array is done. ``mac_block`` is the
    array cycles of one block, ``K*k_step`` plus the skew: the fill before the first
    results reach the epilogue. For equal blocks this is exactly a two-stage pipeline;
    in the usual MAC-bound case it is ``mac + epilogue_block``. Without epilogue,
    ``body = mac``. A lookup in the epilogue (a TABLE: the result's activation) drains at
    ``mac_array.lut_epilogue_cycles_per_element`` where that is slower (Vela's U55/U65 output
    stage: the slower of its output and activation rates, 1 cycle an element for a LUT on the
    U55-256), after its table's load into the LUT memory (:func:`lut.table_load_cycles`, on the
    operation's first tile). The scale and bias reads (:func:`channel_parameter_cycles`) and the
    weight decoder (:func:`weight_decode_cycles`; with the weight fetches of a convolution run
    one output position at a time, :func:`decomposed_cycles`) stream beside both; the body is
    at least as long as each of them.
    """
    rows, cols = hw.mac_array.rows, hw.mac_array.cols
    mac = mac_block = parameters = decode = table_load = 0
    stages = out = 0
    per_element = 0.0
    for step in steps:
        if step.op in MAC_OPS:
            mac += step_cycles(hw, step)
            parameters += channel_parameter_cycles(hw, step)
            decode += weight_decode_cycles(hw, step) + decomposed_cycles(hw, step)
            m, n, k = cycle_dims(hw, step)
            mac_block = max(mac_block, mac_array_cycles(min(m, rows), min(n, cols), k, rows, cols,
                                                        k_step_cycles(hw, step.input_types[0].dtype)))
        else:
            stages += 1
            out = max(out, out_elements(step))
            if step.op is Op.TABLE:
                per_element = hw.mac_array.lut_epilogue_cycles_per_element
                table_load += lut.table_load_cycles(hw, step) if lut.first_tile(step) else 0
    if not stages:
        return max(mac, parameters, decode)
    depth = stages - 1
    epilogue = max(ceil_div(out, cols), math.ceil(out * per_element)) + depth
    block = min(rows * cols, out)
    epilogue_block = max(ceil_div(block, cols), math.ceil(block * per_element)) + depth
    return max(mac + epilogue_block, mac_block + epilogue, parameters, decode) + table_load


def pe_cycles(hw: HwConfig, steps: Sequence[KernelStep]) -> int:
    """PE-cycles the array's peak needs for the steps' MACs: each MAC takes ``k_step``
    PE-cycles of its dtype (``pe_cycles_per_mac[dtype]``, 1 for int8).
    ``mac_utilization`` divides this by ``cycles * rows * cols``, so an fp32 graph is
    measured against the fp32 peak, not the int8 one."""
    return sum(step_macs(step) * k_step_cycles(hw, step.input_types[0].dtype)
               for step in steps if step.op in MAC_OPS)


UNIT = ComputeUnit("mac_array", MAC_OPS, step_cycles, body_cycles,
                   label="the mac_array", required_step="a multiply-accumulate step")
