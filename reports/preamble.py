"""The preamble of a multi-invocation run: the constants loaded into TCM once and kept there.

With several invocations the simulator runs the Program's ``preamble_command_ids`` (the
constant-pool loads) before the first invocation (:mod:`npu_sim.simulator`); these
figures report it apart from the invocations, so ``per_invocation_cycles`` and the DDR
bytes of a steady-state invocation no longer carry the weights.
"""

from __future__ import annotations

from typing import Any

from npu_sim.hw.trace import Trace
from npu_sim.program import DmaCommand, MemorySpace, Program


def preamble_figures(trace: Trace, program: Program | None) -> dict[str, Any]:
    """``preamble_cycles``, ``preamble_ddr_bytes`` and ``resident_constant_bytes`` (all 0
    when the run had no preamble: one invocation, or no constant pool)."""
    first_start = min((i.start_cycle for i in trace.invocations), default=0)
    ids = program.preamble_command_ids if program is not None else frozenset()
    if first_start == 0 or not ids:
        return {"preamble_cycles": 0, "preamble_ddr_bytes": 0, "resident_constant_bytes": 0}
    assert program is not None   # (ids is empty without one)
    loaded = sum(cmd.size_bytes for cmd in program.commands
                 if isinstance(cmd, DmaCommand) and cmd.id in ids and cmd.src.memory is MemorySpace.DDR)
    return {"preamble_cycles": int(first_start), "preamble_ddr_bytes": loaded, "resident_constant_bytes": loaded}
