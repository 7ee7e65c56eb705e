"""The scheduler's cost model: MAC counts and cycle estimates, pure functions.

Used to count work for reports (MACs per operation) and to compare tiling
choices. Compute cycles and MACs come from the hardware model's own pure
functions (:mod:`npu_sim.hw.cost`), so scheduler and simulator agree; the DMA
and tile-loop estimates only need to rank choices well (the simulator's
timing is the measurement).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from npu_sim.hw import cost
from npu_sim.hw.compute_units import mac_array, unit
from npu_sim.hw.compute_units.composites import composite_body_cycles
from npu_sim.hw.config import HwConfig
from npu_sim.hw.ifm_fetch import block_fetched_bytes, fetch_burst_bytes
from npu_sim.memory_layout import element_size_bytes
from npu_sim.program import KernelStep
from npu_sim.reference.kernel_api import Region
from scheduler.ir.npu_ops import NpuOp, OpKind, Step


def _kernel_step(step: Step, out_region: Region | None, operands: tuple = ()) -> KernelStep:
    """``step`` as the hardware model's cost functions take it: types and region, no views (or
    the scheduler's ``operands``: value keys and the indices of earlier steps)."""
    return KernelStep(step.op, step.attribute, operands, tuple(step.input_types), tuple(step.output_types),
                      out_region=out_region, origin=step.origin)


def step_macs(step: Step, out_region: Region | None = None) -> int:
    """Multiply-accumulates of a step (of ``out_region`` of it) as the hardware model counts them."""
    if step.op not in mac_array.MAC_OPS:
        return 0
    return kernel_step_macs(_kernel_step(step, out_region))


def kernel_step_macs(step: KernelStep) -> int:
    """:func:`step_macs` of a kernel step with its region (a tile's command's step)."""
    if step.op not in mac_array.MAC_OPS:
        return 0
    try:
        return mac_array.step_macs(step)
    except (ValueError, IndexError, TypeError):
        return 0  # malformed shapes: the kernel reports the ERROR_IF when it runs


def command_cycles(hw: HwConfig, unit_name: str, steps: Sequence[Step], out_regions: Sequence[Region],
                   composite: str = "") -> int:
    """Cycles of a compute command's ``steps`` computing ``out_regions`` (setup excluded), as the
    simulator charges them: the unit's body cost (:mod:`npu_sim.hw.compute_units`), or the
    composite's."""
    kernel_steps = [_kernel_step(s, r) for s, r in zip(steps, out_regions)]
    if composite:
        return composite_body_cycles(hw, composite, kernel_steps)
    return unit(unit_name).body_cycles(hw, kernel_steps)


def whole_op_cycles(hw: HwConfig, op: NpuOp) -> float:
    """The cost model's cycles of compute operation ``op`` run whole (0 for anything else)."""
    if op.kind is not OpKind.COMPUTE or not op.unit:
        return 0.0
    regions = [tuple((0, n) for n in step.output_types[0].shape) for step in op.steps]
    return float(command_cycles(hw, op.unit, op.steps, regions, op.composite.kind if op.composite else ""))


def ifm_refetch_burst_bytes(hw: HwConfig, steps: Sequence[Step], s: int) -> int:
    """DDR bursts' bytes step ``s`` of a command's ``steps``, streaming its input from the DDR, reads
    of it beyond one copy by fetching it block by block (``tcm.ddr_ifm_refetch``,
    :func:`npu_sim.hw.ifm_fetch.block_fetched_bytes`); 0 elsewhere."""
    if not hw.tcm.ddr_ifm_refetch or not steps[s].input_types:
        return 0
    kernel_steps = [_kernel_step(step, None, tuple(step.operands)) for step in steps]
    kernel_step = kernel_steps[s]
    elem = element_size_bytes(kernel_step.input_types[0].dtype)
    extra = block_fetched_bytes(hw, kernel_steps, s) - prod(kernel_step.input_types[0].shape) * elem
    return fetch_burst_bytes(hw, kernel_step, extra) if extra > 0 else 0


def tcm_cycles(hw: HwConfig, size_bytes: int) -> int:
    """Cycles ``size_bytes`` take through all TCM ports (a compute command's lower bound)."""
    return cost.tcm_cycles(size_bytes, hw)


def unit_setup_cycles(hw: HwConfig, unit_name: str) -> int:
    return unit(unit_name).setup_cycles(hw)


def dma_issue_cycles(hw: HwConfig, size_bytes: float) -> float:
    """Cycles a DMA occupies its engine: setup, then its bytes at the DDR rate (the latency
    overlaps the engine's next descriptor, see :mod:`npu_sim.hw.dma`)."""
    return hw.dma.setup_cycles + size_bytes / hw.ddr.bandwidth_bytes_per_cycle


def dma_command_cycles(hw: HwConfig, size_bytes: float, write: bool = False) -> float:
    """One DMA alone, from its start until its data has landed: issue, then the DDR latency."""
    latency = hw.ddr.write_latency_cycles if write else hw.ddr.read_latency_cycles
    return dma_issue_cycles(hw, size_bytes) + latency


def tile_loop_cycles(hw: HwConfig, invariant_load_bytes: list[int], varying_load_bytes: int, varying_load_count: int,
                     store_bytes: int, store_count: int, compute_cycles_per_tile: float, tile_count: int,
                     refetch_bytes: int = 0) -> float:
    """Estimated cycles of a double-buffered tile loop.

    Operands whose window never changes are loaded once before the first tile;
    the others are loaded per tile, overlapping the previous tile's compute; stores
    overlap the next tile. Loads share the DMA engines (stores keep one to
    themselves); everything shares the DDR bandwidth. Engines pipeline their
    descriptors, so the DDR latency is paid once to fill the loop and once to drain
    it, except that a ping-pong buffer is refilled only after the tile before last
    used it: two tiles take at least one load, its latency and one compute (and
    likewise for the stores). The loop runs at its slowest stage.
    """
    t = max(1, tile_count)
    engines = max(1, hw.dma.engine_count)
    load_engines = max(1, engines - (1 if store_count and engines > 1 else 0))
    bandwidth = hw.ddr.bandwidth_bytes_per_cycle
    read_latency, write_latency = hw.ddr.read_latency_cycles, hw.ddr.write_latency_cycles
    first = sum(dma_issue_cycles(hw, b) for b in invariant_load_bytes) / load_engines
    per_load = (varying_load_count * hw.dma.setup_cycles + varying_load_bytes / bandwidth) / t / load_engines
    per_store = (store_count * hw.dma.setup_cycles + store_bytes / bandwidth) / t
    per_bus = (varying_load_bytes + store_bytes + refetch_bytes) / bandwidth / t
    compute = compute_cycles_per_tile
    step = max(compute, per_load, per_store, per_bus)
    if t > 1:
        if varying_load_count:
            step = max(step, (per_load + read_latency + compute) / 2)
        if store_count:
            step = max(step, (compute + per_store + write_latency) / 2)
    fill = (read_latency if invariant_load_bytes or varying_load_count else 0) + per_load
    drain = compute + (per_store + write_latency if store_count else 0)
    return first + fill + (t - 1) * step + drain
