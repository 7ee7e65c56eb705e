"""Memory roles: which memory holds the constants, the arena (graph inputs and outputs) and the
spills, as the config's ``memory_roles`` says (Vela's memory modes), and that nothing writes a
read-only memory.

* Dedicated_Sram (the default): everything's home is the DDR; the TCM caches what fits.
* Shared_Sram (Ethos-U55): the feature maps live in the SRAM (our TCM), the graph's inputs and
  outputs among them; constants stream from the flash (a read-only DDR); nothing spills, so a
  graph whose tensors do not fit fails naming the tensor and the memory.
* Sram_Only: the constants are in the TCM too, from the start.
"""

from __future__ import annotations

from collections.abc import Iterable

from npu_sim.errors import ScheduleError
from npu_sim.hw.config import HwConfig
from npu_sim.program import ComputeCommand, DmaCommand, MemorySpace, Program, View
from scheduler.ir.npu_ops import ValueKind
from scheduler.memory.buffers import Buffer

DDR, TCM, VAR = MemorySpace.DDR, MemorySpace.TCM, MemorySpace.VARIABLE_SRAM
_MEMORY = {"ddr": DDR, "tcm": TCM}


def home_memory(kind: ValueKind, hw: HwConfig) -> MemorySpace | None:
    """Where a value of ``kind`` lives for the whole program (None: the blocks place it)."""
    if kind in (ValueKind.INPUT, ValueKind.OUTPUT):
        return _MEMORY[hw.memory_roles.arena]
    if kind is ValueKind.CONSTANT:
        return _MEMORY[hw.memory_roles.constants]
    if kind is ValueKind.VARIABLE:
        return VAR
    return None


def on_chip_kinds(hw: HwConfig) -> frozenset[ValueKind]:
    """The kinds of values whose home is the TCM (no copy into it is needed)."""
    return frozenset(k for k in (ValueKind.INPUT, ValueKind.OUTPUT, ValueKind.CONSTANT)
                     if home_memory(k, hw) is TCM)


def may_spill(hw: HwConfig) -> bool:
    """True if an intermediate that does not fit the TCM may go to the DDR."""
    return hw.memory_roles.spills == "ddr"


def no_spill_error(hw: HwConfig, what: str) -> ScheduleError:
    """The error of a graph that needs a spill where the roles allow none; ``what`` names the
    tensor (and the operation) that does not fit the TCM."""
    return ScheduleError(f"{what}; {hw.name or 'this NPU'} keeps its feature maps in its TCM of "
                         f"{hw.tcm.size_bytes:,} bytes and has no memory to spill to (memory_roles.spills: none)")


def check_writes(program: Program, hw: HwConfig) -> None:
    """ScheduleError naming the allocation if a command writes a read-only memory (flash)."""
    read_only = {DDR} if hw.ddr.read_only else set()
    if not read_only:
        return
    for cmd in program.walk():
        views = [cmd.dst] if isinstance(cmd, DmaCommand) else list(cmd.outputs) if isinstance(cmd, ComputeCommand) \
            else []
        for view in views:
            if view.memory in read_only:
                raise ScheduleError(f"command {cmd.id} ({cmd.name}) writes {_allocation(program, view)} in the "
                                    f"{view.memory.value}, which is read-only (flash) on {hw.name or 'this NPU'}")


def _allocation(program: Program, view: View) -> str:
    lo = view.span[0]
    names = [a.name for a in program.allocations if a.memory is view.memory and a.offset_bytes <= lo < a.end_bytes]
    return repr(names[0]) if names else f"offset {lo}"


def whole_program_tcm_bytes(buffers: Iterable[Buffer], skip: str = "") -> int:
    """Bytes of the TCM that whole-program buffers (the arena's inputs and outputs, resident
    constants) hold, other than the one named ``skip`` (the constant pool, counted apart)."""
    return sum(b.size_bytes for b in buffers if b.memory is TCM and _homed(b) and b.name != skip)


def _homed(buffer: Buffer) -> bool:
    """Whether ``buffer`` is the TCM home of a tensor: whole-program, or an arena input or output."""
    return buffer.whole_program or buffer.host_writes or buffer.host_reads


def homes_too_big_error(buffers: Iterable[Buffer], streamed_pool_bytes: int, hw: HwConfig) -> ScheduleError:
    """The error of tensors whose home is the TCM (and the constant pool: resident among
    ``buffers``, or the most bytes its streamed chunks take at once) that do not fit it,
    naming the largest."""
    homed = [b for b in buffers if b.memory is TCM and _homed(b)]
    largest = max(homed, key=lambda b: b.size_bytes)
    total = sum(b.size_bytes for b in homed) + streamed_pool_bytes
    constants = streamed_pool_bytes > 0 or any(b.kind == "constant" for b in homed)
    return ScheduleError(f"{largest.kind} {largest.name!r} ({largest.size_bytes:,} bytes) does not fit the TCM of "
                         f"{hw.tcm.size_bytes:,} bytes of {hw.name or 'this NPU'}, where its memory roles keep it, "
                         f"with the other tensors kept there ({total:,} bytes in all"
                         f"{', the constant pool included' if constants else ''})")
