"""The per-operation table ``npu-sim run`` prints: where the cycles and the DDR bytes went.

Reads only the summary dict (:mod:`reports.summary`), so it can be printed again
from a saved ``summary.json``. With several invocations it shows the first one
(the others run the same operations) and says so.
"""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Console
from rich.table import Table

#: Rows shown before the table is cut (the summary keeps them all).
MAX_ROWS = 60


def human_bytes(count: float) -> str:
    """``1536`` -> ``1.5 KiB``: binary units, three significant digits."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1024
    return f"{value:.3g} GiB"  # pragma: no cover


def ops_table(summary: Mapping[str, Any], *, invocation: int = 0, max_rows: int = MAX_ROWS) -> Table:
    """A rich Table of the summary's ``ops`` of one invocation, in start order."""
    rows = [op for op in summary.get("ops", []) if op.get("invocation", 0) == invocation]
    per_invocation = summary.get("per_invocation_cycles") or [summary.get("total_cycles", 0)]
    inv_cycles = per_invocation[invocation] if invocation < len(per_invocation) else 0
    title = f"{summary.get('graph', '')} on {summary.get('hw_config', '')}: {len(rows)} NPU operations"
    if summary.get("invocations", 1) > 1:
        title += f" (invocation {invocation} of {summary['invocations']})"
    table = Table(title=title, title_justify="left", show_lines=False, pad_edge=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("operation", overflow="fold", max_width=44)
    table.add_column("op", overflow="fold", max_width=26)
    for header in ("unit", "start", "cycles", "% time", "MACs", "DDR read", "DDR write"):
        table.add_column(header, justify="left" if header == "unit" else "right", no_wrap=True)
    for index, op in enumerate(rows[:max_rows]):
        cycles = op["end_cycle"] - op["start_cycle"]
        share = 100.0 * cycles / inv_cycles if inv_cycles else 0.0
        table.add_row(str(index), op["name"], op["op"], op["unit"], f"{op['start_cycle']:,}",
                      f"{cycles:,}", f"{share:.1f}", f"{op['macs']:,}",
                      human_bytes(op["ddr_read_bytes"]), human_bytes(op["ddr_write_bytes"]))
    if len(rows) > max_rows:
        table.add_row("…", f"{len(rows) - max_rows} more in summary.json", *[""] * 8)
    return table


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


def utilization_line(summary: Mapping[str, Any]) -> str:
    return "busy: " + ", ".join(f"{unit} {100 * frac:.1f}%"
                                for unit, frac in summary.get("utilization", {}).items())


def print_report(summary: Mapping[str, Any], console: Console | None = None) -> None:
    """Print the table and the totals."""
    if console is None:
        console = Console()
        if not console.is_terminal:  # piped or captured: do not squeeze the table into 80 columns
            console = Console(width=max(console.width, 132))
    console.print(ops_table(summary))
    console.print(totals_line(summary), highlight=False, soft_wrap=True)
    console.print(utilization_line(summary), highlight=False, soft_wrap=True)
