"""The plan verifier: static checks that a Program's memory plan and command order are sound.

:func:`verify_program` raises :class:`PlanError` naming the first problem:

1. the Program's own structural checks (:meth:`Program.validate`);
2. no two allocations of one memory overlap in bytes while both are live
   (``first_use``..``last_use``; None: the whole program);
3. every view a command touches lies inside one allocation of its memory that
   is live at that command (graph input/output/variable views inside
   whole-program allocations);
4. compute commands read and write only TCM (a fused composite may also read the
   variable SRAM); DMAs use paths the hardware has;
5. no command writes a DDR input or constant; every byte read was last
   written (in stream order) through the allocation the read goes through, by a
   command or by the host (initial data, graph inputs and variables): a read
   never sees bytes another allocation overwrote. After a COND_IF a byte counts
   only if both branches leave it the same; a loop is followed for two
   iterations (so a value carried to the next iteration must survive the body)
   and after it a byte counts only if zero and two iterations leave it the same;
6. every two accesses to a byte, one of them a write, are ordered by the
   dependencies (transitively; a control command's nested commands run after
   its dependencies and before whoever depends on it; a branch and a loop body
   run after the condition is read, the body of a loop after its condition
   commands) and by the in-order queues, as the simulator runs them: within a
   command list (between control commands), a compute command starts after the
   previous one of its unit is done, a DMA after the previous one of its engine
   started, so after what that one waited for (its data may land later). Loop
   iterations are assumed to be barriers, as the sequencer runs them;
7. a view of a block tensor walks the table of one of the Program's block tensors, whose
   pointer-table allocation holds exactly its blocks' offsets (each block is an allocation,
   checked by 2, 3, 5 and 6 like any other);
8. a Program with ``preamble_command_ids`` is checked again as several invocations run it
   (:mod:`npu_sim.simulator`): those commands, top-level DMAs, run first and once, waiting for
   nothing; in an invocation they are done before it starts, order nothing after them but
   themselves (a command waiting for one waits for none of what it waited for) and hold no
   place in their engine's queue; and no command of an invocation writes the bytes they wrote
   (the next invocation reads them as they left them).

Accesses are exact byte sets of the views, not their spans.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from npu_sim.errors import ProgramError
from npu_sim.hw.dma import DMA_PATHS
from npu_sim.memory_layout import block_ranges
from npu_sim.program import (
    Allocation,
    Command,
    ComputeCommand,
    CondCommand,
    DmaCommand,
    LoopCommand,
    MemorySpace,
    Program,
    View,
    command_reads_in_place,
)
from scheduler.memory.byte_ranges import Ranges, covered, overlaps, pages, view_ranges

DDR, TCM, VAR = MemorySpace.DDR, MemorySpace.TCM, MemorySpace.VARIABLE_SRAM
PAGE_BYTES = 1024
UNWRITTEN, MIXED = -1, -2   # byte owners: never written; written through different allocations


class PlanError(ProgramError):
    """The memory plan or the command order of a Program is unsound."""


def _label(cmd: Command) -> str:
    return f"command {cmd.id}" + (f" ({cmd.name})" if cmd.name else "")


def _live(a: Allocation, cid: int) -> bool:
    return (a.first_use is None or a.first_use <= cid) and (a.last_use is None or cid <= a.last_use)


def _lives_overlap(a: Allocation, b: Allocation) -> bool:
    a_lo = -1 if a.first_use is None else a.first_use
    a_hi = float("inf") if a.last_use is None else a.last_use
    b_lo = -1 if b.first_use is None else b.first_use
    b_hi = float("inf") if b.last_use is None else b.last_use
    return a_lo <= b_hi and b_lo <= a_hi


def check_allocations(program: Program) -> None:
    """No two allocations of a memory share bytes while both are live."""
    for memory in MemorySpace:
        allocs = sorted((a for a in program.allocations if a.memory is memory and a.size_bytes > 0),
                        key=lambda a: a.offset_bytes)
        for i, a in enumerate(allocs):
            for b in allocs[i + 1:]:
                if b.offset_bytes >= a.end_bytes:
                    break
                if _lives_overlap(a, b):
                    raise PlanError(f"allocations {a.name} [{a.offset_bytes}, {a.end_bytes}) and {b.name} "
                                    f"[{b.offset_bytes}, {b.end_bytes}) of {memory.value} overlap while both live")


def _reads_writes(cmd: Command) -> tuple[list[View], list[View]]:
    if isinstance(cmd, DmaCommand):
        return [cmd.src], [cmd.dst]
    if isinstance(cmd, ComputeCommand):
        return [v for s in cmd.steps for v in s.operands if isinstance(v, View)], list(cmd.outputs)
    return [cmd.condition], []


def _check_compute_reads(cmd: ComputeCommand, reads: list[View]) -> None:
    """Compute units read the TCM (a composite also the variable SRAM, a LUT its tables where
    they live, a matrix-vector product with ``weights_in_place`` its weights)."""
    readable = (TCM, VAR) if cmd.composite else (TCM,)
    tables = {id(o) for s in cmd.steps for i, o in enumerate(s.operands) if command_reads_in_place(cmd, s, i)}
    for v in reads:
        if v.element_count and v.memory not in readable and id(v) not in tables:
            raise PlanError(f"{_label(cmd)}: compute operand {v} is not in TCM")


class _Containment:
    def __init__(self, program: Program):
        self.by_memory = {m: sorted((a for a in program.allocations if a.memory is m),
                                    key=lambda a: a.offset_bytes) for m in MemorySpace}
        self.offsets = {m: [a.offset_bytes for a in allocs] for m, allocs in self.by_memory.items()}
        self.largest = {m: max((a.size_bytes for a in allocs), default=0) for m, allocs in self.by_memory.items()}

    def find(self, view: View, cid: int | None, where: str) -> Allocation | None:
        """The allocation holding ``view`` (live at command ``cid``; None: for the whole program)."""
        if view.element_count == 0:
            return None
        if view.blocks is not None:   # a block tensor's: every piece in one of its blocks
            pieces = self.pieces(view, cid, where)
            return pieces[0][0] if pieces else None
        return self.find_bytes(view, *view.span, cid, where)

    def pieces(self, view: View, cid: int | None, where: str) -> list[tuple[Allocation | None, int, int]]:
        """``(allocation, start, end)`` of each run of bytes ``view`` touches (a block tensor's:
        each piece of a run within one block, with that block's allocation)."""
        if view.blocks is None:
            a = self.find(view, cid, where)
            return [(a, int(lo), int(hi)) for lo, hi in view_ranges(view)]
        logical = view_ranges(view.logical())
        runs = block_ranges(logical[:, 0], logical[:, 1], view.blocks, view.block_bytes)
        return [(self.find_bytes(view, int(lo), int(hi), cid, where), int(lo), int(hi)) for lo, hi in runs]

    def find_bytes(self, view: View, lo: int, hi: int, cid: int | None, where: str) -> Allocation:
        """The allocation holding bytes ``[lo, hi)`` of ``view``'s memory (see :meth:`find`)."""
        allocs = self.by_memory[view.memory]
        k = bisect.bisect_right(self.offsets[view.memory], lo) - 1
        while k >= 0 and allocs[k].offset_bytes >= lo - self.largest[view.memory]:
            a = allocs[k]
            if hi <= a.end_bytes and (a.first_use is None if cid is None else _live(a, cid)):
                return a
            k -= 1
        raise PlanError(f"{where}: view {view} [{lo}, {hi}) lies in no allocation live "
                        + ("at that command" if cid is not None else "for the whole program"))

    def check(self, view: View, cid: int | None, where: str) -> None:
        self.find(view, cid, where)


@dataclass
class _Access:
    cmd: int
    ranges: Ranges
    write: bool
    alive: bool = True

    def __post_init__(self) -> None:
        self.lo = int(self.ranges[0, 0]) if len(self.ranges) else 0
        self.hi = int(self.ranges[-1, 1]) if len(self.ranges) else 0


def _page_bytes(memory: MemorySpace, sizes: dict[MemorySpace, int]) -> int:
    return max(64, sizes.get(memory, 0) // 256) if memory is TCM else PAGE_BYTES


@dataclass
class _Records:
    """Accesses not yet known to be ordered before everything after them, indexed by page
    (writes and reads apart)."""

    sizes: dict[MemorySpace, int]
    writes: dict[tuple[MemorySpace, int], list[_Access]] = field(default_factory=dict)
    reads: dict[tuple[MemorySpace, int], list[_Access]] = field(default_factory=dict)

    def _pages(self, memory: MemorySpace, ranges: Ranges) -> set[int]:
        return pages(ranges, _page_bytes(memory, self.sizes))

    def candidates(self, memory: MemorySpace, ranges: Ranges, with_reads: bool) -> list[_Access]:
        lo, hi = int(ranges[0, 0]), int(ranges[-1, 1])
        seen: dict[int, _Access] = {}
        for index in ((self.writes, self.reads) if with_reads else (self.writes,)):
            for p in self._pages(memory, ranges):
                recs = index.get((memory, p))
                if not recs:
                    continue
                alive = [r for r in recs if r.alive]
                if len(alive) < len(recs):
                    index[(memory, p)] = alive
                for rec in alive:
                    if rec.lo < hi and lo < rec.hi:
                        seen[id(rec)] = rec
        return list(seen.values())

    def add(self, memory: MemorySpace, rec: _Access) -> None:
        index = self.writes if rec.write else self.reads
        for p in self._pages(memory, rec.ranges):
            index.setdefault((memory, p), []).append(rec)

    def copy(self) -> _Records:
        """Independent records (pruning in one branch must not affect the other)."""
        clones: dict[int, _Access] = {}
        out = _Records(self.sizes)
        for mine, theirs in ((self.writes, out.writes), (self.reads, out.reads)):
            for k, v in mine.items():
                theirs[k] = [clones.setdefault(id(r), _Access(r.cmd, r.ranges, r.write)) for r in v if r.alive]
        return out

    def replace_with_union(self, a: _Records, b: _Records) -> None:
        """Become the accesses of either branch (whichever ran)."""
        for name in ("writes", "reads"):
            index: dict[tuple[MemorySpace, int], list[_Access]] = {}
            for source in (a, b):
                for k, v in getattr(source, name).items():
                    index.setdefault(k, []).extend(r for r in v if r.alive)
            setattr(self, name, index)


class _Verifier:
    def __init__(self, program: Program, resident: frozenset[int] = frozenset()):
        self.program = program
        #: the preamble's commands (checking the run of several invocations), else none
        self.resident = resident
        self.resident_bytes: list[tuple[int, MemorySpace, Ranges]] = []   # (command, memory, bytes it loads)
        self.containment = _Containment(program)
        self.tables = block_tables(program)
        self.reach: dict[int, int] = {}       # command id -> bitset of commands ordered before its start
        self.done: dict[int, int] = {}        # command id -> bitset of commands ordered before anyone after it
        sizes = {m: max((a.end_bytes for a in program.allocations if a.memory is m), default=0)
                 for m in MemorySpace}
        self.index = {id(a): k for k, a in enumerate(program.allocations)}
        # per byte: the index of the allocation through which it was last written
        self.owner = {m: np.full(sizes[m], UNWRITTEN, dtype=np.int32) for m in MemorySpace}
        for k, a in enumerate(program.allocations):
            if a.initial_data is not None:
                self.owner[a.memory][a.offset_bytes:a.offset_bytes + len(a.initial_data)] = k
            if a.kind in ("input", "variable"):
                self.owner[a.memory][a.offset_bytes:a.end_bytes] = k

    # -- happens-before
    def _before(self, deps: tuple[int, ...], start: int) -> int:
        bits = start
        for d in deps:
            if d not in self.done:
                raise PlanError(f"dependency {d} is not a command of an enclosing or the same list")
            bits |= self.done[d] | (1 << d)
        return bits

    # -- per command
    def run_list(self, cmds: Sequence[Command], start: int, records: _Records) -> int:
        """Check ``cmds``; return the bitset of commands done when all of them are."""
        finished = start
        last: dict[object, int] = {}   # queue -> its latest command in this list
        for cmd in cmds:
            if cmd.id in self.resident:   # (loaded by the preamble, before the invocation)
                continue
            before = self._before(cmd.deps, start)
            if isinstance(cmd, (DmaCommand, ComputeCommand)):
                before |= self._queue_order(cmd, last)
            self.reach[cmd.id] = before
            if isinstance(cmd, (DmaCommand, ComputeCommand)):
                self.check_resident_kept(cmd)
                self.run_access(cmd, before, records)
                self.done[cmd.id] = before
                finished |= before | (1 << cmd.id)
            else:
                inner = self.run_control(cmd, before, records)
                self.done[cmd.id] = inner
                finished |= inner | (1 << cmd.id)
                last.clear()   # later commands are issued once it is done
        return finished

    def run_access(self, cmd: DmaCommand | ComputeCommand, before: int, records: _Records) -> None:
        """Check a DMA's or a compute command's views, reads and writes (``before``: the bitset
        of commands ordered before its start)."""
        self.check_unit(cmd)
        reads, writes = _reads_writes(cmd)
        self.check_views(cmd, reads + writes)
        for v in writes:
            a = self.containment.find(v, cmd.id, _label(cmd))
            if a is not None and a.memory is DDR and a.kind in ("input", "constant"):
                raise PlanError(f"{_label(cmd)}: writes the {a.kind} {a.name}")
        self.check_initialised(cmd, reads)
        self.check_order(cmd, before, [v for v in reads if not self._read_only(v, cmd)], writes, records)
        self.mark_written(cmd, writes)

    def run_control(self, cmd: CondCommand | LoopCommand, before: int, records: _Records) -> int:
        """Check a COND_IF or a WHILE and its nested lists; the bitset of commands done when it is."""
        self.check_views(cmd, [cmd.condition])
        inner = before
        if isinstance(cmd, CondCommand):
            self.check_order(cmd, before, [cmd.condition], [], records)
            self.check_initialised(cmd, [cmd.condition])
            saved = self._owners()
            then_records = records.copy()
            decided = before | (1 << cmd.id)   # the branch runs after the condition is read
            inner |= self.run_list(cmd.then_commands, decided, then_records)
            then_owner = self.owner
            self.owner = saved
            else_records = records.copy()
            inner |= self.run_list(cmd.else_commands, decided, else_records)
            self._merge(then_owner)
            records.replace_with_union(then_records, else_records)
            return inner
        cond_done = self.run_list(cmd.cond_commands, before, records)
        self.check_order(cmd, cond_done, [cmd.condition], [], records)
        self.check_initialised(cmd, [cmd.condition])
        no_iteration = self._owners()
        body_done = self.run_list(cmd.body_commands, cond_done | (1 << cmd.id), records)
        inner |= cond_done | body_done
        # a second iteration: what it reads must have survived the first
        # (iterations are barriers, so every command of the first is before it)
        again = self.run_list(cmd.cond_commands, inner | (1 << cmd.id), records)
        self.check_initialised(cmd, [cmd.condition])
        again = self.run_list(cmd.body_commands, again | (1 << cmd.id), records)
        self.run_list(cmd.cond_commands, again, records)
        self._merge(no_iteration)
        return inner

    def run_preamble(self, records: _Records) -> int:
        """Check the preamble of several invocations: its commands run first, once, waiting for
        nothing. Returns the bitset of commands done before an invocation starts."""
        done = 0
        preamble = [cmd for cmd in self.program.commands if cmd.id in self.resident]
        if len(preamble) < len(self.resident):
            stray = sorted(self.resident - {cmd.id for cmd in preamble})
            raise PlanError(f"preamble command {stray[0]} is not a top-level command")
        for cmd in preamble:
            if not isinstance(cmd, DmaCommand):
                raise PlanError(f"{_label(cmd)}: a preamble command must be a DMA")
            source = self.containment.find(cmd.src, cmd.id, _label(cmd))
            if source is not None and source.kind != "constant":
                raise PlanError(f"{_label(cmd)}: the preamble loads {source.kind} {source.name}, "
                                "not a constant")
            self.reach[cmd.id] = self.done[cmd.id] = 0   # (it orders nothing but itself)
            self.run_access(cmd, 0, records)
            if cmd.dst.element_count:
                self.resident_bytes.append((cmd.id, cmd.dst.memory, view_ranges(cmd.dst)))
            done |= 1 << cmd.id
        return done

    def check_resident_kept(self, cmd: DmaCommand | ComputeCommand) -> None:
        """No command of an invocation writes the bytes the preamble loaded (every invocation
        reads them as the preamble left them)."""
        if not self.resident_bytes:
            return
        for v in _reads_writes(cmd)[1]:
            if not v.element_count:
                continue
            ranges = view_ranges(v)
            for load, memory, loaded in self.resident_bytes:
                if memory is v.memory and overlaps(loaded, ranges):
                    raise PlanError(f"{_label(cmd)}: writes {memory.value} bytes that preamble command "
                                    f"{load} loads once for every invocation")

    def _queue_order(self, cmd: DmaCommand | ComputeCommand, last: dict[object, int]) -> int:
        """What ``cmd``'s queue orders before its start: the previous compute command of its unit
        (done) and what it waited for; for a DMA, what the previous DMA of its engine waited for."""
        queue: object = ("dma", cmd.engine) if isinstance(cmd, DmaCommand) else cmd.unit
        previous = last.get(queue)
        last[queue] = cmd.id
        if previous is None:
            return 0
        return self.reach[previous] if isinstance(cmd, DmaCommand) else self.done[previous] | (1 << previous)

    def _read_only(self, view: View, cmd: Command) -> bool:
        """Views of DDR inputs and constants (checked above never to be written)."""
        a = self.containment.find(view, cmd.id, _label(cmd))
        return a is not None and a.memory is DDR and a.kind in ("input", "constant")

    def check_unit(self, cmd: Command) -> None:
        if isinstance(cmd, ComputeCommand):
            reads, writes = _reads_writes(cmd)
            for v in writes:
                if v.element_count and v.memory is not TCM:
                    raise PlanError(f"{_label(cmd)}: compute result {v} is not in TCM")
            _check_compute_reads(cmd, reads)
        elif isinstance(cmd, DmaCommand) and (cmd.src.memory, cmd.dst.memory) not in DMA_PATHS \
                and cmd.src.element_count:
            raise PlanError(f"{_label(cmd)}: no DMA path {cmd.src.memory.value} -> {cmd.dst.memory.value}")

    def check_views(self, cmd: Command, views: list[View]) -> None:
        for v in views:
            if v.blocks is not None and self.tables.get(v.blocks) != v.block_bytes:
                raise PlanError(f"{_label(cmd)}: view {v} walks no block tensor's pointer table")
            self.containment.check(v, cmd.id, _label(cmd))

    def _owners(self) -> dict[MemorySpace, np.ndarray]:
        return {m: o.copy() for m, o in self.owner.items()}

    def _merge(self, other: dict[MemorySpace, np.ndarray]) -> None:
        """Bytes after one of two paths: kept where both agree, else unwritten or mixed."""
        for m, mine in self.owner.items():
            theirs = other[m]
            differ = mine != theirs
            mine[differ] = np.where((mine[differ] == UNWRITTEN) | (theirs[differ] == UNWRITTEN), UNWRITTEN, MIXED)

    def check_initialised(self, cmd: Command, reads: list[View]) -> None:
        """Every byte read was last written through the allocation it is read through."""
        for v in reads:
            owner = self.owner[v.memory]
            for a, start, end in self.containment.pieces(v, cmd.id, _label(cmd)):
                if a is None:
                    continue
                mine = self.index[id(a)]
                wrong = np.flatnonzero(owner[start:end] != mine)
                if not len(wrong):
                    continue
                first = start + int(wrong[0])
                who = int(owner[first])
                if who == UNWRITTEN:
                    raise PlanError(f"{_label(cmd)}: reads {v.memory.value} byte {first} of {v} "
                                    "before anything writes it")
                by = "a write that depends on the branch taken" if who == MIXED else \
                    f"allocation {self.program.allocations[who].name!r}"
                raise PlanError(f"{_label(cmd)}: reads {v.memory.value} byte {first} of {v} "
                                f"(allocation {a.name!r}) after {by} overwrote it")

    def mark_written(self, cmd: Command, writes: list[View]) -> None:
        for v in writes:
            for a, start, end in self.containment.pieces(v, cmd.id, _label(cmd)):
                if a is not None:
                    self.owner[v.memory][start:end] = self.index[id(a)]

    def check_order(self, cmd: Command, before: int, reads: list[View], writes: list[View],
                    records: _Records) -> None:
        """Every earlier access ``cmd`` conflicts with is ordered before it (``before``: a bit
        per command id); then its writes retire the records they cover, and its accesses join."""
        accesses = [(v.memory, view_ranges(v), False) for v in reads if v.element_count] + \
                   [(v.memory, view_ranges(v), True) for v in writes if v.element_count]
        for memory, ranges, is_write in accesses:
            _check_conflicts(cmd, before, memory, ranges, is_write, records)
        for memory, ranges, is_write in accesses:
            if is_write:
                _retire_covered(cmd, memory, ranges, records)
        for memory, ranges, is_write in accesses:
            records.add(memory, _Access(cmd.id, ranges, is_write))


def _check_conflicts(cmd: Command, before: int, memory: MemorySpace, ranges: Ranges, is_write: bool,
                     records: _Records) -> None:
    for rec in records.candidates(memory, ranges, with_reads=is_write):
        if rec.cmd == cmd.id:
            continue
        if overlaps(rec.ranges, ranges) and not (before >> rec.cmd) & 1:
            kind = "write" if is_write else "read"
            other = "write" if rec.write else "read"
            raise PlanError(f"{_label(cmd)}: its {kind} of {memory.value} bytes is not ordered "
                            f"after the {other} by command {rec.cmd}")


def _retire_covered(cmd: Command, memory: MemorySpace, ranges: Ranges, records: _Records) -> None:
    """Earlier accesses whose bytes a write of ``cmd`` covers need not be checked again."""
    lo, hi = int(ranges[0, 0]), int(ranges[-1, 1])
    for rec in records.candidates(memory, ranges, with_reads=True):
        if rec.cmd != cmd.id and lo <= rec.lo and rec.hi <= hi and covered(rec.ranges, ranges):
            rec.alive = False


def block_tables(program: Program) -> dict[tuple[int, ...], int]:
    """Block offsets -> block size of each of the Program's block tensors, after checking that
    its pointer table (an allocation of its table memory) holds those offsets."""
    tables = {(a.memory, a.offset_bytes): a for a in program.allocations if a.initial_data is not None}
    out = {}
    for t in program.block_tensors:
        table = tables.get((t.table_memory, t.table_offset_bytes))
        want = b"".join(offset.to_bytes(t.pointer_bytes, "little") for offset in t.blocks)
        if table is None or table.initial_data != want:
            raise PlanError(f"block tensor {t.name}: its pointer table in {t.table_memory.value} at "
                            f"{t.table_offset_bytes} does not list its {len(t.blocks)} blocks")
        out[t.blocks] = t.block_bytes
    return out


def verify_program(program: Program) -> None:
    """Raise :class:`PlanError` (or ProgramError) unless ``program`` passes every check above:
    as one invocation runs it and, with a preamble, as several do."""
    program.validate()
    check_allocations(program)
    _verify_run(program, frozenset())
    if program.preamble_command_ids:
        _verify_run(program, program.preamble_command_ids)


def _verify_run(program: Program, resident: frozenset[int]) -> None:
    """Checks 3 to 8 of one run: a single invocation (``resident`` empty), or an invocation after
    the preamble of the commands ``resident``."""
    verifier = _Verifier(program, resident)
    ids = [cmd.id for cmd in program.walk()]
    # (the host writes an input before the first command and reads an output after the last:
    # an arena buffer in the TCM is live from the start, or to the end, not throughout)
    first, last = (min(ids), max(ids)) if ids else (None, None)
    for name, view in program.inputs.items():
        verifier.containment.check(view, first, f"graph tensor {name!r}")
    for name, view in program.outputs.items():
        verifier.containment.check(view, last, f"graph tensor {name!r}")
    for name, view in program.variables.items():
        verifier.containment.check(view, None, f"graph tensor {name!r}")
    records = _Records(dict(program.memory_sizes))
    verifier.run_list(program.commands, verifier.run_preamble(records) if resident else 0, records)
    for name, view in program.outputs.items():
        for start, end in view_ranges(view):
            a = verifier.containment.find(view, last, f"graph output {name!r}")
            if (verifier.owner[view.memory][start:end] != verifier.index[id(a)]).any():
                raise PlanError(f"graph output {name!r}: some bytes are never written")
