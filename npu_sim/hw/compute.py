"""Compute units (MAC array, vector unit, LUT unit): in-order queues that run TOSA kernels on tiles.

A :class:`~npu_sim.program.ComputeCommand` is compiled into a :class:`ComputeOp`:
its operand and result views are bound to the TCM once, its cycles come from
:func:`npu_sim.hw.cost.compute_command_cycles`. When it ends it reads its operands
from memory, runs each :class:`~npu_sim.program.KernelStep` through
:func:`npu_sim.reference.kernel_api.run_kernel` (the same bit-exact kernels as the
reference executor), passing step outputs on to later steps (``int`` operands: a
fused epilogue kept inside the unit), and writes the last step's outputs.
Reads and writes happen at the end of the command, after its cycles have elapsed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from npu_sim.errors import MemoryAccessError, ProgramError
from npu_sim.hw.memory import Memory, ViewAccess
from npu_sim.hw.units import Machine, QueuedCommand, Unit
from npu_sim.program import ComputeCommand, KernelStep, MemorySpace, View
from npu_sim.reference.kernel_api import KernelArgs, run_kernel


@dataclass
class CompiledStep:
    """A kernel step with its operands bound: ``ViewAccess`` (memory) or ``int`` (earlier step)."""

    step: KernelStep
    operands: list[Union[ViewAccess, int]]
    input_types: list
    output_types: list
    input_offsets: list | None
    name: str


def compile_step(step: KernelStep, index: int, tcm: Memory, where: str) -> CompiledStep:
    operands: list[Union[ViewAccess, int]] = []
    for i, operand in enumerate(step.operands):
        if isinstance(operand, View):
            if operand.memory is not MemorySpace.TCM:
                raise ProgramError(f"{where}: step {index} operand {i} is in {operand.memory.value}; "
                                   "compute units read only the TCM")
            operands.append(tcm.access(operand))
        elif isinstance(operand, int) and 0 <= operand < index:
            operands.append(operand)
        else:
            raise ProgramError(f"{where}: step {index} operand {i} is {operand!r}; expected a View "
                               f"or the index of an earlier step (0..{index - 1})")
    if len(step.input_types) != len(step.operands):
        raise ProgramError(f"{where}: step {index} has {len(step.operands)} operands but "
                           f"{len(step.input_types)} input types")
    offsets = None if step.input_offsets is None else [tuple(o) for o in step.input_offsets]
    return CompiledStep(step, operands, list(step.input_types), list(step.output_types), offsets,
                        step.name)


def compile_compute(command: ComputeCommand, tcm: Memory, where: str
                    ) -> tuple[list[CompiledStep], list[ViewAccess]]:
    """Bind a compute command's steps and outputs to the TCM (ProgramError if malformed)."""
    if not command.steps:
        raise ProgramError(f"{where}: a compute command needs at least one step")
    steps = [compile_step(step, i, tcm, where) for i, step in enumerate(command.steps)]
    outputs = []
    for i, view in enumerate(command.outputs):
        if view.memory is not MemorySpace.TCM:
            raise ProgramError(f"{where}: output {i} is in {view.memory.value}; "
                               "compute units write only the TCM")
        outputs.append(tcm.access(view))
    return steps, outputs


class ComputeOp(QueuedCommand):
    """A compute command compiled for one machine (``steps``/``outputs`` from :func:`compile_compute`)."""

    __slots__ = ("command", "steps", "outputs", "cycles", "macs")

    def __init__(self, command: ComputeCommand, unit: Unit, machine: Machine,
                 steps: list[CompiledStep], outputs: list[ViewAccess], cycles: int, macs: int):
        super().__init__(command.id, command.name, unit, machine)
        self.command = command
        self.steps = steps
        self.outputs = outputs
        self.cycles = cycles
        self.macs = macs

    def start(self) -> None:
        env = self.machine.env
        self.start_cycle = env.now
        env.timeout(self.cycles).callbacks.append(self._end)

    def _end(self, _event: object) -> None:
        try:
            self.execute()
        except MemoryAccessError as exc:
            raise MemoryAccessError(f"{self.label}: {exc}") from None
        self.machine.finish(self)

    def execute(self) -> None:
        """Read operands, run the kernels, write the results (the functional half of the command)."""
        results: list[list] = []
        for cs in self.steps:
            inputs = [operand.read() if isinstance(operand, ViewAccess) else results[operand][0]
                      for operand in cs.operands]
            step = cs.step
            args = KernelArgs(step.op, step.attribute, inputs, cs.input_types, cs.output_types,
                              cs.name or self.label, step.out_region, cs.input_offsets)
            results.append(run_kernel(args))
        last = results[-1]
        if len(last) < len(self.outputs):
            raise ProgramError(f"{self.label}: the last step produced {len(last)} outputs, "
                               f"the command writes {len(self.outputs)}")
        for access, array in zip(self.outputs, last):
            access.write(array)
