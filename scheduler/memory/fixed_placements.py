"""Fixed placements: where the values live that no block compiles, decided before any block is.

Inputs, outputs and constants get a buffer of their own in the memory their role names (the
DDR unless the config's memory roles say otherwise, :mod:`scheduler.memory.roles`), variables
one in the variable SRAM. Small constants that compute steps read (zero points, shifts, shapes...) go to a
constant pool instead: one DDR image, loaded into a TCM buffer chunk by chunk, each chunk
before the main-block operation that first reads its entries (laid out in order of first
use, so each operation loads only its new entries). Where constants stream
(``tcm.constant_stream_slack_fraction``, one invocation) there is no resident TCM copy: each
chunk is a TCM buffer of its own, its entries laid out by first and last reader, dead after
the last; and where reused constants are not kept either (the Ethos-U presets) a loop body's
constants other than scalars stream from their home at every iteration, as its weights do (Vela
compiles a TFLite WHILE body, a Keras GRU's, as a subgraph of its own, run again at each step:
nothing of it stays in the SRAM across the loop).
"""

from __future__ import annotations

import bisect
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

from npu_sim.hw.compute_units.mac_array import MAC_OPS
from npu_sim.hw.config import HwConfig
from npu_sim.memory_layout import align_up, memory_bytes
from npu_sim.program import Allocation, MemorySpace
from scheduler.ir.npu_ops import LoweredBlock, LoweredGraph, NpuOp, OpKind, Value, ValueKind
from scheduler.memory.buffers import Buffer, Placement
from scheduler.memory.roles import home_memory
from scheduler.passes.weight_streams import weights_and_parameters

DDR, TCM, VAR = MemorySpace.DDR, MemorySpace.TCM, MemorySpace.VARIABLE_SRAM

#: Constants up to this size may go to the TCM constant pool (zero points, shifts, shapes...).
POOL_ITEM_MAX_BYTES = 2048
#: With resident constants (several invocations, one preamble) the pool takes at most this share.
RESIDENT_TCM_SHARE = 3 / 4
#: Constants a loop body reads (every iteration) may take the pool up to this share of the TCM:
#: loaded once before the loop, they stay for all its iterations.
LOOP_TCM_SHARE = 1 / 4
#: Name of the constant pool's buffers (its TCM copy is written only by the pool loads).
POOL_BUFFER_NAME = "constant_pool"
#: The pool takes at most this share of the TCM, and never more than POOL_MAX_BYTES.
POOL_TCM_SHARE = 1 / 16
POOL_MAX_BYTES = 65536
#: Pool entries are aligned to this many bytes.
POOL_ITEM_ALIGNMENT = 8
#: Pool chunks smaller than this (or than the bytes the DDR moves during one DMA's setup,
#: if larger) are loaded together with the next operation's. DMA engines pipeline their
#: descriptors (the DDR latency overlaps the next descriptor), so small chunks only cost
#: their setup.
POOL_MIN_CHUNK_BYTES = 256
#: A streamed pool chunk absorbing a later run lives at most this many operations past its own
#: last reader, unless it holds at most POOL_LONG_LIVED_MAX_BYTES (scalars): a bias vector or a
#: table dies near its reader.
POOL_MERGE_LONGER_OPERATIONS = 2
POOL_LONG_LIVED_MAX_BYTES = 64

_HOME_KINDS = {ValueKind.INPUT: "input", ValueKind.OUTPUT: "output", ValueKind.VARIABLE: "variable",
               ValueKind.CONSTANT: "constant"}


@dataclass
class Fixed:
    """Placements decided before any block is compiled."""

    placements: dict[str, Placement]
    const_ddr: dict[str, Placement]   # the DDR home of every constant (pooled ones too)
    buffers: list[Buffer]
    pool_ddr: Buffer | None
    pool_tcm: Buffer | None
    pool_chunks: dict[int, tuple[int, int]]   # main op index -> (offset, size) of the pool to load before it
    #: streamed constants (``tcm.constant_stream_slack_fraction``): main op index -> the chunks of
    #: the pool image to load before it, (offset, size, TCM buffer of their own); no resident pool
    segment_loads: dict[int, list[tuple[int, int, Buffer]]] = field(default_factory=dict)
    #: the most TCM bytes the streamed pool's buffers take at once (their loads prefetched)
    segment_peak_bytes: int = 0


