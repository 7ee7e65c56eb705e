"""The headline of a run, in units a person reads: how fast, how busy, how much memory and
energy, and one sentence that answers "where does the time go".

Pure functions of a summary dict (summary.json): the run page shows them as cards, the
comparison page as rows with B/A. Every figure is per inference (per invocation) where
that is what a user compares; exact values stay in summary.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reports.human_units import duration, energy, human_bytes, per_second, percent, si
from reports.svg import BOUND_LABELS
from reports.table import op_cycles


@dataclass(frozen=True)
class Figure:
    """One headline figure: what, its value with its unit, a line of context, the number
    behind it (for B/A; None when there is none) and whether it calls for attention."""

    label: str
    value: str
    detail: str
    number: float | None = None
    warn: bool = False


def invocations(summary: Mapping[str, Any]) -> int:
    return max(1, int(summary.get("invocations", 1) or 1))


def latency_seconds(summary: Mapping[str, Any]) -> float:
    """Seconds per inference: the mean invocation (the preamble of a stream apart)."""
    per = summary.get("per_invocation_cycles") or [summary.get("total_cycles", 0)]
    return sum(per) / len(per) / summary.get("clock_hz", 1)


def headline_figures(summary: Mapping[str, Any]) -> list[Figure]:
    """Latency, throughput, MAC utilisation, DDR traffic, TCM, energy, area (and the CPU
    fallback and the preamble when the run has them), in that order."""
    n = invocations(summary)
    seconds = latency_seconds(summary)
    clock_hz = summary.get("clock_hz", 1)
    ddr_bytes = summary.get("ddr_read_bytes", 0) + summary.get("ddr_write_bytes", 0)
    figures = [
        Figure("Latency", duration(seconds), f"{seconds * clock_hz:,.0f} cycles per inference at "
               f"{si(clock_hz)}Hz" + (f", {n} inferences" if n > 1 else ""), seconds),
        Figure("Inferences per second", per_second(1 / seconds) if seconds else "-",
               "one inference after another", 1 / seconds if seconds else None),
        Figure("MAC utilisation", percent(summary.get("mac_utilization", 0.0)),
               f"{si(summary.get('macs', 0) / n)} MACs per inference", summary.get("mac_utilization", 0.0)),
        Figure("DDR bandwidth", f"{summary.get('ddr_gigabytes_per_second', 0.0):.3g} GB/s",
               f"{percent(summary.get('ddr_bandwidth_utilization', 0.0))} of the DDR's peak",
               summary.get("ddr_gigabytes_per_second", 0.0)),
        Figure("DDR per inference", human_bytes(ddr_bytes / n),
               f"read {human_bytes(summary.get('ddr_read_bytes', 0) / n)}, "
               f"write {human_bytes(summary.get('ddr_write_bytes', 0) / n)}", ddr_bytes / n),
        _tcm_figure(summary),
    ]
    if "energy_pj" in summary:
        figures.append(Figure("Energy per inference", energy(summary["energy_pj"] / n),
                              _largest_part(summary.get("energy_breakdown_pj", {})), summary["energy_pj"] / n))
    if "area_mm2" in summary:
        figures.append(Figure("Area", f"{summary['area_mm2']:.3g} mm2",
                              _largest_part(summary.get("area_breakdown_mm2", {})), summary["area_mm2"]))
    cpu = summary.get("cpu_ops")
    if cpu:
        figures.append(_cpu_figure(summary, cpu))
    if summary.get("preamble_cycles"):
        figures.append(Figure("Preamble", duration(summary["preamble_cycles"] / clock_hz),
                              f"constants loaded once: {human_bytes(summary.get('preamble_ddr_bytes', 0))}",
                              summary["preamble_cycles"] / clock_hz))
    return figures


def _tcm_figure(summary: Mapping[str, Any]) -> Figure:
    peak, bound = summary.get("peak_tcm_bytes", 0), summary.get("tcm_lower_bound_bytes", 0)
    over = f" (+{percent(peak / bound - 1)})" if bound and peak > bound else ""
    size = summary.get("tcm_size_bytes")
    of = f" of {human_bytes(size)}" if size else ""
    return Figure("Peak TCM", human_bytes(peak), f"lower bound {human_bytes(bound)}{over}{of}"
                  + _constant_share(summary), peak)


def _constant_share(summary: Mapping[str, Any]) -> str:
    """``; constants N % of the peak (R resident)`` when constants are in the TCM at its peak."""
    at_peak = summary.get("tcm_peak") or {}
    constants = (at_peak.get("by_kind") or {}).get("constant", 0)
    if not constants or not at_peak.get("bytes"):
        return ""
    resident = summary.get("tcm_resident_constant_bytes", 0)
    return f"; constants {percent(constants / at_peak['bytes'])} of the peak" + \
        (f" ({human_bytes(resident)} resident)" if resident else " (streamed)")


def _cpu_figure(summary: Mapping[str, Any], cpu: Any) -> Figure:
    rows = cpu if isinstance(cpu, list) else []
    cycles = sum(int(r.get("cycles", 0)) for r in rows if isinstance(r, dict))
    total = summary.get("total_cycles", 0)
    share = f"{percent(cycles / total)} of the run" if total else ""
    return Figure("CPU fallback", f"{len(rows)} ops", f"on the host CPU: {cycles:,} cycles, {share}",
                  len(rows), warn=True)


def _largest_part(parts: Mapping[str, float]) -> str:
    total = sum(parts.values())
    if not parts or not total:
        return ""
    name, value = max(parts.items(), key=lambda kv: kv[1])
    return f"most of it {name}: {percent(value / total)}"


def answer(summary: Mapping[str, Any]) -> str:
    """One sentence: the latency, what bounds most of the operations' cycles, the busiest unit
    and the longest operation."""
    parts = [f"{duration(latency_seconds(summary))} per inference on {summary.get('hw_config', '?')}"]
    by_bound = summary.get("time_breakdown", {}).get("by_bound", {})
    if by_bound:
        bound, info = max(by_bound.items(), key=lambda kv: kv[1].get("cycles", 0))
        parts.append(f"{percent(info.get('share', 0.0))} of the operations' cycles are "
                     f"{BOUND_LABELS.get(bound, bound)}-bound")
    utilization = summary.get("utilization", {})
    if utilization:
        unit, busy = max(utilization.items(), key=lambda kv: kv[1])
        parts.append(f"the busiest unit is {unit} ({percent(busy)} busy)")
    ops = [op for op in summary.get("ops", []) if op.get("invocation", 0) == 0]
    if ops:
        top = max(ops, key=op_cycles)
        inv = (summary.get("per_invocation_cycles") or [summary.get("total_cycles", 0)])[0]
        share = f" ({percent(op_cycles(top) / inv)} of the inference)" if inv else ""
        parts.append(f"the longest operation is {top.get('name', '?')}{share}")
    return "; ".join(parts) + "."
