"""Memory-plan statistics of a compiled Program (``npu-sim plan``), before any simulation.

Read from the Program itself (allocations, command stream) and from the
scheduler's ``Program.stats`` (TCM footprint and lower bound, planned and
compulsory DDR traffic, spilled values, per-operation tiling) when present.
``tcm_overhead`` compares the compact placement (``tcm_compact_bytes``) with the
lower bound: the plan itself may spread buffers wider when the TCM has room.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from npu_sim.hw.compute_units import unit_names
from npu_sim.hw.config import HwConfig
from npu_sim.program import ComputeCommand, DmaCommand, OperationStats, PlanStats, Program
from reports.block_tensors import plan_block_tensors
from reports.composites import composite_candidates, format_candidates
from reports.cpu_ops import plan_cpu_ops
from reports.occupancy import tcm_plan_figures
from reports.stripes import striped_chain_figures, striped_chain_lines
from reports.table import human_bytes


def plan_stats(program: Program, hw: HwConfig) -> dict[str, Any]:
    """JSON-ready statistics of ``program``'s memory plan and command stream on ``hw``."""
    peak, compact, bound = tcm_plan_figures(program)
    stats: dict[str, Any] = {
        "graph": program.graph_name,
        "hw_config": hw.name,
        **_command_counts(program, hw),
        "peak_tcm_bytes": peak,
        "tcm_compact_bytes": compact,
        "tcm_lower_bound_bytes": bound,
        "tcm_overhead": (compact - bound) / bound if bound else 0.0,
        "tcm_size_bytes": hw.tcm.size_bytes,
        "variable_sram_size_bytes": hw.variable_sram.size_bytes,
        "memories": _memories(program),
        "block_tensors": plan_block_tensors(program),
        "stripes": striped_chain_figures(program),
    }
    facts = program.stats
    if facts is not None:
        stats.update(_scheduler_facts(facts))
    stats["operations"] = [] if facts is None else [_operation(op) for op in facts.operations]
    return stats


def _command_counts(program: Program, hw: HwConfig) -> dict[str, Any]:
    """Commands in all, and per DMA engine and compute unit as the run summary counts them
    (0 when unused)."""
    units: Counter[str] = Counter({name: 0 for name in (*(f"dma{e}" for e in range(hw.dma.engine_count)),
                                                        *unit_names())})
    for cmd in program.walk():
        if isinstance(cmd, DmaCommand):
            units[f"dma{cmd.engine}"] += 1
        elif isinstance(cmd, ComputeCommand):
            units[cmd.unit] += 1
        else:
            units["sequencer"] += 1
    return {"commands": sum(units.values()), "commands_per_unit": dict(sorted(units.items()))}


def _memories(program: Program) -> dict[str, Any]:
    memories: dict[str, Any] = {}
    for memory, size in program.memory_sizes.items():
        allocs = [a for a in program.allocations if a.memory is memory]
        kinds: dict[str, int] = defaultdict(int)
        for a in allocs:
            kinds[a.kind] += a.size_bytes
        memories[memory.value] = {"plan_size_bytes": size, "allocations": len(allocs),
                                  "allocated_bytes": sum(a.size_bytes for a in allocs),
                                  "bytes_by_kind": dict(sorted(kinds.items()))}
    return memories


def _scheduler_facts(facts: PlanStats) -> dict[str, Any]:
    return {
        "tcm_planner": facts.tcm_planner,
        "planned_ddr_read_bytes": facts.planned_ddr_read_bytes,
        "planned_ddr_write_bytes": facts.planned_ddr_write_bytes,
        "compulsory_ddr_read_bytes": facts.compulsory_ddr_read_bytes,
        "compulsory_ddr_write_bytes": facts.compulsory_ddr_write_bytes,
        "macs": facts.macs,
        "spilled_values": list(facts.spilled_values),
        "evicted_values": list(facts.evicted_values),
        "composites": composite_candidates(facts),
        "cpu_ops": plan_cpu_ops(facts),
    }


def _operation(op: OperationStats) -> dict[str, Any]:
    row: dict[str, Any] = {"name": op.name, "op": op.op, "unit": op.unit}
    if op.tile_shape is not None:
        row["tile_shape"] = list(op.tile_shape)
    row.update(tile_count=op.tile_count, working_set_bytes=op.working_set_bytes, macs=op.macs)
    return row


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
    lines += _block_tensor_lines(stats.get("block_tensors") or {})
    lines += striped_chain_lines(stats.get("stripes") or {})
    if "composites" in stats:
        lines += format_candidates(stats["composites"])
    for op in stats.get("cpu_ops") or []:
        lines.append(f"on the host CPU: {op['name']} ({op['op']}, {op['dtype']}): {op['reason']}")
    return "\n".join([*lines, _tiled_operations(stats.get("operations", []))])


def _block_tensor_lines(blocks: Mapping[str, Any]) -> list[str]:
    """A line naming the block tensors, if any."""
    if not blocks.get("count"):
        return []
    names = ", ".join(t["name"] for t in blocks.get("tensors", []))
    return [f"block tensors: {blocks['count']} ({blocks['blocks']} blocks in the TCM's holes, pointer tables "
            f"{human_bytes(blocks['pointer_table_bytes'])}): {names}"]


def _tiled_operations(operations: list[dict[str, Any]]) -> str:
    tiled = [op for op in operations if (op.get("tile_count") or 1) > 1]
    return (f"{len(operations)} operations, {len(tiled)} tiled"
            + "".join(f"\n  {op['name']} ({op.get('op', '')}): {op['tile_count']} tiles of "
                      f"{op.get('tile_shape')}, working set {human_bytes(op.get('working_set_bytes') or 0)}"
                      for op in tiled))


def _exact(count: int) -> str:
    """``45.1 KiB (46,160 B)``; plain bytes below 1 KiB."""
    return human_bytes(count) + (f" ({count:,} B)" if count >= 1024 else "")