def compute_operands(block: LoweredBlock) -> list[str]:
    """Value keys read by compute steps of ``block`` and its nested blocks, in first-use order."""
    keys: dict[str, None] = {}
    for op in block.ops:
        for key in op_compute_operands(op):
            keys.setdefault(key, None)
    return list(keys)


def op_compute_operands(op: NpuOp) -> list[str]:
    """Value keys read by the compute steps of ``op`` (and of its blocks), in first-use order."""
    keys: dict[str, None] = {}
    if op.kind is OpKind.COMPUTE:
        for step in op.steps:
            for o in step.operands:
                if isinstance(o, str):
                    keys.setdefault(o, None)
    for sub in op.blocks:
        for key in compute_operands(sub):
            keys.setdefault(key, None)
    return list(keys)


def fixed_placements(lowered: LoweredGraph, hw: HwConfig, tcm_alignment: int, *,
                     resident_constants: bool = False) -> Fixed:
    """DDR homes of inputs, outputs and constants; variables in the variable SRAM; the constant pool.

    ``resident_constants``: the program will run several invocations with the pool loaded
    once (a preamble), so the pool may take up to :data:`RESIDENT_TCM_SHARE` of the TCM and
    hold constants of any size that fits (the weights of an LSTM, first used first)."""
    values = lowered.values
    pooled, first_use, pool_size = _pool_layout(lowered, hw, resident_constants)
    streamed = streams_constants(hw, resident_constants)
    last_use = _last_uses(lowered.main, pooled) if streamed else {}
    if streamed:
        pooled = _lifetime_layout(values, pooled, first_use, last_use)
    placements: dict[str, Placement] = {}
    const_ddr: dict[str, Placement] = {}
    buffers: list[Buffer] = []
    graph_outputs = frozenset(lowered.main.outputs)
    for key, value in values.items():
        buffer = None if key in pooled else _home_buffer(value, hw, graph_outputs)
        if buffer is None:
            continue
        buffers.append(buffer)
        placements[key] = Placement(buffer, 0, value.type)
        if value.kind is ValueKind.CONSTANT:
            const_ddr[key] = Placement(buffer, 0, value.type)
    if not pooled:
        return Fixed(placements, const_ddr, buffers, None, None, {})
    image = _pool_image(values, pooled, pool_size)
    pool_ddr = Buffer(POOL_BUFFER_NAME, DDR, pool_size, kind="constant", initial_data=image, whole_program=True)
    buffers.append(pool_ddr)
    for key, offset in pooled.items():
        const_ddr[key] = Placement(pool_ddr, offset, values[key].type)
    if streamed:
        segments = _segment_loads(values, pooled, first_use, last_use, hw, tcm_alignment)
        spans = sorted((load for loads in segments.values() for load in loads), key=lambda load: load[0])
        starts = [start for start, _, _ in spans]
        for key, offset in pooled.items():
            start, _, buffer = spans[bisect.bisect_right(starts, offset) - 1]
            placements[key] = Placement(buffer, offset - start, values[key].type)
        peak = _segment_peak_bytes(segments, pooled, last_use, min(1, hw.dma.prefetch_operations))
        return Fixed(placements, const_ddr, buffers, pool_ddr, None, {}, segments, peak)
    pool_tcm = Buffer(POOL_BUFFER_NAME, TCM, align_up(pool_size, tcm_alignment), kind="constant",
                      whole_program=True)
    buffers.append(pool_tcm)
    for key, offset in pooled.items():
        placements[key] = Placement(pool_tcm, offset, values[key].type)
    return Fixed(placements, const_ddr, buffers, pool_ddr, pool_tcm, _pool_chunks(values, pooled, first_use, hw))


def streams_constants(hw: HwConfig, resident_constants: bool) -> bool:
    """True if constants stream through short-lived buffers rather than a resident pool
    (``tcm.constant_stream_slack_fraction``; several invocations keep the pool)."""
    return hw.tcm.constant_stream_slack_fraction is not None and not resident_constants


