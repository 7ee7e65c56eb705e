"""The scheduler's lowered IR: NPU operations over named values.

After support check and fusion, each block of the graph becomes a list of
:class:`NpuOp`: a compute operation (one or more chained kernel :class:`Step` s
on one unit), a copy between two values (variable reads and writes, RESHAPE
that cannot alias, block results), or a control-flow operation whose blocks are
compiled recursively. Values are named by *keys* unique in the whole graph
(nested blocks prefix their tensor names); :class:`Value` records where a
value comes from, which decides where it may live. A :class:`LoweredGraph`
holds the main :class:`LoweredBlock` and every value.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from npu_sim.memory_layout import element_size_bytes
from npu_sim.program import CompositeCandidate, CompositeFacts, CpuFallback, is_command_parameter
from npu_sim.program import reads_in_place as command_reads_in_place
from npu_sim.tosa.ir import Operator, TensorType
from npu_sim.tosa.ops import Attribute, Op

#: Value keys of variables start with this (``var:`` + the variable's name; see lowering).
VARIABLE_KEY_PREFIX = "var:"


def is_variable_key(key: str) -> bool:
    return key.startswith(VARIABLE_KEY_PREFIX)


class ValueKind(str, Enum):
    INPUT = "input"              # graph input (DDR, written by the host)
    OUTPUT = "output"            # graph output (DDR, read by the host)
    CONSTANT = "constant"        # data known at compile time (DDR, or the TCM constant pool)
    VARIABLE = "variable"        # TOSA variable (variable SRAM, persistent)
    INTERMEDIATE = "intermediate"  # TCM if it fits, else spilled to DDR
    BOUND = "bound"              # block input/output of a control-flow block: storage given by the caller


@dataclass
class Value:
    """A tensor value of the graph, by unique key."""

    key: str
    type: TensorType
    kind: ValueKind
    data: np.ndarray | None = None   # constants and variable initial values
    name: str = ""                   # the tensor name in its block (for messages and reports)
    #: ``size_bytes`` and the type it was computed from
    _size: tuple | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def size_bytes(self) -> int:
        """Bytes of the value (remembered for its type: passes ask for it many times)."""
        cached = self._size
        if cached is not None and cached[0] is self.type:
            return cached[1]
        size = math.prod(self.type.shape) * element_size_bytes(self.type.dtype)
        self._size = (self.type, size)
        return size


@dataclass(frozen=True)
class Step:
    """One kernel call of an NPU operation.

    ``operands`` are value keys, or ``int`` k for output 0 of step k of the same
    operation (a fused intermediate that never leaves the unit).
    """

    op: Op
    attribute: Attribute
    operands: tuple[str | int, ...]
    input_types: tuple[TensorType, ...]
    output_types: tuple[TensorType, ...]
    name: str
    origin: str = ""   # the source operator it comes from (see KernelStep.origin)


class OpKind(str, Enum):
    COMPUTE = "compute"
    COPY = "copy"
    COND_IF = "cond_if"
    WHILE_LOOP = "while_loop"


@dataclass
class NpuOp:
    """One operation of the lowered block, in execution order."""

    name: str
    kind: OpKind
    unit: str = ""
    steps: tuple[Step, ...] = ()
    outputs: tuple[str, ...] = ()       # value keys written
    sources: tuple[str, ...] = ()       # COPY: the value read; control flow: the operands
    graph_ops: tuple[str, ...] = ()     # names of the graph operators this covers
    operator: Operator | None = None    # control flow: the graph operator
    blocks: tuple[LoweredBlock, ...] = ()   # control flow: its lowered blocks
    macs: int = 0
    #: COPY: its result may share its source's bytes (RESHAPE/IDENTITY, a contiguous SLICE)
    alias_ok: bool = False
    #: COPY of a contiguous SLICE: the element offset of the run it takes from its source
    slice_offset_elements: int | None = None
    #: COPY of a SLICE: the source operator it comes from (a .tflite UNPACK's location, a TOSA
    #: SLICE's; "": a slice a converter made inside a fused operator, an LSTM's time step)
    origin: str = ""
    #: COPY into TCM that stages a graph input or a constant for its readers (see staging)
    staged: bool = False
    #: a fused composite (an LSTM cell): what it computes; it runs whole, never tiled
    composite: CompositeFacts | None = None
    #: output k is output 0 of step ``output_steps[k]`` (empty: the last step's outputs)
    output_steps: tuple[int, ...] = ()
    #: a table lookup on the LUT: the function its table holds (SIGMOID, TANH), else ""
    lut_function: str = ""
    #: its matrix products read their constant weights where they live (see
    #: :mod:`scheduler.passes.weights_in_place`)
    weights_in_place: bool = False
    #: it reads its parameters (SHAPE tensors, single values) where they live, as the command
    #: stream's registers (see :func:`npu_sim.program.is_command_parameter`)
    parameters_in_place: bool = False
    #: its TABLE's table goes from its home into the LUT memory, no TCM copy (see
    #: :func:`scheduler.passes.weights_in_place.mark_tables_in_place`)
    table_in_place: bool = False
    #: cycles of its table's load that run before it (see :mod:`scheduler.passes.table_loads`)
    table_load_hidden_cycles: int = 0
    #: (step, operand) of the constants it reads where they live (see
    #: :func:`scheduler.passes.weights_in_place.mark_elementwise_constants_in_place`)
    constant_operands_in_place: tuple[tuple[int, int], ...] = ()
    #: ``inputs`` and the (steps, sources) it was computed from
    _inputs: tuple | None = field(default=None, init=False, repr=False, compare=False)
    #: the ordering's estimate of its cycles and the (steps, sources, config) it was made for
    timing_memo: tuple | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def inputs(self) -> tuple[str, ...]:
        """Value keys read, in first-use order, without repeats (recomputed only when
        ``steps`` or ``sources`` are replaced: passes ask for it many times)."""
        cached = self._inputs
        if cached is not None and cached[0] is self.steps and cached[1] is self.sources:
            return cached[2]
        seen: dict[str, None] = {}
        for step in self.steps:
            for operand in step.operands:
                if isinstance(operand, str):
                    seen.setdefault(operand, None)
        for key in self.sources:
            seen.setdefault(key, None)
        inputs = tuple(seen)
        self._inputs = (self.steps, self.sources, inputs)
        return inputs

    def reads_in_place(self, step: int, operand: int) -> bool:
        """True for an operand read where it lives, with no TCM copy: a lookup's table, weights
        read in place (see :func:`npu_sim.program.reads_in_place`)."""
        if (step, operand) in self.constant_operands_in_place:
            return True
        kernel = self.steps[step]
        parameter = self.parameters_in_place and \
            is_command_parameter(kernel.op, operand, kernel.input_types[operand])
        return command_reads_in_place(self.unit, self.composite.kind if self.composite else "",
                                      kernel.op, operand, self.weights_in_place, parameter, self.table_in_place)

    def output_type(self, k: int) -> TensorType:
        """The type of output ``k`` of a COMPUTE operation."""
        if self.output_steps:
            return self.steps[self.output_steps[k]].output_types[0]
        return self.steps[-1].output_types[k]

    @property
    def op_label(self) -> str:
        """``CONV2D+RESCALE+CLAMP`` style label of what the operation computes."""
        if self.composite is not None:
            return self.composite.kind.upper()
        if self.steps:
            return "+".join(s.op.name for s in self.steps)
        if self.operator is not None:
            return self.operator.op.name
        return self.kind.value.upper()


@dataclass
class LoweredBlock:
    """A block as NPU operations. ``inputs``/``outputs`` are value keys in signature order."""

    name: str
    ops: list[NpuOp]
    inputs: list[str]
    outputs: list[str]

    def walk_blocks(self) -> Iterator[LoweredBlock]:
        """This block and the blocks of its control-flow operations, depth first."""
        yield self
        for op in self.ops:
            for sub in op.blocks:
                yield from sub.walk_blocks()


def copy_producers(block: LoweredBlock) -> dict[str, NpuOp]:
    """The block's values made by a COPY operation (a SLICE, a RESHAPE, a staging copy) -> it."""
    return {out: op for op in block.ops if op.kind is OpKind.COPY for out in op.outputs}


