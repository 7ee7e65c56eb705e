"""The plan's figures for reports: :class:`npu_sim.program.PlanStats` of a compiled Program.

Read from the Program itself (allocations, DMA commands, compute commands' MACs), from the
memory plan (TCM footprint, compact size and lower bound) and from the operation records
emission kept (what each NPU operation computes and how it was tiled).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Mapping, Sequence

from npu_sim.hw.compute_units.mac_array import MAC_OPS
from npu_sim.program import (
    CompositeCandidate,
    ComputeCommand,
    CpuFallback,
    DmaCommand,
    MemorySpace,
    OperationStats,
    PlanStats,
    Program,
    StripedChainStats,
    View,
)
from scheduler.codegen.materialize import MemoryPlan, Numbering, walk
from scheduler.codegen.stream import ACommand, OpRecord
from scheduler.memory.fixed_placements import tcm_pool_allocation
from scheduler.memory.liveness import LiveRange, max_live_bytes

DDR = MemorySpace.DDR


def plan_stats(program: Program, cmds: list[ACommand], numbering: Numbering, records: list[OpRecord],
               evicted: list[str], plan: MemoryPlan, planner: str,
               candidates: Sequence[CompositeCandidate] = (), cpu_fallbacks: Sequence[CpuFallback] = (),
               striped: Sequence[StripedChainStats] = (), rolling_whole: Mapping[int, int] | None = None
               ) -> PlanStats:
    """The figures of ``program`` (compiled from ``cmds``; ``records``: one per NPU operation;
    ``striped``: its chains run in stripes, ``rolling_whole``: their rolling buffers' whole bytes
    by buffer serial)."""
    command_op: dict[int, int] = {numbering.ids[id(a)]: a.op for a in walk(cmds)}
    planned_read, planned_write = planned_ddr_bytes(program)
    compulsory_read, compulsory_write = compulsory_ddr_bytes(program)
    macs = operation_macs(program, command_op)
    return PlanStats(
        peak_tcm_bytes=plan.tcm_peak_bytes,
        tcm_compact_bytes=plan.tcm_compact_bytes,
        tcm_lower_bound_bytes=plan.tcm_lower_bound_bytes,
        tcm_planner=planner,
        compulsory_ddr_read_bytes=compulsory_read,
        compulsory_ddr_write_bytes=compulsory_write,
        planned_ddr_read_bytes=planned_read,
        planned_ddr_write_bytes=planned_write,
        macs=sum(macs.values()),
        operations=with_resident_weights(program, operations(records, command_op, macs)),
        command_operation=dict(sorted(command_op.items())),
        spilled_values=tuple(a.name for a in program.allocations if a.kind == "spill"),
        evicted_values=tuple(evicted),
        command_count=numbering.count,
        composite_candidates=tuple(candidates),
        cpu_fallbacks=tuple(cpu_fallbacks),
        striped_chains=tuple(striped),
        tcm_lower_bound_unstriped_bytes=unstriped_lower_bound(plan, rolling_whole or {}),
    )


def unstriped_lower_bound(plan: MemoryPlan, rolling_whole: Mapping[int, int]) -> int:
    """The most TCM bytes live at once were each rolling buffer (by serial in ``rolling_whole``)
    its whole tensor over the same lifetime: the plan's bound without its stripes."""
    if not rolling_whole:
        return plan.tcm_lower_bound_bytes
    return max_live_bytes([LiveRange(r.key, rolling_whole.get(r.key, r.size_bytes), r.start, r.end)
                           for r in plan.ranges.values()])


