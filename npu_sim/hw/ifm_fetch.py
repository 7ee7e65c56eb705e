"""IFM fetches: what an NPU reading its input feature map where it lives fetches, block by block.

An Ethos-U65/U85 walks a convolution's or pooling's output in OFM blocks and fetches, for every
block, the input window that block needs (its halo included) across the whole input depth: an
input left in the DRAM crosses the bus once per OFM block, and a convolution's deeper output
(several depth blocks) reads it once per depth block. Vela's cost model counts exactly that
(regor ``ethos_u85_performance.cpp`` / ``ethos_u55_performance.cpp``, ``MeasureElementAccess``:
``ifmRead = ifmBlock.ElementsWH * ifm.Depth * subkernels * ofmBlockCount``; depthwise and pooling
count only the blocks in H x W), and its DRAM feature-map reads of ResNet-50 on the U85 are
4-35x the tensors' sizes. Where a preset sets ``tcm.ddr_ifm_refetch``, the scheduler charges a
tile reading such an input these fetches beyond the one copy its DMA brings into the TCM; so does
the transpose before a sum over H or W (``vector.transpose_reductions``: :func:`block_fetched_bytes`).

The OFM block is the MAC array's (``mac_array.ofm_block_elements`` results over at most
``ofm_block_max_depth`` channels; a small map is one block, ``ofm_block_min_depth``); its H x W
shape is the one that needs the fewest input elements per output position (Vela searches its
block configurations for the cheapest). Pure functions of the HwConfig and a kernel step.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from math import prod
from typing import TYPE_CHECKING, Any

from npu_sim.hw.compute_units.unit import ceil_div, out_shape
from npu_sim.hw.compute_units.vector import folded_prologue, source_operator_cycles, transpose_fetched_elements
from npu_sim.memory_layout import element_size_bytes
from npu_sim.program import KernelStep
from npu_sim.tosa.ops import Op

if TYPE_CHECKING:
    from npu_sim.hw.config import HwConfig

#: Operators whose output the NPU walks in OFM blocks, fetching their input per block.
BLOCK_FETCH_OPS = frozenset({Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.AVG_POOL2D, Op.MAX_POOL2D})
#: Of those, the ones that reduce over the whole input depth: each OFM depth block fetches it all.
DEPTH_REDUCING_OPS = frozenset({Op.CONV2D})
#: A sum whose NPU lowering transposes its input, and the widening RESCALE it may read through.
TRANSPOSED_SUM_OPS = frozenset({Op.REDUCE_SUM, Op.RESCALE})
#: Largest kernel one pass takes in H and W; a larger kernel is split into sub-kernels, each
#: fetching the input again (regor ``s_SubkernelLimits``: 8 x 8 for convolution and pooling).
SUBKERNEL_LIMIT = 8


def _kernel(step: KernelStep) -> tuple[int, int, int, int, int, int]:
    """``(kh, kw, stride_h, stride_w, dilation_h, dilation_w)`` of a block-fetching step."""
    attribute = step.attribute
    sy, sx = (tuple(attribute.stride) + (1, 1))[:2]
    if step.op is Op.CONV2D:   # weights [OC, KH, KW, IC]
        _, kh, kw, _ = step.input_types[1].shape
    elif step.op is Op.DEPTHWISE_CONV2D:   # weights [KH, KW, C, M]
        kh, kw, _, _ = step.input_types[1].shape
    else:
        kh, kw = (tuple(attribute.kernel) + (1, 1))[:2]
    dy, dx = (tuple(getattr(attribute, "dilation", ())) + (1, 1))[:2]
    return kh, kw, max(sy, 1), max(sx, 1), max(dy, 1), max(dx, 1)


@lru_cache(maxsize=4096)
def block_shape(positions: int, tile_h: int, tile_w: int, kernel: tuple[int, int, int, int, int, int],
                ifm_h: int, ifm_w: int) -> tuple[int, int, int, int]:
    """``(block_h, block_w, window_h, window_w)``: the OFM block of at most ``positions`` output
    positions within a ``tile_h x tile_w`` tile whose input window (clipped to the input's
    ``ifm_h x ifm_w``) is the smallest per output position (ties: the wider block)."""
    kh, kw, sy, sx, dy, dx = kernel
    best: tuple[float, int, int, int, int] | None = None
    for bw in range(1, min(tile_w, positions) + 1):
        bh = min(tile_h, max(1, positions // bw))
        wh = min(ifm_h, (bh - 1) * sy + (kh - 1) * dy + 1)
        ww = min(ifm_w, (bw - 1) * sx + (kw - 1) * dx + 1)
        per_position = wh * ww / (bh * bw)
        if best is None or per_position <= best[0]:
            best = (per_position, bh, bw, wh, ww)
    assert best is not None
    return best[1], best[2], best[3], best[4]


def ofm_block_geometry(hw: HwConfig, step: KernelStep) -> tuple[int, int]:
    """``(positions, depth)`` of an OFM block of ``step``'s operation: the output positions and
    channels one block holds (the whole operation's output sets it, however it is tiled)."""
    full = tuple(step.output_types[0].shape)
    channels = full[-1]
    capacity = hw.mac_array.ofm_block_elements
    if capacity <= 0:
        return prod(full[:-1]), channels
    shallowest = hw.mac_array.ofm_block_min_depth
    if shallowest > 0 and prod(full[:-1]) * shallowest <= capacity:
        return prod(full[:-1]), channels
    cap = hw.mac_array.ofm_block_max_depth
    depth = min(channels, cap) if cap > 0 else channels
    return max(1, capacity // max(depth, 1)), depth


def ifm_fetch_elements(hw: HwConfig, step: KernelStep) -> int:
    """Input elements ``step``'s tile fetches block by block (0 for other operators): per OFM block
    of the whole operation (in H x W, and in depth for a convolution) the block's input window across
    the whole input depth, once per sub-kernel; a tile takes its share by output elements (the
    blocks are the operation's, however the scheduler tiles it)."""
    if step.op not in BLOCK_FETCH_OPS:
        return 0
    full = tuple(step.output_types[0].shape)
    n, out_h, out_w, channels = full
    _, ifm_h, ifm_w, ifm_c = step.input_types[0].shape
    kernel = _kernel(step)
    positions, depth = ofm_block_geometry(hw, step)
    bh, bw, wh, ww = block_shape(positions, out_h, out_w, kernel, ifm_h, ifm_w)
    blocks = n * ceil_div(out_h, bh) * ceil_div(out_w, bw)
    if step.op in DEPTH_REDUCING_OPS:
        blocks *= ceil_div(channels, depth)
    subkernels = ceil_div(kernel[0], SUBKERNEL_LIMIT) * ceil_div(kernel[1], SUBKERNEL_LIMIT)
    return _tile_share(blocks * subkernels * wh * ww * ifm_c, step)


def _tile_share(whole: int, step: KernelStep[Any]) -> int:
    """A tile's share, by output elements, of ``whole`` fetched for the whole operation (the
    blocks are the operation's, however the scheduler tiles it)."""
    return whole * prod(out_shape(step)) // max(1, prod(step.output_types[0].shape))


def block_fetched_bytes(hw: HwConfig, steps: Sequence[KernelStep[Any]], s: int) -> int:
    """Bytes of step ``s``'s input (operand 0) the NPU fetches block by block where it lives, for
    ``s``'s tile (0 where the step reads its input once): a convolution's or pooling's
    (:func:`ifm_fetch_elements`), and the transpose before a REDUCE_SUM over H or W
    (``vector.transpose_reductions``), which fetches on the same pooling path; a widening RESCALE
    folded into such a sum is where that transpose's narrow reads land (Vela transposes the
    int8 map itself: its Dram feature-map reads of EfficientNet-B0's squeeze-and-excite means on
    the U85, 25.7 MB for a 401 KB map)."""
    step = steps[s]
    if step.op in BLOCK_FETCH_OPS:
        return ifm_fetch_elements(hw, step) * element_size_bytes(step.input_types[0].dtype)
    if step.op not in TRANSPOSED_SUM_OPS or not step.input_types or not hw.vector.transpose_reductions \
            or source_operator_cycles(hw, steps) is not None:
        return 0   # (a TFLite MEAN or softmax compiled as its source operator has no transpose)
    summing = next((steps[t] for t in range(s + 1, len(steps)) if folded_prologue(hw, steps, t) is step), None)
    if summing is None:
        if folded_prologue(hw, steps, s) is not None:   # its transpose reads the RESCALE's input
            return 0
        summing = step
    bits = step.input_types[0].dtype.bits
    whole = transpose_fetched_elements(hw, summing, bits)
    if not whole:
        return 0
    return _tile_share(whole, summing) * max(1, bits // 8)


def fetch_burst_bytes(hw: HwConfig, step: KernelStep, size_bytes: int) -> int:
    """The DDR bursts' bytes ``size_bytes`` of ``step``'s input fetches take: whole bursts, and a
    thin pixel (narrower than ``dma.thin_pixel_access_bytes`` per byte of its element) in accesses
    of that many bytes per element byte, each a whole burst (Vela: an NHWC read's burst spans the
    IFM block's depth, EstimateMemoryTransfer)."""
    burst = hw.ddr.burst_size_bytes
    elem = element_size_bytes(step.input_types[0].dtype)
    access = hw.dma.thin_pixel_access_bytes * elem
    if 0 < step.input_types[0].shape[-1] * elem < access < burst:
        return ceil_div(size_bytes, access) * burst
    return ceil_div(size_bytes, burst) * burst
