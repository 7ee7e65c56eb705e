"""The Program: the contract between the scheduler (compiler) and the simulated NPU.

A Program is a static memory plan plus a command stream for ONE invocation of a
graph; the simulator runs it once per invocation (variables persist in the
variable SRAM, constants are loaded into DDR once).

Memory plan (in the spirit of Relax ``alloc_storage`` / ``alloc_tensor(offset)``):
every :class:`Allocation` is a named byte range of one memory space with a
lifetime in command ids. Operands are :class:`View`\\ s: a typed, possibly strided
window of a memory, laid out as :mod:`npu_sim.memory_layout` says (little-endian,
INT4 one sign-extended byte per element).

Commands:

* :class:`DmaCommand`: copies a view of one memory into a view of another (the
  same shape; 1D/2D/3D strided descriptors) on a DMA engine;
* :class:`ComputeCommand`: runs one or more chained TOSA kernel steps (an NPU
  operation such as conv + rescale + clamp) on a compute unit, reading operand
  views and writing result views;
* :class:`CondCommand` / :class:`LoopCommand`: structured control flow decided by
  the sequencer at run time from the bytes of a condition view.

Every command names the ids of the commands it waits for (``deps``). Commands on
one engine or unit execute in stream order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar, overload

from npu_sim.errors import ProgramError
from npu_sim.memory_layout import element_size_bytes
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op

Region = tuple[tuple[int, int], ...]
_T = TypeVar("_T")
_R = TypeVar("_R")
OperandT = TypeVar("OperandT")


class MemorySpace(str, Enum):
    DDR = "ddr"
    TCM = "tcm"
    VARIABLE_SRAM = "var_sram"


class _cached_property(Generic[_T, _R]):
    """Computes an attribute once and stores it in the instance ``__dict__``.

    Works on frozen dataclasses (it bypasses ``__setattr__``; equality and hashing use
    the fields only) and, unlike ``functools.cached_property`` before Python 3.12,
    takes no lock: later reads are plain attribute lookups.
    """

    def __init__(self, fn: Callable[[_T], _R]):
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _cached_property[_T, _R]: ...

    @overload
    def __get__(self, obj: _T, owner: type | None = None) -> _R: ...

    def __get__(self, obj: _T | None, owner: type | None = None) -> _R | _cached_property[_T, _R]:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


@dataclass(frozen=True)
class View:
    """A typed window of a memory: ``shape`` elements starting at ``offset_bytes``.

    ``strides_bytes`` (one per dimension) default to contiguous row-major.

    A view of a block tensor (seed 002: a discontiguous tensor) has ``blocks``, the physical
    offsets of its fixed-size blocks of ``block_bytes`` bytes (its pointer table); its
    ``offset_bytes`` and strides then address the tensor's logical bytes, logical byte ``a``
    lying at ``blocks[a // block_bytes] + a % block_bytes``.
    """

    memory: MemorySpace
    offset_bytes: int
    shape: tuple[int, ...]
    dtype: DType
    strides_bytes: tuple[int, ...] | None = None
    blocks: tuple[int, ...] | None = None
    block_bytes: int = 0

    def __hash__(self) -> int:
        """The hash of the fields, as the dataclass would compute it, once (views key the
        scheduler's tables)."""
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = hash((self.memory, self.offset_bytes, self.shape, self.dtype,
                                              self.strides_bytes, self.blocks))
        return h

    # Derived geometry is cached on the instance (see _cached_property): Programs hold
    # hundreds of thousands of views and the simulator asks each for its span and size.
    @_cached_property
    def element_bytes(self) -> int:
        return element_size_bytes(self.dtype)

    @_cached_property
    def strides(self) -> tuple[int, ...]:
        if self.strides_bytes is not None:
            return self.strides_bytes
        strides, step = [], self.element_bytes
        for dim in reversed(self.shape):
            strides.append(step)
            step *= dim
        return tuple(reversed(strides))

    @_cached_property
    def element_count(self) -> int:
        return int(math.prod(self.shape))

    @_cached_property
    def size_bytes(self) -> int:
        """Bytes of payload (not the span)."""
        return self.element_count * self.element_bytes

    @_cached_property
    def span(self) -> tuple[int, int]:
        """[first byte, last byte + 1) touched by the view (empty views span nothing; a block
        tensor's view: the physical bytes from its lowest to its highest touched block)."""
        if self.blocks is not None:
            return self._block_span()
        return self.logical_span

    @_cached_property
    def logical_span(self) -> tuple[int, int]:
        """:attr:`span` in the view's own addresses (a block tensor's logical bytes)."""
        if self.element_count == 0:
            return self.offset_bytes, self.offset_bytes
        if self.strides_bytes is None:  # contiguous: the common case, kept cheap
            return self.offset_bytes, self.offset_bytes + self.element_count * self.element_bytes
        lo = self.offset_bytes + sum(min(0, s * (d - 1)) for s, d in zip(self.strides, self.shape))
        hi = self.offset_bytes + sum(max(0, s * (d - 1)) for s, d in zip(self.strides, self.shape))
        return lo, hi + self.element_bytes

    @_cached_property
    def table_entries(self) -> tuple[int, ...]:
        """Indices of the pointer-table entries an access walks: the blocks from its first to its
        last logical byte (none for a view of contiguous bytes)."""
        if self.blocks is None or self.element_count == 0:
            return ()
        lo, hi = self.logical_span
        return tuple(range(lo // self.block_bytes, (hi - 1) // self.block_bytes + 1))

    def logical(self) -> View:
        """The same window of the tensor's logical bytes, without its blocks."""
        return View(self.memory, self.offset_bytes, self.shape, self.dtype, self.strides_bytes)

    @_cached_property
    def block_pieces(self) -> tuple[tuple[int, int], ...]:
        """Per table entry an access walks, the physical bytes ``[lo, hi)`` of its block from
        the view's first to its last logical byte (a block tensor's short last block, or a
        window of a block, only as far as the view reaches)."""
        if self.blocks is None:
            return ()
        lo, hi = self.logical_span
        bb = self.block_bytes
        return tuple((self.blocks[i] + max(lo - i * bb, 0), self.blocks[i] + min(hi - i * bb, bb))
                     for i in self.table_entries)

    def _block_span(self) -> tuple[int, int]:
        pieces = self.block_pieces
        if not pieces:
            return 0, 0
        return min(lo for lo, _ in pieces), max(hi for _, hi in pieces)

    @_cached_property
    def is_contiguous(self) -> bool:
        return self.strides_bytes is None or self.strides_bytes == View(
            self.memory, self.offset_bytes, self.shape, self.dtype).strides

    def __str__(self) -> str:
        dims = "x".join(map(str, self.shape)) or "scalar"
        stride = "" if self.is_contiguous else f" strides={list(self.strides)}"
        where = f"{self.offset_bytes:#x}"
        if self.blocks is not None:   # (its blocks are listed once, by the Program's allocations)
            first = f"{self.blocks[0]:#x}" if self.blocks else "-"
            where = f"{len(self.blocks)} blocks of {self.block_bytes} from {first} +{where}"
        return f"{self.memory.value}[{where}] {dims} {self.dtype.name}{stride}"


@dataclass(frozen=True)
class Allocation:
    """A statically placed buffer. ``first_use``/``last_use`` are command ids (None: whole program).

    ``initial_data`` is loaded before the first invocation (constants, variable initial values).
    """

    name: str
    memory: MemorySpace
    offset_bytes: int
    size_bytes: int
    kind: str = "activation"  # input | output | constant | activation | stripe | spill | variable | tile
    first_use: int | None = None
    last_use: int | None = None
    initial_data: bytes | None = None
    #: a block of a block tensor: the tensor's name (its blocks share it; see :class:`BlockTensor`)
    block_of: str = ""

    @property
    def end_bytes(self) -> int:
        return self.offset_bytes + self.size_bytes


def block_allocation_name(tensor: str, index: int) -> str:
    """The name of the allocation of block ``index`` of the block tensor ``tensor``."""
    return f"{tensor}[block {index}]"


def block_tensor_of(allocation_name: str) -> str:
    """The block tensor an allocation named by :func:`block_allocation_name` belongs to ("" if none)."""
    head, sep, tail = allocation_name.rpartition("[block ")
    return head if sep and tail.endswith("]") and tail[:-1].isdigit() else ""


@dataclass(frozen=True)
class BlockTensor:
    """A tensor stored as fixed-size blocks anywhere in one memory (seed 002's discontiguous
    tensor): ``blocks`` are the blocks' offsets in ``memory`` (an allocation each, named after
    the tensor), listed by the pointer table, an allocation of ``table_memory`` whose initial
    data holds them (``pointer_bytes`` little-endian bytes per entry)."""

    name: str
    memory: MemorySpace
    size_bytes: int
    block_bytes: int
    blocks: tuple[int, ...]
    table_memory: MemorySpace
    table_offset_bytes: int
    pointer_bytes: int

    @property
    def table_bytes(self) -> int:
        return len(self.blocks) * self.pointer_bytes


@dataclass(frozen=True)
class DmaCommand:
    """Copies ``src`` to ``dst``. ``access_bytes`` > 0: the copy reads its DDR source in
    accesses of that many bytes, each taking a whole burst (a feature map whose pixels are
    narrower than the NPU's access, see ``dma.thin_pixel_access_bytes``)."""

    id: int
    engine: int
    src: View
    dst: View
    deps: tuple[int, ...] = ()
    name: str = ""
    access_bytes: int = 0

    @property
    def size_bytes(self) -> int:
        return self.src.size_bytes


@dataclass(frozen=True)
class KernelStep(Generic[OperandT]):
    """One TOSA kernel call inside a compute command.

    ``operands`` are views, or ``int`` k meaning "output 0 of step k of this command"
    (kept inside the unit, as a fused epilogue does). ``input_types``/``output_types``
    are full-tensor types; ``out_region``/``input_offsets`` locate a tile (see
    :mod:`npu_sim.reference.kernel_api`). A Program's steps hold :class:`View` s; the
    scheduler builds them with its own views, placed later.
    """

    op: Op
    attribute: Attribute
    operands: tuple[OperandT | int, ...]
    input_types: tuple[TensorType, ...]
    output_types: tuple[TensorType, ...]
    out_region: Region | None = None
    input_offsets: tuple[tuple[int, ...], ...] | None = None
    name: str = ""
    #: the source operator the step comes from (a .tflite operator's location; "" if unknown):
    #: steps of one source operator may run as one NPU operation (``npu_support.source_operators``)
    origin: str = ""


#: The LUT unit's own units name (``ComputeCommand.unit``).
LUT_UNIT = "lut"


#: Operators whose operand 1 is a weight tensor a matrix product reads (see ``weights_in_place``).
WEIGHT_OPS = frozenset({Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.TRANSPOSE_CONV2D, Op.MATMUL})


def reads_weight_stream(step_op: Op, operand_index: int) -> bool:
    """True for an operand of a matrix product's weight stream: its weights and bias (operands 1
    and 2 of a product), the multipliers and shifts of the RESCALE that scales its results
    (operands 1 and 2): what Vela's weight encoder packs into one stream per operation."""
    return operand_index in (1, 2) and (step_op in WEIGHT_OPS or step_op is Op.RESCALE)


def reads_in_place(command_unit: str, composite: str, step_op: Op, operand_index: int,
                   weights_in_place: bool = False, parameter: bool = False, table_in_place: bool = False) -> bool:
    """True for the operand a command may read where it lives, in any memory: a lookup's table
    (:func:`reads_table_in_place`; a TABLE's too with ``table_in_place``), with ``weights_in_place``
    (see ``ComputeCommand``) its weight stream (:func:`reads_weight_stream`), and a ``parameter``
    (see :func:`is_command_parameter`) of a command with ``parameters_in_place``."""
    return parameter or reads_table_in_place(command_unit, composite, step_op, operand_index, table_in_place) or \
        (weights_in_place and reads_weight_stream(step_op, operand_index))


def command_reads_in_place(command: ComputeCommand, step: KernelStep, operand_index: int) -> bool:
    """:func:`reads_in_place` for operand ``operand_index`` of ``step`` of ``command``, or one of its
    ``constant_operands_in_place``."""
    if command.constant_operands_in_place and any(
            command.steps[s] is step and j == operand_index for s, j in command.constant_operands_in_place):
        return True
    parameter = command.parameters_in_place and \
        is_command_parameter(step.op, operand_index, step.input_types[operand_index])
    return reads_in_place(command.unit, command.composite, step.op, operand_index, command.weights_in_place,
                          parameter, command.table_in_place)


#: Operands that scale or offset an operation (zero points, a RESCALE's multiplier and shift, a
#: MUL's shift), by operator: a single one is a register of the command stream, whatever its width.
_SCALING_OPERANDS: dict[Op, tuple[int, ...]] = {
    Op.RESCALE: (1, 2, 3, 4), Op.MUL: (2,), Op.CONV2D: (3, 4), Op.CONV3D: (3, 4), Op.DEPTHWISE_CONV2D: (3, 4),
    Op.TRANSPOSE_CONV2D: (3, 4), Op.MATMUL: (2, 3), Op.AVG_POOL2D: (1, 2), Op.NEGATE: (1, 2)}

#: Widest scalar data operand the command stream holds (the Ethos-U's 16-bit IFM2 scalar register).
SCALAR_REGISTER_BITS = 16


def is_command_parameter(step_op: Op, operand_index: int, operand_type: TensorType) -> bool:
    """True for an operand an NPU's command stream carries in its registers, not read from a
    memory: a SHAPE tensor (a RESHAPE's new shape); a single zero point, multiplier or shift
    (:data:`_SCALING_OPERANDS`); a single data operand of at most :data:`SCALAR_REGISTER_BITS`
    bits (the Ethos-U's IFM2 scalar mode: Vela 5.2 reads an int32 scalar of a MUL from the flash,
    64 B an operation, an int8 one of an ADD not at all)."""
    if operand_type.dtype is DType.SHAPE:
        return True
    if math.prod(operand_type.shape) != 1 or (step_op in WEIGHT_OPS and operand_index in (1, 2)):
        return False
    return operand_index in _SCALING_OPERANDS.get(step_op, ()) or operand_type.dtype.bits <= SCALAR_REGISTER_BITS


def reads_table_in_place(command_unit: str, composite: str, step_op: Op, operand_index: int,
                         table_in_place: bool = False) -> bool:
    """True for the operand a command may read where it lives, in any memory: the table of a
    lookup's GATHER on the LUT unit or in a fused composite, and with ``table_in_place`` (see
    ``ComputeCommand``) a TABLE's on the LUT unit. The LUT loads its table into a memory of its
    own (timed by ``lut.table_load_*``), so the table needs no TCM copy."""
    if step_op is Op.TABLE:
        return table_in_place and operand_index == 1 and command_unit == LUT_UNIT
    return step_op is Op.GATHER and operand_index == 0 and (command_unit == LUT_UNIT or bool(composite))


@dataclass(frozen=True)
class ComputeCommand:
    """Runs ``steps`` in order on ``unit``; the last step's outputs go to ``outputs``.

    A fused composite (``composite``, e.g. ``lstm_cell``) hands out results of several
    steps: output k is output 0 of step ``output_steps[k]``; it is timed by the
    composite's cost function (:mod:`npu_sim.hw.compute_units.composites`).
    """

    id: int
    unit: str
    steps: tuple[KernelStep[View], ...]
    outputs: tuple[View, ...]
    deps: tuple[int, ...] = ()
    name: str = ""
    macs: int = 0
    output_steps: tuple[int, ...] = ()
    composite: str = ""
    #: the function a lookup's table holds (SIGMOID, TANH): a LUT unit that computes it built in
    #: loads no table (``lut.builtin_functions``)
    lut_function: str = ""
    #: the operation reads a copy of part of a graph input, whose home is the DDR (an LSTM's time
    #: step; ``tcm.in_place_ddr_feature_maps``)
    reads_ddr_home: bool = False
    #: the operation reads (writes) an LSTM cell's state, which the NPU keeps in the DDR
    #: (``tcm.ddr_recurrent_state``)
    reads_ddr_state: bool = False
    writes_ddr_state: bool = False
    #: it reads its weight stream (weights, bias, the scaling RESCALE's multipliers and shifts:
    #: :func:`reads_weight_stream`) where it lives, the DDR or flash, while it computes: the bytes
    #: cross the DDR channel as one stream (``tcm.matrix_vector_weights_in_place``)
    weights_in_place: bool = False
    #: bytes it reads again, while it computes, of an input feature map living in the DDR: its
    #: block fetches beyond the copy in the TCM (``tcm.ddr_ifm_refetch``), and the DDR bursts'
    #: bytes they take
    ifm_refetch_bytes: int = 0
    ifm_refetch_burst_bytes: int = 0
    #: it reads its parameters (:func:`is_command_parameter`) where they live, as the command
    #: stream's register values: no TCM copy, no transfer (``tcm.parameters_in_command_stream``)
    parameters_in_place: bool = False
    #: its TABLE's table is loaded into the LUT memory from where it lives, the DDR or flash, with
    #: no TCM copy (the LUT's load from the source is timed: ``lut.table_source_latency_cycles``)
    table_in_place: bool = False
    #: cycles of its table's load into the LUT memory that run before it starts, behind the
    #: operation before it (``lut.table_load_behind_previous``, :mod:`scheduler.passes.table_loads`);
    #: its first tile pays the rest
    table_load_hidden_cycles: int = 0
    #: (step, operand) of the constant operands of an elementwise operation it reads where they
    #: live, the DDR or flash, while it computes, with no TCM copy (``tcm.elementwise_constants_in_place``)
    constant_operands_in_place: tuple[tuple[int, int], ...] = ()

    def in_place_weights(self) -> list[View]:
        """The views of its weight stream it reads outside the TCM (empty unless
        ``weights_in_place``)."""
        if not self.weights_in_place:
            return []
        return [o for s in self.steps for i, o in enumerate(s.operands)
                if isinstance(o, View) and o.memory is not MemorySpace.TCM and reads_weight_stream(s.op, i)]

    def in_place_constants(self) -> list[View]:
        """The views of the elementwise constant operands it reads outside the TCM (empty unless
        ``constant_operands_in_place``)."""
        views = [self.steps[s].operands[j] for s, j in self.constant_operands_in_place]
        return [v for v in views if isinstance(v, View) and v.memory is not MemorySpace.TCM]

    def in_place_tables(self) -> list[View]:
        """The TABLE tables it loads into the LUT from outside the TCM (empty unless ``table_in_place``)."""
        if not self.table_in_place:
            return []
        return [s.operands[1] for s in self.steps
                if s.op is Op.TABLE and isinstance(s.operands[1], View) and s.operands[1].memory is not MemorySpace.TCM]


@dataclass(frozen=True)
class CondCommand:
    """Runs ``then_commands`` if the condition view's first element is true, else ``else_commands``."""

    id: int
    condition: View
    then_commands: tuple[Command, ...]
    else_commands: tuple[Command, ...]
    deps: tuple[int, ...] = ()
    name: str = ""


@dataclass(frozen=True)
class LoopCommand:
    """``while True: run cond_commands; if not condition: break; run body_commands``.

    More than ``max_iterations`` iterations is an error (never a hang).
    """

    id: int
    cond_commands: tuple[Command, ...]
    condition: View
    body_commands: tuple[Command, ...]
    max_iterations: int
    deps: tuple[int, ...] = ()
    name: str = ""


Command = DmaCommand | ComputeCommand | CondCommand | LoopCommand


@dataclass(frozen=True)
class OperationStats:
    """One NPU operation of the plan: what it computes, on which unit, how it was tiled, and
    the ids of the commands serving it (its tiles, the DMAs feeding them and storing their
    results)."""

    name: str
    op: str                                  # what it computes: CONV2D+RESCALE+CLAMP
    unit: str                                # compute unit, "dma" or "sequencer"
    graph_ops: tuple[str, ...] = ()          # the graph operators it covers
    macs: int = 0
    block: str = ""                          # the graph block it belongs to
    tile_shape: tuple[int, ...] | None = None   # None: one untiled kernel call
    tile_count: int = 1
    working_set_bytes: int = 0               # TCM its tiles need
    commands: tuple[int, ...] = ()
    composite: CompositeFacts | None = None  # a fused composite: what it computes


@dataclass(frozen=True)
class CompositeFacts:
    """What a fused composite operation (such as an LSTM cell) computes, for reports."""

    kind: str                                # lstm_cell
    hidden_units: int
    input_size: int
    outputs: tuple[str, ...]                 # the tensors it hands out (h', c')
    weights_resident: bool = False           # its weights stay in TCM across invocations


@dataclass(frozen=True)
class CompositeCandidate:
    """One place a composite rule looked at: fused, or the reason it was not."""

    kind: str
    anchor: str                              # the tensor it anchored on
    block: str
    fused: bool
    reason: str = ""
    operators: tuple[str, ...] = ()          # the graph operators fused


@dataclass(frozen=True)
class CpuFallback:
    """An operation the NPU cannot run, moved to the host CPU (``cpu`` unit), for reports."""

    operation: str                           # the NPU operation's name (OperationStats.name)
    op: str                                  # what it computes: CONV2D+CLAMP
    operator: str                            # the graph operator the NPU cannot run
    dtype: str                               # its data type (fp32)
    reason: str                              # why, with the rule's source
    npu_unit: str = ""                       # the NPU unit it would have run on


@dataclass(frozen=True)
class RollingBufferStats:
    """A striped chain's intermediate kept a few rows at a time, for reports."""

    value: str                               # the tensor's name
    rows: int                                # rows the buffer holds
    size_bytes: int                          # its bytes
    whole_bytes: int                         # the whole tensor's bytes


@dataclass(frozen=True)
class StripedChainStats:
    """Operations run stripe by stripe (a cascade), for reports: the scheduler's estimate of
    their cycles striped and whole, and the rolling buffers that replace whole intermediates."""

    operations: tuple[str, ...]              # the NPU operations' names, in order
    stripe_rows: int                         # rows of the last operation's output per stripe
    stripe_count: int
    buffers: tuple[RollingBufferStats, ...]
    est_cycles: float
    whole_est_cycles: float


@dataclass(frozen=True)
class PlanStats:
    """Facts of a compiled plan that the summary and the reports read, computed by the scheduler.

    TCM: ``peak_tcm_bytes`` (the plan's footprint), ``tcm_compact_bytes`` (the footprint of
    the planner's placement of the exact live ranges, which the plan may spread wider),
    ``tcm_lower_bound_bytes`` (most bytes live at once: no planner can do better; with striped
    chains, the bound of the striped schedule, ``tcm_lower_bound_unstriped_bytes`` that of its
    rolling buffers taken whole).
    DDR: ``compulsory_*`` (inputs and constants read, outputs written, once each) and
    ``planned_*`` (what the DMA commands move, loop bodies once). Then the operations and
    which operation each command serves. Figures of later plan features (fused composites,
    a preamble) belong here as fields of their own.
    """

    peak_tcm_bytes: int
    tcm_compact_bytes: int
    tcm_lower_bound_bytes: int
    tcm_planner: str = ""
    compulsory_ddr_read_bytes: int = 0
    compulsory_ddr_write_bytes: int = 0
    planned_ddr_read_bytes: int = 0
    planned_ddr_write_bytes: int = 0
    macs: int = 0
    operations: tuple[OperationStats, ...] = ()
    command_operation: Mapping[int, int] = field(default_factory=dict)   # command id -> index in operations
    spilled_values: tuple[str, ...] = ()     # allocations of kind "spill"
    evicted_values: tuple[str, ...] = ()     # values the TCM plan gave up keeping resident
    command_count: int = 0
    composite_candidates: tuple[CompositeCandidate, ...] = ()   # composites looked at, fused or not
    cpu_fallbacks: tuple[CpuFallback, ...] = ()   # operations moved to the host CPU
    striped_chains: tuple[StripedChainStats, ...] = ()   # operations run in stripes
    #: the most bytes live at once were the striped chains' rolling buffers whole tensors
    #: (over the same lifetimes): the bound of this schedule without its stripes
    tcm_lower_bound_unstriped_bytes: int = 0

    @property
    def compulsory_ddr_bytes(self) -> int:
        return self.compulsory_ddr_read_bytes + self.compulsory_ddr_write_bytes


@dataclass
class Program:
    """Memory plan + command stream for one invocation of a graph.

    ``stats``: the scheduler's facts about the plan (None for a Program built by hand).
    """

    memory_sizes: dict[MemorySpace, int]
    allocations: list[Allocation]
    commands: list[Command]
    inputs: dict[str, View] = field(default_factory=dict)
    outputs: dict[str, View] = field(default_factory=dict)
    variables: dict[str, View] = field(default_factory=dict)
    graph_name: str = ""
    stats: PlanStats | None = None
    #: ids of top-level commands that only load constants into TCM that no other command
    #: writes (the constant pool): with several invocations they run once, in a preamble,
    #: and the constants stay resident (see :mod:`npu_sim.simulator`): no wait of another
    #: command may be left implied through them, nor any command write their bytes
    preamble_command_ids: frozenset[int] = frozenset()
    #: tensors the TCM plan stores as blocks (:mod:`scheduler.memory.block_tensors`)
    block_tensors: tuple[BlockTensor, ...] = ()

    def walk(self) -> Iterator[Command]:
        """Every command, nested ones included, in stream order."""
        yield from _walk(self.commands)

    def validate(self) -> None:
        """Structural checks: ids unique, deps known and earlier, views inside their memories."""
        seen: set[int] = set()
        for cmd in self.walk():
            self._check_command(cmd, seen)
            seen.add(cmd.id)
        for alloc in self.allocations:
            size = self.memory_sizes.get(alloc.memory)
            if size is None:
                raise ProgramError(f"allocation {alloc.name}: memory {alloc.memory.value} not in the plan")
            if alloc.offset_bytes < 0 or alloc.end_bytes > size:
                raise ProgramError(f"allocation {alloc.name} [{alloc.offset_bytes}, {alloc.end_bytes}) "
                                   f"outside {alloc.memory.value} of {size} bytes")
        for name, view in {**self.inputs, **self.outputs, **self.variables}.items():
            self.check_view(view, f"graph tensor {name!r}")

    def _check_command(self, cmd: Command, seen: set[int]) -> None:
        """``cmd``'s id is new, its deps are earlier commands, its views lie in their memories."""
        if cmd.id in seen:
            raise ProgramError(f"command id {cmd.id} used twice")
        for dep in cmd.deps:
            if dep not in seen:
                raise ProgramError(f"command {cmd.id} ({cmd.name}) depends on unknown or later command {dep}")
        sizes = self.memory_sizes
        for view in command_views(cmd):
            size = sizes.get(view.memory)
            lo, hi = view.span
            if size is None or lo < 0 or hi > size:  # the message is built only on failure
                self.check_view(view, f"command {cmd.id} ({cmd.name})")
        if isinstance(cmd, DmaCommand) and cmd.src.shape != cmd.dst.shape:
            raise ProgramError(f"command {cmd.id} ({cmd.name}): DMA shapes differ {cmd.src.shape} vs {cmd.dst.shape}")
        if isinstance(cmd, DmaCommand) and cmd.src.dtype != cmd.dst.dtype:
            raise ProgramError(f"command {cmd.id} ({cmd.name}): DMA dtypes differ")

    def check_view(self, view: View, where: str) -> None:
        size = self.memory_sizes.get(view.memory)
        if size is None:
            raise ProgramError(f"{where}: memory {view.memory.value} not in the plan")
        lo, hi = view.span
        if lo < 0 or hi > size:
            raise ProgramError(f"{where}: view {view} spans [{lo}, {hi}) outside {view.memory.value} of {size} bytes")

    def listing(self) -> str:
        """A readable listing: storages, allocations with offsets, then the command stream."""
        lines = []
        for memory, size in self.memory_sizes.items():
            lines.append(f"{memory.value} = alloc_storage(size={size})")
        for a in sorted(self.allocations, key=lambda a: (a.memory.value, a.offset_bytes)):
            life = "" if a.first_use is None else f"  # live cmds {a.first_use}..{a.last_use}"
            lines.append(f"%{a.name} = alloc_tensor({a.memory.value}, offset={a.offset_bytes}, "
                         f"size={a.size_bytes}, kind={a.kind}){life}")
        lines.append("")
        lines.extend(_listing(self.commands, indent=""))
        return "\n".join(lines)


def command_views(cmd: Command) -> list[View]:
    """The views a command itself touches (not those of nested commands)."""
    if isinstance(cmd, DmaCommand):
        return [cmd.src, cmd.dst]
    if isinstance(cmd, ComputeCommand):
        views = [v for step in cmd.steps for v in step.operands if isinstance(v, View)]
        return views + list(cmd.outputs)
    return [cmd.condition]


def _walk(commands: tuple | list) -> Iterator[Command]:
    for cmd in commands:
        yield cmd
        if isinstance(cmd, CondCommand):
            yield from _walk(cmd.then_commands)
            yield from _walk(cmd.else_commands)
        elif isinstance(cmd, LoopCommand):
            yield from _walk(cmd.cond_commands)
            yield from _walk(cmd.body_commands)


def _listing(commands: tuple | list, indent: str) -> list[str]:
    lines = []
    for cmd in commands:
        deps = f" after {list(cmd.deps)}" if cmd.deps else ""
        if isinstance(cmd, DmaCommand):
            lines.append(f"{indent}{cmd.id:>5} dma{cmd.engine}: copy {cmd.src} -> {cmd.dst}{deps}  # {cmd.name}")
        elif isinstance(cmd, ComputeCommand):
            ops = "+".join(s.op.name for s in cmd.steps)
            outs = ", ".join(map(str, cmd.outputs))
            lines.append(f"{indent}{cmd.id:>5} {cmd.unit}: {ops} -> {outs}{deps}  # {cmd.name}")
        elif isinstance(cmd, CondCommand):
            lines.append(f"{indent}{cmd.id:>5} if {cmd.condition}{deps}:  # {cmd.name}")
            lines.extend(_listing(cmd.then_commands, indent + "    "))
            lines.append(f"{indent}      else:")
            lines.extend(_listing(cmd.else_commands, indent + "    "))
        else:
            lines.append(f"{indent}{cmd.id:>5} loop (max {cmd.max_iterations}){deps}:  # {cmd.name}")
            lines.extend(_listing(cmd.cond_commands, indent + "    "))
            lines.append(f"{indent}      while {cmd.condition}:")
            lines.extend(_listing(cmd.body_commands, indent + "    "))
    return lines
