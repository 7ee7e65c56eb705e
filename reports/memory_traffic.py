"""Per-memory figures in the run summary (``memories``): each memory's role, size and traffic.

``ddr_read_bytes`` / ``ddr_write_bytes`` stay the off-chip memory's traffic at the top of
summary.json; this adds, for every memory of the machine, what it holds (its roles in the
config's ``memory_roles``: Vela's memory modes), whether it is read-only (flash), its size, the
payload bytes the DMAs read from it and wrote into it (and, for the DDR, the weights matrix-vector
products read there in place), and for the TCM the bytes the compute units read and wrote there.
"""

from __future__ import annotations

from typing import Any

from npu_sim.hw.config import HwConfig
from npu_sim.hw.trace import Trace
from npu_sim.program import DmaCommand, MemorySpace, Program


def memory_roles(hw: HwConfig) -> dict[str, list[str]]:
    """Memory name -> what it holds, by the config's roles."""
    roles: dict[str, list[str]] = {m.value: [] for m in MemorySpace}
    r = hw.memory_roles
    roles[r.constants].append("constants")
    roles[r.arena].append("graph inputs and outputs")
    roles["tcm"].append("feature maps and tiles")
    if r.spills != "none":
        roles[r.spills].append("spills")
    roles[MemorySpace.VARIABLE_SRAM.value].append("variables")
    return roles


def memory_figures(trace: Trace, hw: HwConfig, program: Program | None) -> dict[str, dict[str, Any]]:
    """Per memory: ``holds``, ``read_only``, ``size_bytes``, ``read_bytes`` and ``write_bytes``
    (DMA payload from and into it; the DDR's reads also count the weights compute commands read
    there in place), and for the TCM ``compute_bytes`` (read and written by the compute units)."""
    sizes = {MemorySpace.DDR: hw.ddr.size_bytes, MemorySpace.TCM: hw.tcm.size_bytes,
             MemorySpace.VARIABLE_SRAM: hw.variable_sram.size_bytes}
    read = dict.fromkeys(MemorySpace, 0)
    written = dict.fromkeys(MemorySpace, 0)
    ends = {c.id: (c.src.memory, c.dst.memory, c.size_bytes) for c in program.walk()
            if isinstance(c, DmaCommand)} if program is not None else {}
    compute_bytes = 0
    for record in trace.commands:
        if record.kind == "dma" and record.id in ends:
            src, dst, size = ends[record.id]
            read[src] += size
            written[dst] += size
        elif record.kind == "compute":
            compute_bytes += record.bytes
            read[MemorySpace.DDR] += record.ddr_read_bytes
    holds = memory_roles(hw)
    out: dict[str, dict[str, Any]] = {}
    for memory in MemorySpace:
        figures: dict[str, Any] = {"holds": holds[memory.value], "size_bytes": sizes[memory],
                                   "read_only": memory is MemorySpace.DDR and hw.ddr.read_only,
                                   "read_bytes": read[memory], "write_bytes": written[memory]}
        if memory is MemorySpace.TCM:
            figures["compute_bytes"] = compute_bytes
        out[memory.value] = figures
    return out
