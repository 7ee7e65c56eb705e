"""The run summary (``summary.json``): what a simulation took, in cycles, bytes and memory.

:func:`build_summary` is a pure function of the simulator's :class:`~npu_sim.hw.trace.Trace`,
the :class:`~npu_sim.program.Program` it ran (for the memory plan and the scheduler's
command -> operation map) and the :class:`~npu_sim.hw.config.HwConfig`. Every number
in it is read from those; none is estimated here.

Fields (ARCHITECTURE.md lists the required ones):

* ``total_cycles``: from the start of the first invocation to the end of the last;
  ``per_invocation_cycles``; ``seconds`` = cycles / ``clock_hz``;
* ``ddr_read_bytes`` / ``ddr_write_bytes``: payload bytes the DMAs moved from/to DDR, the
  off-chip memory (``*_burst_bytes``: what the DDR moved, whole bursts); ``memories``: per
  memory what it holds (the config's memory roles), whether it is read-only (flash) and the
  bytes moved from and into it (:mod:`reports.memory_traffic`); ``ddr_bytes_per_cycle`` and
  ``ddr_gigabytes_per_second``: achieved payload bandwidth over the run;
  ``ddr_bandwidth_utilization``: burst bytes over what the DDR could move in that time;
* ``peak_tcm_bytes``: the TCM footprint of the plan (end of the topmost allocation);
  ``tcm_compact_bytes``: the footprint of the scheduler's compact placement (the plan
  may spread buffers wider when the TCM has room, to avoid false dependencies);
  ``tcm_lower_bound_bytes``: the most bytes live at once by the plan's lifetimes
  (the bound no planner can beat); ``peak_live_tcm_bytes``: the most bytes in use at
  one cycle in the simulation; ``tcm_peak``: the allocations in use at that cycle and
  their bytes by kind (``by_kind``: activation, tile, constant ...; :mod:`reports.peak_tensors`);
  ``tcm_resident_constant_bytes``: the TCM constants hold for the whole run (the resident
  constant pool; 0 where constants stream through buffers around their readers);
* ``ddr_spill_bytes``: the bytes the plan spilled to the DDR (each spilled buffer's bytes, per
  invocation that used it); ``ddr_spill_space_bytes``: the most DDR bytes spills held at once;
* ``ops``: one row per NPU operation and invocation (see :mod:`reports.operations`):
  its ``cycles`` are its work (the cycles in which one of its commands kept a unit busy),
  ``span_cycles`` its first start to its last end, ``busy_intervals`` per unit (the
  constants a multi-invocation run loads once before its first invocation are operations of
  invocation -1, the preamble); with its
  ``bound`` (``compute``, ``memory`` or ``setup_latency``: what most of its
  commands' cycles went to) and ``bound_shares`` (each one's fraction of them);
* ``time_breakdown``: the run's cycles by unit (busy cycles and their share of the run)
  and by bound (the operations' cycles of each kind summed, their share, and how many
  operations each bound dominates), see :func:`time_breakdown`;
* ``utilization``: busy fraction of each unit (a DMA engine is busy while it issues a
  descriptor, not while the data is in flight); ``mac_utilization``: the MAC array's
  MACs over its peak for their dtype (``macs_per_cycle``) for the whole run;
* ``energy_pj``, ``energy_breakdown_pj``, ``area_mm2``, ``area_breakdown_mm2``: see
  :mod:`reports.energy`;
* ``fused_composites``: one entry per fused composite instance (an LSTM cell): its kind,
  the graph operators it replaced, its sizes, ``weights_resident`` and its compute cycles
  per invocation (:mod:`reports.composites`);
* ``cpu_ops``: the operations on the host CPU, outside the NPU's support (operator, dtype,
  cycles, reason; :mod:`reports.cpu_ops`);
* ``block_tensors``: the tensors the TCM plan stores as blocks in its holes behind a pointer
  table (``count``, ``blocks``, ``pointer_table_bytes``; :mod:`reports.block_tensors`);
* ``stripes``: the chains of operations run in horizontal stripes, their rolling buffers
  and the whole tensors those replace (:mod:`reports.stripes`);
  ``tcm_lower_bound_unstriped_bytes``: the lower bound were those buffers whole tensors (the
  bound of the schedule without its stripes; ``tcm_lower_bound_bytes`` is the striped one's);
* ``preamble_cycles``, ``preamble_ddr_bytes``, ``resident_constant_bytes``: the constants
  loaded into TCM once before the first invocation of a multi-invocation run
  (:mod:`reports.preamble`; not part of ``total_cycles``);
* ``inputs`` (name -> where the data came from) and ``outputs`` (graph output
  name -> file): filled in by whoever reads and writes the files (``npu-sim run``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from npu_sim.hw.config import HwConfig
from npu_sim.hw.trace import Trace
from npu_sim.program import MemorySpace, Program
from reports.block_tensors import block_tensor_totals
from reports.composites import fused_composites
from reports.cpu_ops import cpu_ops
from reports.energy import energy_area_figures
from reports.memory_traffic import memory_figures
from reports.occupancy import peak, spilled_bytes, tcm_plan_figures, trace_occupancy_steps
from reports.operations import BOUNDS, OperationSpan, bound_of, command_setup_cycles, operation_spans, shares
from reports.peak_tensors import resident_constant_tcm_bytes, tcm_peak
from reports.preamble import preamble_figures
from reports.stripes import striped_chain_figures


def total_cycles(trace: Trace) -> int:
    """Cycles from the start of the first invocation to the end of the last."""
    if not trace.invocations:
        return max((c.end_cycle for c in trace.commands), default=0)
    return max(i.end_cycle for i in trace.invocations) - min(i.start_cycle for i in trace.invocations)


def build_summary(trace: Trace, hw: HwConfig, program: Program | None = None, *,
                  graph: str = "", outputs: Mapping[str, str] | None = None,
                  wall_seconds: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The summary dict of one simulation (JSON-ready: only str, int, float, list, dict)."""
    cycles = total_cycles(trace)
    counters = trace.counters
    ddr_bytes = counters.ddr_read_bytes + counters.ddr_write_bytes
    ddr_burst_bytes = counters.ddr_read_burst_bytes + counters.ddr_write_burst_bytes
    mac_pes = hw.mac_array.rows * hw.mac_array.cols

    tcm_footprint, tcm_compact, tcm_bound = tcm_plan_figures(program)
    tcm_steps = trace_occupancy_steps(trace, MemorySpace.TCM)
    span = (min((i.start_cycle for i in trace.invocations), default=0),
            max((i.end_cycle for i in trace.invocations), default=cycles))

    summary: dict[str, Any] = {
        "command": "run",
        "graph": graph or (program.graph_name if program else ""),
        "hw_config": hw.name,
        "invocations": len(trace.invocations),
        "inputs": {},
        "outputs": dict(outputs or {}),
        "total_cycles": cycles,
        "per_invocation_cycles": [i.cycles for i in trace.invocations],
        "clock_hz": hw.clock_hz,
        "seconds": cycles / hw.clock_hz,
        "per_invocation_seconds": [i.cycles / hw.clock_hz for i in trace.invocations],
        "ddr_read_bytes": counters.ddr_read_bytes,
        "ddr_write_bytes": counters.ddr_write_bytes,
        "ddr_read_burst_bytes": counters.ddr_read_burst_bytes,
        "ddr_write_burst_bytes": counters.ddr_write_burst_bytes,
        "ddr_bytes_per_cycle": _ratio(ddr_bytes, cycles),
        "ddr_gigabytes_per_second": _ratio(ddr_bytes * hw.clock_hz, cycles) / 1e9,
        "ddr_bandwidth_utilization": _ratio(ddr_burst_bytes, cycles * hw.ddr.bandwidth_bytes_per_cycle),
        "macs": counters.macs,
        "mac_utilization": _ratio(counters.mac_pe_cycles, cycles * mac_pes),
        "peak_tcm_bytes": tcm_footprint,
        "tcm_compact_bytes": tcm_compact,
        "tcm_lower_bound_bytes": tcm_bound,
        "tcm_size_bytes": hw.tcm.size_bytes,
        "peak_live_tcm_bytes": peak(tcm_steps[1]),
        "variable_sram_bytes": peak(trace_occupancy_steps(trace, MemorySpace.VARIABLE_SRAM, span=span)[1]),
        "ddr_spill_bytes": spilled_bytes(trace.allocations),
        "ddr_spill_space_bytes": peak(trace_occupancy_steps(trace, MemorySpace.DDR, kinds=("spill",))[1]),
        "utilization": counters.utilization(cycles),
        "busy_cycles": dict(counters.busy_cycles),
        "command_counts": dict(counters.command_counts),
    }
    spans = operation_spans(trace.commands, program, command_setup_cycles(hw), span[0], trace.repeats)
    summary["ops"] = [span_.as_dict(busy_intervals=True) for span_ in spans]
    summary["time_breakdown"] = time_breakdown(spans, summary["busy_cycles"], cycles)
    summary["tcm_peak"] = tcm_peak(trace.allocations, *tcm_steps)
    summary["tcm_resident_constant_bytes"] = resident_constant_tcm_bytes(program.allocations) if program else 0
    summary["fused_composites"] = fused_composites(spans, program)
    summary["cpu_ops"] = cpu_ops(spans, program)
    summary["block_tensors"] = block_tensor_totals(program)
    summary["stripes"] = striped_chain_figures(program)
    summary["tcm_lower_bound_unstriped_bytes"] = summary["stripes"]["tcm_lower_bound_unstriped_bytes"] or tcm_bound
    summary["memories"] = memory_figures(trace, hw, program)
    summary.update(energy_area_figures(trace, hw, program, cycles))
    summary.update(preamble_figures(trace, program))
    if wall_seconds:
        summary["wall_seconds"] = {k: float(v) for k, v in wall_seconds.items()}
    summary["hw"] = hw.model_dump(mode="json")
    return summary


def time_breakdown(spans: list[OperationSpan], busy_cycles: Mapping[str, int], cycles: int) -> dict[str, Any]:
    """Where the run's time goes: each unit's busy cycles and their share of the run, and the
    operations' cycles by what bounds them (:attr:`OperationSpan.bound_cycles`, summed: work
    that overlaps in time, so the shares are of that work, not of the run) and how many
    operations each bound dominates."""
    parts = [s.bound_cycles for s in spans]
    by_bound = {bound: sum(p[bound] for p in parts) for bound in BOUNDS}
    bounds = Counter(bound_of(p) for p in parts)
    return {
        "total_cycles": cycles,
        "by_unit": {unit: {"busy_cycles": busy, "share": round(_ratio(busy, cycles), 4)}
                    for unit, busy in busy_cycles.items()},
        "by_bound": {bound: {"cycles": by_bound[bound], "share": share,
                             "operations": bounds[bound]}
                     for bound, share in shares(by_bound).items()},
    }


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0
