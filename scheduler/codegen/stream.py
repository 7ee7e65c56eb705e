"""The command stream before the memory plan: commands over symbolic views.

Emission builds these; :mod:`scheduler.codegen.materialize` numbers them, resolves
their views and adds dependencies to make :mod:`npu_sim.program` commands.
``op`` indexes the :class:`OpRecord` (one per NPU operation) a command belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from npu_sim.hw.dma import MAX_DESCRIPTOR_DIMS
from npu_sim.memory_layout import element_size_bytes
from npu_sim.program import CompositeFacts, KernelStep
from scheduler.memory.buffers import BufView


@dataclass
class OpRecord:
    """One NPU operation, for reports: what it computes and how it was tiled."""

    name: str
    label: str                 # CONV2D+RESCALE+CLAMP
    unit: str                  # compute unit, "dma" or "sequencer"
    graph_ops: tuple[str, ...]
    macs: int = 0
    tile_shape: tuple[int, ...] | None = None
    tile_count: int = 1
    working_set_bytes: int = 0
    block: str = ""
    composite: CompositeFacts | None = None   # a fused composite: what it computes


@dataclass
class ADma:
    engine: int
    src: BufView
    dst: BufView
    name: str
    op: int
    access_bytes: int = 0   # see DmaCommand.access_bytes


@dataclass
class ACompute:
    unit: str
    steps: list[KernelStep[BufView]]      # operands: BufView or int
    outputs: list[BufView]
    name: str
    op: int
    macs: int = 0
    output_steps: tuple[int, ...] = ()   # see ComputeCommand
    composite: str = ""
    lut_function: str = ""               # see ComputeCommand
    reads_ddr_home: bool = False         # see ComputeCommand
    reads_ddr_state: bool = False        # see ComputeCommand
    writes_ddr_state: bool = False       # see ComputeCommand
    weights_in_place: bool = False       # see ComputeCommand
    parameters_in_place: bool = False    # see ComputeCommand
    table_in_place: bool = False         # see ComputeCommand
    table_load_hidden_cycles: int = 0    # see ComputeCommand
    constant_operands_in_place: tuple[tuple[int, int], ...] = ()   # see ComputeCommand
    ifm_refetch_bytes: int = 0           # see ComputeCommand
    ifm_refetch_burst_bytes: int = 0     # see ComputeCommand


@dataclass
class ACond:
    condition: BufView
    then: list[ACommand]
    orelse: list[ACommand]
    name: str
    op: int


@dataclass
class ALoop:
    cond: list[ACommand]
    condition: BufView
    body: list[ACommand]
    max_iterations: int
    name: str
    op: int


ACommand = ADma | ACompute | ACond | ALoop


@dataclass
class Stream:
    """Commands plus the op records they refer to."""

    commands: list[ACommand] = field(default_factory=list)
    ops: list[OpRecord] = field(default_factory=list)


def dma_pieces(src: BufView, dst: BufView, max_dims: int = MAX_DESCRIPTOR_DIMS) -> list[tuple[BufView, BufView]]:
    """Split a copy into DMA descriptors of at most ``max_dims`` dimensions.

    Size-1 dimensions are dropped and dimensions contiguous in both views merged
    first, so most tiles of NHWC tensors need one 1D-3D descriptor.
    """
    if src.element_count == 0:
        return []
    shape: list[int] = []
    s_str: list[int] = []
    d_str: list[int] = []
    for n, a, b in zip(src.shape, src.strides, dst.strides):
        if n == 1:
            continue
        if shape and s_str[-1] == n * a and d_str[-1] == n * b:
            shape[-1] *= n
            s_str[-1], d_str[-1] = a, b
            continue
        shape.append(n)
        s_str.append(a)
        d_str.append(b)
    if not shape:
        shape, s_str, d_str = [1], [src.strides[-1] if src.strides else 1], [dst.strides[-1] if dst.strides else 1]
    if s_str[-1] != element_size_bytes(src.dtype) or d_str[-1] != element_size_bytes(dst.dtype):
        max_dims -= 1  # element runs: the descriptor needs one more level for them
    pieces: list[tuple[BufView, BufView]] = []
    _split(src, dst, src.offset_bytes, dst.offset_bytes, shape, s_str, d_str, max_dims, pieces)
    return pieces


def _split(src: BufView, dst: BufView, s_off: int, d_off: int, shape: list[int], s_str: list[int],
           d_str: list[int], max_dims: int, pieces: list[tuple[BufView, BufView]]) -> None:
    """Descriptors of at most ``max_dims`` dimensions: one per index of the outer dimensions."""
    if len(shape) <= max_dims:
        pieces.append((BufView(src.buffer, s_off, tuple(shape), src.dtype, tuple(s_str)),
                       BufView(dst.buffer, d_off, tuple(shape), dst.dtype, tuple(d_str))))
        return
    for i in range(shape[0]):
        _split(src, dst, s_off + i * s_str[0], d_off + i * d_str[0], shape[1:], s_str[1:], d_str[1:], max_dims,
               pieces)
