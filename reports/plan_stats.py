"""Memory-plan statistics of a compiled Program (``npu-sim plan``), before any simulation.

Read from the Program itself (allocations, command stream) and from the
scheduler's ``Program.notes`` (TCM footprint and lower bound, planned and
compulsory DDR traffic, spilled values, per-operation tiling) when present.
``tcm_overhead`` compares the compact placement (``tcm_compact_bytes``) with the
lower bound: the plan itself may spread buffers wider when the TCM has room.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Mapping

from npu_sim.hw.compute_units import unit_names
from npu_sim.hw.config import HwConfig
from npu_sim.program import ComputeCommand, DmaCommand, MemorySpace, Program
from reports.occupancy import footprint_bytes, planned_live_bytes_bound
from reports.table import human_bytes

#: Scheduler notes copied as they are when present.
NOTE_KEYS = ("tcm_planner", "planned_ddr_read_bytes", "planned_ddr_write_bytes",
             "compulsory_ddr_read_bytes", "compulsory_ddr_write_bytes", "macs",
             "spilled_values", "evicted_values")


def plan_stats(program: Program, hw: HwConfig) -> dict[str, Any]:
    """JSON-ready statistics of ``program``'s memory plan and command stream on ``hw``."""
    notes: Mapping[str, Any] = program.notes or {}
    # every DMA engine and compute unit, as the run summary counts them (0 when unused)
    units: Counter[str] = Counter({name: 0 for name in (*(f"dma{e}" for e in range(hw.dma.engine_count)),
                                                        *unit_names())})
    for cmd in program.walk():
        if isinstance(cmd, DmaCommand):
            units[f"dma{cmd.engine}"] += 1
        elif isinstance(cmd, ComputeCommand):
            units[cmd.unit] += 1
        else:
            units["sequencer"] += 1
    memories: dict[str, Any] = {}
    for memory, size in program.memory_sizes.items():
        allocs = [a for a in program.allocations if a.memory is memory]
        kinds: dict[str, int] = defaultdict(int)
        for a in allocs:
            kinds[a.kind] += a.size_bytes
        memories[memory.value] = {"plan_size_bytes": size, "allocations": len(allocs),
                                  "allocated_bytes": sum(a.size_bytes for a in allocs),
                                  "bytes_by_kind": dict(sorted(kinds.items()))}
    peak = notes.get("peak_tcm_bytes", footprint_bytes(program, MemorySpace.TCM))
    compact = notes.get("tcm_compact_bytes", peak)
    bound = notes.get("tcm_lower_bound_bytes", planned_live_bytes_bound(program, MemorySpace.TCM))
    stats: dict[str, Any] = {
        "graph": program.graph_name,
        "hw_config": hw.name,
        "commands": sum(units.values()),
        "commands_per_unit": dict(sorted(units.items())),
        "peak_tcm_bytes": int(peak),
        "tcm_compact_bytes": int(compact),
        "tcm_lower_bound_bytes": int(bound),
        "tcm_overhead": (compact - bound) / bound if bound else 0.0,
        "tcm_size_bytes": hw.tcm.size_bytes,
        "variable_sram_size_bytes": hw.variable_sram.size_bytes,
        "memories": memories,
    }
    stats.update({k: notes[k] for k in NOTE_KEYS if k in notes})
    ops = notes.get("ops") or []
    stats["operations"] = [
        {k: op.get(k) for k in ("name", "op", "unit", "tile_shape", "tile_count", "working_set_bytes", "macs")
         if op.get(k) is not None}
        for op in ops if isinstance(op, Mapping)]
    return stats


def format_plan_stats(stats: Mapping[str, Any]) -> str:
    """The statistics as readable lines."""
    lines = [f"plan of {stats['graph']} for {stats['hw_config']}: {stats['commands']} commands "
             f"({', '.join(f'{u} {n}' for u, n in stats['commands_per_unit'].items())})"]
    compact = stats.get("tcm_compact_bytes", stats["peak_tcm_bytes"])
    spread = (f" (buffers spread out for parallelism; compact placement {_exact(compact)})"
              if compact != stats["peak_tcm_bytes"] else "")
    lines.append(f"TCM: peak {_exact(stats['peak_tcm_bytes'])} of "
                 f"{human_bytes(stats['tcm_size_bytes'])}{spread}; lower bound "
                 f"{_exact(stats['tcm_lower_bound_bytes'])}; "
                 f"overhead {100 * stats['tcm_overhead']:.1f}%"
                 + (f" (planner {stats['tcm_planner']})" if "tcm_planner" in stats else ""))
    for memory, info in stats["memories"].items():
        kinds = ", ".join(f"{k} {human_bytes(v)}" for k, v in info["bytes_by_kind"].items())
        lines.append(f"{memory}: {info['allocations']} allocations, {human_bytes(info['allocated_bytes'])}"
                     f" allocated in a plan of {human_bytes(info['plan_size_bytes'])}"
                     + (f" ({kinds})" if kinds else ""))
    if "planned_ddr_read_bytes" in stats:
        lines.append(f"DDR traffic planned: read {human_bytes(stats['planned_ddr_read_bytes'])}, write "
                     f"{human_bytes(stats['planned_ddr_write_bytes'])}; compulsory: read "
                     f"{human_bytes(stats.get('compulsory_ddr_read_bytes', 0))}, write "
                     f"{human_bytes(stats.get('compulsory_ddr_write_bytes', 0))}")
    spilled = stats.get("spilled_values") or []
    lines.append(f"spilled to DDR: {', '.join(spilled) if spilled else 'nothing'}")
    tiled = [op for op in stats.get("operations", []) if (op.get("tile_count") or 1) > 1]
    lines.append(f"{len(stats.get('operations', []))} operations, {len(tiled)} tiled"
                 + "".join(f"\n  {op['name']} ({op.get('op', '')}): {op['tile_count']} tiles of "
                           f"{op.get('tile_shape')}, working set {human_bytes(op.get('working_set_bytes') or 0)}"
                           for op in tiled))
    return "\n".join(lines)


def _exact(count: int) -> str:
    """``45.1 KiB (46,160 B)``; plain bytes below 1 KiB."""
    return human_bytes(count) + (f" ({count:,} B)" if count >= 1024 else "")
