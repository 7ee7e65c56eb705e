"""Compute units (MAC array, vector unit, LUT unit): in-order queues that run TOSA kernels on tiles.

A :class:`~npu_sim.program.ComputeCommand` is compiled into a :class:`ComputeOp`:
its operand and result views are bound to the TCM once, its cycles come from
:func:`npu_sim.hw.cost.compute_command_cycles`. When it ends it reads its operands
from memory, runs each :class:`~npu_sim.program.KernelStep` through
:func:`npu_sim.reference.kernel_api.run_kernel` (the same bit-exact kernels as the
reference executor), passing step outputs on to later steps (``int`` operands: a
fused epilogue kept inside the unit), and writes the last step's outputs (a fused
composite: output 0 of each step its ``output_steps`` names).
Reads and writes happen at the end of the command, after its cycles have elapsed.

CUSTOM steps run the implementation registered for their (domain, name) in
:mod:`npu_sim.reference.custom`, as the reference executor does.

Every step's results are checked against what the command declares: the step's
output types (the ``out_region`` shape when tiled), and for the last step the
output views. A built-in kernel returning anything else is a bug in npu-sim
(:class:`KernelResultError`, exit code 1); a CUSTOM implementation doing so is
the implementation's fault (:class:`~npu_sim.errors.TosaRuntimeError`, as in the
reference executor). Nothing wrong is ever written silently.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple, NoReturn

import numpy as np

from npu_sim.errors import MemoryAccessError, ProgramError, SimulationError, TosaRuntimeError
from npu_sim.hw.ddr import BandwidthChannel
from npu_sim.hw.int_pipelines import fuse_int_pipelines
from npu_sim.hw.memory import Memory, ViewAccess
from npu_sim.hw.queues import Machine, QueuedCommand, Unit
from npu_sim.hw.result_memo import ResultMemo
from npu_sim.hw.table_folding import PlanEntry, fold_plan
from npu_sim.program import ComputeCommand, KernelStep, MemorySpace, Region, View, command_reads_in_place
from npu_sim.reference.custom import custom_implementation
from npu_sim.reference.kernel_api import BoundKernel, KernelArgs, bind_kernel, run_kernel
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op


class KernelResultError(SimulationError):
    """A built-in kernel returned results other than the command declares: a bug in npu-sim."""

    exit_code = 1


@dataclass
class CompiledStep:
    """A kernel step with its operands bound: ``ViewAccess`` (memory) or ``int`` (earlier step)."""

    step: KernelStep
    operands: list[ViewAccess | int]
    input_types: list
    output_types: list
    input_offsets: list | None
    name: str
    expected: tuple[tuple[tuple[int, ...], np.dtype], ...] = ()  # (shape, storage dtype) per output


#: Memories a fused composite's steps read (its state straight from the variable SRAM bank).
COMPOSITE_READABLE = (MemorySpace.TCM, MemorySpace.VARIABLE_SRAM)


#: Binds a view to its memory (bounds checked): ``Memory.access``, or nothing in a timing-only run.
Binder = Callable[[View], "ViewAccess | None"]


def binder(memories: Mapping[MemorySpace, Memory]) -> Binder:
    """Views bound to ``memories`` (:meth:`Memory.access`)."""
    return lambda view: memories[view.memory].access(view)


def no_binding(view: View) -> None:
    """A timing-only run binds no view: it moves no bytes (and ``Program.validate`` has checked
    that every view lies in its memory, which the machine sizes as the plan)."""
    return None


def compile_step(step: KernelStep, index: int, bind: Binder, where: str,
                 readable: tuple[MemorySpace, ...] = (MemorySpace.TCM,),
                 in_place: Callable[[KernelStep, int], bool] = lambda step, i: False) -> CompiledStep:
    """Bind a step's operands (``bind``: see :data:`Binder`): views of the ``readable`` memories
    (the TCM; a fused composite also reads the variable SRAM; ``in_place(step, i)``: operand ``i``
    is read where it lives: a table, weights, a parameter), or earlier steps' results."""
    operands: list[ViewAccess | int] = []
    for i, operand in enumerate(step.operands):
        if type(operand) is View or isinstance(operand, View):
            if operand.memory not in readable and not in_place(step, i):
                _unreadable(operand, i, index, readable, where)
            operands.append(bind(operand))  # type: ignore[arg-type]   # (None only when timing only)
        elif isinstance(operand, int) and 0 <= operand < index:
            operands.append(operand)
        else:
            raise ProgramError(f"{where}: step {index} operand {i} is {operand!r}; expected a View "
                               f"or the index of an earlier step (0..{index - 1})")
    input_types = list(step.input_types)
    if len(input_types) != len(operands):
        raise ProgramError(f"{where}: step {index} has {len(step.operands)} operands but "
                           f"{len(step.input_types)} input types")
    offsets = None if step.input_offsets is None else [tuple(o) for o in step.input_offsets]
    try:
        expected = _cached_expected(step.output_types, step.out_region)
    except TypeError:   # (a step built with lists)
        expected = _expected(step.output_types, step.out_region)
    return CompiledStep(step, operands, input_types, list(step.output_types), offsets, step.name, expected)


