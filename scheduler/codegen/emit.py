"""Emission: NPU operations with their tile plans become DMA and compute commands.

For a compute operation, tile by tile (in the plan's loop order):

1. each streamed operand whose window differs from what its buffer holds is
   loaded by DMA into the next of its (ping-pong) tile buffers; operands
   resident in TCM are read in place through strided views;
2. one compute command runs the chained kernel steps on the tile;
3. outputs not resident in TCM are stored from their tile buffer by DMA.

Loads go to the DMA engines but the last, stores to the last engine, so a
store never waits behind the next tile's loads. Copies (variable reads and
writes, RESHAPE/IDENTITY that cannot alias, block arguments and results) use a
direct DMA path when the hardware has one, the vector unit for TCM to TCM,
and a ping-pong staging buffer in TCM otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

from npu_sim.hw.compute_units import CPU, VECTOR
from npu_sim.hw.config import HwConfig
from npu_sim.hw.dma import DMA_PATHS
from npu_sim.hw.ifm_fetch import block_fetched_bytes, fetch_burst_bytes
from npu_sim.memory_layout import align_up, element_size_bytes
from npu_sim.program import KernelStep, MemorySpace
from npu_sim.reference.kernel_api import Region
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op, make_attribute
from scheduler.codegen.stream import ACommand, ACompute, ADma, dma_pieces
from scheduler.cost_model import dma_issue_cycles, kernel_step_macs
from scheduler.ir.npu_ops import NpuOp
from scheduler.memory.buffers import Buffer, BufView, Placement, tile_view
from scheduler.passes.tiling import TilePlan
from scheduler.passes.windows import StepTile, region_shape, region_size, whole_tile

DDR, TCM, VAR = MemorySpace.DDR, MemorySpace.TCM, MemorySpace.VARIABLE_SRAM


class Emitter:
    """Builds abstract commands; owns the tile buffers it creates.

    DMA engines: stores to DDR go to the last engine, so a store waiting for its
    tile never holds up loads; loads and on-chip copies (a variable written to the
    variable SRAM bank) go to the engine with the least DMA work queued so far (by
    the cost model's estimate of the cycles each occupies its engine), so the two
    state writes at the end of a stateful LSTM do not queue the output's store.
    With ``dma.constants_on_first_engine`` the loads of constants from their home all
    go to engine 0 (the NPU's one weight channel).
    """

    def __init__(self, hw: HwConfig, alignment: int):
        self.hw = hw
        self.dma_engines = max(1, hw.dma.engine_count)
        self.alignment = alignment
        self.engine_work = [0.0] * self.dma_engines
        self.constants_on_first_engine = hw.dma.constants_on_first_engine

    def _engine(self, src: BufView, dst: BufView) -> int:
        store = src.memory is TCM and dst.memory is DDR
        cost = dma_issue_cycles(self.hw, src.size_bytes)
        if store:
            engine = self.dma_engines - 1
        elif self.constants_on_first_engine and src.memory is DDR and src.buffer is not None and \
                src.buffer.kind == "constant":
            engine = 0
        else:
            engine = self.engine_work.index(min(self.engine_work))   # (the first of the least loaded)
        self.engine_work[engine] += cost
        return engine

    def dma(self, src: BufView, dst: BufView, name: str, op: int) -> list[ACommand]:
        access = self.thin_pixel_access_bytes(src)
        return [ADma(self._engine(s, d), s, d, name, op, access) for s, d in dma_pieces(src, dst)]

    def thin_pixel_access_bytes(self, src: BufView) -> int:
        """The access size a DDR read of ``src`` goes in (0: whole bursts): a feature map (rank
        3 or more, not a constant: weights stream as they are stored) whose pixels, its last
        dimension, are narrower than the NPU's access, ``dma.thin_pixel_access_bytes`` per byte of
        its element, is read one access per pixel's brick (as the NPU's block fetches,
        :func:`npu_sim.hw.ifm_fetch.fetch_burst_bytes`: Vela's burst spans the IFM block's depth of
        elements, EstimateMemoryTransfer; a 16-bit map's accesses are twice an 8-bit one's)."""
        access = self.hw.dma.thin_pixel_access_bytes * element_size_bytes(src.dtype)
        if access <= 0 or src.buffer is None or src.memory is not DDR or len(src.shape) < 3 \
                or src.buffer.kind == "constant":
            return 0
        return access if src.shape[-1] * element_size_bytes(src.dtype) < access else 0

    def tile_buffer(self, name: str, size_bytes: int, op: int | None) -> Buffer:
        return Buffer(name, TCM, align_up(max(1, size_bytes), self.alignment), kind="tile", op=op)

    # -- compute operations
    def compute(self, op: NpuOp, plan: TilePlan, place: Callable[[str], Placement],
                windows: Callable[[Region], list[StepTile]], op_index: int,
                ddr_home: Callable[[str], bool] | None = None) -> list[ACommand]:
        """Commands of a compute operation; ``windows(region)`` gives the chain's tiles."""
        emission = self.operation(op, plan, place, op_index, ddr_home)
        for t, region in enumerate(plan.tiles()):
            emission.tile(t, windows(region) if emission.tiled else whole_tile(op.steps))
        return emission.cmds

    def operation(self, op: NpuOp, plan: TilePlan, place: Callable[[str], Placement],
                  op_index: int, ddr_home: Callable[[str], bool] | None = None) -> OperationEmission:
        """The emission of compute operation ``op``, tile by tile as the caller gives them (a
        striped chain interleaves the tiles of its operations). ``ddr_home(key)``: value ``key``
        is a TCM copy of a feature map whose home is the DDR (a staged graph input)."""
        return OperationEmission(self, op, plan, place, op_index, ddr_home)

    # -- copies
    def copy(self, src: Placement, dst: Placement, name: str, op_index: int,
             staging_budget_bytes: int, bands: int = 1) -> list[ACommand]:
        """Copy the bytes of ``src`` into ``dst`` (same size; ``dst``'s shape).

        ``bands`` > 1 splits a direct DMA into that many slices of the outermost
        dimension (readers of the first slice need not wait for the rest)."""
        if src.buffer is dst.buffer and src.offset_bytes == dst.offset_bytes:
            return []
        if dst.size_bytes == 0:
            return []
        source = src.whole(tuple(dst.type.shape)) if src.type.dtype == dst.type.dtype else None
        path = (src.memory, dst.memory)
        if source is not None and path in DMA_PATHS:
            return self.banded_dma(src, dst, source, name, op_index, bands)
        if source is not None and path == (TCM, TCM):
            t = dst.type
            step = KernelStep(Op.IDENTITY, make_attribute(Op.IDENTITY), (source,), (t,), (t,), name=name)
            return [ACompute(VECTOR.name, [step], [dst.whole()], name, op_index)]
        return self.staged_copy(src, dst, name, op_index, staging_budget_bytes)

    def banded_dma(self, src: Placement, dst: Placement, source: BufView, name: str, op_index: int,
                   bands: int) -> list[ACommand]:
        """A direct DMA of ``source`` (``src`` as ``dst``'s shape) into ``dst``, in up to ``bands``
        slices of the outermost dimension larger than one."""
        shape = tuple(dst.type.shape)
        outer = next((d for d, n in enumerate(shape) if n > 1), None)
        if bands <= 1 or outer is None:
            return self.dma(source, dst.whole(), name, op_index)
        cmds: list[ACommand] = []
        n = shape[outer]
        edges = sorted({n * k // min(bands, n) for k in range(min(bands, n) + 1)})
        srcp = src.retyped(dst.type)
        for lo, hi in zip(edges, edges[1:]):
            region = tuple((lo, hi) if d == outer else (0, size) for d, size in enumerate(shape))
            cmds += self.dma(srcp.window(region), dst.window(region), name, op_index)
        return cmds

    def staged_copy(self, src: Placement, dst: Placement, name: str, op_index: int,
                    budget_bytes: int) -> list[ACommand]:
        """A copy without a direct DMA path, through two staging buffers in TCM."""
        total = dst.size_bytes
        chunk = max(self.alignment, (budget_bytes // 2) // self.alignment * self.alignment)
        chunk = min(chunk, align_up(total, self.alignment))
        stages = [self.tile_buffer(f"{name}:stage/{i}", chunk, None) for i in range(2 if total > chunk else 1)]
        cmds: list[ACommand] = []
        for i, start in enumerate(range(0, total, chunk)):
            n = min(chunk, total - start)
            s = BufView(src.buffer, src.offset_bytes + start, (n,), DType.INT8)
            d = BufView(dst.buffer, dst.offset_bytes + start, (n,), DType.INT8)
            stage = BufView(stages[i % len(stages)], 0, (n,), DType.INT8)
            cmds += self.dma(s, stage, f"{name}: stage in", op_index)
            cmds += self.dma(stage, d, f"{name}: stage out", op_index)
        return cmds


def staging_need_bytes(src: MemorySpace, dst: MemorySpace, size_bytes: int, alignment: int) -> int:
    """TCM bytes a copy between these memories needs at least (0 with a direct path):
    two staging chunks, as small as the alignment if need be."""
    if (src, dst) in DMA_PATHS or (src, dst) == (TCM, TCM) or size_bytes == 0:
        return 0
    return min(2 * alignment, align_up(size_bytes, alignment))


class OperationEmission:
    """The commands of one compute operation, tile by tile, and the tile buffers they use:
    ping-pong buffers per streamed operand (what each holds, which is next) and per output
    not resident in TCM."""

    def __init__(self, emitter: Emitter, op: NpuOp, plan: TilePlan, place: Callable[[str], Placement],
                 op_index: int, ddr_home: Callable[[str], bool] | None = None):
        self.emitter, self.op, self.place, self.op_index = emitter, op, place, op_index
        self.ddr_home = ddr_home
        self.fetched: set[tuple[int, Region]] = set()   # (step, window) of IFMs fetched from the DDR so far
        self.tiled = plan.tile_shape is not None
        name = op.name
        self.slot_buffers = {slot: [emitter.tile_buffer(f"{name}:in{slot[0]}.{slot[1]}/{i}", plan.slot_bytes[slot],
                                                        op_index)
                                    for i in range(plan.slot_buffers[slot])] for slot in plan.slot_bytes}
        self.out_buffers = {k: [emitter.tile_buffer(f"{name}:out{k}/{i}", plan.output_bytes[k], op_index)
                                for i in range(plan.output_buffers)] for k in plan.output_bytes}
        self.loaded: dict[tuple[int, int], tuple[Region, BufView]] = {}   # slot -> (window, view holding it)
        self.next_buffer = {slot: 0 for slot in self.slot_buffers}
        self.direct: dict[tuple[int, int], bool] = {}   # slot -> read where it lives (see _reads_direct)
        self.ddr_sources: dict[int, bool] = {}   # step -> its source read from the DDR (see ifm_refetch)
        self.cmds: list[ACommand] = []

    def tile(self, t: int, tiles: list[StepTile]) -> None:
        """Tile ``t``: loads of the operand windows its buffers do not hold, the compute command, the stores."""
        op, tiled, operand_view = self.op, self.tiled, self.operand
        steps = []
        this_tile: dict[tuple[str, Region], BufView] = {}
        for s, (step, tile) in enumerate(zip(op.steps, tiles)):
            windows = tile.windows
            operands = tuple([operand if isinstance(operand, int) else operand_view(s, j, operand, window, this_tile)
                              for j, (operand, window) in enumerate(zip(step.operands, windows))])
            steps.append(KernelStep(step.op, step.attribute, operands, step.input_types, step.output_types,
                                    tile.out_region if tiled else None,
                                    tuple([tuple([a for a, _ in w]) for w in windows]) if tiled else None,
                                    step.name, step.origin))
        outputs, stores = self.outputs(t, tiles[-1].out_region)
        macs = sum([kernel_step_macs(k) for k in steps])   # (the steps' regions and types are the tile's)
        compute = ACompute(op.unit, steps, outputs, op.name, self.op_index, macs, op.output_steps,
                           op.composite.kind if op.composite else "", op.lut_function)
        if self.emitter.hw.tcm.ddr_ifm_refetch and op.unit != CPU.name:   # (the NPU's block fetches)
            compute.ifm_refetch_bytes, compute.ifm_refetch_burst_bytes = self.ifm_refetch(steps, tiles)
        self.cmds.append(compute)
        for view, target in stores:
            self.cmds += self.emitter.dma(view, target, f"{op.name}: store", self.op_index)

    def ifm_refetch(self, steps: list[KernelStep[BufView]], tiles: list[StepTile]) -> tuple[int, int]:
        """``(bytes, burst bytes)`` the tile's block-fetching steps read again of an input feature map
        living in the DDR (``tcm.ddr_ifm_refetch``, :mod:`npu_sim.hw.ifm_fetch`): their block fetches
        beyond the one copy of each window the tile's DMA (or the staging copy) brings."""
        hw = self.emitter.hw
        size = burst = 0
        for s, (step, tile) in enumerate(zip(steps, tiles)):
            if not self._reads_ddr_source(s):
                continue
            fetched = block_fetched_bytes(hw, steps, s)
            if not fetched:
                continue
            window = tile.windows[0]
            if (s, window) not in self.fetched:
                self.fetched.add((s, window))
                fetched -= region_size(window) * element_size_bytes(step.input_types[0].dtype)
            if fetched > 0:
                size += fetched
                burst += fetch_burst_bytes(hw, step, fetched)
        return size, burst

    def _reads_ddr_source(self, s: int) -> bool:
        """Whether step ``s``'s first operand is a value read from a home in the DDR (the same at
        every tile: a stripe moves a placement within its buffer, never to another memory)."""
        found = self.ddr_sources.get(s)
        if found is None:
            operands = self.op.steps[s].operands
            source = operands[0] if operands else None
            found = self.ddr_sources[s] = isinstance(source, str) and self._in_ddr(s, source)
        return found

    def _in_ddr(self, s: int, key: str) -> bool:
        """Whether step ``s`` reads value ``key`` from a home in the DDR (loaded by tiles, or a TCM
        copy of a graph input there)."""
        memory = self.place(key).memory
        if memory is DDR:
            return not self.op.reads_in_place(s, 0)
        return memory is TCM and self.ddr_home is not None and self.ddr_home(key)

    def operand(self, s: int, j: int, operand: str, window: Region,
                this_tile: dict[tuple[str, Region], BufView]) -> BufView:
        """Operand ``j`` of step ``s``: in place in TCM, else the tile buffer holding its window
        (loaded now unless a buffer holds it already)."""
        placement = self.place(operand)
        slot = (s, j)
        direct = self.direct.get(slot)
        if direct is None:
            direct = self.direct[slot] = self._reads_direct(s, j, placement.memory)
        if direct or region_size(window) == 0:
            return placement.window(window)
        held = self.loaded.get(slot)
        if held is not None and held[0] == window:
            return held[1]
        twin = this_tile.get((operand, window))
        if twin is not None:   # the same window of the same value, already loaded
            return twin
        buffers = self.slot_buffers[slot]
        index = self.next_buffer[slot]
        self.next_buffer[slot] = (index + 1) % len(buffers)
        view = tile_view(buffers[index], region_shape(window), self.op.steps[s].input_types[j].dtype)
        self.cmds += self.emitter.dma(placement.window(window), view, f"{self.op.name}: load {operand}",
                                      self.op_index)
        self.loaded[slot] = (window, view)
        this_tile[(operand, window)] = view
        return view

    def _reads_direct(self, s: int, j: int, memory: MemorySpace) -> bool:
        """Whether operand ``j`` of step ``s`` (in ``memory``: the same at every tile) is read
        where it lives: in the TCM, a composite's state, a LUT's table, weights read in place."""
        return memory is TCM or (memory is VAR and self.op.composite is not None) or \
            (memory is DDR and self.op.reads_in_place(s, j))

    def outputs(self, t: int, out_region: Region) -> tuple[list[BufView], list[tuple[BufView, BufView]]]:
        """Where tile ``t`` writes each output (in place in TCM, else a tile buffer), and the
        ``(tile buffer, destination)`` stores."""
        outputs, stores = [], []
        for k, key in enumerate(self.op.outputs):
            placement = self.place(key)
            if placement.memory is TCM:
                outputs.append(placement.window(out_region) if self.tiled else placement.whole())
                continue
            buffers = self.out_buffers[k]
            out_type = self.op.output_type(k)
            if self.op.output_steps:   # a composite's outputs: whole, each of its own shape
                view = tile_view(buffers[t % len(buffers)], tuple(out_type.shape), out_type.dtype)
                target = placement.whole()
            else:
                view = tile_view(buffers[t % len(buffers)], region_shape(out_region), out_type.dtype)
                target = placement.window(out_region)
            outputs.append(view)
            stores.append((view, target))
        return outputs, stores
