"""The per-operation table ``npu-sim run`` prints: where the cycles and the DDR bytes went.

Reads only the summary dict (:mod:`reports.summary`), so it can be printed again
from a saved ``summary.json``. With several invocations it shows the first one
(the others run the same operations) and says so. The table is laid out with
plain string formatting (rich's look, without its per-cell layout cost).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reports.human_units import human_bytes

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["human_bytes", "ops_table", "op_cycles", "print_report", "report_text", "totals_line"]

#: Rows shown before the table is cut (the summary keeps them all).
MAX_ROWS = 60


#: Columns: header, right-aligned, maximum width (longer cells fold onto more lines).
COLUMNS = (("#", True, None), ("operation", False, 44), ("op", False, 26), ("unit", False, None),
           ("start", True, None), ("cycles", True, None), ("% time", True, None), ("span", True, None),
           ("bound", False, None),
           ("MACs", True, None), ("DDR read", True, None), ("DDR write", True, None))


#: How the table writes an operation's bound (summary.json's ``bound``).
_BOUND_LABELS = {"compute": "compute", "memory": "memory", "setup_latency": "setup/lat"}


def ops_table(summary: Mapping[str, Any], *, invocation: int = 0, max_rows: int = MAX_ROWS) -> str:
    """The summary's ``ops`` of one invocation, in start order, as a boxed text table: each
    operation's cycles are its work (cycles its commands kept a unit busy, :func:`op_cycles`),
    its share of the invocation, and apart from them its span (first start to last end).

    Plain string formatting (a rich Table takes ~1 ms per row to lay out; this is the
    same layout, heavy-headed box, long names folded, at a small fraction of that)."""
    rows = [op for op in summary.get("ops", []) if op.get("invocation", 0) == invocation]
    per_invocation = summary.get("per_invocation_cycles") or [summary.get("total_cycles", 0)]
    inv_cycles = per_invocation[invocation] if invocation < len(per_invocation) else 0
    title = f"{summary.get('graph', '')} on {summary.get('hw_config', '')}: {len(rows)} NPU operations"
    if summary.get("invocations", 1) > 1:
        title += f" (invocation {invocation} of {summary['invocations']})"
    cells: list[list[str]] = []
    for index, op in enumerate(rows[:max_rows]):
        cycles = op_cycles(op)
        share = 100.0 * cycles / inv_cycles if inv_cycles else 0.0
        unit = op["unit"] + (" (host)" if op["unit"] == "cpu" else "")
        cells.append([str(index), op["name"], op["op"], unit, f"{op['start_cycle']:,}", f"{cycles:,}",
                      f"{share:.1f}", f"{op['end_cycle'] - op['start_cycle']:,}",
                      _BOUND_LABELS.get(op.get("bound", ""), ""), f"{op['macs']:,}",
                      human_bytes(op["ddr_read_bytes"]),
                      human_bytes(op["ddr_write_bytes"])])
    if len(rows) > max_rows:
        cells.append(["…", f"{len(rows) - max_rows} more in summary.json"] + [""] * (len(COLUMNS) - 2))
    return "\n".join([title] + _boxed([c[0] for c in COLUMNS], cells))


def op_cycles(op: Mapping[str, Any]) -> int:
    """An ``ops`` row's work in cycles: its ``cycles`` (a summary.json written before rows had
    their busy cycles: the sum of its compute and DMA busy cycles, capped at its span)."""
    if "span_cycles" in op:
        return int(op["cycles"])
    return min(op["end_cycle"] - op["start_cycle"], op.get("compute_cycles", 0) + op.get("dma_cycles", 0))


def _column_widths(headers: list[str], rows: list[list[str]]) -> list[int]:
    """Per column: its header, or its longest cell capped at the column's limit if longer."""
    limits = [limit for _, _, limit in COLUMNS]
    widths = [len(h) for h in headers]
    for i, column in enumerate(zip(*rows)):
        longest, limit = max(map(len, column)), limits[i]
        widths[i] = max(widths[i], min(longest, limit) if limit else longest)
    return widths