def _expected(output_types: Sequence[TensorType], region: Region | None
              ) -> tuple[tuple[tuple[int, ...], np.dtype], ...]:
    """(shape, storage dtype) of each output of a step (of its tile: ``region``), as its kernel
    returns them (the tiles of an operation share their types and extents)."""
    extents = None if region is None else tuple([b - a for a, b in region])
    return tuple([(tuple(t.shape) if extents is None else extents, t.dtype.numpy_dtype) for t in output_types])


_cached_expected = lru_cache(maxsize=4096)(_expected)


def _unreadable(operand: View, i: int, index: int, readable: tuple[MemorySpace, ...], where: str) -> NoReturn:
    what = "the TCM" if len(readable) == 1 else "the TCM and the variable SRAM"
    raise ProgramError(f"{where}: step {index} operand {i} is in {operand.memory.value}; "
                       f"compute units read only {what}")


def compile_compute(command: ComputeCommand, memories: Mapping[MemorySpace, Memory], where: str,
                    bind: Binder | None = None) -> tuple[list[CompiledStep], list[ViewAccess]]:
    """Bind a compute command's steps and outputs to the memories (ProgramError if malformed;
    ``bind``: see :data:`Binder`)."""
    if not command.steps:
        raise ProgramError(f"{where}: a compute command needs at least one step")
    readable = COMPOSITE_READABLE if command.composite else (MemorySpace.TCM,)
    bind = bind or binder(memories)

    def in_place(step: KernelStep, operand_index: int) -> bool:
        return command_reads_in_place(command, step, operand_index)

    steps = [compile_step(step, i, bind, where, readable, in_place) for i, step in enumerate(command.steps)]
    if command.output_steps and (len(command.output_steps) != len(command.outputs) or
                                 any(not 0 <= s < len(steps) for s in command.output_steps)):
        raise ProgramError(f"{where}: output_steps {list(command.output_steps)} do not name a step "
                           f"for each of its {len(command.outputs)} outputs")
    outputs = []
    for i, view in enumerate(command.outputs):
        if view.memory is not MemorySpace.TCM:
            raise ProgramError(f"{where}: output {i} is in {view.memory.value}; "
                               "compute units write only the TCM")
        outputs.append(bind(view))
    return steps, outputs  # type: ignore[return-value]   # (Nones only when timing only)


def _feeds(cs: CompiledStep, constants: list[np.ndarray | None]) -> tuple[tuple[int, Any], ...]:
    """Where a bound step's operands come from (see ``ComputeOp.feeds``): a constant's bytes never
    change once loaded, so its value is kept (read-only) instead of read again every run."""
    feeds: list[tuple[int, Any]] = []
    for operand, value in zip(cs.operands, constants):
        if value is not None and isinstance(operand, ViewAccess):
            kept = operand.read()   # (afresh: a kernel may have worked in the copy it was given)
            kept.flags.writeable = False
            feeds.append((2, kept))
        else:
            feeds.append((0, operand) if isinstance(operand, ViewAccess) else (1, operand))
    return tuple(feeds)


