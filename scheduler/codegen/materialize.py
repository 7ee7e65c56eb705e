"""Materialization: number the abstract commands, plan memories, resolve views, add dependencies.

1. Command ids in walk order (a control-flow command before its nested ones).
2. Live ranges of buffers from the ids of the commands touching them.
3. Offsets: TCM by the planner (buffers live at the same time never overlap),
   DDR and the variable SRAM by bump allocation (no reuse; spilled values share
   DDR bytes by their live ranges only when that overflows it). The planner places
   the exact live ranges: the compact placement, whose footprint is what the
   graph needs (``tcm_compact_bytes``). Reusing bytes a buffer freed makes the new
   buffer's writer wait for the old one's last access (a false write-after-read
   dependency that serializes independent work, e.g. a prefetch behind the
   previous operation), so buffers then move, within that footprint, off bytes
   whose previous or next owner the stream does not order them after anyway
   (:func:`scheduler.memory.allocators.avoid_false_dependencies` with
   :mod:`scheduler.codegen.implied_order`): fewer cycles for no TCM. With ``spread``
   (``schedule(..., spread_tcm=True)``), freed bytes are not handed to a buffer
   first used soon after when the TCM has room for that: live ranges are extended
   by :data:`SPREAD_REUSE_DISTANCES` commands, keeping the longest distance that
   fits: fewer cycles for more TCM. When the compact placement overflows the TCM although
   the bytes live at once fit, the buffers it could not place become block tensors in the
   holes (:mod:`scheduler.memory.block_tensors`, unless ``block_tensors.enabled`` is off),
   each with a pointer table in the variable SRAM; nothing moves after that.
4. Views resolved; dependencies from exact byte accesses (:mod:`scheduler.codegen.deps`), without
   those the others or the in-order queues imply (:class:`scheduler.codegen.deps.ImpliedWaits`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from npu_sim.errors import ScheduleError
from npu_sim.hw.config import HwConfig
from npu_sim.memory_layout import align_up
from npu_sim.program import (
    Allocation,
    BlockTensor,
    Command,
    ComputeCommand,
    CondCommand,
    DmaCommand,
    KernelStep,
    LoopCommand,
    MemorySpace,
    View,
    block_allocation_name,
)
from scheduler.codegen.deps import AccessTracker, ImpliedWaits
from scheduler.codegen.implied_order import implied_order
from scheduler.codegen.stream import ACommand, ACompute, ACond, ADma, ALoop
from scheduler.memory.allocators import BumpAllocator, Planner, avoid_false_dependencies, footprint
from scheduler.memory.block_tensors import (
    POINTER_TABLE_KIND,
    BlockPlacement,
    TableRoom,
    block_sizes,
    fixed_first,
    place_blocks,
)
from scheduler.memory.buffers import Buffer, BufView
from scheduler.memory.byte_ranges import ByteSet, view_byte_set, view_ranges
from scheduler.memory.liveness import LiveRange, max_live_bytes

DDR, TCM, VAR = MemorySpace.DDR, MemorySpace.TCM, MemorySpace.VARIABLE_SRAM

#: With spreading: command distances tried, longest first, before which freed TCM bytes are not reused.
SPREAD_REUSE_DISTANCES = (256, 32)


def walk(cmds: list[ACommand]) -> Iterator[ACommand]:
    """Every command, nested ones after their control command, in stream order."""
    for cmd in cmds:
        yield cmd
        if isinstance(cmd, ACond):
            yield from walk(cmd.then)
            yield from walk(cmd.orelse)
        elif isinstance(cmd, ALoop):
            yield from walk(cmd.cond)
            yield from walk(cmd.body)


def views_of(cmd: ACommand) -> list[BufView]:
    if isinstance(cmd, ADma):
        return [cmd.src, cmd.dst]
    if isinstance(cmd, ACompute):
        return [v for step in cmd.steps for v in step.operands if isinstance(v, BufView)] + list(cmd.outputs)
    return [cmd.condition]


@dataclass
class Numbering:
    ids: dict[int, int] = field(default_factory=dict)         # id(abstract command) -> command id
    last_nested: dict[int, int] = field(default_factory=dict)  # control command id -> last id inside
    count: int = 0


def number(cmds: list[ACommand]) -> Numbering:
    """Command ids in walk order (a control command before its nested ones)."""
    numbering = Numbering()
    _number(cmds, numbering)
    return numbering


def _number(cmds: list[ACommand], numbering: Numbering) -> None:
    for cmd in cmds:
        cid = numbering.count
        numbering.ids[id(cmd)] = cid
        numbering.count += 1
        if isinstance(cmd, ACond):
            _number(cmd.then, numbering)
            _number(cmd.orelse, numbering)
            numbering.last_nested[cid] = numbering.count - 1
        elif isinstance(cmd, ALoop):
            _number(cmd.cond, numbering)
            _number(cmd.body, numbering)
            numbering.last_nested[cid] = numbering.count - 1


def live_ranges(cmds: list[ACommand], numbering: Numbering, partners_from_loads: bool = True,
                partners_until_last_load: bool = False) -> dict[int, tuple[Buffer, int, int]]:
    """Buffer serial -> (buffer, first id, last id) over every command touching it; an operation's
    tile buffers (ping-pong partners) coexist over its commands, or (``partners_from_loads``
    False, ``dma.prefetch_holds_partner_buffers``) over its compute commands only: its loads
    hoisted into earlier operations then hold just the buffers they fill. With
    ``partners_until_last_load`` (``dma.prefetch_under_last_tile``) a partner lives until its own
    last use or the operation's last load into a partner, whichever is later, not to the
    operation's end: after that no load of the operation can overwrite it, and a later
    operation's load hoisted under the last tile may take its place.

    (The walk meets the commands in id order: a buffer's or operation's first command is the
    first met, its last the latest end met, a loop's end being its last nested command.)"""
    spans: dict[int, list] = {}   # serial -> [buffer, first, last]
    op_span: dict[int, list[int]] = {}       # op -> [first, last] over its commands
    compute_span: dict[int, list[int]] = {}  # op -> [first, last] over its commands but DMAs
    last_load: dict[int, int] = {}           # op -> its last DMA into one of its tile buffers
    loaded: set[int] = set()                 # serials of tile buffers a DMA of their operation fills
    ids = numbering.ids
    for cmd in walk(cmds):
        cid = ids[id(cmd)]
        end = numbering.last_nested.get(cid, cid) if isinstance(cmd, ALoop) else cid
        _extend(op_span, cmd.op, cid)
        if isinstance(cmd, ADma):
            views: Iterable[BufView] = (cmd.src, cmd.dst)
            _note_load(cmd, cid, last_load, loaded)
        else:
            _extend(compute_span, cmd.op, cid)
            views = views_of(cmd)
        for view in views:
            b = view.buffer
            if b is None:
                continue
            known = spans.get(b.serial)
            if known is None:
                spans[b.serial] = [b, cid, end]
            elif end > known[2]:
                known[2] = end
    usage: dict[int, tuple[Buffer, int, int]] = {}
    for serial, (b, first, last) in spans.items():
        if b.op is not None and b.op in op_span:   # ping-pong partners must coexist
            lo, hi = op_span[b.op] if partners_from_loads else compute_span.get(b.op, op_span[b.op])
            if partners_until_last_load and serial in loaded:
                hi = last_load[b.op]
            first, last = min(first, lo), max(last, hi)
        usage[serial] = (b, first, last)
    _span_loops(cmds, numbering, usage)
    return usage


def _note_load(cmd: ADma, cid: int, last_load: dict[int, int], loaded: set[int]) -> None:
    """A DMA filling one of its own operation's tile buffers: the operation's latest such load so far."""
    if cmd.dst.buffer is not None and cmd.dst.buffer.op == cmd.op:
        last_load[cmd.op] = cid
        loaded.add(cmd.dst.buffer.serial)


def _extend(spans: dict[int, list[int]], op: int, cid: int) -> None:
    """Command ``cid`` (in id order) of operation ``op`` extends its ``[first, last]``."""
    span = spans.get(op)
    if span is None:
        spans[op] = [cid, cid]
    else:
        span[1] = cid


def _span_loops(cmds: list[ACommand], numbering: Numbering, usage: dict[int, tuple[Buffer, int, int]]) -> None:
    """A buffer a loop touches that lives beyond the loop (the carried state, values read
    every iteration) is live for the whole loop, not only up to its last touch in
    command order: the next iteration reads it again. Buffers touched only inside the
    loop live within one iteration (each iteration writes them before reading)."""
    for cmd in walk(cmds):
        if not isinstance(cmd, ALoop):
            continue
        lo = numbering.ids[id(cmd)]
        hi = numbering.last_nested[lo]
        inside = {view.buffer.serial for nested in walk(cmd.cond + cmd.body) for view in views_of(nested)
                  if view.buffer is not None}
        for serial in inside:
            b, first, last = usage[serial]
            if first < lo or last > hi:
                usage[serial] = (b, min(first, lo), max(last, hi))


@dataclass
class MemoryPlan:
    offsets_ok: bool
    tcm_peak_bytes: int
    tcm_lower_bound_bytes: int
    overflow: list[Buffer]                   # TCM buffers placed beyond the capacity
    ranges: dict[int, LiveRange]             # serial -> TCM live range
    buffers: dict[int, Buffer]               # serial -> buffer (every memory)
    first_last: dict[int, tuple[int, int]]   # serial -> live range in ids (non whole-program buffers)
    tcm_compact_bytes: int = 0               # footprint of the placement of the exact live ranges


def plan_memories(cmds: list[ACommand], numbering: Numbering, fixed: list[Buffer], hw: HwConfig, planner: Planner,
                  tcm_alignment: int, ddr_alignment: int, var_alignment: int,
                  spread: bool = False) -> MemoryPlan:
    """Offsets of every buffer (TCM by ``planner``, DDR and the variable SRAM by bump allocation)."""
    usage = live_ranges(cmds, numbering, hw.dma.prefetch_holds_partner_buffers, hw.dma.prefetch_under_last_tile)
    last_id = max(0, numbering.count - 1)
    buffers: dict[int, Buffer] = {b.serial: b for b in fixed}
    buffers.update((serial, b) for serial, (b, _, _) in usage.items())
    first_last = _timed_ranges(usage, fixed, last_id)
    tcm = [b for b in buffers.values() if b.memory is TCM and (b.whole_program or b.serial in first_last)]
    ranges = {b.serial: LiveRange(b.serial, b.size_bytes, *((0, last_id) if b.whole_program else first_last[b.serial]))
              for b in tcm}
    exact = list(ranges.values())
    offsets, compact, peak = _place_tcm(cmds, numbering, exact, tcm, buffers, hw, planner,
                                        (tcm_alignment, var_alignment), spread, last_id)
    for b in tcm:
        b.offset_bytes = offsets.get(b.serial, 0)
    capacity = hw.tcm.size_bytes
    overflow = sorted((b for b in tcm if b.blocks is None and b.end_bytes > capacity),
                      key=lambda b: -b.size_bytes)
    _bump_allocate(buffers, ddr_alignment, var_alignment)
    _share_ddr_when_short(buffers, first_last, hw.ddr.size_bytes, planner, ddr_alignment)
    return MemoryPlan(not overflow, peak, max_live_bytes(exact), overflow, ranges, buffers,
                      first_last, compact)


def _timed_ranges(usage: dict[int, tuple[Buffer, int, int]], fixed: list[Buffer],
                  last_id: int) -> dict[int, tuple[int, int]]:
    """Each buffer's live range in command ids but the whole-program ones: from its first to its
    last command; an arena input from the start, an arena output to the end (the host writes one
    before the first command, reads the other after the last), there all along if no command
    touches it."""
    first_last: dict[int, tuple[int, int]] = {}
    for serial, (b, first, last) in usage.items():
        if not b.whole_program:
            first_last[serial] = (0 if b.host_writes else first, last_id if b.host_reads else last)
    for b in fixed:
        if (b.host_writes or b.host_reads) and b.serial not in first_last:
            first_last[b.serial] = (0, last_id)
    return first_last


def _place_tcm(cmds: list[ACommand], numbering: Numbering, exact: list[LiveRange], tcm: list[Buffer],
               buffers: dict[int, Buffer], hw: HwConfig, planner: Planner, alignments: tuple[int, int], spread: bool,
               last_id: int) -> tuple[dict[int, int], int, int]:
    """TCM offsets (a block tensor's buffer has none: its blocks are its own), the compact
    footprint and the plan's footprint (see the module doc, step 3)."""
    capacity = hw.tcm.size_bytes
    alignment = alignments[0]   # (TCM, variable SRAM)
    offsets = planner.place(exact, alignment)
    compact = footprint(exact, offsets)
    if compact > capacity:   # block tensors, else the overflowing plan stays: it names the value to spill
        blocked = _block_tensors(exact, offsets, tcm, buffers, hw, planner, alignments)
        if blocked is None:
            return offsets, compact, compact
        _place_tables(buffers, blocked, hw)   # (the blocks fill holes of the compact plan: nothing moves after)
        compact = blocked.footprint_bytes(exact)
        return blocked.offsets, compact, compact
    offsets = avoid_false_dependencies(exact, offsets, alignment, implied_order(cmds, numbering.ids))
    if spread:
        offsets = _spread(exact, offsets, planner, alignment, last_id, capacity)
    return offsets, compact, footprint(exact, offsets)


def _block_tensors(exact: list[LiveRange], offsets: dict[int, int], tcm: list[Buffer], buffers: dict[int, Buffer],
                   hw: HwConfig, planner: Planner, alignments: tuple[int, int]) -> BlockPlacement | None:
    """The buffers placed beyond the TCM stored as blocks in its holes (None: they spill; see
    :mod:`scheduler.memory.block_tensors`), their pointer tables within the free variable SRAM."""
    config = hw.block_tensors
    if not config.enabled or max_live_bytes(exact) > hw.tcm.size_bytes:
        return None
    alignment, var_alignment = alignments   # (TCM, variable SRAM)
    eligible = {b.serial for b in tcm if not (b.whole_program or b.host_writes or b.host_reads)}
    var_bytes = sum(align_up(b.size_bytes, var_alignment) for b in buffers.values() if b.memory is VAR)
    room = TableRoom(hw.variable_sram.size_bytes - var_bytes, config.pointer_bytes, var_alignment)
    block_bytes = align_up(config.block_bytes, alignment)
    blocked = place_blocks(exact, offsets, hw.tcm.size_bytes, alignment, eligible, block_bytes, room)
    if blocked is None:   # (the whole-program buffers in a row first, the others placed again above)
        offsets = fixed_first(exact, eligible, planner.place, alignment)
        blocked = place_blocks(exact, offsets, hw.tcm.size_bytes, alignment, eligible, block_bytes, room)
    return blocked


def _place_tables(buffers: dict[int, Buffer], blocked: BlockPlacement, hw: HwConfig) -> None:
    """Each block tensor's blocks, and its pointer table: a variable-SRAM buffer whose initial
    data lists the blocks' offsets."""
    pointer_bytes = hw.block_tensors.pointer_bytes
    for serial, blocks in sorted(blocked.blocks.items()):
        b = buffers[serial]
        b.blocks, b.block_bytes = blocks, blocked.block_bytes
        table = b"".join(offset.to_bytes(pointer_bytes, "little") for offset in blocks)
        pointer_table = Buffer(f"{b.name}.pointer_table", VAR, len(table), POINTER_TABLE_KIND, table,
                               whole_program=True)
        b.pointer_table = pointer_table
        buffers[pointer_table.serial] = pointer_table


def _spread(exact: list[LiveRange], offsets: dict[int, int], planner: Planner, alignment: int, last_id: int,
            capacity: int) -> dict[int, int]:
    """A placement that does not hand freed bytes to a buffer first used soon after (live
    ranges extended by the longest of :data:`SPREAD_REUSE_DISTANCES` that fits), else ``offsets``."""
    for distance in SPREAD_REUSE_DISTANCES:
        spaced = [LiveRange(r.key, r.size_bytes, r.start, min(last_id, r.end + distance)) for r in exact]
        if spaced == exact:
            break
        place = getattr(planner, "place_like_last", planner.place)   # fitting is enough here
        spaced_offsets = place(spaced, alignment)
        if footprint(spaced, spaced_offsets) <= capacity:
            return spaced_offsets
    return offsets


def _bump_allocate(buffers: dict[int, Buffer], ddr_alignment: int, var_alignment: int) -> None:
    """DDR and variable SRAM: every buffer its own bytes (inputs, outputs, constants, variables first)."""
    for memory, alignment in ((DDR, ddr_alignment), (VAR, var_alignment)):
        group = sorted((b for b in buffers.values() if b.memory is memory),
                       key=lambda b: (_KIND_ORDER.get(b.kind, 9), b.serial))
        bump = BumpAllocator().place([LiveRange(b.serial, b.size_bytes, 0, 0) for b in group], alignment)
        for b in group:
            b.offset_bytes = bump[b.serial]


_KIND_ORDER = {"input": 0, "output": 1, "constant": 2, "variable": 3}


def _share_ddr_when_short(buffers: dict[int, Buffer], first_last: dict[int, tuple[int, int]], ddr_bytes: int,
                          planner: Planner, alignment: int) -> None:
    """When every DDR buffer having its own bytes overflows the DDR, let the buffers with a
    live range (spilled values) share bytes as the TCM planner shares the TCM: after the
    buffers that live for the whole program (inputs, outputs, constants), the spills are
    placed by their live ranges. Only then: sharing adds write-after-read waits."""
    ddr = [b for b in buffers.values() if b.memory is DDR]
    if max((b.end_bytes for b in ddr), default=0) <= ddr_bytes:
        return
    timed = [b for b in ddr if b.serial in first_last]
    if not timed:
        return
    base = max((b.end_bytes for b in ddr if b.serial not in first_last), default=0)
    base = align_up(base, alignment)
    offsets = planner.place([LiveRange(b.serial, b.size_bytes, *first_last[b.serial]) for b in timed], alignment)
    for b in timed:
        b.offset_bytes = base + offsets[b.serial]


def check_capacity(plan: MemoryPlan, hw: HwConfig) -> dict[MemorySpace, int]:
    """Memory sizes for the program; ScheduleError if DDR or the variable SRAM overflows."""
    used = {m: max((b.end_bytes for b in plan.buffers.values() if b.memory is m), default=0)
            for m in (DDR, VAR)}
    if used[VAR] > hw.variable_sram.size_bytes:
        variables = sorted((b for b in plan.buffers.values() if b.memory is VAR), key=lambda b: b.name)
        listing = ", ".join(f"{b.name} ({b.size_bytes} bytes)" for b in variables)
        raise ScheduleError(f"variables need {used[VAR]} bytes of variable SRAM, only "
                            f"{hw.variable_sram.size_bytes} available: {listing}")
    if used[DDR] > hw.ddr.size_bytes:
        raise ScheduleError(f"the graph needs {used[DDR]} bytes of DDR, only {hw.ddr.size_bytes} available")
    return {DDR: hw.ddr.size_bytes, TCM: hw.tcm.size_bytes, VAR: hw.variable_sram.size_bytes}


def allocations(plan: MemoryPlan) -> list[Allocation]:
    """The Program's allocations: every placed buffer with a lifetime (repeated names numbered)."""
    out: list[Allocation] = []
    seen: dict[str, int] = {}
    for serial, b in sorted(plan.buffers.items()):
        if not b.whole_program and serial not in plan.first_last:
            continue
        count = seen.get(b.name, 0)
        seen[b.name] = count + 1
        name = b.name if count == 0 else f"{b.name}#{count}"
        first, last = (None, None) if b.whole_program else plan.first_last[serial]
        if b.blocks is not None:   # a block tensor: an allocation per block, named after it
            out += [Allocation(block_allocation_name(name, k), b.memory, offset, size, b.kind, first, last,
                               block_of=name)
                    for k, (offset, size) in enumerate(zip(b.blocks, block_sizes(b.size_bytes, b.block_bytes)))]
            continue
        out.append(Allocation(name, b.memory, b.placed_offset, b.size_bytes, b.kind, first, last, b.initial_data))
    return out


def block_tensors(plan: MemoryPlan, hw: HwConfig) -> tuple[BlockTensor, ...]:
    """The plan's block tensors, named as their allocations are (first of a name: the name)."""
    names: dict[str, int] = {}
    out = []
    for serial, b in sorted(plan.buffers.items()):
        if not b.whole_program and serial not in plan.first_last:
            continue
        count = names.get(b.name, 0)
        names[b.name] = count + 1
        if b.blocks is None or b.pointer_table is None:
            continue
        name = b.name if count == 0 else f"{b.name}#{count}"
        out.append(BlockTensor(name, b.memory, b.size_bytes, b.block_bytes, b.blocks, VAR,
                               b.pointer_table.placed_offset, hw.block_tensors.pointer_bytes))
    return tuple(out)


def _accesses(views: list[View], cache: dict[View, ByteSet | None]) -> list[tuple[MemorySpace, ByteSet]]:
    """``(memory, bytes)`` of each non-empty view (``cache``: byte sets by view; tiles repeat)."""
    out = []
    for v in views:
        try:
            byte_set = cache[v]
        except KeyError:
            byte_set = cache[v] = view_byte_set(v) if v.blocks is None else ByteSet.of(view_ranges(v))
        if byte_set is not None:
            out.append((v.memory, byte_set))
    return out


def _read_only(view: BufView) -> bool:
    """Views of DDR inputs and constants: no command writes them, so their reads order nothing."""
    b = view.buffer
    return b is not None and b.memory is DDR and b.kind in ("input", "constant")


#: The largest page of the TCM's dependency index: a large TCM (the U55 presets' 8 MiB) in 64
#: pages of 128 KiB would file hundreds of small tensors on each page, each access scanning them.
MAX_TCM_PAGE_BYTES = 8192


def page_sizes(memory_sizes: dict[MemorySpace, int]) -> dict[MemorySpace, int]:
    """Index granularity for dependency tracking: about 64 pages of TCM (at most
    :data:`MAX_TCM_PAGE_BYTES` each), 4 KiB elsewhere. It decides only which records an
    access compares bytes with, never the dependencies found."""
    return {TCM: max(64, min(memory_sizes.get(TCM, 0) // 64, MAX_TCM_PAGE_BYTES)), DDR: 4096, VAR: 1024}


def preamble_loads(cmds: list[ACommand], numbering: Numbering, pool: Buffer | None) -> frozenset[int]:
    """Ids of the top-level DMAs that write the TCM constant pool ``pool`` (nothing else writes
    it): with several invocations they run once, in a preamble (:mod:`npu_sim.simulator`)."""
    if pool is None:
        return frozenset()
    return frozenset(numbering.ids[id(cmd)] for cmd in cmds if isinstance(cmd, ADma) and cmd.dst.buffer is pool)


def build_commands(cmds: list[ACommand], numbering: Numbering,
                   memory_sizes: dict[MemorySpace, int] | None = None,
                   preamble: frozenset[int] = frozenset()) -> list[Command]:
    """Program commands with resolved views and dependencies (control flow as barriers).
    ``preamble``: ids of the DMAs that several invocations run once, before the first
    (:func:`preamble_loads`): no other command's wait is taken as implied through them."""
    return _CommandBuilder(numbering, page_sizes(memory_sizes or {}), preamble).build(cmds)


class _CommandBuilder:
    """Resolves views and finds each command's dependencies, list by list (a control command
    is a barrier: the commands after it wait for it, and it for everything before)."""

    def __init__(self, numbering: Numbering, paging: dict[MemorySpace, int], preamble: frozenset[int]):
        self.numbering, self.paging, self.preamble = numbering, paging, preamble
        self.cache: dict[View, ByteSet | None] = {}
        self.views: dict[BufView, View] = {}   # tiles repeat views (weights, constants): resolve each once

    def resolve(self, view: BufView) -> View:
        try:
            return self.views[view]
        except KeyError:
            resolved = self.views[view] = view.resolve()
            return resolved

    def build(self, lst: list[ACommand]) -> list[Command]:
        tracker = AccessTracker(self.paging)
        implied = ImpliedWaits()   # this list's commands only: nested lists depend on none of them
        barrier: int | None = None
        out: list[Command] = []
        for cmd in lst:
            cid = self.numbering.ids[id(cmd)]
            if isinstance(cmd, ADma):
                out.append(self.dma(cid, cmd, tracker, implied, barrier))
            elif isinstance(cmd, ACompute):
                out.append(self.compute(cid, cmd, tracker, implied, barrier))
            else:
                deps = tracker.live_commands()
                if barrier is not None:
                    deps.add(barrier)
                out.append(self.control(cid, cmd, implied.reduce(cid, deps)))
                tracker = AccessTracker(self.paging)
                implied.restart_queues()
                barrier = cid
        return out

    def dma(self, cid: int, cmd: ADma, tracker: AccessTracker, implied: ImpliedWaits,
            barrier: int | None) -> DmaCommand:
        src, dst = self.resolve(cmd.src), self.resolve(cmd.dst)
        reads = [] if _read_only(cmd.src) else _accesses([src], self.cache)
        deps = tracker.access(cid, reads, _accesses([dst], self.cache))
        if barrier is not None:
            deps.add(barrier)
        kept = implied.reduce(cid, deps, ("dma", cmd.engine), pipelined=True, resident=cid in self.preamble)
        return DmaCommand(cid, cmd.engine, src, dst, kept, cmd.name, cmd.access_bytes)

    def compute(self, cid: int, cmd: ACompute, tracker: AccessTracker, implied: ImpliedWaits,
                barrier: int | None) -> ComputeCommand:
        steps, reads = [], []
        for step in cmd.steps:
            operands = tuple([self.resolve(o) if isinstance(o, BufView) else o for o in step.operands])
            reads += [o for o in operands if isinstance(o, View)]
            steps.append(KernelStep(step.op, step.attribute, operands, step.input_types, step.output_types,
                                    step.out_region, step.input_offsets, step.name, step.origin))
        outputs = tuple([self.resolve(v) for v in cmd.outputs])
        # (steps read the same view several times: a repeat would find and record nothing more)
        deps = tracker.access(cid, _accesses(list(dict.fromkeys(reads)), self.cache),
                              _accesses(list(outputs), self.cache))
        if barrier is not None:
            deps.add(barrier)
        return ComputeCommand(cid, cmd.unit, tuple(steps), outputs, implied.reduce(cid, deps, cmd.unit),
                              cmd.name, cmd.macs, cmd.output_steps, cmd.composite, cmd.lut_function,
                              cmd.reads_ddr_home, cmd.reads_ddr_state, cmd.writes_ddr_state, cmd.weights_in_place,
                              cmd.ifm_refetch_bytes, cmd.ifm_refetch_burst_bytes, cmd.parameters_in_place,
                              cmd.table_in_place, cmd.table_load_hidden_cycles,
                              cmd.constant_operands_in_place)

    def control(self, cid: int, cmd: ACond | ALoop, deps: tuple[int, ...]) -> CondCommand | LoopCommand:
        condition = self.resolve(cmd.condition)
        if isinstance(cmd, ACond):
            return CondCommand(cid, condition, tuple(self.build(cmd.then)), tuple(self.build(cmd.orelse)),
                               deps, cmd.name)
        return LoopCommand(cid, tuple(self.build(cmd.cond)), condition, tuple(self.build(cmd.body)),
                           cmd.max_iterations, deps, cmd.name)
