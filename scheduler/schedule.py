"""``schedule(graph, hw) -> Program``: the scheduler's pass pipeline.

    support check -> fusion -> lowering            (support, fusion, lowering)
    -> constant folding -> unit choice -> staging   (folding, assign_units below, staging)
    -> operation order: list scheduling per block   (ordering)
    -> fixed placements: inputs, outputs and constants in DDR; small constants in a
       TCM pool loaded chunk by chunk before their first reader; variables in the
       variable SRAM (ScheduleError naming them if they do not fit)
    -> per block: aliasing, residency + tiling, emission, prefetch hoisting
                                                    (compiler, residency, tiling, emit)
    -> liveness, TCM planner, DDR / variable SRAM bump allocation
                                                    (materialize, liveness, allocators)
    -> dependencies from exact byte accesses       (deps, byte_ranges)

If the TCM planner cannot place everything (fragmentation), the largest
resident intermediate live where it overflowed is spilled and the graph is
compiled again. ``Program.stats`` carries the figures reports need
(:class:`npu_sim.program.PlanStats`). :func:`scheduler.verify.verify_program` checks the result.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from npu_sim.errors import ScheduleError
from npu_sim.gc_pause import gc_paused
from npu_sim.hw.compute_units import MAC_ARRAY, VECTOR, mac_array
from npu_sim.memory_layout import align_up, memory_bytes
from npu_sim.program import ComputeCommand, DmaCommand, MemorySpace, OperationStats, PlanStats, Program
from npu_sim.reference.executor import DEFAULT_MAX_ITERATIONS
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Graph, TensorType
from scheduler.allocators import BestOfGreedy, Planner
from scheduler.buffers import Buffer, Placement
from scheduler.compiler import CompileContext, NeedRoom, compile_block
from scheduler.emit import Emitter
from scheduler.folding import fold_constants
from scheduler.fusion import DEFAULT_RULES
from scheduler.lowering import lower
from scheduler.materialize import allocations, build_commands, check_capacity, number, plan_memories, walk
from scheduler.npu_ops import LoweredBlock, LoweredGraph, NpuOp, OpKind, ValueKind
from scheduler.ordering import reorder_block
from scheduler.staging import stage
from scheduler.stream import ACommand, OpRecord
from scheduler.tiling import Tiler

DDR, TCM, VAR = MemorySpace.DDR, MemorySpace.TCM, MemorySpace.VARIABLE_SRAM

#: Constants up to this size may go to the TCM constant pool (zero points, shifts, shapes...).
POOL_ITEM_MAX_BYTES = 2048
#: The pool takes at most this share of the TCM, and never more than POOL_MAX_BYTES.
POOL_TCM_SHARE = 1 / 16
POOL_MAX_BYTES = 65536
#: Pool chunks smaller than this (or than the bytes the DDR moves during one DMA's setup,
#: if larger) are loaded together with the next operation's. DMA engines pipeline their
#: descriptors (the DDR latency overlaps the next descriptor), so small chunks only cost
#: their setup.
POOL_MIN_CHUNK_BYTES = 256
MAX_ATTEMPTS = 64
DDR_ALIGNMENT = 64
VAR_ALIGNMENT = 16


@dataclass
class Fixed:
    """Placements decided before any block is compiled."""

    placements: dict[str, Placement]
    const_ddr: dict[str, Placement]
    buffers: list[Buffer]
    pool_ddr: Buffer | None
    pool_tcm: Buffer | None
    pool_chunks: dict[int, tuple[int, int]]   # main op index -> (offset, size) of the pool to load before it


def _blocks(block: LoweredBlock):
    yield block
    for op in block.ops:
        for sub in op.blocks:
            yield from _blocks(sub)


def compute_operands(block: LoweredBlock) -> list[str]:
    """Value keys read by compute steps of ``block`` and its nested blocks, in first-use order."""
    keys: dict[str, None] = {}
    for op in block.ops:
        for key in op_compute_operands(op):
            keys.setdefault(key, None)
    return list(keys)


def op_compute_operands(op: NpuOp) -> list[str]:
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


def assign_units(lowered: LoweredGraph, hw) -> None:
    """MAC operators whose dtype the MAC array has no rate for run on the vector unit."""
    for block in _blocks(lowered.main):
        for op in block.ops:
            if op.kind is OpKind.COMPUTE and op.unit == MAC_ARRAY.name and \
                    not mac_array.supports(hw, op.steps[0].input_types[0].dtype):
                op.unit = VECTOR.name


def order_blocks(lowered: LoweredGraph, hw) -> None:
    """List-schedule the operations of every block (:mod:`scheduler.ordering`)."""
    for block in _blocks(lowered.main):
        block.ops = reorder_block(block.ops, lowered.values, hw, hw.tcm.size_bytes)


def fixed_placements(lowered: LoweredGraph, hw, tcm_alignment: int) -> Fixed:
    """DDR homes of inputs, outputs and constants; variables in the variable SRAM; the constant pool.

    Small constants read by compute steps go to a TCM pool, laid out in order of
    first use so that each main-block operation loads only its new chunk.
    """
    values = lowered.values
    placements: dict[str, Placement] = {}
    const_ddr: dict[str, Placement] = {}
    buffers: list[Buffer] = []
    pool_limit = min(POOL_MAX_BYTES, int(hw.tcm.size_bytes * POOL_TCM_SHARE))
    pooled: dict[str, int] = {}
    first_use: dict[str, int] = {}
    pool_size = 0
    for index, op in enumerate(lowered.main.ops):
        for key in op_compute_operands(op):
            value = values[key]
            if value.kind is not ValueKind.CONSTANT or key in pooled:
                continue
            size = value.size_bytes
            if 0 < size <= POOL_ITEM_MAX_BYTES and pool_size + align_up(size, 8) <= pool_limit:
                pooled[key] = pool_size
                first_use[key] = index
                pool_size += align_up(size, 8)
    for key, value in values.items():
        size = value.size_bytes
        if key in pooled:
            continue
        if value.kind is ValueKind.INPUT:
            b = Buffer(value.name, DDR, max(1, size), kind="input", whole_program=True)
        elif value.kind is ValueKind.OUTPUT:
            b = Buffer(value.name, DDR, max(1, size), kind="output", whole_program=True)
        elif value.kind is ValueKind.VARIABLE:
            data = None if value.data is None else memory_bytes(value.data, value.type.dtype)
            b = Buffer(value.name, VAR, max(1, size), kind="variable", initial_data=data, whole_program=True)
        elif value.kind is ValueKind.CONSTANT:
            b = Buffer(value.name, DDR, max(1, size), kind="constant",
                       initial_data=memory_bytes(value.data, value.type.dtype), whole_program=True)
            const_ddr[key] = Placement(b, 0, value.type)
        else:
            continue
        buffers.append(b)
        placements[key] = Placement(b, 0, value.type)
    pool_ddr = pool_tcm = None
    chunks: dict[int, tuple[int, int]] = {}
    if pooled:
        image = bytearray(pool_size)
        for key, offset in pooled.items():
            data = memory_bytes(values[key].data, values[key].type.dtype)
            image[offset:offset + len(data)] = data
        pool_ddr = Buffer("constant_pool", DDR, pool_size, kind="constant", initial_data=bytes(image),
                          whole_program=True)
        pool_tcm = Buffer("constant_pool", TCM, align_up(pool_size, tcm_alignment), kind="constant",
                          whole_program=True)
        buffers += [pool_ddr, pool_tcm]
        for key, offset in pooled.items():
            placements[key] = Placement(pool_tcm, offset, values[key].type)
            const_ddr[key] = Placement(pool_ddr, offset, values[key].type)
        # one chunk per main-block operation using new pool entries (tiny chunks merge into the next)
        spans: dict[int, list[int]] = {}
        for key, offset in pooled.items():
            lo_hi = spans.setdefault(first_use[key], [offset, offset])
            lo_hi[1] = offset + align_up(values[key].size_bytes, 8)
        min_chunk = max(POOL_MIN_CHUNK_BYTES, hw.dma.setup_cycles * hw.ddr.bandwidth_bytes_per_cycle)
        current: list[int] | None = None   # [first op index, start, end]
        for index in sorted(spans):
            lo, hi = spans[index]
            current = [index, lo, hi] if current is None else [current[0], current[1], hi]
            if current[2] - current[1] >= min_chunk or not chunks:   # the first operation waits for its own only
                chunks[current[0]] = (current[1], current[2] - current[1])
                current = None
        if current is not None:
            chunks[current[0]] = (current[1], current[2] - current[1])
    return Fixed(placements, const_ddr, buffers, pool_ddr, pool_tcm, chunks)


def schedule(graph: Graph, hw, *, planner: Planner | None = None, rules=DEFAULT_RULES,
             spread_tcm: bool = False) -> Program:
    """Compile ``graph`` for ``hw`` (a :class:`npu_sim.hw.config.HwConfig`) into a Program.

    ``spread_tcm``: use free TCM to avoid reusing freed bytes soon (fewer false
    dependencies, so fewer cycles, but ``peak_tcm_bytes`` above the compact plan).
    """
    with gc_paused():   # millions of short-lived tiles, views and access records
        return _schedule(graph, hw, planner, rules, spread_tcm)


def _schedule(graph: Graph, hw, planner: Planner | None, rules, spread_tcm: bool) -> Program:
    planner = planner or BestOfGreedy()
    lowered = lower(graph, rules)
    fold_constants(lowered)
    assign_units(lowered, hw)
    stage(lowered, POOL_ITEM_MAX_BYTES)
    order_blocks(lowered, hw)
    tcm_alignment = max(16, hw.tcm.port_bytes_per_cycle)
    fixed = fixed_placements(lowered, hw, tcm_alignment)
    pool_bytes = fixed.pool_tcm.size_bytes if fixed.pool_tcm is not None else 0
    values = lowered.values
    tiler = Tiler(hw, lambda k: values[k].data if values[k].kind is ValueKind.CONSTANT else None, tcm_alignment)
    evicted: set[str] = set()
    capacity = hw.tcm.size_bytes - pool_bytes
    if capacity < 0:
        raise ScheduleError(f"the constant pool ({pool_bytes} bytes) does not fit the TCM")
    last_error: Exception | None = None
    for _ in range(MAX_ATTEMPTS):
        ctx = CompileContext(values, fixed.placements, fixed.const_ddr, tiler,
                             Emitter(hw, tcm_alignment), tcm_alignment,
                             DEFAULT_MAX_ITERATIONS, evicted=set(evicted))
        try:
            cmds = compile_block(ctx, lowered.main, {}, capacity, _pool_loader(fixed, ctx))
        except NeedRoom as exc:
            if exc.keys <= evicted:
                raise exc.error from None
            evicted |= exc.keys
            last_error = exc.error
            continue
        numbering = number(cmds)
        plan = plan_memories(cmds, numbering, fixed.buffers, hw, planner, tcm_alignment, DDR_ALIGNMENT,
                             VAR_ALIGNMENT, spread=spread_tcm)
        if plan.offsets_ok:
            return _program(graph, lowered, fixed, ctx, cmds, numbering, plan, hw, planner)
        victims = _victims(plan, ctx)
        if victims:
            evicted |= victims
            continue
        # fragmentation among buffers that cannot spill: plan every operation with less room
        shrunk = capacity - max(tcm_alignment, capacity // 16)
        if shrunk < (hw.tcm.size_bytes - pool_bytes) // 2:
            break
        capacity = shrunk
    raise ScheduleError(f"could not place the working set in the TCM of {hw.tcm.size_bytes} bytes "
                        "(fragmentation)" + (f"; {last_error}" if last_error else ""))


def _pool_loader(fixed: Fixed, ctx: CompileContext):
    """The constant-pool chunk loads to issue before each main-block operation."""
    if fixed.pool_tcm is None:
        return None
    record: list[int] = []

    def chunks(index: int) -> list[ACommand]:
        chunk = fixed.pool_chunks.get(index)
        if chunk is None:
            return []
        if not record:
            record.append(len(ctx.records))
            ctx.records.append(OpRecord("constant_pool", "LOAD", "dma", ()))
        offset, size = chunk
        t = TensorType((size,), DType.INT8)
        return ctx.emitter.dma(Placement(fixed.pool_ddr, offset, t).whole(),
                               Placement(fixed.pool_tcm, offset, t).whole(),
                               f"load constant pool [{offset}, {offset + size})", record[0])

    return chunks


def _victims(plan, ctx: CompileContext) -> set[str]:
    """The resident intermediates to spill: for each place the placement overflowed, the
    largest intermediate live there.

    Overflows at disjoint times are separate shortages: one victim each, in one recompilation
    (MobileNetV3-Small fp32 overflowed in up to 15 places, and needed as many attempts).
    Overflowing buffers that overlap an already served one are left to the next attempt.
    A whole-program buffer (the constant pool) that overflowed says nothing about *where*:
    every intermediate overlaps it, so it would name the largest intermediate of the whole
    graph, attempt after attempt (60 recompilations of EfficientNet-B0 on edge). So the
    overflowing buffers with a lifetime are asked first, the largest first, and the pool
    only when none of them has a victim.
    """
    timed = [b for b in plan.overflow if not b.whole_program]
    served: list = []
    chosen: set[str] = set()
    for worst in timed + [b for b in plan.overflow if b.whole_program]:
        r = plan.ranges[worst.serial]
        if any(r.overlaps(other) for other in served) or (chosen and worst.whole_program):
            continue
        candidates = [plan.buffers[s] for s, other in plan.ranges.items()
                      if s in ctx.group_buffers and other.overlaps(r)
                      and ctx.group_buffers[s] not in chosen]
        if candidates:
            chosen.add(ctx.group_buffers[max(candidates, key=lambda b: (b.size_bytes, -b.serial)).serial])
            served.append(r)
    return chosen


def _program(graph: Graph, lowered: LoweredGraph, fixed: Fixed, ctx: CompileContext, cmds: list[ACommand],
             numbering, plan, hw, planner) -> Program:
    memory_sizes = check_capacity(plan, hw)
    commands = build_commands(cmds, numbering, memory_sizes)
    values = lowered.values
    main = graph.main
    inputs = {name: fixed.placements[key].whole().resolve() for name, key in zip(main.inputs, lowered.main.inputs)}
    outputs = {}
    for name, key in zip(main.outputs, lowered.main.outputs):
        p = fixed.const_ddr.get(key) or fixed.placements.get(key)
        if p is None:
            raise ScheduleError(f"graph output {name!r} has no storage")
        outputs[name] = p.whole().resolve()
    variables = {values[k].name: p.whole().resolve() for k, p in fixed.placements.items()
                 if values[k].kind is ValueKind.VARIABLE}
    program = Program(memory_sizes, allocations(plan), commands, inputs, outputs, variables,
                      graph_name=getattr(graph, "name", "") or "")
    program.stats = _plan_stats(program, cmds, ctx, numbering, plan, planner)
    return program


def _plan_stats(program: Program, cmds: list[ACommand], ctx: CompileContext, numbering, plan,
                planner) -> PlanStats:
    """The plan's figures for reports (see :class:`npu_sim.program.PlanStats`)."""
    command_op: dict[int, int] = {numbering.ids[id(a)]: a.op for a in walk(cmds)}
    op_commands: dict[int, list[int]] = {}
    for cid, index in sorted(command_op.items()):
        op_commands.setdefault(index, []).append(cid)
    read = write = 0
    touched: set[tuple[MemorySpace, int]] = set()   # DDR allocations some DMA reads or writes
    ddr_allocs = sorted((a for a in program.allocations if a.memory is DDR), key=lambda a: a.offset_bytes)
    starts = [a.offset_bytes for a in ddr_allocs]
    for cmd in program.walk():
        if not isinstance(cmd, DmaCommand):
            continue
        for view, is_read in ((cmd.src, True), (cmd.dst, False)):
            if view.memory is not DDR or view.element_count == 0:
                continue
            if is_read:
                read += cmd.size_bytes
            else:
                write += cmd.size_bytes
            k = bisect.bisect_right(starts, view.span[0]) - 1
            if k >= 0:
                touched.add((DDR, starts[k]))
    compulsory_read = sum(a.size_bytes for a in ddr_allocs
                          if a.kind in ("input", "constant") and (DDR, a.offset_bytes) in touched)
    compulsory_write = sum(a.size_bytes for a in ddr_allocs
                           if a.kind == "output" and (DDR, a.offset_bytes) in touched)
    command_macs: dict[int, int] = {}
    for cmd in program.walk():
        if isinstance(cmd, ComputeCommand):
            index = command_op[cmd.id]
            command_macs[index] = command_macs.get(index, 0) + cmd.macs
    operations = tuple(
        OperationStats(rec.name, rec.label, rec.unit, tuple(rec.graph_ops), command_macs.get(index, 0), rec.block,
                       rec.tile_shape, rec.tile_count, rec.working_set_bytes, tuple(op_commands.get(index, [])))
        for index, rec in enumerate(ctx.records))
    evicted = sorted({ctx.values[k].name for k in ctx.evicted if k in ctx.values})
    return PlanStats(
        peak_tcm_bytes=plan.tcm_peak_bytes,
        tcm_compact_bytes=plan.tcm_compact_bytes,
        tcm_lower_bound_bytes=plan.tcm_lower_bound_bytes,
        tcm_planner=planner.name + (f" ({planner.last})" if getattr(planner, "last", "") else ""),
        compulsory_ddr_read_bytes=compulsory_read,
        compulsory_ddr_write_bytes=compulsory_write,
        planned_ddr_read_bytes=read,
        planned_ddr_write_bytes=write,
        macs=sum(command_macs.values()),
        operations=operations,
        command_operation={cid: index for cid, index in sorted(command_op.items())},
        spilled_values=tuple(a.name for a in program.allocations if a.kind == "spill"),
        evicted_values=tuple(evicted),
        command_count=numbering.count,
    )