class InPlaceRead(NamedTuple):
    """What a compute command reads where it lives (its weight stream, ``weights_in_place``; its
    input's block fetches, ``ifm_refetch_bytes``): the bytes cross ``channel`` (whole bursts, at most
    ``cap_bytes_per_cycle``: the bursts a read keeps in flight over its latency) while it
    computes; it ends when both are done."""

    channel: BandwidthChannel
    burst_bytes: int
    latency_cycles: int
    cap_bytes_per_cycle: float = math.inf


class ComputeOp(QueuedCommand):
    """A compute command compiled for one machine (``steps``/``outputs`` from :func:`compile_compute`)."""

    __slots__ = ("command", "steps", "outputs", "cycles", "macs", "bound", "constant_tcm", "all_bound", "feeds",
                 "fold", "plan", "memo", "copy_from", "in_place_read", "in_place_bytes", "parts_left", "binds")

    def __init__(self, command: ComputeCommand, unit: Unit, machine: Machine,
                 steps: list[CompiledStep], outputs: list[ViewAccess], cycles: int, macs: int,
                 constant_tcm: tuple[int, int] | None = None):
        super().__init__(command.id, command.name, unit, machine)
        self.command = command
        self.steps = steps
        self.outputs = outputs
        self.cycles = cycles
        self.macs = macs
        #: per step, its kernel bound after a first whole-tensor call (later invocations skip
        #: the static work, as the reference executor's bound steps do); None: not bound (yet)
        self.bound: list[BoundKernel | None] = [None] * len(steps)
        #: every step bound and its results checked once: later runs take the straight loop
        self.all_bound = False
        #: bind its kernels after a first run (False: it runs once, binding would be wasted)
        self.binds = True
        #: per bound step, where each operand comes from: (0, access) read from memory, (1, k)
        #: step k's result, (2, array) a constant's value kept since binding (read-only)
        self.feeds: list[tuple[tuple[int, Any], ...] | None] = [None] * len(steps)
        #: TCM bytes [start, end) that hold constants once loaded (see the simulator's preamble)
        self.constant_tcm = constant_tcm
        #: fold elementwise chains into tables once every step is bound (a long stream's fast
        #: path: :mod:`npu_sim.hw.table_folding`); the plan it gave, None: the steps as they are
        self.fold = False
        self.plan: list[PlanEntry] | None = None
        #: with ``fold``, a command reading a few bytes: its results by those bytes (None: none)
        self.memo: ResultMemo | None = None
        #: with ``fold``, an IDENTITY of one operand read from memory: that operand (its bytes are
        #: copied to the output, no kernel run; None: not such a command)
        self.copy_from: ViewAccess | None = None
        #: what it reads from the DDR while it computes (None: it reads only the TCM)
        self.in_place_read: InPlaceRead | None = None
        #: the bytes it reads where they live and their bursts' (``simulator.in_place_read_bytes``)
        self.in_place_bytes = (0, 0)
        self.parts_left = 0

    def start(self) -> None:
        env = self.machine.env
        now = self.start_cycle = env.now
        read = self.in_place_read
        if read is None:
            env.timeout(self.cycles).callbacks.append(self._end)
            return
        self.parts_left = 2   # (its compute body and its weights' transfer)
        read.channel.start(now, read.burst_bytes, read.cap_bytes_per_cycle, read.latency_cycles, self._part_done)
        env.timeout(self.cycles).callbacks.append(self._part_done)

    def _part_done(self, event: object) -> None:
        self.parts_left -= 1
        if not self.parts_left:
            self._end(event)

    def _end(self, _event: object) -> None:
        self.act()
        self.machine.finish(self)

    def act(self) -> None:
        """Its functional half (:meth:`execute`), a memory error named by the command."""
        try:
            if self.all_bound:
                self._execute_bound()
            else:
                self.execute()
        except MemoryAccessError as exc:
            raise MemoryAccessError(f"{self.label}: {exc}") from None

    def execute(self) -> None:
        """Read operands, run the kernels, write the results (the functional half of the command)."""
        if self.all_bound:
            self._execute_bound()
            return
        results: list[list] = []
        ran_bound = True   # every step ran bound, results checked: later runs take the straight loop
        for index, cs in enumerate(self.steps):
            inputs = [operand.read() if isinstance(operand, ViewAccess) else results[operand][0]
                      for operand in cs.operands]
            bound = self.bound[index]
            if bound is not None:
                with np.errstate(all="ignore"):   # (as the executor runs bound kernels)
                    out = bound(inputs)
                self._check(index, cs, out)
                results.append(out)
                continue
            ran_bound = False
            step = cs.step
            args = KernelArgs(step.op, step.attribute, inputs, cs.input_types, cs.output_types,
                              cs.name or self.label, step.out_region, cs.input_offsets)
            if step.op is Op.CUSTOM:
                attribute = step.attribute
                out = custom_implementation(attribute.domain_name, attribute.operator_name)(args)
            else:
                out = run_kernel(args)
            self._check(index, cs, out)
            if self.binds and step.op is not Op.CUSTOM and _whole_tensors(cs, inputs):
                constants = self._constants(cs, inputs)
                self.bound[index] = bind_kernel(args, constants)
                self.feeds[index] = _feeds(cs, constants)
            results.append(out)
        self._write_outputs(results)
        self.all_bound = ran_bound
        if ran_bound and self.fold:
            self._prepare_stream()

    def _prepare_stream(self) -> None:
        """Every step bound, in a long stream: its plan (folded chains, integer steps handed on
        to their RESCALE), or its copy, or its results remembered by the bytes it reads."""
        output_steps = self.command.output_steps or (len(self.steps) - 1,)
        plan = fold_plan([cs.step for cs in self.steps], self.bound, self.feeds,  # type: ignore[arg-type]
                         output_steps)
        steps = plan if plan is not None else list(zip(range(len(self.steps)), self.bound, self.feeds))
        reshapes = frozenset(i for i, cs in enumerate(self.steps) if cs.step.op is Op.RESHAPE)
        self.plan = fuse_int_pipelines(steps, output_steps, reshapes) or plan  # type: ignore[arg-type]
        self.copy_from = _identity_source(self.steps, self.feeds, self.outputs)
        self.memo = None if self.copy_from is not None else ResultMemo.of(self.feeds)  # type: ignore[arg-type]

    def _execute_bound(self) -> None:
        """Every step bound and checked in an earlier run: a straight loop (numpy's warnings are
        off for the whole simulation, as the executor runs bound kernels: the simulator's
        ``run``); a bound kernel's results keep the shapes and dtypes checked before. In a long
        stream, an IDENTITY copies its operand's bytes and a command reading a few bytes
        writes the results remembered for them (:mod:`npu_sim.hw.result_memo`)."""
        memo = self.memo
        if memo is None:
            if self.copy_from is not None:
                self.outputs[0].copy_from(self.copy_from)
                return
            self._store(self._produced(self._bound_results()))
            return
        key = memo.key()
        produced = memo.results.get(key)
        if produced is None:
            produced = self._produced(self._bound_results())
            if not memo.remember(key, produced):
                self.memo = None
        self._store(produced)

    def _bound_results(self) -> list[Any]:
        """Each step's results, by the bound kernels (a folding plan: the steps it runs)."""
        plan = self.plan
        if plan is not None:
            return self._plan_results(plan)
        results: list[list] = []
        for bound, feeds in zip(self.bound, self.feeds):
            assert bound is not None and feeds is not None
            results.append(bound([source.read() if kind == 0 else results[source][0] if kind == 1 else source
                                  for kind, source in feeds]))
        return results

    def _plan_results(self, plan: list[PlanEntry]) -> list[Any]:
        """The steps a folding plan runs (the others' results are no longer read)."""
        results: list[Any] = [None] * len(self.steps)
        for index, run, feeds in plan:
            results[index] = run([source.read() if kind == 0 else results[source][0] if kind == 1 else source
                                  for kind, source in feeds])
        return results

    def _write_outputs(self, results: list[list]) -> None:
        """Write the last step's results (a composite: output 0 of each of its output steps)."""
        self._store(self._produced(results))

    def _store(self, produced: list[np.ndarray]) -> None:
        for access, array in zip(self.outputs, produced):
            access.write(array)

    def _produced(self, results: list[list]) -> list[np.ndarray]:
        """The arrays the command writes, checked against its outputs: the last step's results
        (a composite: output 0 of each of its output steps)."""
        output_steps = self.command.output_steps
        if output_steps:
            produced = [results[s][0] for s in output_steps]
        else:
            produced = results[-1]
            if len(produced) < len(self.outputs):
                raise ProgramError(f"{self.label}: the last step produced {len(produced)} outputs, "
                                   f"the command writes {len(self.outputs)}")
        for k, (access, array) in enumerate(zip(self.outputs, produced)):
            if array.shape != access.shape or array.dtype != access.storage:
                step = output_steps[k] if output_steps else len(self.steps) - 1
                self._fail(step, f"output {k} is {_describe(array)}, but the command writes it to {access.view}")
        return list(produced)

    def _constants(self, cs: CompiledStep, inputs: list[np.ndarray]) -> list[np.ndarray | None]:
        """Operand values that stay fixed (read from the constant bytes), None for the others."""
        span = self.constant_tcm
        values: list[np.ndarray | None] = []
        for operand, value in zip(cs.operands, inputs):
            view = operand.view if isinstance(operand, ViewAccess) else None
            fixed = span is not None and view is not None and view.strides_bytes is None \
                and view.memory is MemorySpace.TCM and span[0] <= view.offset_bytes \
                and view.offset_bytes + view.size_bytes <= span[1]
            values.append(value if fixed else None)
        return values

    def _check(self, index: int, cs: CompiledStep, out: object) -> None:
        """The step returned one array per declared output, of the declared shape and dtype."""
        expected = cs.expected
        if not isinstance(out, (list, tuple)) or len(out) != len(expected):
            count = len(out) if isinstance(out, (list, tuple)) else type(out).__name__
            self._fail(index, f"returned {count} output(s), expected a list of {len(expected)}")
        for k, (array, (shape, dtype)) in enumerate(zip(out, expected)):
            if type(array) is not np.ndarray or array.shape != shape or array.dtype != dtype:
                self._fail(index, f"output {k} is {_describe(array)}, expected {dtype.name} of "
                                  f"shape {list(shape)}")

    def _fail(self, index: int, problem: str) -> NoReturn:
        step = self.steps[index].step
        what = f"step {index} ({step.op.name}{': ' + step.name if step.name else ''})"
        if step.op is Op.CUSTOM:
            attribute = step.attribute
            raise TosaRuntimeError(self.label, f"{what}: CUSTOM implementation "
                                               f"{attribute.domain_name}::{attribute.operator_name} {problem}")
        raise KernelResultError(f"{self.label}: {what}: kernel {problem} (a bug in npu-sim)")


