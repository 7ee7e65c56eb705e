"""Runs a :class:`~npu_sim.program.Program` on the hardware model, event by event (simpy).

The machine (:class:`Simulator`):

* memories (:mod:`npu_sim.hw.memory`) holding real bytes: DDR, TCM, variable SRAM,
  sized as the Program's plan (which must fit the config's capacities);
* DMA engines ``dma0..dmaN-1`` and compute units ``mac_array``, ``vector``, ``lut``,
  each an in-order queue (:mod:`npu_sim.hw.queues`);
* bandwidth channels for the DDR, the variable SRAM and the TCM (:mod:`npu_sim.hw.ddr`);
* a sequencer that issues the command stream to the queues in stream order.

Run order: constants and initial values (``Allocation.initial_data``) are loaded
before the first invocation; each invocation the host writes the graph inputs into
their DDR views (in zero cycles), the sequencer issues the commands, and when every
command is done the host reads the outputs back from their views. Variables stay in
the variable SRAM from one invocation to the next. Invocation ``k+1`` starts when
invocation ``k`` has finished.

Preamble: with several invocations, the commands the Program names in
``preamble_command_ids`` (the constant-pool loads: TCM bytes nothing else writes) run
once, before the first invocation, and count as done in every invocation: the constants
stay resident in TCM and the invocations move only inputs, outputs and what does not fit.
A command waiting for one of them therefore waits for nothing it waited for, and it holds no
place in its engine's queue: the scheduler lists every other wait itself
(:class:`scheduler.codegen.deps.ImpliedWaits`), and the plan verifier checks the Program so.
The preamble's span is :attr:`SimResult.preamble_cycles`; invocation records start after it.

Issue and dependencies: a command starts when it heads its unit's queue, the unit is
idle and every command in ``deps`` is done *in this invocation* (a dependency on a
command that is never issued in it, e.g. one in a branch not taken, waits forever:
depend on the CondCommand/LoopCommand instead). A DMA engine is idle again once its
descriptor's last burst is issued; the DMA is *done* (its bytes land and its
dependents may start) a DDR latency later (:mod:`npu_sim.hw.dma`). The sequencer
issues plain commands without delay; at a control command it stops issuing until the
command's deps are done, then decides from the condition view's first element (non-zero: true):

* ``CondCommand``: issues the chosen branch; the command is done when the branch is.
* ``LoopCommand``: ``cond_commands`` run to completion, the condition is read; if
  true the ``body_commands`` run to completion, and again. Iterations are barriers.
  More iterations than ``max_iterations`` raise :class:`SimulationError`.

Long streams (``FOLD_MIN_INVOCATIONS`` invocations or more): an invocation that starts on a
quiet machine may be replayed from an earlier one's record instead of event by event, with
the same bits, cycles and records (:mod:`npu_sim.hw.replay`).

When no event is left but commands are, :class:`SimulationDeadlock` names the blocked
commands. Everything is deterministic: same Program, config and inputs, same trace.

Timing only (``timing_only=True``): the same commands with the same cycles and the same
event schedule, but no kernel runs and no byte moves (no inputs are written, no outputs or
variables are read back): a command's timing never depends on the values it computes.
Control flow does (a condition is a computed value), so a Program with COND_IF or WHILE
commands runs in full anyway (``SimResult.timing_only`` says which happened).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import simpy

import npu_sim.reference  # noqa: F401  (registers the kernels the compute units run)
from npu_sim import progress
from npu_sim.errors import InputError, MemoryAccessError, ProgramError, SimulationDeadlock, SimulationError
from npu_sim.gc_pause import gc_paused
from npu_sim.hw.compute import ComputeOp, InPlaceRead, TimedComputeOp, compile_compute, no_binding
from npu_sim.hw.compute_units import MAC_ARRAY, VECTOR, unit_names
from npu_sim.hw.compute_units.mac_array import channel_parameter_bytes, decomposed_read_bytes
from npu_sim.hw.compute_units.vector import per_channel_rescale_bytes, source_operator_bytes
from npu_sim.hw.config import HwConfig, load_hw_config
from npu_sim.hw.cost import ComputeCycles, command_mac_pe_cycles, command_macs, command_tcm_bytes
from npu_sim.hw.ddr import BandwidthChannel
from npu_sim.hw.dma import DmaModel, DmaOp, TimedDmaOp, channel_bandwidth_bytes_per_cycle, make_descriptor
from npu_sim.hw.memory import Memory, PointerTables, ViewAccess, named
from npu_sim.hw.queues import Clock, Dependency, QueuedCommand, Unit, Waiter
from npu_sim.hw.replay import Diverged, Replays, Transfer
from npu_sim.hw.trace import AllocationIndex, Counters, InvocationRecord, StaticInfo, Trace, TraceRecorder
from npu_sim.program import (
    Allocation,
    Command,
    ComputeCommand,
    CondCommand,
    DmaCommand,
    LoopCommand,
    MemorySpace,
    Program,
)
from npu_sim.reference.unpredictable import active_log
from npu_sim.run_limits import LoopGuard, current_limits


@dataclass
class SimResult:
    """Outputs per invocation (read back from the modeled memories), trace and cycle counts."""

    outputs: list[dict[str, np.ndarray]]
    variables: dict[str, np.ndarray]  # final contents of the variables that were written
    trace: Trace
    total_cycles: int
    per_invocation_cycles: list[int]
    clock_hz: int
    hw_name: str
    #: cycles of the preamble that loaded the resident constants (0: none)
    preamble_cycles: int = 0
    #: no values were computed (``outputs`` and ``variables`` empty): see the module doc
    timing_only: bool = False

    @property
    def counters(self) -> Counters:
        return self.trace.counters

    @property
    def seconds(self) -> float:
        return self.total_cycles / self.clock_hz


#: Invocations from which compute commands fold their elementwise chains into tables
#: (:mod:`npu_sim.hw.table_folding`): building the tables costs milliseconds, which a short
#: run would not win back.
FOLD_MIN_INVOCATIONS = 64


def simulate_program(program: Program, hw: HwConfig | str,
                     invocations_inputs: Sequence[dict[str, np.ndarray]], *, timing_only: bool = False) -> SimResult:
    """Run ``program`` once per element of ``invocations_inputs`` on the machine ``hw`` describes
    (``timing_only``: see the module doc; the inputs are then not read)."""
    if isinstance(hw, str):
        hw = load_hw_config(hw)
    with gc_paused():
        return Simulator(program, hw, timing_only=timing_only).run(invocations_inputs)


def has_control_flow(program: Program) -> bool:
    """Whether ``program`` has COND_IF or WHILE commands (their conditions are computed values)."""
    return any(isinstance(cmd, (CondCommand, LoopCommand)) for cmd in program.commands)


def _written_bytes(commands: Sequence[Command]) -> int:
    """Bytes one pass over ``commands`` writes (nested loops count their own work)."""
    total = 0
    for cmd in commands:
        if isinstance(cmd, DmaCommand):
            total += cmd.dst.size_bytes
        elif isinstance(cmd, ComputeCommand):
            total += sum(view.size_bytes for view in cmd.outputs)
    return total


def _constant_tcm_bytes(program: Program) -> tuple[int, int] | None:
    """The TCM bytes ``[start, end)`` only the preamble loads write (the constant pool): what a
    compute step reads there is a constant once loaded (its kernel may be bound to it)."""
    ids = program.preamble_command_ids
    ranges = [(c.dst.offset_bytes, c.dst.offset_bytes + c.size_bytes) for c in program.commands
              if isinstance(c, DmaCommand) and c.id in ids and c.dst.memory is MemorySpace.TCM]
    if not ranges:
        return None
    return min(r[0] for r in ranges), max(r[1] for r in ranges)


def _attach_pointer_tables(program: Program, memories: dict[MemorySpace, Memory]) -> None:
    """Accesses to a block tensor walk its pointer table in the bytes of the table's memory."""
    for t in program.block_tensors:
        tables = memories[t.memory].pointer_tables
        if tables is None or tables.memory is not memories[t.table_memory]:
            tables = memories[t.memory].pointer_tables = PointerTables(memories[t.table_memory], {})
        tables.tables[t.blocks] = (t.table_offset_bytes, t.pointer_bytes)


