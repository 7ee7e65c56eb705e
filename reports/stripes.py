"""Striped chains in the run summary (``stripes``) and the plan statistics.

A striped chain (:mod:`scheduler.passes.stripes`) runs consecutive operations stripe by
stripe, its intermediates in rolling buffers of a few rows: the summary lists each chain's
operations, stripe height and count, its rolling buffers beside the whole tensors they
replace, and the scheduler's cycle estimates striped and whole; and the TCM's lower bound
with the rolling buffers taken whole (``tcm_lower_bound_unstriped_bytes``), beside the
striped schedule's own (``tcm_lower_bound_bytes``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from npu_sim.program import Program
from reports.human_units import human_bytes


def striped_chain_figures(program: Program | None) -> dict[str, Any]:
    """``count``, ``tcm_lower_bound_unstriped_bytes``, ``rolling_bytes`` and
    ``rolling_whole_bytes`` (all chains' buffers and the tensors they replace), and ``chains``."""
    stats = program.stats if program is not None else None
    if stats is None:
        return {"count": 0, "tcm_lower_bound_unstriped_bytes": 0, "rolling_bytes": 0, "rolling_whole_bytes": 0,
                "chains": []}
    chains = stats.striped_chains
    return {
        "count": len(chains),
        "tcm_lower_bound_unstriped_bytes": stats.tcm_lower_bound_unstriped_bytes,
        "rolling_bytes": sum(b.size_bytes for c in chains for b in c.buffers),
        "rolling_whole_bytes": sum(b.whole_bytes for c in chains for b in c.buffers),
        "chains": [{"operations": list(c.operations), "stripe_rows": c.stripe_rows, "stripe_count": c.stripe_count,
                    "est_cycles": c.est_cycles, "whole_est_cycles": c.whole_est_cycles,
                    "rolling_buffers": [{"value": b.value, "rows": b.rows, "size_bytes": b.size_bytes,
                                         "whole_bytes": b.whole_bytes} for b in c.buffers]}
                   for c in chains],
    }


def striped_chain_lines(stripes: Mapping[str, Any]) -> list[str]:
    """A line per striped chain (none if there is none): its operations, stripes and rolling
    buffers, and the lower bound without them."""
    if not stripes.get("count"):
        return []
    lines = [f"striped chains: {stripes['count']}, rolling buffers {human_bytes(stripes['rolling_bytes'])} for "
             f"{human_bytes(stripes['rolling_whole_bytes'])} of whole tensors; lower bound unstriped "
             f"{human_bytes(stripes['tcm_lower_bound_unstriped_bytes'])}"]
    for chain in stripes["chains"]:
        buffers = ", ".join(f"{b['value']} {b['rows']} rows ({human_bytes(b['size_bytes'])} of "
                            f"{human_bytes(b['whole_bytes'])})" for b in chain["rolling_buffers"])
        lines.append(f"  {' -> '.join(chain['operations'])}: {chain['stripe_count']} stripes of "
                     f"{chain['stripe_rows']} rows; {buffers}")
    return lines