class TimedComputeOp(ComputeOp):
    """A compute command of a timing-only run: its cycles elapse, no kernel runs, nothing is
    read or written (the event schedule is the same: a command's timing never depends on data)."""

    __slots__ = ()

    def _end(self, _event: object) -> None:
        self.machine.finish(self)

    def act(self) -> None:
        pass


def _identity_source(steps: list[CompiledStep], feeds: list[Any], outputs: list[ViewAccess]) -> ViewAccess | None:
    """The operand an IDENTITY command copies from memory to its one output (of its storage
    type and element count), None for any other command."""
    if len(steps) != 1 or steps[0].step.op is not Op.IDENTITY or len(outputs) != 1:
        return None
    step_feeds = feeds[0]
    if not step_feeds or len(step_feeds) != 1:
        return None
    kind, source = step_feeds[0]
    if kind != 0 or not isinstance(source, ViewAccess):
        return None
    out = outputs[0]
    same = source.storage == out.storage and source.view.element_count == out.view.element_count
    return source if same else None


def _whole_tensors(cs: CompiledStep, inputs: list[np.ndarray]) -> bool:
    """True if the step computes its whole output from whole operands (no tile): the calls a
    kernel may be bound from."""
    region, offsets = cs.step.out_region, cs.input_offsets
    if region is not None and (not cs.output_types or
                               list(region) != [(0, n) for n in cs.output_types[0].shape]):
        return False
    if offsets is not None and any(any(o) for o in offsets):
        return False
    return all(getattr(a, "shape", None) == t.shape for a, t in zip(inputs, cs.input_types))


def _describe(array: object) -> str:
    if isinstance(array, np.ndarray):
        return f"{array.dtype.name} of shape {list(array.shape)}"
    return type(array).__name__