def operations(records: list[OpRecord], command_op: dict[int, int], macs: dict[int, int]
               ) -> tuple[OperationStats, ...]:
    """One record per NPU operation, with the ids of its commands and their MACs."""
    op_commands: dict[int, list[int]] = {}
    for cid, index in sorted(command_op.items()):
        op_commands.setdefault(index, []).append(cid)
    return tuple(
        OperationStats(rec.name, rec.label, rec.unit, tuple(rec.graph_ops), macs.get(index, 0), rec.block,
                       rec.tile_shape, rec.tile_count, rec.working_set_bytes, tuple(op_commands.get(index, [])),
                       rec.composite)
        for index, rec in enumerate(records))


def with_resident_weights(program: Program, ops: tuple[OperationStats, ...]) -> tuple[OperationStats, ...]:
    """Composites' ``weights_resident``: the weights of every matrix product they run lie in the
    TCM constant pool and the program loads that pool once, in a preamble."""
    if not any(op.composite for op in ops):
        return ops
    pool = _resident_pool(program)
    commands = {cmd.id: cmd for cmd in program.walk() if isinstance(cmd, ComputeCommand)}
    out = []
    for op in ops:
        if op.composite is not None:
            weights = [step.operands[1] for cid in op.commands if cid in commands
                       for step in commands[cid].steps if step.op in MAC_OPS and len(step.operands) > 1]
            resident = pool is not None and all(_inside(w, pool) for w in weights)
            op = dataclasses.replace(op, composite=dataclasses.replace(op.composite, weights_resident=resident))
        out.append(op)
    return tuple(out)


def _inside(operand: object, span: tuple[int, int]) -> bool:
    """A TCM view within ``span``."""
    return isinstance(operand, View) and operand.memory is MemorySpace.TCM \
        and span[0] <= operand.span[0] and operand.span[1] <= span[1]


def _resident_pool(program: Program) -> tuple[int, int] | None:
    """TCM bytes [start, end) of the constant pool if it stays resident across invocations."""
    pool = tcm_pool_allocation(program.allocations) if program.preamble_command_ids else None
    return None if pool is None else (pool.offset_bytes, pool.end_bytes)


def operation_macs(program: Program, command_op: dict[int, int]) -> dict[int, int]:
    """Operation index -> MACs of its compute commands (loop bodies once)."""
    macs: dict[int, int] = {}
    for cmd in program.walk():
        if isinstance(cmd, ComputeCommand):
            index = command_op[cmd.id]
            macs[index] = macs.get(index, 0) + cmd.macs
    return macs


def planned_ddr_bytes(program: Program) -> tuple[int, int]:
    """``(read, write)`` bytes the DMA commands move from and to DDR (loop bodies once)."""
    read = write = 0
    for cmd in program.walk():
        if isinstance(cmd, DmaCommand):
            if cmd.src.memory is DDR and cmd.src.element_count:
                read += cmd.size_bytes
            if cmd.dst.memory is DDR and cmd.dst.element_count:
                write += cmd.size_bytes
    return read, write


def compulsory_ddr_bytes(program: Program) -> tuple[int, int]:
    """``(read, write)``: the inputs and constants some DMA reads, and the outputs some DMA
    writes, once each."""
    ddr_allocs = sorted((a for a in program.allocations if a.memory is DDR), key=lambda a: a.offset_bytes)
    touched = _touched_offsets(program, [a.offset_bytes for a in ddr_allocs])
    read = sum(a.size_bytes for a in ddr_allocs if a.kind in ("input", "constant") and a.offset_bytes in touched)
    write = sum(a.size_bytes for a in ddr_allocs if a.kind == "output" and a.offset_bytes in touched)
    return read, write


def _touched_offsets(program: Program, starts: list[int]) -> set[int]:
    """The offsets (of ``starts``, sorted) of the DDR allocations some DMA reads or writes."""
    touched: set[int] = set()
    for cmd in program.walk():
        if not isinstance(cmd, DmaCommand):
            continue
        for view in (cmd.src, cmd.dst):
            if view.memory is DDR and view.element_count:
                k = bisect.bisect_right(starts, view.span[0]) - 1
                if k >= 0:
                    touched.add(starts[k])
    return touched
