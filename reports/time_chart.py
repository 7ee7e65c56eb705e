"""Where the time goes: the operations' cycles by what bounds them, each unit's busy share of
the run, and the operations that take longest, as bar charts (inline SVG).

Reads summary.json's ``time_breakdown`` (by bound, by unit) and ``ops`` (each row's
``cycles``: its work, and ``bound_shares``). An operation's bar is split by its bound
shares, so the chart says both how long and why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reports.human_units import cycles, percent
from reports.svg import BOUND_COLOURS, BOUND_LABELS, OTHER_COLOUR, PALETTE, Bar, bar_chart, legend
from reports.table import op_cycles

#: Operations shown in the "longest operations" chart.
TOP_OPERATIONS = 12


def op_row_id(index: int) -> str:
    """The HTML id of the per-op table row of ``summary["ops"][index]``."""
    return f"op-{index}"


def bound_legend() -> str:
    return legend([(BOUND_LABELS[b], c) for b, c in BOUND_COLOURS.items()])


def bound_chart(summary: Mapping[str, Any]) -> str:
    """One bar per bound: its share of the operations' cycles and how many operations it bounds."""
    by_bound = summary.get("time_breakdown", {}).get("by_bound", {})
    bars = [Bar(f"{BOUND_LABELS.get(b, b)}-bound",
                [(info.get("share", 0.0), BOUND_COLOURS.get(b, OTHER_COLOUR),
                  f"{BOUND_LABELS.get(b, b)}: {cycles(info.get('cycles', 0))} cycles")],
                f"{percent(info.get('share', 0.0))} · {info.get('operations', 0)} ops")
            for b, info in by_bound.items()]
    return bar_chart(bars, label="operation cycles by bound", label_width=150, bar_width=290, note_width=120)


def unit_colour(unit: str, index: int) -> str:
    if unit.startswith("dma"):
        return BOUND_COLOURS["memory"]
    if unit == "mac_array":
        return BOUND_COLOURS["compute"]
    return PALETTE[(index + 4) % len(PALETTE)]


def unit_chart(summary: Mapping[str, Any]) -> str:
    """One bar per unit and DMA engine: the share of the run it was busy."""
    by_unit = summary.get("time_breakdown", {}).get("by_unit", {})
    exact = summary.get("utilization", {})   # unrounded: the same figure as the headline's
    bars = [Bar(unit, [(exact.get(unit, info.get("share", 0.0)), unit_colour(unit, i),
                        f"{unit}: busy {cycles(info.get('busy_cycles', 0))} cycles")],
                f"{percent(exact.get(unit, info.get('share', 0.0)))} busy")
            for i, (unit, info) in enumerate(by_unit.items())]
    return bar_chart(bars, label="busy share of the run by unit", label_width=150, bar_width=290, note_width=120)


def top_operations(summary: Mapping[str, Any], count: int = TOP_OPERATIONS) -> list[int]:
    """Indices into ``ops`` of the first invocation's longest operations, longest first."""
    ops = summary.get("ops", [])
    first = [i for i, op in enumerate(ops) if op.get("invocation", 0) == 0]
    return sorted(first, key=lambda i: (-op_cycles(ops[i]), i))[:count]


def top_operations_chart(summary: Mapping[str, Any], count: int = TOP_OPERATIONS,
                         row_id: Callable[[int], str] = op_row_id) -> str:
    """The longest operations, split by bound; the longest fills the width, the note gives each
    one's cycles and share of the inference."""
    ops = summary.get("ops", [])
    per = summary.get("per_invocation_cycles") or [summary.get("total_cycles", 0)]
    inference = per[0] if per else 0
    top = top_operations(summary, count)
    longest = max((op_cycles(ops[i]) for i in top), default=0)
    bars = []
    for i in top:
        op = ops[i]
        work = op_cycles(op)
        share = work / inference if inference else 0.0
        shares = op.get("bound_shares") or {op.get("bound", "compute"): 1.0}
        segments = [(work / longest * fraction if longest else 0.0, BOUND_COLOURS.get(b, OTHER_COLOUR),
                     f"{op.get('name', '')}: {BOUND_LABELS.get(b, b)} {percent(fraction)} of its cycles")
                    for b, fraction in shares.items() if fraction]
        bars.append(Bar(op.get("name", ""), segments,
                        f"{cycles(work)} cyc · {percent(share)} · {BOUND_LABELS.get(op.get('bound', ''), '')}",
                        row_id(i)))
    if not bars:
        return '<p class="note">No operations.</p>'
    return bar_chart(bars, label="longest operations", label_width=250, note_width=210, bar_width=380)
