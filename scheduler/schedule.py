"""``schedule(graph, hw) -> Program``: the scheduler's pass pipeline.

    support check -> fusion -> lowering              passes/ (ir/support)
    -> constant folding -> unit choice -> CPU fallback (what the NPU cannot run)
    -> staging                                        passes/
    -> operation order: list scheduling per block     passes/ordering
       (with stripes on, feature maps' producers sunk to their readers: passes/sinking)
    -> fixed placements: inputs, outputs and constants in DDR; small constants in a
       TCM pool loaded chunk by chunk before their first reader; variables in the
       variable SRAM                                  memory/fixed_placements
    -> per block: aliasing, striped chains, residency + tiling, cascading, emission,
       prefetch hoisting                              codegen/compiler (passes/stripes,
                                                      residency, tiling, cascade;
                                                      codegen/emit, stripe_emit)
    -> numbering, liveness, TCM planner, DDR / variable SRAM bump allocation
                                                      codegen/materialize (memory/)
    -> dependencies from exact byte accesses         codegen/deps (memory/byte_ranges)
    -> the plan's figures for reports                plan_stats

If the TCM planner cannot place everything (fragmentation), the largest resident
intermediate live where it overflowed is spilled and the graph is compiled again (the
stripes' search keeps the chains it evaluated across these attempts: passes/stripes.ChainMemo).
:func:`scheduler.verify.verify_program` checks the result.
"""

from __future__ import annotations

import sys

from npu_sim import progress
from npu_sim.budget import check_npu_capacity
from npu_sim.errors import ScheduleError
from npu_sim.gc_pause import gc_paused
from npu_sim.hw.config import HwConfig
from npu_sim.program import Program
from npu_sim.reference.executor import DEFAULT_MAX_ITERATIONS
from npu_sim.tosa.ir import Graph
from scheduler.codegen.compiler import CompileContext, NeedRoom, compile_block, constant_pool_loads
from scheduler.codegen.emit import Emitter
from scheduler.codegen.materialize import (
    MemoryPlan,
    Numbering,
    allocations,
    block_tensors,
    build_commands,
    check_capacity,
    number,
    plan_memories,
    preamble_loads,
)
from scheduler.codegen.stream import ACommand
from scheduler.ir.npu_ops import LoweredGraph, ValueKind
from scheduler.memory.allocators import BestOfGreedy, Planner
from scheduler.memory.fixed_placements import (
    POOL_BUFFER_NAME,
    POOL_ITEM_MAX_BYTES,
    RESIDENT_TCM_SHARE,
    Fixed,
    fixed_placements,
    pool_item_max_bytes,
    streams_constants,
)
from scheduler.memory.liveness import LiveRange
from scheduler.memory.roles import (
    check_writes,
    homes_too_big_error,
    may_spill,
    on_chip_kinds,
    whole_program_tcm_bytes,
)
from scheduler.passes.concat_slices import slice_concats
from scheduler.passes.constant_merging import merge_identical_constants
from scheduler.passes.constant_reloads import reload_distant_constants
from scheduler.passes.cpu_fallback import assign_cpu_fallbacks
from scheduler.passes.empty_tensors import drop_empty_tensors
from scheduler.passes.float_round_trips import integer_data_movement
from scheduler.passes.folding import fold_constants
from scheduler.passes.fusion import DEFAULT_RULES, FusionRule, rules_for
from scheduler.passes.loop_invariants import hoist_loop_invariants
from scheduler.passes.lowering import lower
from scheduler.passes.ordering import order_blocks
from scheduler.passes.reshape_rescales import rescale_before_reshape
from scheduler.passes.sinking import sink_feature_maps
from scheduler.passes.staging import homed_inputs, stage
from scheduler.passes.stripes import ChainMemo
from scheduler.passes.table_loads import mark_table_loads
from scheduler.passes.tiling import Tiler
from scheduler.passes.unit_choice import assign_units
from scheduler.passes.weight_streams import private_weight_streams
from scheduler.passes.weights_in_place import (
    mark_elementwise_constants_in_place,
    mark_parameters_in_place,
    mark_tables_in_place,
    mark_weights_in_place,
)
from scheduler.plan_stats import plan_stats

MAX_ATTEMPTS = 64
DDR_ALIGNMENT = 64
VAR_ALIGNMENT = 16


