"""DMA engines: in-order queues of strided copy descriptors between memories.

A :class:`~npu_sim.program.DmaCommand` is one *descriptor*: its source and
destination views are merged dimension by dimension into at most three levels
(1D: one contiguous run; 2D: rows of runs; 3D: planes of rows), the shape a real
strided DMA programs. A copy that needs more than three levels must be split by
the scheduler: it is rejected with a :class:`ProgramError`.

Timing: descriptors are pipelined
---------------------------------
An engine works through its queue in order, but it does not wait for a
descriptor's data to land before it takes the next one (as real DMA engines
do: they issue the next descriptor's bursts while earlier bursts are in flight):

    start -> setup_cycles -> issue phase on the arbitrating channel  [engine busy]
                                   last burst issued -> latency -> done  [engine free]

* The *issue phase* is the fluid data phase of :mod:`npu_sim.hw.ddr`: the bytes the
  transfer moves on its channel (for DDR :func:`ddr_burst_bytes`: every contiguous
  run costs the whole bursts it touches), at the channel's max-min fair share,
  capped. When its last byte has moved (rounded up to a whole cycle) the engine is
  free and starts its next ready descriptor.
* The command is *done* ``latency_cycles`` later: its bytes are copied then, and
  only then are the commands that depend on it released. Latency: DDR
  ``read_latency_cycles`` if the source is DDR, plus ``write_latency_cycles`` if
  the destination is; on-chip copies have none (they are done when issued).
* The arbitrating channel is the DDR if either side is in DDR, else the variable
  SRAM, else the TCM. The rate cap is the other side's port rate (TCM
  ``port_bytes_per_cycle``, variable SRAM ``bytes_per_cycle``) and, for DDR, the
  outstanding-burst limit by Little's law: a burst is outstanding for its round
  trip ``latency + burst_size_bytes / bandwidth``, so an engine never issuing
  faster than ``max_outstanding_bursts * burst_size_bytes / round trip`` never has
  more than ``max_outstanding_bursts`` bursts in flight. The cap holds for the
  engine's one issuing descriptor at a time, so in-flight bursts of earlier
  descriptors (still in their latency) count against the limit too: the bytes in
  flight at any cycle were issued in the last round trip, at most cap x round trip.

With one descriptor and an idle machine this is ``setup + ceil(bytes / rate) +
latency`` (:func:`npu_sim.hw.cost.dma_cycles`); a chain of small descriptors on one
engine pays the latency once, not once per descriptor.

The bytes move when the command is done (a read of never-written bytes fails there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from npu_sim.errors import MemoryAccessError, ProgramError
from npu_sim.hw.config import HwConfig
from npu_sim.hw.ddr import BandwidthChannel
from npu_sim.hw.memory import ViewAccess
from npu_sim.hw.queues import Machine, QueuedCommand, Unit
from npu_sim.program import DmaCommand, MemorySpace, View

#: levels a DMA descriptor can describe (1D/2D/3D)
MAX_DESCRIPTOR_DIMS = 3
#: The copies the DMA engines make (DDR to DDR and TCM to TCM copies go through the TCM
#: or the vector unit).
DMA_PATHS = frozenset({(MemorySpace.DDR, MemorySpace.TCM), (MemorySpace.TCM, MemorySpace.DDR),
                       (MemorySpace.DDR, MemorySpace.VARIABLE_SRAM), (MemorySpace.VARIABLE_SRAM, MemorySpace.DDR),
                       (MemorySpace.TCM, MemorySpace.VARIABLE_SRAM), (MemorySpace.VARIABLE_SRAM, MemorySpace.TCM)})


@dataclass(frozen=True)
class Descriptor:
    """A copy as merged levels: ``shape`` (innermost = contiguous run length in bytes) and byte strides."""

    shape: tuple[int, ...]
    src_strides: tuple[int, ...]
    dst_strides: tuple[int, ...]

    @property
    def dims(self) -> int:
        return len(self.shape)

    @property
    def run_bytes(self) -> int:
        return self.shape[-1] if self.shape else 0


def _byte_levels(view: View) -> tuple[list[int], list[int]]:
    """Shape and strides of a view in bytes, the element's bytes as the innermost level."""
    shape = list(view.shape) + [view.element_bytes]
    strides = list(view.strides) + [1]
    return shape, strides