def in_place_read_bytes(hw: HwConfig, cmd: ComputeCommand) -> tuple[int, int]:
    """Bytes ``cmd`` reads from the DDR while it computes, and the DDR bursts' bytes they take: the
    weight stream it reads where it lives (one stream: Vela's encoder packs an operation's weights
    and scales together), a per-channel RESCALE's multipliers read per element
    (``vector.per_channel_rescale_read_bytes``), a softmax's reads of the constants' memory
    (``vector.source_softmax_read_bytes``), a squared difference's (``vector.source_squared_difference_read_bytes``)
    and its input feature map's block fetches beyond the TCM
    copy, a TABLE's table loaded into the LUT from where it lives, and an elementwise operation's
    constant operands read there (``ComputeCommand.in_place_constants``): what crosses the DDR channel
    while it computes (:class:`InPlaceRead`)."""
    size = sum(v.size_bytes for v in (*cmd.in_place_weights(), *cmd.in_place_tables(), *cmd.in_place_constants()))
    if cmd.unit == VECTOR.name:   # (both 0 unless the config sets their bytes)
        size += sum(per_channel_rescale_bytes(hw, step) for step in cmd.steps) + source_operator_bytes(hw, cmd.steps)
    burst = hw.ddr.burst_size_bytes
    return size + cmd.ifm_refetch_bytes, -(-size // burst) * burst + cmd.ifm_refetch_burst_bytes


def command_ddr_read_bytes(hw: HwConfig, cmd: ComputeCommand,
                           in_place: tuple[int, int] | None = None) -> tuple[int, int]:
    """:func:`in_place_read_bytes` (``in_place``, if known) and what a convolution reads again: the
    channel parameters (``mac_array.channel_parameter_bytes``) and, run one output position at a
    time beyond ``mac_array.max_stride``, the weight stream per position (whole bursts). Their
    time is the cost model's (in the command's cycles), their bytes count."""
    size, burst_bytes = in_place_read_bytes(hw, cmd) if in_place is None else in_place
    if cmd.unit != MAC_ARRAY.name or not (hw.mac_array.channel_parameter_bytes or hw.mac_array.max_stride):
        return size, burst_bytes
    parameters = sum(channel_parameter_bytes(hw, step) + decomposed_read_bytes(hw, step) for step in cmd.steps)
    if not parameters:
        return size, burst_bytes
    burst = hw.ddr.burst_size_bytes
    return size + parameters, burst_bytes + -(-parameters // burst) * burst


def _where(cmd: Command) -> str:
    return f"command {cmd.id}" + (f" ({cmd.name})" if cmd.name else "")


class _Control:
    """A CondCommand or LoopCommand: handled by the sequencer, never queued on a unit."""

    __slots__ = ("cid", "name", "command", "deps", "done", "issued", "waiters", "condition",
                 "branches")

    def __init__(self, command: CondCommand | LoopCommand, condition: ViewAccess,
                 branches: tuple[list[Node], list[Node]]):
        self.cid, self.name, self.command = command.id, command.name, command
        self.deps: tuple[Node, ...] = ()
        self.done = False
        self.issued = False
        self.waiters: list[Waiter] | None = None
        self.condition = condition
        self.branches = branches  # (then, else) or (cond_commands, body_commands)

    @property
    def label(self) -> str:
        return f"command {self.cid}" + (f" ({self.name})" if self.name else "")


class _StaticFacts:
    """What the trace records of every execution of a compiled command (computed once per
    command, when the trace's tables are first asked for). Apart from the :class:`Simulator`:
    a trace must not keep the whole machine alive."""

    def __init__(self, program: Program, hw: HwConfig):
        self.program, self.hw = program, hw

    @cached_property
    def _touched(self) -> dict[int, tuple[int, ...]]:
        """The allocations each command touches (:meth:`AllocationIndex.touched_all`), by id."""
        return AllocationIndex(self.program.allocations).touched_all(self.program.walk())

    def __call__(self, node: Node) -> StaticInfo:
        touched = self._touched[node.command.id]
        if isinstance(node, DmaOp):
            t = node.timing
            return StaticInfo("dma", node.unit.name, "copy", node.command.src.size_bytes, 0, 0,
                              t.ddr_read_bytes, t.ddr_write_bytes, t.ddr_read_burst_bytes,
                              t.ddr_write_burst_bytes, touched)
        if isinstance(node, ComputeOp):
            cmd = node.command
            weights = command_ddr_read_bytes(self.hw, cmd, node.in_place_bytes)
            return StaticInfo("compute", cmd.unit, "+".join(s.op.name for s in cmd.steps),
                              command_tcm_bytes(cmd.steps, cmd.outputs), node.macs,
                              command_mac_pe_cycles(self.hw, cmd), weights[0], 0, weights[1], 0, touched)
        kind, op = ("cond", "if") if isinstance(node.command, CondCommand) else ("loop", "while")
        return StaticInfo(kind, "sequencer", op, 0, 0, 0, 0, 0, 0, 0, touched)


class _Barrier:
    """Succeeds its event when ``pending`` dependencies are done."""

    __slots__ = ("pending", "event")

    def __init__(self, env: simpy.Environment):
        self.pending = 0
        self.event = env.event()

    def dep_done(self) -> None:
        self.pending -= 1
        if self.pending == 0:
            self.event.succeed()


Node = DmaOp | ComputeOp | _Control


class Simulator:
    """A Program compiled onto one machine; :meth:`run` simulates invocations."""

    def __init__(self, program: Program, hw: HwConfig, *, timing_only: bool = False):
        program.validate()
        self.program, self.hw = program, hw
        self.timing_only = timing_only and not has_control_flow(program)
        self.env = Clock()
        self.memories = self._make_memories(program, hw)
        self.dma_units = [Unit(f"dma{i}") for i in range(hw.dma.engine_count)]
        self.compute_units = self._make_compute_units(hw)
        self.channels = {space: BandwidthChannel(self.env, space.value,
                                                 channel_bandwidth_bytes_per_cycle(hw, space))
                         for space in MemorySpace}
        self.recorder = TraceRecorder()
        self.invocation = 0
        self.preamble_cycles = 0
        self.nodes: dict[int, Node] = {}
        self._dma_model = DmaModel(hw)
        self._compute_cycles = ComputeCycles(hw)
        self._constant_tcm = _constant_tcm_bytes(program)
        self._copy_geometries: set[tuple] = set()   # of the strided copies checked
        self.top = self._compile_block(program.commands)
        self.all_nodes = list(self.nodes.values())
        self._waiting: tuple[str, tuple] | None = None
        #: while an invocation is recorded for replays: per condition read, where and its re-check
        self._checks: list[tuple[int, Callable[[], None]]] | None = None
        if not self.timing_only:
            self._load_initial_data(program.allocations)

    # --- compile ---------------------------------------------------------------------------
    @staticmethod
    def _make_compute_units(hw: HwConfig) -> dict[str, Unit]:
        """One in-order queue per compute unit, or one queue they all share
        (``shared_compute_pipeline``: one compute command at a time)."""
        if hw.shared_compute_pipeline:
            pipeline = Unit("compute")
            return {name: pipeline for name in unit_names()}
        return {name: Unit(name) for name in unit_names()}

    @staticmethod
    def _make_memories(program: Program, hw: HwConfig) -> dict[MemorySpace, Memory]:
        capacity = {MemorySpace.DDR: hw.ddr.size_bytes, MemorySpace.TCM: hw.tcm.size_bytes,
                    MemorySpace.VARIABLE_SRAM: hw.variable_sram.size_bytes}
        memories = {}
        for space in MemorySpace:
            size = program.memory_sizes.get(space, 0)
            if size > capacity[space]:
                raise ProgramError(f"the program plans {size} bytes of {space.value}; "
                                   f"{hw.name or 'the hardware'} has {capacity[space]}")
            memories[space] = Memory(space, size, read_only=space is MemorySpace.DDR and hw.ddr.read_only)
        _attach_pointer_tables(program, memories)
        return memories

    def _compile_block(self, commands: Sequence[Command]) -> list[Node]:
        return [self._compile(cmd) for cmd in commands]

    def _compile(self, cmd: Command) -> Node:
        if type(cmd) is DmaCommand:  # the hot case: keep it lean (error messages built only on error)
            src, dst = cmd.src, cmd.dst
            if not 0 <= cmd.engine < len(self.dma_units):
                raise ProgramError(f"{_where(cmd)}: DMA engine {cmd.engine} does not exist "
                                   f"({self.hw.name or 'the hardware'} has {len(self.dma_units)})")
            if not (src.is_contiguous and dst.is_contiguous):
                self._check_descriptor(cmd)
            timing = self._dma_model.timing(src, dst, cmd.access_bytes)
            if self.timing_only:   # (Program.validate checked that its views lie in the memories)
                node: Node = TimedDmaOp(cmd, self.dma_units[cmd.engine], self, None, None,  # type: ignore[arg-type]
                                        timing, self.channels[timing.channel])
            else:
                node = DmaOp(cmd, self.dma_units[cmd.engine], self,
                             self.memories[src.memory].access(src), self.memories[dst.memory].access(dst),
                             timing, self.channels[timing.channel])
            node.deps = self._resolve_deps(cmd)
            self.nodes[cmd.id] = node
            return node
        where = _where(cmd)
        if isinstance(cmd, ComputeCommand):
            if cmd.unit not in self.compute_units:
                raise ProgramError(f"{where}: unknown compute unit {cmd.unit!r} "
                                   f"(units: {', '.join(unit_names())})")
            # (no cache of equal commands: schedulers emit each tile once; hashing them cost more)
            bind = no_binding if self.timing_only else None
            steps, outputs = compile_compute(cmd, self.memories, where, bind)
            cycles, macs = self._compute_cycles(cmd), command_macs(cmd)
            node = (TimedComputeOp if self.timing_only else ComputeOp)(
                cmd, self.compute_units[cmd.unit], self, steps, outputs, cycles, macs, self._constant_tcm)
            node.in_place_bytes = in_place_read_bytes(self.hw, cmd)
            node.in_place_read = self._in_place_read(cmd, node.in_place_bytes)
        elif isinstance(cmd, (CondCommand, LoopCommand)):
            with named(f"{where} condition"):
                condition = self.memories[cmd.condition.memory].access(cmd.condition)
            if isinstance(cmd, CondCommand):
                branches = (self._compile_block(cmd.then_commands), self._compile_block(cmd.else_commands))
            else:
                if cmd.max_iterations < 0:
                    raise ProgramError(f"{where}: max_iterations must be >= 0")
                branches = (self._compile_block(cmd.cond_commands), self._compile_block(cmd.body_commands))
            node = _Control(cmd, condition, branches)
        else:
            raise ProgramError(f"{where}: unknown command type {type(cmd).__name__}")
        node.deps = self._resolve_deps(cmd)
        self.nodes[cmd.id] = node
        return node

    def _in_place_read(self, cmd: ComputeCommand, in_place: tuple[int, int]) -> InPlaceRead | None:
        """What ``cmd`` reads from the DDR while it computes (``in_place``: :func:`in_place_read_bytes`,
        whole bursts; its read latency)."""
        if any(v.memory is not MemorySpace.DDR for v in (*cmd.in_place_weights(), *cmd.in_place_tables())):
            raise ProgramError(f"{_where(cmd)}: weights and tables read in place must be in the DDR")
        size, burst_bytes = in_place
        if not size:
            return None
        latency = self.hw.ddr.read_latency_cycles
        return InPlaceRead(self.channels[MemorySpace.DDR], burst_bytes, latency, self._dma_model.read_cap(latency))

    def _check_descriptor(self, cmd: DmaCommand) -> None:
        """Reject a copy that needs more than 3 levels (:func:`make_descriptor`), once per geometry:
        offsets play no part, and the tiles of a tensor repeat theirs."""
        src, dst = cmd.src, cmd.dst
        geometry = (src.shape, src.dtype, src.strides_bytes, dst.shape, dst.dtype, dst.strides_bytes)
        if geometry not in self._copy_geometries:
            make_descriptor(src, dst, _where(cmd))
            self._copy_geometries.add(geometry)

    def _resolve_deps(self, cmd: Command) -> tuple[Node, ...]:
        nodes = self.nodes
        try:
            return tuple([nodes[d] for d in cmd.deps])  # validate(): deps precede in stream order
        except KeyError as exc:  # only an enclosing Cond/Loop is earlier yet not compiled
            raise ProgramError(f"{_where(cmd)} depends on command {exc.args[0]}, which encloses it "
                               "(it would wait for itself)") from None

    def _release(self) -> None:
        """Drop what only the run needed once it is over.

        The compiled commands refer to the machine, the memories to their bound views,
        the channels to their transfers, and those back to the commands: reference
        cycles that only Python's cycle collector could free, after traversing them all
        (and the trace keeps the commands). Cutting them frees the machine and its
        memories as soon as the run ends; the trace keeps what its records need."""
        for node in self.all_nodes:
            if isinstance(node, _Control):
                del node.condition
                node.branches = ([], [])
                continue
            del node.machine
            if isinstance(node, ComputeOp):
                node.steps, node.outputs, node.in_place_read = [], [], None
            else:
                del node.src, node.dst, node.channel
        for memory in self.memories.values():
            memory.forget_accesses()
        self.nodes.clear()
        self.all_nodes = self.top = []

    def _load_initial_data(self, allocations: list[Allocation]) -> None:
        for alloc in allocations:
            if alloc.initial_data is None:
                continue
            if len(alloc.initial_data) > alloc.size_bytes:
                raise ProgramError(f"allocation {alloc.name}: {len(alloc.initial_data)} bytes of initial "
                                   f"data exceed its {alloc.size_bytes} bytes")
            with named(f"allocation {alloc.name}"):
                self.memories[alloc.memory].load(alloc.offset_bytes, alloc.initial_data)

    # --- run ---------------------------------------------------------------------------------
    def run(self, invocations_inputs: Sequence[dict[str, np.ndarray]]) -> SimResult:
        """Simulate the invocations in order (once per Simulator: the machine keeps its state)."""
        if self.recorder.invocations or self.recorder.raw:
            raise RuntimeError("a Simulator runs once; make a new one (or call simulate_program)")
        if isinstance(invocations_inputs, dict):
            raise InputError("invocations_inputs must be a list of {input name: array} dicts, "
                             "one per invocation")
        outputs: list[dict[str, np.ndarray]] = []
        progress.stage("simulating commands", len(self.all_nodes) * len(invocations_inputs),
                       self.recorder.raw.__len__)
        driver = self.env.process(self._drive(list(invocations_inputs), outputs))
        with np.errstate(all="ignore"):   # once for every compute command (bound kernels run so)
            self.env.run()
        if driver.is_alive:
            raise SimulationDeadlock(self._deadlock_message())
        units = [u.name for u in self.dma_units] + list(unit_names())
        trace = Trace(self.recorder.raw, self.recorder.invocations, _StaticFacts(self.program, self.hw),
                      self.program.allocations, units, self.recorder.repeats)
        per_invocation = [inv.cycles for inv in self.recorder.invocations]
        variables = {} if self.timing_only else self._read_variables()
        result = SimResult(outputs, variables, trace, int(self.env.now), per_invocation,
                           self.hw.clock_hz, self.hw.name, self.preamble_cycles, self.timing_only)
        self._release()
        return result

    def _preamble_nodes(self, invocation_count: int) -> list[Node]:
        """The top-level commands to run once before the invocations (none for one invocation:
        nothing to amortise, and in line the loads overlap the first operations)."""
        ids = self.program.preamble_command_ids
        if invocation_count < 2 or not ids:
            return []
        return [n for n in self.top if isinstance(n, QueuedCommand) and n.cid in ids]

    def _drive(self, invocations: list[dict[str, np.ndarray]],
               outputs: list[dict[str, np.ndarray]]) -> Generator[simpy.Event, object, None]:
        env = self.env
        limits = current_limits()
        preamble = self._preamble_nodes(len(invocations))
        if preamble:
            yield from self._run_preamble(preamble)
        self._plan_kernels(len(invocations))
        resident = {id(n) for n in preamble}
        per_invocation = [n for n in self.all_nodes if id(n) not in resident]
        top = [n for n in self.top if id(n) not in resident]
        replays = self._replays() if len(invocations) >= FOLD_MIN_INVOCATIONS else None
        for k, inputs in enumerate(invocations):
            limits.check_deadline(f"simulating invocation {k}")
            self.invocation = k
            start = env.now
            if not self.timing_only:
                self._write_inputs(inputs, k)
            script = None if replays is None else replays.replay(k, self.recorder.raw)
            if script is not None:
                self.recorder.repeats[k] = (script.invocation, start - script.start)
                yield env.timeout(script.duration)
            else:
                yield from self._run_invocation(per_invocation, top, replays)
            outputs.append({} if self.timing_only else self._read_outputs(k))
            self.recorder.invocations.append(InvocationRecord(k, int(start), int(env.now)))

    def _replays(self) -> Replays | None:
        """A long stream's replays of invocations (:mod:`npu_sim.hw.replay`); none in a run that
        goes on past REQUIREs (the kernels record each violation where it happens), nor where a
        compute command moves bytes over a channel (weights read in place: replay checks the
        DMAs' transfers only)."""
        if active_log() is not None or any(isinstance(n, ComputeOp) and n.in_place_read for n in self.all_nodes):
            return None
        units = self.dma_units + list({id(u): u for u in self.compute_units.values()}.values())
        # (a block tensor's bytes are found through its pointer table: not worth bounding)
        extents = None if self.program.block_tensors else \
            [(memory, memory.bound_extent()) for memory in self.memories.values()]
        return Replays(self.env, units, list(self.channels.values()), extents)

    def _run_invocation(self, per_invocation: list[Node], top: list[Node],
                        replays: Replays | None) -> Generator[simpy.Event, object, None]:
        """One invocation, event by event (recorded for replays when the machine is quiet)."""
        recording = replays is not None and replays.begin()
        begin, start = len(self.recorder.raw), self.env.now
        self._checks = [] if recording else None
        for node in per_invocation:
            node.done = False
            node.issued = False
            node.waiters = None
        yield from self._sequence(top)
        yield from self._wait(self.top, "the end of the invocation")
        if recording:
            assert replays is not None and self._checks is not None
            replays.keep(self.invocation, self.recorder.raw[begin:], start, self._checks, self._transfer)
        self._checks = None

    @staticmethod
    def _transfer(node: Node, start: int, busy_end: int) -> Transfer | None:
        """A DMA's transfer, in the closed form a replay checks (see :mod:`npu_sim.hw.replay`)."""
        if not isinstance(node, DmaOp) or not node.timing.channel_bytes:
            return None
        timing = node.timing
        return (node.channel, start + timing.setup_cycles, timing.channel_bytes,
                node.channel.rate_alone(timing.cap_bytes_per_cycle), busy_end)

    def _run_preamble(self, preamble: list[Node]) -> Generator[simpy.Event, object, None]:
        """The constant loads before the first invocation. They write disjoint pool bytes nothing
        else writes, from constants: in the preamble they wait for nothing but their engine's
        queue (their dependencies order them against the commands of an invocation, which do
        not run yet)."""
        saved = [n.deps for n in preamble]
        for node in preamble:
            node.deps = ()
            self._issue(node)   # type: ignore[arg-type]   # (QueuedCommands only)
        yield from self._wait(preamble, "the preamble")
        for node, deps in zip(preamble, saved):
            node.deps = deps
        self.preamble_cycles = int(self.env.now)

    def _plan_kernels(self, invocation_count: int) -> None:
        """A long stream folds its chains (:meth:`_fold_chains`); in a single invocation the
        top-level compute commands run once: they bind no kernels."""
        if invocation_count >= FOLD_MIN_INVOCATIONS:
            self._fold_chains()
        if invocation_count == 1:
            for node in self.top:
                if isinstance(node, ComputeOp):
                    node.binds = False

    def _fold_chains(self) -> None:
        """A long stream folds the compute commands' elementwise chains into tables."""
        for node in self.all_nodes:
            if isinstance(node, ComputeOp):
                node.fold = True

    def _sequence(self, block: list[Node]) -> Generator[simpy.Event, object, None]:
        issue = self._issue
        for node in block:
            if isinstance(node, _Control):
                yield from self._control(node)
            else:
                issue(node)

    def _issue(self, op: QueuedCommand) -> None:
        op.issued = True
        op.done = False
        pending = 0
        for dep in op.deps:
            if not dep.done:
                pending += 1
                if dep.waiters is None:
                    dep.waiters = [op]
                else:
                    dep.waiters.append(op)
        op.pending = pending
        op.unit.push(op)

    def _wait(self, nodes: Sequence[Node], what: str) -> Generator[simpy.Event, object, None]:
        barrier = None
        for node in nodes:
            if not node.done:
                if barrier is None:
                    barrier = _Barrier(self.env)
                barrier.pending += 1
                if node.waiters is None:
                    node.waiters = [barrier]
                else:
                    node.waiters.append(barrier)
        if barrier is not None:
            self._waiting = (what, tuple(nodes))
            yield barrier.event
            self._waiting = None

    def _control(self, node: _Control) -> Generator[simpy.Event, object, None]:
        node.issued = True
        node.done = False
        yield from self._wait(node.deps, f"the dependencies of {node.label}")
        start = self.env.now
        first, second = node.branches
        if isinstance(node.command, CondCommand):
            branch = first if self._decide(node) else second
            yield from self._sequence(branch)
            yield from self._wait(branch, f"the branch of {node.label}")
        else:
            assert isinstance(node.command, LoopCommand)
            guard = LoopGuard(node.label, _written_bytes(node.command.cond_commands)
                              + _written_bytes(node.command.body_commands))
            while True:
                yield from self._sequence(first)
                yield from self._wait(first, f"the condition commands of {node.label}")
                if not self._decide(node):
                    break
                if guard.iterations >= node.command.max_iterations:
                    raise SimulationError(f"{node.label}: loop exceeded max_iterations="
                                          f"{node.command.max_iterations}")
                yield from self._sequence(second)
                yield from self._wait(second, f"the body of {node.label}")
                guard.step()
        now = int(self.env.now)
        self.recorder.raw.append((node, self.invocation, int(start), now, now))
        self._mark_done(node)

    def _decide(self, node: _Control) -> bool:
        """The condition's value; noted for a replay when the invocation is recorded."""
        value = self._condition(node)
        checks = self._checks
        if checks is not None:
            def check() -> None:
                if self._condition(node) != value:
                    raise Diverged(node.label)
            checks.append((len(self.recorder.raw), check))
        return value

    @staticmethod
    def _condition(node: _Control) -> bool:
        try:   # (as ``named`` does, without making the name at every iteration)
            values = node.condition.read()
        except MemoryAccessError as exc:
            raise MemoryAccessError(f"{node.label} condition: {exc}") from None
        return bool(values.reshape(-1)[0]) if values.size else False

    def _mark_done(self, node: QueuedCommand | _Control) -> None:
        """``node`` is done: release the commands waiting on it."""
        node.done = True
        waiters = node.waiters
        if waiters:
            node.waiters = None
            for waiter in waiters:
                waiter.dep_done()

    def finish(self, op: QueuedCommand) -> None:
        """Called by a command that is done and leaves its unit now (compute, on-chip DMA)."""
        now = self.env.now
        self.recorder.raw.append((op, self.invocation, op.start_cycle, now, now))
        self._mark_done(op)
        op.unit.release()

    def complete(self, op: QueuedCommand) -> None:
        """Called by a DMA whose data has landed; it released its engine at ``busy_end_cycle``."""
        self.recorder.raw.append((op, self.invocation, op.start_cycle, self.env.now, op.busy_end_cycle))
        self._mark_done(op)

    # --- host side ----------------------------------------------------------------------------
    def _write_inputs(self, inputs: dict[str, np.ndarray], k: int) -> None:
        if not isinstance(inputs, dict):
            raise InputError(f"invocation {k}: inputs must be a dict of name -> array")
        expected = self.program.inputs
        missing = [name for name in expected if name not in inputs]
        unknown = [name for name in inputs if name not in expected]
        if missing:
            raise InputError(f"invocation {k}: missing input(s) {missing}")
        if unknown:
            raise InputError(f"invocation {k}: unknown input(s) {unknown} (inputs: {list(expected)})")
        for name, view in expected.items():
            array = np.asarray(inputs[name])
            storage = view.dtype.numpy_dtype
            if array.shape != tuple(view.shape):
                raise InputError(f"invocation {k}: input {name!r} has shape {list(array.shape)}, "
                                 f"expected {list(view.shape)}")
            if array.dtype != storage:
                raise InputError(f"invocation {k}: input {name!r} has dtype {array.dtype}, "
                                 f"expected {storage} ({view.dtype.name})")
            try:   # (as ``named`` does, without a context manager per input and invocation)
                self.memories[view.memory].access(view).write(array)
            except MemoryAccessError as exc:
                raise MemoryAccessError(f"graph input {name!r}: {exc}") from None

    def _read_outputs(self, k: int) -> dict[str, np.ndarray]:
        outputs = {}
        for name, view in self.program.outputs.items():
            try:
                outputs[name] = self.memories[view.memory].access(view).read()
            except MemoryAccessError as exc:
                raise MemoryAccessError(f"invocation {k}: graph output {name!r}: {exc}") from None
        return outputs

    def _read_variables(self) -> dict[str, np.ndarray]:
        values = {}
        for name, view in self.program.variables.items():
            access = self.memories[view.memory].access(view)
            if access.is_written:
                values[name] = access.read()
        return values

    def _deadlock_message(self) -> str:
        blocked: list[str] = []
        for unit in self.dma_units + list(self.compute_units.values()):
            if unit.queue:
                head = unit.queue[0]
                blocked.append(f"{head.label} on {unit.name} waits for {self._describe_deps(head.deps)}")
        if self._waiting is not None:
            what, nodes = self._waiting
            blocked.append(f"the sequencer waits for {what}: {self._describe_deps(nodes)}")
        detail = "; ".join(blocked[:6]) or "unknown"
        return f"simulation deadlock in invocation {self.invocation} at cycle {int(self.env.now)}: {detail}"

    @staticmethod
    def _describe_deps(nodes: Sequence[Dependency]) -> str:
        parts = [f"{n.label}" + ("" if n.issued else " (never issued in this invocation)")
                 for n in nodes if not n.done]
        return ", ".join(parts) or "nothing"