def _segment_peak_bytes(segments: dict[int, list[tuple[int, int, Buffer]]], pooled: dict[str, int],
                        last_use: dict[str, int], prefetch_operations: int) -> int:
    """The most bytes of the streamed pool's buffers live at one main-block operation, each
    live from ``prefetch_operations`` before its first reader to its last (the TCM the blocks
    leave them; loads hoisted further back are planned like any buffer)."""
    offsets = sorted((offset, last_use[key]) for key, offset in pooled.items())
    deltas: dict[int, int] = {}
    for first, loads in segments.items():
        for start, size, buffer in loads:
            lo = bisect.bisect_left(offsets, (start, -1))
            hi = bisect.bisect_left(offsets, (start + size, -1))
            last = max(last for _, last in offsets[lo:hi])
            begin = max(0, first - prefetch_operations)
            deltas[begin] = deltas.get(begin, 0) + buffer.size_bytes
            deltas[last + 1] = deltas.get(last + 1, 0) - buffer.size_bytes
    live = peak = 0
    for index in sorted(deltas):
        live += deltas[index]
        peak = max(peak, live)
    return peak


def _last_uses(block: LoweredBlock, keys: Iterable[str]) -> dict[str, int]:
    """Index of the last main-block operation reading each of ``keys``."""
    wanted = set(keys)
    last: dict[str, int] = {}
    for index, op in enumerate(block.ops):
        for key in op_compute_operands(op):
            if key in wanted:
                last[key] = index
    return last


def _lifetime_layout(values: dict[str, Value], pooled: dict[str, int], first_use: dict[str, int],
                     last_use: dict[str, int]) -> dict[str, int]:
    """The pool image laid out by (first reader, last reader): the entries one chunk loads are
    contiguous and die together."""
    order = sorted(pooled, key=lambda k: (first_use[k], last_use[k], pooled[k]))
    offsets: dict[str, int] = {}
    size = 0
    for key in order:
        offsets[key] = size
        size += align_up(values[key].size_bytes, POOL_ITEM_ALIGNMENT)
    return offsets


def _segment_loads(values: dict[str, Value], pooled: dict[str, int], first_use: dict[str, int],
                   last_use: dict[str, int], hw: HwConfig,
                   tcm_alignment: int) -> dict[int, list[tuple[int, int, Buffer]]]:
    """The streamed pool's chunks: a run of entries with the same first and last reader is one
    TCM buffer, loaded before its first reader and dead after its last. A run smaller than a
    DMA's worth (see :func:`_pool_chunks`) joins the next (loaded earlier) when that one's
    last reader comes no earlier (its bytes are not kept beyond their last reader), and when the
    next is small too or has the same first reader: a large run is not loaded ahead of its first
    reader for a few bytes' DMA (DS-CNN int16's softmax tables, 2 KB, had come three operations
    early with a pooling's 8 bytes of scales, over the network's peak); and a chunk lives past its
    own last reader for the run it absorbs by at most :data:`POOL_MERGE_LONGER_OPERATIONS`
    operations unless it holds at most :data:`POOL_LONG_LIVED_MAX_BYTES` (a stateful LSTM's
    256-byte bias had stayed to the end with a 1-byte shift read at every step)."""
    runs: list[list[int]] = []   # [first reader, start, end, last reader]
    for key in sorted(pooled, key=pooled.__getitem__):
        end = pooled[key] + align_up(values[key].size_bytes, POOL_ITEM_ALIGNMENT)
        if runs and (runs[-1][0], runs[-1][3]) == (first_use[key], last_use[key]):
            runs[-1][2] = end
        else:
            runs.append([first_use[key], pooled[key], end, last_use[key]])
    min_chunk = max(POOL_MIN_CHUNK_BYTES, hw.dma.setup_cycles * hw.ddr.bandwidth_bytes_per_cycle)
    chunks: list[list[int]] = []
    for run in runs:
        last = chunks[-1] if chunks else None
        if last is not None and last[2] - last[1] < min_chunk and run[3] >= last[3] and \
                (run[2] - run[1] < min_chunk or run[0] == last[0]) and \
                (run[3] - last[3] <= POOL_MERGE_LONGER_OPERATIONS or last[2] - last[1] <= POOL_LONG_LIVED_MAX_BYTES):
            last[2], last[3] = run[2], max(last[3], run[3])
        else:
            chunks.append(list(run))
    loads: dict[int, list[tuple[int, int, Buffer]]] = {}
    for first, start, end, _ in chunks:
        buffer = Buffer(f"{POOL_BUFFER_NAME}[{start}:{end})", TCM, align_up(end - start, tcm_alignment),
                        kind="constant")
        loads.setdefault(first, []).append((start, end - start, buffer))
    return loads


