"""Pure cost functions of the hardware model: compute commands and uncontended DMAs.

The simulator times every compute command with :func:`compute_command_cycles`; the
scheduler's estimates use the same unit cost functions (:mod:`npu_sim.hw.compute_units`),
so both agree by construction. Nothing here has state or side effects.

A compute command costs ``setup_cycles + max(body, TCM cycles)`` on its unit (plus, for the
operands of block tensors, the reads of their pointer-table entries): ``body`` is
the unit's cost of the command's steps (the unit's registry entry), and its operands and
results cross the TCM ports at ``tcm.bandwidth_bytes_per_cycle`` (a bound that stops a
tiny-K tile from looking free). A fused composite reading its state from the variable SRAM
is also bound by that bank's port (``variable_sram.bytes_per_cycle``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from operator import attrgetter

from npu_sim.errors import ProgramError
from npu_sim.hw.compute_units import LUT, MAC_ARRAY, VECTOR, ComputeUnit, unit
from npu_sim.hw.compute_units.composites import composite_body_cycles
from npu_sim.hw.compute_units.lut import builtin_lookup_cycles, computes_built_in, first_tile_table_load_cycles
from npu_sim.hw.compute_units.mac_array import MAC_OPS, pe_cycles, step_macs
from npu_sim.hw.compute_units.unit import ceil_div
from npu_sim.hw.compute_units.vector import SOURCE_SCALED_OPS, source_operator_cycles
from npu_sim.hw.config import HwConfig
from npu_sim.hw.ddr import ceil_cycles
from npu_sim.hw.dma import channel_bandwidth_bytes_per_cycle, dma_timing
from npu_sim.hw.ifm_fetch import BLOCK_FETCH_OPS, ifm_fetch_elements
from npu_sim.memory_layout import element_size_bytes
from npu_sim.program import ComputeCommand, DmaCommand, KernelStep, MemorySpace, View, command_views
from npu_sim.tosa.ops import Op


def tcm_cycles(size_bytes: int, hw: HwConfig) -> int:
    """Cycles to move ``size_bytes`` through all TCM ports at peak bandwidth."""
    return ceil_div(max(size_bytes, 0), hw.tcm.bandwidth_bytes_per_cycle)


def check_unit_can_run(unit_name: str, steps: Sequence[KernelStep], where: str) -> ComputeUnit:
    """The unit called ``unit_name``; ProgramError unless it can run the command (a MAC op on
    the array, a LUT op on the LUT)."""
    try:
        compute_unit = unit(unit_name)
    except ProgramError as exc:
        raise ProgramError(f"{where}: {exc}") from None
    if not compute_unit.can_run(steps):
        raise ProgramError(f"{where}: {compute_unit.label} needs {compute_unit.required_step} "
                           f"({'+'.join(s.op.name for s in steps)} has none)")
    return compute_unit


def command_tcm_bytes(steps: Sequence[KernelStep], outputs: Sequence[View], distinct: bool = False) -> int:
    """Bytes a compute command reads and writes in the TCM (each view once per reference, or
    once in all if ``distinct``: a composite reads an operand into the unit once, and its
    LUT holds its tables, which cross once per table load, timed by ``lut.table_load_*``)."""
    tcm = MemorySpace.TCM
    if distinct:
        views = list(dict.fromkeys([v for s in steps for i, v in enumerate(s.operands)
                                    if isinstance(v, View) and v.memory is tcm and not _lut_table(s.op, i)]))
    else:
        views = [v for s in steps for v in s.operands if isinstance(v, View) and v.memory is tcm]
    return sum([v.size_bytes for v in views]) + sum([v.size_bytes for v in outputs if v.memory is tcm])


def wide_ifm_refetch_bytes(hw: HwConfig, steps: Sequence[KernelStep]) -> int:
    """TCM bytes the block-fetching steps of a command read again of a wide input they read in
    the TCM (``tcm.wide_ifm_block_fetch_bits`` or more bits an element): their fetches per OFM
    block, halo and depth blocks included (:func:`npu_sim.hw.ifm_fetch.ifm_fetch_elements`),
    beyond the one read of their window. (Vela's U55 SHRAM holds half as many 16-bit input values:
    its int16 convolutions fetch their input per small block, and run SRAM-bound.)"""
    extra = 0
    for step in steps:
        source = step.operands[0] if step.operands else None
        if step.op not in BLOCK_FETCH_OPS or not isinstance(source, View) or source.memory is not MemorySpace.TCM \
                or step.input_types[0].dtype.bits < hw.tcm.wide_ifm_block_fetch_bits:
            continue
        fetched = ifm_fetch_elements(hw, step) * element_size_bytes(step.input_types[0].dtype)
        extra += max(0, fetched - source.size_bytes)
    return extra


def _lut_table(op: Op, operand: int) -> bool:
    """The operand a table step loads into the LUT (TABLE's table, a lookup's GATHER table)."""
    return (op is Op.TABLE and operand == 1) or (op is Op.GATHER and operand == 0)


def compute_command_cycles(hw: HwConfig, command: ComputeCommand) -> int:
    """Cycles of a compute command: ``setup + max(body, TCM cycles)`` (see the module doc)."""
    where = f"command {command.id} ({command.name})" if command.name else f"command {command.id}"
    compute_unit = check_unit_can_run(command.unit, command.steps, where)
    if command.composite:
        try:
            body = composite_body_cycles(hw, command.composite, command.steps)
        except ProgramError as exc:
            raise ProgramError(f"{where}: {exc}") from None
    elif computes_built_in(hw, command.lut_function, command.steps):
        body = builtin_lookup_cycles(hw, command.steps)
    else:
        body = compute_unit.body_cycles(hw, command.steps)
        if command.table_load_hidden_cycles and compute_unit is LUT:   # (loaded in part before it)
            body -= min(command.table_load_hidden_cycles, first_tile_table_load_cycles(hw, command.steps))
    moved = command_tcm_bytes(command.steps, command.outputs, distinct=bool(command.composite))
    if hw.tcm.wide_ifm_block_fetch_bits and command.unit == MAC_ARRAY.name and not command.composite:
        moved += wide_ifm_refetch_bytes(hw, command.steps)
    tcm = tcm_cycles(moved, hw)
    return (compute_unit.setup_cycles(hw) + pointer_table_cycles(hw, command_views(command))
            + block_latency_cycles(hw, command) + max(body, tcm, variable_sram_read_cycles(command, hw)))


def pointer_table_cycles(hw: HwConfig, views: Sequence[View]) -> int:
    """Cycles reading the pointer-table entries of the block-tensor views among ``views``
    (``block_tensors.table_read_cycles_per_entry`` each), before the access can start."""
    entries = sum(len(v.table_entries) for v in views if v.blocks is not None)
    return entries * hw.block_tensors.table_read_cycles_per_entry


def block_latency_cycles(hw: HwConfig, command: ComputeCommand) -> int:
    """The TCM latencies a MAC-array operation exposes: its first tile waits ``tcm.read_latency_cycles``
    for its first input block, its last tile ``tcm.write_latency_cycles`` for its last output block
    (a whole operation in one command pays both). Vela's Ethos-U cost model charges a convolution,
    fully connected or pooling operation run on its own (scheduled First and Last) its IFM memory's
    read latency and its OFM memory's write latency (regor ethos_u85_performance.cpp,
    EstimateMacOpCycles: MinimumIfmCycles, MinimumOfmCycles); its elementwise operations amortise
    them over their blocks (EstimateElementwiseCycles). A vector operation starting with one of
    ``vector.block_latency_ops`` runs on the pooling path (a RESCALE, a CLAMP on the U85) and pays
    them too. With ``tcm.in_place_ddr_feature_maps`` an operation reading a copy of part of a graph
    input (``reads_ddr_home``: an LSTM's time step) pays the DDR's read latency instead: Vela's NPU
    reads it where it lives, the DRAM on Dedicated_Sram (faststorage_allocator.cpp moves only
    intermediate feature maps into the SRAM), where our DMA copies it ahead."""
    read, write = hw.tcm.read_latency_cycles, hw.tcm.write_latency_cycles
    step = _block_step(hw, command) if (read or write) else None
    if step is None:
        return 0
    first, last = tile_position(step)
    if hw.tcm.in_place_ddr_feature_maps and command.reads_ddr_home:
        read = hw.ddr.read_latency_cycles
    if hw.tcm.ddr_recurrent_state and command.reads_ddr_state:
        read = hw.ddr.read_latency_cycles
    if hw.tcm.ddr_recurrent_state and command.writes_ddr_state:
        write = hw.ddr.write_latency_cycles
    return (read if first else 0) + (write if last else 0)


def _block_step(hw: HwConfig, command: ComputeCommand) -> KernelStep | None:
    """The step whose tile position sets a command's block latencies: its MAC step on the array, its
    first step on the vector unit where that is one of ``vector.block_latency_ops`` (a RESCALE or an
    activation of its own runs on the pooling path, as the pooling path's no-op) unless the command
    is an elementwise ADD, SUB, MUL, MAXIMUM or MINIMUM with the RESCALEs of its TFLite operator
    folded in (:data:`SOURCE_SCALED_OPS`; not a source operator timed as one, a mean or a softmax:
    :func:`npu_sim.hw.compute_units.vector.source_operator_cycles`), whose latencies Vela amortises
    over its blocks (else None)."""
    if command.composite or not command.steps:
        return None
    if command.unit == MAC_ARRAY.name:
        return next((s for s in command.steps if s.op in MAC_OPS), None)
    if command.unit != VECTOR.name or command.steps[0].op.name not in hw.vector.block_latency_ops:
        return None
    elementwise = any(s.op in SOURCE_SCALED_OPS and s.op.name not in hw.vector.block_latency_ops
                      for s in command.steps) and source_operator_cycles(hw, command.steps) is None
    return None if elementwise else command.steps[0]


def tile_position(step: KernelStep) -> tuple[bool, bool]:
    """Whether ``step`` computes its operation's first tile (its region starts at the origin) and
    its last (the region ends where the output does); a step without a region is both."""
    region = step.out_region
    if region is None or not step.output_types:
        return True, True
    shape = step.output_types[0].shape
    starts, stops = zip(*region) if region else ((), ())
    n = min(len(stops), len(shape))   # (compared as far as both go)
    return not any(starts), stops[:n] == tuple(shape[:n])


def variable_sram_read_cycles(command: ComputeCommand, hw: HwConfig) -> int:
    """Cycles a composite's reads of the variable SRAM take through its port (its state)."""
    views = {v for s in command.steps for v in s.operands
             if isinstance(v, View) and v.memory is MemorySpace.VARIABLE_SRAM}
    if not views:
        return 0
    return ceil_div(sum(v.size_bytes for v in views), hw.variable_sram.bytes_per_cycle)


def command_macs(command: ComputeCommand) -> int:
    return sum(step_macs(step) for step in command.steps)


def command_mac_pe_cycles(hw: HwConfig, command: ComputeCommand) -> int:
    """PE-cycles of the MAC array's peak the command's MACs take (0 off the array; see
    :func:`npu_sim.hw.compute_units.mac_array.pe_cycles`)."""
    if command.unit != MAC_ARRAY.name:
        return 0
    return pe_cycles(hw, command.steps)


def dma_cycles(hw: HwConfig, command: DmaCommand | tuple[View, View]) -> int:
    """Cycles of a DMA with the machine otherwise idle: ``setup + ceil(bytes / rate) + latency``.

    ``bytes`` are the bytes charged on the arbitrating channel (whole DDR bursts), ``rate``
    is ``min(channel bandwidth, cap)`` (see :mod:`npu_sim.hw.dma`).
    """
    if isinstance(command, tuple):
        command = DmaCommand(id=-1, engine=0, src=command[0], dst=command[1])
    timing = dma_timing(hw, command)
    rate = min(channel_bandwidth_bytes_per_cycle(hw, timing.channel), timing.cap_bytes_per_cycle)
    data = ceil_cycles(timing.channel_bytes / rate) if timing.channel_bytes else 0
    return timing.setup_cycles + data + (timing.latency_cycles if timing.channel_bytes else 0)


class ComputeCycles:
    """:func:`compute_command_cycles` of one machine, remembered for commands that differ only in
    where their views lie (the tiles of an operation): a cost never depends on an address.
    Fused composites are costed each time (they count an operand read twice once)."""

    def __init__(self, hw: HwConfig) -> None:
        self.hw = hw
        self.known: dict[tuple, int] = {}

    def __call__(self, command: ComputeCommand) -> int:
        if command.composite:
            return compute_command_cycles(self.hw, command)
        key = (_shape_fields(command),
               tuple([_step_key(step) for step in command.steps]),
               tuple([tile_position(step) for step in command.steps]),
               tuple([_view_key(v) for v in command.outputs]),
               origin_classes([step.origin for step in command.steps]))
        cycles = self.known.get(key)
        if cycles is None:
            cycles = self.known[key] = compute_command_cycles(self.hw, command)
        return cycles


#: The fields of a compute command besides its identity, steps and outputs (unit, composite, ...).
_SHAPE_FIELDS = tuple(f.name for f in fields(ComputeCommand)
                      if f.name not in ("id", "name", "deps", "steps", "outputs"))
_shape_fields = attrgetter(*_SHAPE_FIELDS)


def origin_classes(origins: Sequence[str]) -> tuple[int, ...]:
    """Which steps share a source operator, given each step's :attr:`KernelStep.origin`: per step,
    the index of the first step of its origin, -1 without one. The vector unit folds a source
    operator's rescales and times a TFLite SOFTMAX by it: two commands alike but for this are not
    costed alike."""
    first: dict[str, int] = {}
    return tuple([first.setdefault(origin, i) if origin else -1 for i, origin in enumerate(origins)])


def _step_key(step: KernelStep) -> tuple:
    """What a step's cost reads: its kernel, attribute (by value: a frozen dataclass, so the
    same operator at every time step of an unrolled recurrence shares its cost), types, tile
    extents and its operands' memories, shapes, types and strides."""
    region = None if step.out_region is None else tuple([b - a for a, b in step.out_region])
    return (step.op, step.attribute, step.input_types, step.output_types, region,
            tuple([_view_key(o) if isinstance(o, View) else o for o in step.operands]))


def _view_key(view: View) -> tuple:
    """What a view's cost reads: its memory, shape, type, strides and, for a block tensor's view,
    how many pointer-table entries it walks (which depends on where it starts in its blocks)."""
    entries = len(view.table_entries) if view.blocks is not None else 0
    return (view.memory, view.shape, view.dtype, view.strides_bytes, entries)
