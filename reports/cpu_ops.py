"""Operators on the host CPU in the run summary (``cpu_ops``) and the plan statistics.

One entry per operation the scheduler moved to the ``cpu`` unit because the preset's NPU
cannot run it (:mod:`scheduler.passes.cpu_fallback`): what it computes, the graph operator at
fault, its data type, the reason with its source, and the CPU cycles it took (its compute
commands' busy cycles over the whole run, every invocation included).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from npu_sim.program import PlanStats, Program
from reports.operations import OperationSpan


def cpu_ops(spans: Sequence[OperationSpan], program: Program | None) -> list[dict[str, Any]]:
    """Per operation on the host CPU: ``name``, ``op``, ``operator``, ``dtype``, ``cycles``,
    ``reason`` (empty where the plan moved nothing)."""
    if program is None or program.stats is None:
        return []
    cycles: dict[str, int] = {}
    for span in spans:
        cycles[span.name] = cycles.get(span.name, 0) + span.compute_cycles
    return [{"name": f.operation, "op": f.op, "operator": f.operator, "dtype": f.dtype,
             "cycles": cycles.get(f.operation, 0), "reason": f.reason}
            for f in program.stats.cpu_fallbacks]


def plan_cpu_ops(stats: PlanStats) -> list[dict[str, Any]]:
    """The operations the plan runs on the host CPU, and why (no cycles: nothing ran yet)."""
    return [{"name": f.operation, "op": f.op, "operator": f.operator, "dtype": f.dtype, "reason": f.reason}
            for f in stats.cpu_fallbacks]