def copied_graph_input(key: str, producers: dict[str, NpuOp], values: dict[str, Value]) -> tuple[str | None, bool]:
    """The graph input value ``key`` is, or is a chain of copies of (``producers``:
    :func:`copy_producers`); None if it is neither. And whether a SLICE without a source operator of
    its own is among the copies (a time step a fused operator's lowering takes from the input: Vela
    lowers the fused operator itself and reads it there; a slice by an operator of its own, a .tflite
    UNPACK or a TOSA SLICE, is an operation whose result Vela places in the SRAM)."""
    sliced = False
    for _ in range(len(producers) + 1):
        kind = values[key].kind
        if kind is ValueKind.INPUT:
            return key, sliced
        producer = producers.get(key)
        if kind is not ValueKind.INTERMEDIATE or producer is None or not producer.sources:
            return None, False
        key, sliced = producer.sources[0], sliced or (producer.slice_offset_elements is not None
                                                      and not producer.origin)
    return None, False


@dataclass
class LoweredGraph:
    """The lowered main block and every value of the graph by key."""

    main: LoweredBlock
    values: dict[str, Value]
    output_keys: set[str] = field(default_factory=set)
    #: composite candidates the fusion rules looked at, in every block
    candidates: list[CompositeCandidate] = field(default_factory=list)
    #: operations moved to the host CPU (outside the NPU's support), with the reason
    cpu_fallbacks: list[CpuFallback] = field(default_factory=list)
    #: value keys of the LSTM cells' state (h and c, into and out of each cell) where the
    #: hardware keeps it in the DDR (``tcm.ddr_recurrent_state``; else empty)
    recurrent_state: set[str] = field(default_factory=set)