def tcm_pool_allocation(allocations: Iterable[Allocation]) -> Allocation | None:
    """The TCM allocation of the constant pool among a Program's allocations, if any."""
    return next((a for a in allocations if a.name.split("#")[0] == POOL_BUFFER_NAME
                 and a.memory is MemorySpace.TCM), None)


def pool_item_max_bytes(hw: HwConfig, resident_constants: bool) -> int:
    """The largest constant the pool takes (small ones only where the NPU keeps no reused
    constant: ``tcm.keep_reused_constants``)."""
    keep = resident_constants and hw.tcm.keep_reused_constants
    return pool_limit_bytes(hw, resident_constants) if keep else POOL_ITEM_MAX_BYTES


def pool_limit_bytes(hw: HwConfig, resident_constants: bool) -> int:
    """The most bytes the pool takes (streamed: no limit, its image is off-chip and each
    chunk lives only around its readers)."""
    if streams_constants(hw, resident_constants):
        return sys.maxsize
    if resident_constants:
        return int(hw.tcm.size_bytes * RESIDENT_TCM_SHARE)
    return min(POOL_MAX_BYTES, int(hw.tcm.size_bytes * POOL_TCM_SHARE))


def _pool_layout(lowered: LoweredGraph, hw: HwConfig,
                 resident_constants: bool) -> tuple[dict[str, int], dict[str, int], int]:
    """``(offset in the pool, index of the first main-block reader)`` of each pooled constant, and the pool size."""
    limit = pool_limit_bytes(hw, resident_constants) if home_memory(ValueKind.CONSTANT, hw) is DDR else 0
    item_max = pool_item_max_bytes(hw, resident_constants)
    loop_limit = max(limit, int(hw.tcm.size_bytes * LOOP_TCM_SHARE))
    pooled: dict[str, int] = {}
    first_use: dict[str, int] = {}
    size = 0
    tables = _never_pooled(lowered, hw, resident_constants)
    in_loops = loop_operands(lowered.main) if hw.tcm.keep_reused_constants else set()
    for index, op in enumerate(lowered.main.ops):
        for key in op_compute_operands(op):
            value = lowered.values[key]
            if value.kind is not ValueKind.CONSTANT or key in pooled or key in tables:
                continue
            item = align_up(value.size_bytes, POOL_ITEM_ALIGNMENT)
            if key in in_loops and 0 < value.size_bytes and size + item <= loop_limit or \
                    0 < value.size_bytes <= item_max and size + item <= limit:
                pooled[key] = size
                first_use[key] = index
                size += item
    return pooled, first_use, size


def _never_pooled(lowered: LoweredGraph, hw: HwConfig, resident_constants: bool) -> set[str]:
    """Constants the pool never takes: tables read in place, and where reused constants are not kept,
    the weights (they stream from their home at every use) and, where constants stream, a loop
    body's constants other than scalars (at every iteration)."""
    never = tables_read_in_place(lowered.main)
    if not hw.tcm.keep_reused_constants:
        never |= weight_operands(lowered.main, packed=hw.tcm.packed_weight_streams)
        if streams_constants(hw, resident_constants):
            never |= {key for key in loop_operands(lowered.main)
                      if lowered.values[key].size_bytes > POOL_LONG_LIVED_MAX_BYTES}
    return never


def weight_operands(block: LoweredBlock, *, packed: bool = False) -> set[str]:
    """What a matrix product streams from its home at every use, in ``block`` and its nested
    blocks: its weights (operand 1 of a MAC step), and with weights that several operations
    read, the per-channel parameters that go with them: the bias and the multipliers and shifts of a per-channel
    RESCALE fused with the product (Vela encodes every output channel's bias and scale into the
    weight stream, 10 bytes a channel, so an unrolled LSTM reads them again at each step).
    ``packed`` (``tcm.packed_weight_streams``): only the weights several operations read; those of
    one reader (small shared ones are copied per reader first, :mod:`scheduler.passes.weight_streams`)
    may go to the streamed pool with their parameters: one load before their operation. Scalars
    (zero points) are not streamed."""
    readers: dict[str, int] = {}
    parameters_of: dict[str, set[str]] = {}
    for sub in block.walk_blocks():
        for op in sub.ops:
            if not any(step.op in MAC_OPS for step in op.steps):
                continue
            op_weights, parameters = weights_and_parameters(op)
            for key in op_weights:
                readers[key] = readers.get(key, 0) + 1
                parameters_of.setdefault(key, set()).update(parameters - op_weights)
    reused = [key for key, count in readers.items() if count > 1]
    streamed = set(reused) if packed else set(readers)
    return streamed.union(*[parameters_of[key] for key in reused])