def _merge(shape: list[int], *stride_lists: list[int]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 levels, then fuse neighbours that are contiguous in every stride list."""
    keep = [i for i, d in enumerate(shape) if d != 1] or [len(shape) - 1]
    shape = [shape[i] for i in keep]
    strides = [[s[i] for i in keep] for s in stride_lists]
    i = len(shape) - 2
    while i >= 0:
        if all(s[i] == s[i + 1] * shape[i + 1] for s in strides):
            shape[i] *= shape[i + 1]
            for s in strides:
                s[i] = s[i + 1]
            del shape[i + 1]
            for s in strides:
                del s[i + 1]
        i -= 1
    return shape, strides


def make_descriptor(src: View, dst: View, where: str = "DMA") -> Descriptor:
    """The merged descriptor of a copy ``src -> dst``; ProgramError if it needs more than 3 levels."""
    if src.shape != dst.shape:
        raise ProgramError(f"{where}: shapes differ {src.shape} vs {dst.shape}")
    if src.element_bytes != dst.element_bytes:
        raise ProgramError(f"{where}: element sizes differ ({src.dtype.name} vs {dst.dtype.name})")
    if src.element_count == 0:
        return Descriptor((0,), (1,), (1,))
    if src.is_contiguous and dst.is_contiguous:
        return Descriptor((src.size_bytes,), (1,), (1,))
    shape, s_strides = _byte_levels(src)
    _, d_strides = _byte_levels(dst)
    merged, (ms, md) = _merge(shape, s_strides, d_strides)
    if ms[-1] != 1 or md[-1] != 1:  # innermost run not contiguous on one side: element runs
        merged, ms, md = merged + [1], ms + [1], md + [1]
    if len(merged) > MAX_DESCRIPTOR_DIMS:
        raise ProgramError(f"{where}: the copy {src} -> {dst} needs {len(merged)} strided levels; "
                           f"a DMA descriptor has at most {MAX_DESCRIPTOR_DIMS} (split the command)")
    return Descriptor(tuple(merged), tuple(ms), tuple(md))


def contiguous_runs(view: View) -> tuple[np.ndarray, int]:
    """Start offsets (bytes) of the view's contiguous runs and the run length in bytes."""
    if view.element_count == 0:
        return np.zeros(0, np.int64), 0
    shape, strides = _byte_levels(view)
    merged, (ms,) = _merge(shape, strides)
    if ms[-1] != 1:
        merged, ms = merged + [1], ms + [1]
    starts = np.array([view.offset_bytes], dtype=np.int64)
    for size, stride in zip(merged[:-1], ms[:-1]):
        starts = (starts[:, None] + np.arange(size, dtype=np.int64)[None, :] * stride).reshape(-1)
    return starts, merged[-1]


def ddr_burst_count(view: View, burst_size_bytes: int) -> int:
    """Bursts a DDR access to ``view`` costs: each contiguous run takes the aligned bursts it touches."""
    if view.is_contiguous:
        if view.size_bytes == 0:
            return 0
        first = view.offset_bytes
        return (first + view.size_bytes - 1) // burst_size_bytes - first // burst_size_bytes + 1
    starts, run = contiguous_runs(view)
    if run == 0:
        return 0
    if run % burst_size_bytes == 0 and not np.any(starts % burst_size_bytes):
        return len(starts) * (run // burst_size_bytes)
    return int(((starts + run - 1) // burst_size_bytes - starts // burst_size_bytes + 1).sum())


def ddr_burst_bytes(view: View, burst_size_bytes: int) -> int:
    """Bytes the DDR moves for ``view``: whole bursts."""
    return ddr_burst_count(view, burst_size_bytes) * burst_size_bytes


class DmaTiming(NamedTuple):
    """Static timing parameters of one DMA command on a given hardware config."""

    channel: MemorySpace  # which memory's bandwidth arbitrates it
    channel_bytes: int  # bytes charged on that channel
    cap_bytes_per_cycle: float
    setup_cycles: int
    latency_cycles: int
    ddr_read_bytes: int  # payload
    ddr_write_bytes: int
    ddr_read_burst_bytes: int
    ddr_write_burst_bytes: int


def port_bytes_per_cycle(hw: HwConfig, memory: MemorySpace) -> float:
    """Rate one DMA transfer can reach on ``memory``'s side (DDR: its whole bandwidth)."""
    if memory is MemorySpace.TCM:
        return hw.tcm.port_bytes_per_cycle
    if memory is MemorySpace.VARIABLE_SRAM:
        return hw.variable_sram.bytes_per_cycle
    return hw.ddr.bandwidth_bytes_per_cycle


def channel_bandwidth_bytes_per_cycle(hw: HwConfig, memory: MemorySpace) -> float:
    """Total bandwidth of the channel that arbitrates transfers on ``memory``."""
    if memory is MemorySpace.TCM:
        return hw.tcm.bandwidth_bytes_per_cycle
    return port_bytes_per_cycle(hw, memory)


def read_cap_bytes_per_cycle(hw: HwConfig, latency_cycles: int) -> float:
    """Bytes a cycle one stream of DDR reads reaches: the bursts it keeps in flight
    (``dma.max_outstanding_bursts``) over the latency and one burst's transfer."""
    ddr = hw.ddr
    return hw.dma.max_outstanding_bursts * ddr.burst_size_bytes / \
        (latency_cycles + ddr.burst_size_bytes / ddr.bandwidth_bytes_per_cycle)


class DmaModel:
    """The DMA timing rules of one config, its constants read once (compiling 10^5 DMAs is common)."""

    def __init__(self, hw: HwConfig):
        ddr = hw.ddr
        self.hw = hw
        self.burst = ddr.burst_size_bytes
        self.read_latency, self.write_latency = ddr.read_latency_cycles, ddr.write_latency_cycles
        self.setup = hw.dma.setup_cycles
        self.table_entry_cycles = hw.block_tensors.table_read_cycles_per_entry
        self.port = {space: float(port_bytes_per_cycle(hw, space)) for space in MemorySpace}
        self._contiguous: dict[tuple, DmaTiming] = {}
        self._strided: dict[tuple, DmaTiming] = {}

    def read_cap(self, latency_cycles: int) -> float:
        """Bytes a cycle one stream of DDR reads reaches (:func:`read_cap_bytes_per_cycle`)."""
        return read_cap_bytes_per_cycle(self.hw, latency_cycles)

    def timing(self, src: View, dst: View, access_bytes: int = 0) -> DmaTiming:
        """Where the copy ``src -> dst`` is arbitrated, the bytes it moves there, its cap and
        latency. ``access_bytes`` > 0: a DDR source is read in accesses of that size, each
        taking a whole burst (:attr:`DmaCommand.access_bytes`)."""
        if src.strides_bytes is None and dst.strides_bytes is None and src.blocks is None and dst.blocks is None:
            # contiguous copies (most tiles) differ only by size and burst alignment: memoized
            burst = self.burst
            key = (src.memory, dst.memory, src.size_bytes, src.offset_bytes % burst, dst.offset_bytes % burst,
                   access_bytes)
            timing = self._contiguous.get(key)
            if timing is None:
                timing = self._contiguous[key] = self._timing(src, dst, access_bytes)
            return timing
        # strided ones (tiles of a tensor in DDR) repeat their geometry at other offsets: the
        # bursts they take depend on the offsets only modulo the burst size
        burst = self.burst
        geometry = (src.memory, dst.memory, src.shape, src.dtype, src.strides_bytes, dst.shape, dst.dtype,
                    dst.strides_bytes, src.offset_bytes % burst, dst.offset_bytes % burst, access_bytes)
        timing = self._strided.get(geometry)
        if timing is None:
            timing = self._strided[geometry] = self._timing(src, dst, access_bytes)
        return timing

    def _timing(self, src: View, dst: View, access_bytes: int = 0) -> DmaTiming:
        DDR = MemorySpace.DDR
        s_mem, d_mem = src.memory, dst.memory
        payload = src.size_bytes
        # a block tensor's side: the descriptor walks its pointer table first, an entry per block
        setup = self.setup + (len(src.table_entries) + len(dst.table_entries)) * self.table_entry_cycles
        read_burst = ddr_burst_count(src, self.burst) * self.burst if s_mem is DDR else 0
        if access_bytes > 0 and s_mem is DDR:
            read_burst = max(read_burst, -(-payload // access_bytes) * self.burst)
        write_burst = ddr_burst_count(dst, self.burst) * self.burst if d_mem is DDR else 0
        if s_mem is DDR or d_mem is DDR:
            latency = (self.read_latency if s_mem is DDR else 0) + \
                      (self.write_latency if d_mem is DDR else 0)
            cap = self.read_cap(latency)
            if s_mem is not DDR:
                cap = min(cap, self.port[s_mem])
            if d_mem is not DDR:
                cap = min(cap, self.port[d_mem])
            return DmaTiming(DDR, read_burst + write_burst, cap, setup, latency,
                             payload if s_mem is DDR else 0, payload if d_mem is DDR else 0,
                             read_burst, write_burst)
        channel = MemorySpace.VARIABLE_SRAM if MemorySpace.VARIABLE_SRAM in (s_mem, d_mem) \
            else MemorySpace.TCM
        cap = min(self.port[s_mem], self.port[d_mem])
        return DmaTiming(channel, payload, cap, setup, 0, 0, 0, 0, 0)


def dma_timing(hw: HwConfig, command: DmaCommand) -> DmaTiming:
    """Where ``command`` is arbitrated, how many bytes it moves there, its cap and latency."""
    return DmaModel(hw).timing(command.src, command.dst, command.access_bytes)


class DmaOp(QueuedCommand):
    """A DMA command compiled for one machine: bound views, timing, channel."""

    __slots__ = ("command", "src", "dst", "timing", "channel")

    def __init__(self, command: DmaCommand, unit: Unit, machine: Machine, src: ViewAccess,
                 dst: ViewAccess, timing: DmaTiming, channel: BandwidthChannel):
        QueuedCommand.__init__(self, command.id, command.name, unit, machine)
        self.command = command
        self.src, self.dst = src, dst
        self.timing = timing
        self.channel = channel

    def start(self) -> None:
        env = self.machine.env
        now = self.start_cycle = env.now
        timing = self.timing
        if timing.channel_bytes:
            self.channel.start(now + timing.setup_cycles, timing.channel_bytes,
                               timing.cap_bytes_per_cycle, 0, self._issued)
        else:  # an empty copy: nothing crosses a memory
            env.timeout(timing.setup_cycles).callbacks.append(self._done_now)

    def _issued(self, _event: object) -> None:
        """The last burst is issued: the engine is free; the data lands ``latency`` later."""
        latency = self.timing.latency_cycles
        if latency:
            self.busy_end_cycle = self.machine.env.now
            self.unit.release()
            self.machine.env.timeout(latency).callbacks.append(self._end)
        else:
            self._done_now(_event)

    def _done_now(self, _event: object) -> None:
        """Issued and done in one cycle (on-chip or empty copies): done first, then the engine."""
        self.busy_end_cycle = self.machine.env.now
        self._copy()
        self.machine.finish(self)

    def _end(self, _event: object) -> None:
        self._copy()
        self.machine.complete(self)

    def act(self) -> None:
        """Its functional half: the copy."""
        self._copy()

    def _copy(self) -> None:
        try:
            self.dst.copy_from(self.src)
        except MemoryAccessError as exc:
            raise MemoryAccessError(f"{self.label}: {exc}") from None


class TimedDmaOp(DmaOp):
    """A DMA of a timing-only run: the same bursts, setup and latency, no bytes copied."""

    __slots__ = ()

    def _copy(self) -> None:
        pass