def _boxed(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of a table with a heavy header box (rich's HEAVY_HEAD look, no edge padding)."""
    right = [r for _, r, _ in COLUMNS]
    widths = _column_widths(headers, rows)
    pads = [(0 if i == 0 else 1, 0 if i == len(widths) - 1 else 1) for i in range(len(widths))]
    spans = [w + a + b for w, (a, b) in zip(widths, pads)]

    lefts = [" " * a for a, _ in pads]
    rights = [" " * b for _, b in pads]
    columns = range(len(widths))

    def line(cells: list[str], bar: str, align: bool) -> list[str]:
        """One row, folded onto several lines where a cell is wider than its column."""
        if all(len(cells[i]) <= widths[i] for i in columns):  # the usual case: one line
            return [bar + bar.join([lefts[i] + (cells[i].rjust(widths[i]) if align and right[i]
                                                else cells[i].ljust(widths[i])) + rights[i]
                                    for i in columns]) + bar]
        folded = [[cell[k:k + w] for k in range(0, len(cell), w)] or [""] for cell, w in zip(cells, widths)]
        out = []
        for j in range(max(len(f) for f in folded)):
            parts = []
            for i, f in enumerate(folded):
                text = f[j] if j < len(f) else ""
                text = text.rjust(widths[i]) if align and right[i] else text.ljust(widths[i])
                parts.append(" " * pads[i][0] + text + " " * pads[i][1])
            out.append(bar + bar.join(parts) + bar)
        return out

    lines = ["┏" + "┳".join("━" * n for n in spans) + "┓"]
    lines += line(headers, "┃", True)
    lines.append("┡" + "╇".join("━" * n for n in spans) + "┩")
    for row in rows:
        lines += line(row, "│", True)
    lines.append("└" + "┴".join("─" * n for n in spans) + "┘")
    return lines


def totals_line(summary: Mapping[str, Any]) -> str:
    """One line: cycles, time, MACs, DDR traffic, TCM use."""
    cycles = summary["total_cycles"]
    micros = summary["seconds"] * 1e6
    inv = summary["invocations"]
    per = f" ({cycles / inv:,.0f} per invocation)" if inv > 1 else ""
    return (f"{cycles:,} cycles{per} = {micros:,.1f} us at {summary['clock_hz'] / 1e6:g} MHz; "
            f"{summary['macs']:,} MACs ({100 * summary['mac_utilization']:.1f}% of peak); "
            f"DDR read {human_bytes(summary['ddr_read_bytes'])}, write "
            f"{human_bytes(summary['ddr_write_bytes'])} "
            f"({100 * summary['ddr_bandwidth_utilization']:.1f}% of bandwidth); "
            f"TCM {human_bytes(summary['peak_tcm_bytes'])} of {human_bytes(summary['tcm_size_bytes'])} "
            f"(lower bound {human_bytes(summary['tcm_lower_bound_bytes'])})")


def tcm_peak_line(summary: Mapping[str, Any], largest: int = 3) -> str:
    """One line on what the TCM holds at its peak: bytes by kind (constants resident or
    streamed) and the ``largest`` tensors; empty without a peak."""
    peak = summary.get("tcm_peak") or {}
    total = peak.get("bytes", 0)
    if not total:
        return ""
    kinds = []
    for kind, size in (peak.get("by_kind") or {}).items():
        resident = summary.get("tcm_resident_constant_bytes", 0) if kind == "constant" else 0
        how = "" if kind != "constant" else f", {human_bytes(resident)} resident" if resident else ", streamed"
        kinds.append(f"{kind} {human_bytes(size)} ({100 * size / total:.0f}%{how})")
    tensors = ", ".join(f"{t['name']} {human_bytes(t['size_bytes'])}" for t in peak.get("tensors", [])[:largest])
    return (f"TCM at its peak (cycle {peak.get('cycle', 0):,}): " + ", ".join(kinds)
            + (f"; largest: {tensors}" if tensors else ""))


def utilization_line(summary: Mapping[str, Any]) -> str:
    return "busy: " + ", ".join(f"{unit} {100 * frac:.1f}%"
                                for unit, frac in summary.get("utilization", {}).items())


#: The box in plain ASCII, for outputs that cannot encode the box-drawing characters.
ASCII_BOX = str.maketrans("┏┳┓┃┡╇┩│└┴┘━─…", "+++|+++|+++=-~")


def cpu_line(summary: Mapping[str, Any]) -> str:
    """One line on the operators the host CPU ran (those outside the NPU's support), if any."""
    rows = [r for r in summary.get("cpu_ops") or [] if isinstance(r, dict)]
    if not rows:
        return ""
    operators = ", ".join(dict.fromkeys(f"{r.get('op', '?')} ({r.get('dtype', '?')})" for r in rows))
    count = f"{len(rows)} operation{'s' if len(rows) != 1 else ''}"
    return (f"host CPU: {count} the NPU cannot run, {sum(int(r.get('cycles', 0)) for r in rows):,} "
            f"cycles: {operators} (cpu_ops in summary.json says why)")


def block_tensors_line(summary: Mapping[str, Any]) -> str:
    """One line on the block tensors of the plan, if any."""
    blocks = summary.get("block_tensors") or {}
    if not blocks.get("count"):
        return ""
    return (f"block tensors: {blocks['count']} stored as {blocks['blocks']} blocks in the TCM's holes instead of "
            f"spilling (pointer tables {human_bytes(blocks['pointer_table_bytes'])} in the variable SRAM; "
            "--no-block-tensors to compare)")


def report_text(summary: Mapping[str, Any]) -> str:
    """The table, the totals, the TCM at its peak, the block tensors, the busy line and the host
    CPU's operators, as ``npu-sim run`` prints them."""
    lines = [ops_table(summary), totals_line(summary), tcm_peak_line(summary), block_tensors_line(summary),
             utilization_line(summary), cpu_line(summary)]
    return "\n".join(line for line in lines if line)


def print_report(summary: Mapping[str, Any], console: Console | None = None) -> None:
    """Print the table and the totals (to ``console``, a rich Console, or standard output)."""
    text = report_text(summary)
    if console is None:
        encoding = getattr(sys.stdout, "encoding", None) or "ascii"
        try:
            text.encode(encoding)
        except (UnicodeEncodeError, LookupError):  # a terminal without the box characters
            text = text.translate(ASCII_BOX)
        print(text)
    elif not any(c in text for c in _SPECIAL):
        # What console.out(text, highlight=False) writes, without rich parsing the text into a
        # Text and wrapping each line (~2 ms for a full table): the same two segments, uncropped.
        from rich.segment import Segment, Segments

        console.print(Segments([Segment(text), Segment("\n")]), end="", crop=False)
    else:  # tabs or control codes, which rich expands or strips
        console.out(text, highlight=False)


#: Characters console.out treats specially (tab expansion, stripped control codes).
_SPECIAL = "\t\x07\x08\x0b\x0c\r"
