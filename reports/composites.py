"""Fused composites in the run summary (``fused_composites``) and the plan statistics.

One entry per fused instance (an LSTM cell may be issued as two NPU operations: its
recurrent product and the rest; they are one instance), read from the scheduler's
operation records and the simulated operation spans.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from npu_sim.program import CompositeFacts, PlanStats, Program
from reports.operations import OperationSpan


def fused_composites(spans: Sequence[OperationSpan], program: Program | None) -> list[dict[str, Any]]:
    """Per fused instance: its kind, the graph operators it replaced, its sizes, whether its
    weights stay in TCM, and its compute cycles in the last invocation (the steady state)."""
    if program is None or program.stats is None:
        return []
    instances: dict[CompositeFacts, dict[str, Any]] = {}
    for op in program.stats.operations:
        facts = op.composite
        if facts is None:
            continue
        entry = instances.get(facts)
        if entry is None:
            entry = instances[facts] = {
                "kind": facts.kind, "operations": [], "replaced_operators": [],
                "hidden_units": facts.hidden_units, "input_size": facts.input_size,
                "outputs": list(facts.outputs), "weights_resident": facts.weights_resident,
                "cycles_per_invocation": 0}
        entry["operations"].append(op.name)
        entry["replaced_operators"] += list(op.graph_ops)
    last = max((s.invocation for s in spans), default=0)
    for entry in instances.values():
        names = set(entry["operations"])
        entry["cycles_per_invocation"] = sum(s.compute_cycles for s in spans
                                             if s.invocation == last and s.name in names)
    return list(instances.values())


def composite_candidates(stats: PlanStats) -> list[dict[str, Any]]:
    """Every place a composite rule looked at: fused, or why not."""
    return [{"kind": c.kind, "anchor": c.anchor, "block": c.block, "fused": c.fused,
             **({"operators": len(c.operators)} if c.fused else {"reason": c.reason})}
            for c in stats.composite_candidates]


def format_candidates(candidates: Sequence[dict[str, Any]]) -> list[str]:
    """Readable lines of :func:`composite_candidates`."""
    if not candidates:
        return ["composites: no candidate"]
    lines = [f"composites: {sum(c['fused'] for c in candidates)} of {len(candidates)} candidates fused"]
    for c in candidates:
        where = f"{c['kind']} at {c['anchor']} (block {c['block']})"
        lines.append(f"  {where}: " + (f"fused, {c['operators']} operators" if c["fused"]
                                        else f"not fused: {c['reason']}"))
    return lines