def schedule(graph: Graph, hw: HwConfig, *, planner: Planner | None = None,
             rules: tuple[FusionRule, ...] = DEFAULT_RULES, spread_tcm: bool = False,
             resident_constants: bool = False) -> Program:
    """Compile ``graph`` for ``hw`` into a Program (its ``stats`` filled in).

    ``spread_tcm``: use free TCM to avoid reusing freed bytes soon (fewer false
    dependencies, so fewer cycles, but ``peak_tcm_bytes`` above the compact plan).
    ``resident_constants``: the Program will run several invocations: constants that fit
    a larger TCM pool go there, loaded once in a preamble (see :mod:`npu_sim.simulator`).
    """
    graph = drop_empty_tensors(graph)   # (nothing to place or move for them)
    graph = hoist_loop_invariants(graph)   # (a loop body's invariant work runs once, before it)
    graph = integer_data_movement(graph)   # (no float round trip around a SLICE of int8 data)
    graph = slice_concats(graph)   # (a slice of one CONCAT input reads it; the CONCAT may go)
    graph = rescale_before_reshape(graph)   # (a product's scaling past a RESHAPE joins its epilogue)
    check_npu_capacity(graph, hw)   # refuse terabyte tensors before tiling them
    with gc_paused():   # millions of short-lived tiles, views and access records
        lowered = lower_graph(graph, hw, rules, resident_constants=resident_constants)
        tcm_alignment = max(16, hw.tcm.port_bytes_per_cycle)
        fixed = fixed_placements(lowered, hw, tcm_alignment, resident_constants=resident_constants)
        return _compile(graph, lowered, fixed, hw, planner or BestOfGreedy(), tcm_alignment, spread_tcm)


def lower_graph(graph: Graph, hw: HwConfig, rules: tuple[FusionRule, ...] = DEFAULT_RULES, *,
                resident_constants: bool = False) -> LoweredGraph:
    """The graph-level passes: the lowered graph, its operations in the order they will run.

    A fused composite runs whole: its tensors may take up to the share of the TCM the
    resident constant pool may (its weights then stay there), else half of it (its weights
    are loaded before it starts, where op by op their tiles would stream)."""
    progress.stage("lowering the graph")
    share = RESIDENT_TCM_SHARE if resident_constants else 1 / 2
    lowered = lower(graph, rules_for(rules, hw), max_composite_bytes=int(hw.tcm.size_bytes * share),
                    find_recurrent_state=hw.tcm.ddr_recurrent_state)
    graph_constants = {k for k, v in lowered.values.items() if v.kind is ValueKind.CONSTANT}
    fold_constants(lowered)
    folded = {k for k, v in lowered.values.items() if v.kind is ValueKind.CONSTANT} - graph_constants
    merge_identical_constants(lowered, POOL_ITEM_MAX_BYTES, folded)
    assign_units(lowered, hw)
    lowered.cpu_fallbacks = assign_cpu_fallbacks(lowered, hw)
    keep = hw.tcm.keep_reused_constants   # (else no constant is above the threshold: none is staged)
    _mark_in_place(lowered, hw, resident_constants)
    if hw.tcm.packed_weight_streams and not keep and streams_constants(hw, resident_constants):
        private_weight_streams(lowered, pool_item_max_bytes(hw, resident_constants))
    unstaged = on_chip_kinds(hw) | ({ValueKind.INPUT} if hw.tcm.graph_inputs_in_place else set())
    stage(lowered, pool_item_max_bytes(hw, resident_constants) if keep else sys.maxsize, unstaged)
    order_blocks(lowered, hw)
    mark_table_loads(lowered, hw)   # (behind the operation before, in the final run order)
    if hw.stripes.enabled:   # (the peak TCM is what the planner then minimises)
        sink_feature_maps(lowered, pool_item_max_bytes(hw, resident_constants))
    if not keep and streams_constants(hw, resident_constants):   # (after the order is final)
        reload_distant_constants(lowered, pool_item_max_bytes(hw, resident_constants), hw=hw)
    return lowered