def loop_operands(block: LoweredBlock) -> set[str]:
    """Values the compute steps inside ``block``'s WHILE_LOOPs read (at any depth)."""
    keys: set[str] = set()
    for sub in block.walk_blocks():
        for op in sub.ops:
            if op.kind is OpKind.WHILE_LOOP:
                keys.update(op_compute_operands(op))
    return keys


def tables_read_in_place(block: LoweredBlock) -> set[str]:
    """Values only ever read where they live (LUT tables, see ``NpuOp.reads_in_place``), in
    ``block`` and its nested blocks: they need no TCM copy, so never go to the pool."""
    in_place: set[str] = set()
    elsewhere: set[str] = set()
    for sub in block.walk_blocks():
        for op in sub.ops:
            for s, step in enumerate(op.steps):
                for j, operand in enumerate(step.operands):
                    if isinstance(operand, str):
                        (in_place if op.reads_in_place(s, j) else elsewhere).add(operand)
    return in_place - elsewhere


def _home_buffer(value: Value, hw: HwConfig, graph_outputs: frozenset[str]) -> Buffer | None:
    """The buffer of an input, output, variable or constant (None for the others), in the memory
    its role names (:mod:`scheduler.memory.roles`): whole-program, except a graph input or output
    in the TCM (the arena of a Shared_Sram NPU), which lives from the invocation's start to its
    last reader, or from its first writer to the end."""
    kind, memory = _HOME_KINDS.get(value.kind), home_memory(value.kind, hw)
    if kind is None or memory is None:
        return None
    data = None if value.data is None else memory_bytes(value.data, value.type.dtype)
    size = max(1, value.size_bytes)
    if memory is TCM and value.kind in (ValueKind.INPUT, ValueKind.OUTPUT):
        return Buffer(value.name, memory, size, kind=kind, host_writes=value.kind is ValueKind.INPUT,
                      host_reads=value.key in graph_outputs or value.kind is ValueKind.OUTPUT)
    return Buffer(value.name, memory, size, kind=kind, initial_data=data, whole_program=True)


def _pool_image(values: dict[str, Value], pooled: dict[str, int], size: int) -> bytes:
    image = bytearray(size)
    for key, offset in pooled.items():
        value = values[key]
        assert value.data is not None   # (a constant)
        data = memory_bytes(value.data, value.type.dtype)
        image[offset:offset + len(data)] = data
    return bytes(image)


def _pool_chunks(values: dict[str, Value], pooled: dict[str, int], first_use: dict[str, int],
                 hw: HwConfig) -> dict[int, tuple[int, int]]:
    """One chunk per main-block operation reading new pool entries; chunks below the minimum
    merge into the next (the first operation waits for its own entries only)."""
    spans: dict[int, list[int]] = {}
    for key, offset in pooled.items():
        lo_hi = spans.setdefault(first_use[key], [offset, offset])
        lo_hi[1] = offset + align_up(values[key].size_bytes, POOL_ITEM_ALIGNMENT)
    min_chunk = max(POOL_MIN_CHUNK_BYTES, hw.dma.setup_cycles * hw.ddr.bandwidth_bytes_per_cycle)
    chunks: dict[int, tuple[int, int]] = {}
    current: list[int] | None = None   # [first op index, start, end]
    for index in sorted(spans):
        lo, hi = spans[index]
        current = [index, lo, hi] if current is None else [current[0], current[1], hi]
        if current[2] - current[1] >= min_chunk or not chunks:
            chunks[current[0]] = (current[1], current[2] - current[1])
            current = None
    if current is not None:
        chunks[current[0]] = (current[1], current[2] - current[1])
    return chunks
