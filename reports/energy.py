"""Energy and area of one simulated run, counted from its events (Accelergy-style first-order).

:func:`energy_breakdown_pj` walks the trace's executed commands: MACs by operand dtype on
the MAC array, elements through the vector and LUT units, the host CPU's busy cycles (the
operators the NPU cannot run), bytes read or written in each memory (a DMA reads its source
and writes its destination; a compute command's TCM bytes; the pointer-table entries a block
tensor's accesses read in the variable SRAM), DDR bursts, and static power
times the run time. :func:`area_breakdown_mm2` sums the parts
of the config. The figures per event are the config's ``energy`` and ``area`` sections.
"""

from __future__ import annotations

from npu_sim.hw.config import HwConfig
from npu_sim.hw.trace import Trace
from npu_sim.program import Command, ComputeCommand, DmaCommand, MemorySpace, Program, command_views

_MEMORY_KEYS = {MemorySpace.TCM: "tcm", MemorySpace.VARIABLE_SRAM: "variable_sram"}


def _command_energy_pj(program: Program, hw: HwConfig) -> dict[int, list[tuple[str, float]]]:
    """Per command id: (breakdown key, pJ) of one execution; a MAC command's pJ is per MAC.
    DDR bytes are not here: the DDR is charged by whole bursts from the counters."""
    e = hw.energy
    byte_pj = {"tcm": e.tcm_byte_pj * e.scale, "variable_sram": e.variable_sram_byte_pj * e.scale}
    energy: dict[int, list[tuple[str, float]]] = {}
    blocks = bool(program.block_tensors)   # (only views of block tensors walk pointer tables)
    for cmd in program.walk():
        if isinstance(cmd, DmaCommand):
            size = cmd.src.size_bytes
            energy[cmd.id] = [(_MEMORY_KEYS[view.memory], size * byte_pj[_MEMORY_KEYS[view.memory]])
                              for view in (cmd.src, cmd.dst) if view.memory in _MEMORY_KEYS]
        elif isinstance(cmd, ComputeCommand):
            elements = sum(view.element_count for view in cmd.outputs)
            if cmd.unit == "vector":
                energy[cmd.id] = [("vector", elements * e.vector_element_pj * e.scale)]
            elif cmd.unit == "lut":
                energy[cmd.id] = [("lut", elements * e.lut_element_pj * e.scale)]
            elif cmd.unit == "mac_array":
                dtype = cmd.steps[0].input_types[0].dtype.name.lower()
                energy[cmd.id] = [("mac_array", e.mac_pj.get(dtype, e.mac_pj.get("int8", 0.0)) * e.scale)]
        table_bytes = blocks and pointer_table_read_bytes(cmd, hw)
        if table_bytes:
            energy.setdefault(cmd.id, []).append(("variable_sram", table_bytes * byte_pj["variable_sram"]))
    return energy


def pointer_table_read_bytes(cmd: Command, hw: HwConfig) -> int:
    """Bytes of pointer tables (in the variable SRAM) one execution of ``cmd`` reads: an entry
    per block its views of block tensors touch."""
    entries = sum(len(view.table_entries) for view in command_views(cmd) if view.blocks is not None)
    return entries * hw.block_tensors.pointer_bytes


def energy_breakdown_pj(trace: Trace, hw: HwConfig, program: Program | None, total_cycles: int) -> dict[str, float]:
    """pJ by unit and memory: mac_array, vector, lut, cpu, tcm, variable_sram, ddr, dma, static."""
    e = hw.energy
    parts = dict.fromkeys(("mac_array", "vector", "lut", "cpu", "tcm", "variable_sram", "ddr", "dma", "static"), 0.0)
    cpu_cycle_pj = e.cpu_cycle_pj * e.scale
    per_command = _command_energy_pj(program, hw) if program is not None else {}
    tcm_pj = e.tcm_byte_pj * e.scale
    for record in trace.commands:
        for key, pj in per_command.get(record.id, ()):
            parts[key] += record.macs * pj if key == "mac_array" else pj
        if record.kind == "compute":
            parts["tcm"] += record.bytes * tcm_pj
            if record.unit == "cpu":
                parts["cpu"] += record.busy_cycles * cpu_cycle_pj
    counters = trace.counters
    burst_bytes = counters.ddr_read_burst_bytes + counters.ddr_write_burst_bytes
    parts["ddr"] = burst_bytes * e.ddr_byte_pj
    parts["dma"] = burst_bytes / hw.ddr.burst_size_bytes * e.dma_burst_pj * e.scale
    sram_kib = (hw.tcm.size_bytes + hw.variable_sram.size_bytes) / 1024
    static_mw = (e.static_mw + e.static_mw_per_kib_sram * sram_kib) * e.scale
    parts["static"] = static_mw * 1e-3 * (total_cycles / hw.clock_hz) * 1e12
    return parts


def area_breakdown_mm2(hw: HwConfig) -> dict[str, float]:
    """mm2 by part: mac_array (PEs for each supported dtype), tcm, variable_sram, vector, lut, dma, fixed."""
    a = hw.area
    pes = hw.mac_array.rows * hw.mac_array.cols
    pe_mm2 = sum(a.pe_mm2.get(dtype, 0.0) for dtype in hw.mac_array.pe_cycles_per_mac)
    return {key: value * a.scale for key, value in {
        "mac_array": pes * pe_mm2,
        "tcm": hw.tcm.size_bytes / 1024 * a.sram_mm2_per_kib,
        "variable_sram": hw.variable_sram.size_bytes / 1024 * a.sram_mm2_per_kib,
        "vector": hw.vector.elements_per_cycle["int8"] * a.vector_lane_mm2,
        "lut": hw.lut.elements_per_cycle * a.lut_lane_mm2,
        "dma": hw.dma.engine_count * a.dma_engine_mm2,
        "fixed": a.fixed_mm2,
    }.items()}


def energy_area_figures(trace: Trace, hw: HwConfig, program: Program | None, total_cycles: int) -> dict[str, object]:
    """The summary's ``energy_pj``, ``energy_breakdown_pj``, ``area_mm2`` and ``area_breakdown_mm2``."""
    energy = energy_breakdown_pj(trace, hw, program, total_cycles)
    area = area_breakdown_mm2(hw)
    return {"energy_pj": sum(energy.values()), "energy_breakdown_pj": energy,
            "area_mm2": sum(area.values()), "area_breakdown_mm2": area}