def _mark_in_place(lowered: LoweredGraph, hw: HwConfig, resident_constants: bool) -> None:
    """Mark what the operations read where it lives: matrix-vector weights, command parameters, LUT tables."""
    if hw.tcm.matrix_vector_weights_in_place and streams_constants(hw, resident_constants):
        mark_weights_in_place(lowered, hw)
    if hw.tcm.parameters_in_command_stream:
        mark_parameters_in_place(lowered)
    if hw.tcm.elementwise_constants_in_place and streams_constants(hw, resident_constants):
        mark_elementwise_constants_in_place(lowered)
    if hw.lut.table_source_latency_cycles > 0:
        mark_tables_in_place(lowered)


def _compile(graph: Graph, lowered: LoweredGraph, fixed: Fixed, hw: HwConfig, planner: Planner,
             tcm_alignment: int, spread_tcm: bool) -> Program:
    """Compile the blocks and plan the memories, spilling and recompiling until the TCM plan fits."""
    pool_bytes = fixed.pool_tcm.size_bytes if fixed.pool_tcm is not None else fixed.segment_peak_bytes
    values = lowered.values
    tiler = Tiler(hw, lambda k: values[k].data if values[k].kind is ValueKind.CONSTANT else None, tcm_alignment,
                  homed_inputs(lowered) if hw.tcm.graph_inputs_in_place else frozenset())
    evicted: set[str] = set()
    homed = whole_program_tcm_bytes(fixed.buffers, skip=POOL_BUFFER_NAME)   # inputs, outputs, constants
    capacity = hw.tcm.size_bytes - pool_bytes - homed
    if capacity < 0:
        raise homes_too_big_error(fixed.buffers, fixed.segment_peak_bytes, hw)
    last_error: Exception | None = None
    operations = sum(len(block.ops) for block in lowered.main.walk_blocks())
    chain_memo = ChainMemo()   # (the stripes' search of each attempt evaluates only what changed)
    for attempt in range(MAX_ATTEMPTS):
        ctx = CompileContext(values, fixed.placements, fixed.const_ddr, tiler,
                             Emitter(hw, tcm_alignment), tcm_alignment,
                             DEFAULT_MAX_ITERATIONS, evicted=set(evicted),
                             recurrent_state=frozenset(lowered.recurrent_state), chain_memo=chain_memo)
        progress.stage("compiling operations" + (f" (attempt {attempt + 1})" if attempt else ""), operations,
                       ctx.records.__len__)
        try:
            cmds = compile_block(ctx, lowered.main, {}, capacity, constant_pool_loads(fixed, ctx))
        except NeedRoom as exc:
            if exc.keys <= evicted:
                raise exc.error from None
            evicted |= exc.keys
            last_error = exc.error
            continue
        numbering = number(cmds)
        progress.stage(f"planning the memories of {numbering.count:,} commands")
        plan = plan_memories(cmds, numbering, fixed.buffers, hw, planner, tcm_alignment, DDR_ALIGNMENT,
                             VAR_ALIGNMENT, spread=spread_tcm)
        if plan.offsets_ok:
            return _program(graph, lowered, fixed, ctx, cmds, numbering, plan, hw, planner)
        victims = _victims(plan, ctx) if may_spill(hw) else set()
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


def _victims(plan: MemoryPlan, ctx: CompileContext) -> set[str]:
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
    served: list[LiveRange] = []
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
             numbering: Numbering, plan: MemoryPlan, hw: HwConfig, planner: Planner) -> Program:
    """The Program of a successful attempt, with its figures."""
    memory_sizes = check_capacity(plan, hw)
    progress.stage(f"ordering the accesses of {numbering.count:,} commands")
    preamble = preamble_loads(cmds, numbering, fixed.pool_tcm)
    commands = build_commands(cmds, numbering, memory_sizes, preamble)
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
    placed = allocations(plan)
    program = Program(memory_sizes, placed, commands, inputs, outputs, variables,
                      graph_name=getattr(graph, "name", "") or "",
                      preamble_command_ids=preamble,
                      block_tensors=block_tensors(plan, hw))
    check_writes(program, hw)
    program.stats = plan_stats(program, cmds, numbering, ctx.records, _evicted_names(ctx), plan,
                               _planner_label(planner), lowered.candidates, lowered.cpu_fallbacks, ctx.striped,
                               ctx.rolling_whole)
    return program


def _evicted_names(ctx: CompileContext) -> list[str]:
    return sorted({ctx.values[k].name for k in ctx.evicted if k in ctx.values})


def _planner_label(planner: Planner) -> str:
    last = getattr(planner, "last", "")
    return planner.name + (f" ({last})" if last else "")
