"""The TOSA graph IR: Graph -> Region -> Block -> Operators and Tensors.

Mirrors the serialization format (seed 003): tensors are referenced by name
within a block; constant data is held decoded as a numpy array of the tensor's
storage dtype (see :mod:`npu_sim.tosa.dtype`); control-flow operators name the
blocks they run in their attributes.

Conventions every reader of the IR can rely on (the flatbuffer and JSON readers
and the :class:`~npu_sim.tosa.builder.GraphBuilder` all produce them):

* **Constants** are tensors with ``data`` (a numpy array of the storage dtype and
  the tensor's shape), produced by a ``CONST`` operator (``CONST_SHAPE`` for
  SHAPE tensors). A tensor with data and no producer is treated as a constant too.
* **SHAPE values** (the file's ``TosaShape`` entries) are tensors of dtype
  ``SHAPE`` and shape ``(rank,)``, data int64. Element types the IR cannot hold
  in numpy (the 1.1-draft FP6/FP4/MX types) keep their raw bytes as a uint8 array.
* **Variables** (TOSA's stateful extension) are tensors with ``variable=True``;
  ``variable_name`` is the variable's name (:attr:`Tensor.variable_key`),
  ``data`` its initial value (None: no initial value). The main block declares
  every variable; any other block that reads or writes one holds an identical
  copy of the declaration, so ``block.tensor(name)`` works everywhere. The
  variable is accessed only through two operators:

  - ``VARIABLE_READ``: inputs ``[variable tensor]``, outputs ``[value]``;
  - ``VARIABLE_WRITE``: inputs ``[variable tensor, value]``, no outputs.

  No ``VARIABLE`` operators: the declaration is the flagged tensor. Readers turn
  both encodings real tools write into this form: tosa-opt's flagged tensors
  read and written through ``IDENTITY`` operators carrying a
  ``VariableRead``/``VariableWriteAttribute``, and the specification's
  ``VARIABLE``/``VARIABLE_READ``/``VARIABLE_WRITE`` operators. The writer emits
  tosa-opt's encoding (the one tosa-tools' reference model runs). A variable is
  state, not a data edge: dependency analysis must not link a write to a read
  of the same variable, only keep their order.
* **Control flow**: ``COND_IF`` inputs are ``[condition, *args]`` (condition:
  BOOL, one element), ``WHILE_LOOP`` inputs are the loop-carried values; the
  blocks named by the attribute receive the arguments by position as their
  ``inputs`` and return their ``outputs`` by position. Branch blocks may sit in
  the main region (the serialization README's layout) or each in a region of
  its own (tosa-tools 2026.8: the attribute then names the *region*, whose only
  block is called ``<region>_bb0``): :meth:`Graph.block` resolves both. Written
  files give every branch block a region of its own, named like the block when
  it sat in the main region (tosa-tools 2026.8's reference model finds branches
  by region name only).
* **Order**: a block's operators are listed in dependency order (every input is
  a block input, a constant, a variable or an earlier operator's output);
  :func:`npu_sim.tosa.validation.validate` checks it along with the rest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from npu_sim.errors import GraphValidationError
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Attribute, Op, attribute_class

_INT32_LIMIT = 2 ** 31
_INT64_LIMIT = 2 ** 63

class _CountsAssignments:
    """Counts the assignments to an object's public attributes in ``_assignments`` (the
    fields of Tensors and Operators change only that way): a cache of facts derived from a
    graph (the executor's prepared graphs) compares the counts instead of every field."""

    _assignments = 0

    def __setattr__(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)
        if name[0] != "_":
            object.__setattr__(self, "_assignments", self._assignments + 1)


#: The assignment count of a Tensor or Operator (see _CountsAssignments).
assignments = attrgetter("_assignments")


class TensorType(NamedTuple):
    """Shape and element type of a value (what kernels need to know of an operand)."""

    shape: tuple[int, ...]
    dtype: DType

    @property
    def element_count(self) -> int:
        """Product of the dimensions, computed in int64 (as numpy would: it wraps around)."""
        count = 1
        for d in self.shape:
            if type(d) is not int or not -_INT32_LIMIT <= d < _INT32_LIMIT:
                return int(np.prod(self.shape, dtype=np.int64))
            count *= d
        # int64 arithmetic wraps modulo 2**64, so it agrees with the exact product
        # whenever that fits in int64
        return count if -_INT64_LIMIT <= count < _INT64_LIMIT else \
            int(np.prod(self.shape, dtype=np.int64))

    @property
    def size_bytes(self) -> int:
        return self.dtype.nbytes(self.element_count)


@dataclass
class Tensor(_CountsAssignments):
    """A named tensor of a block. ``data`` is set for constants (and variable initial values)."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    data: np.ndarray | None = None
    variable: bool = False
    variable_name: str = ""
    is_unranked: bool = False
    #: 1.1-draft block-scaled (MX) tensors only: their scale tensor
    block_scale: BlockScale | None = None
    _type: TensorType | None = field(default=None, init=False, repr=False, compare=False)

    def __init__(self, name: str, shape: Iterable[int], dtype: DType | int, data: np.ndarray | None = None,
                 variable: bool = False, variable_name: str = "", is_unranked: bool = False,
                 block_scale: BlockScale | None = None) -> None:
        # The generated __init__ assigns each field through the counting __setattr__ (and
        # shape and dtype twice); graphs of thousands of tensors are read, so the fields go
        # straight into __dict__, counted as those assignments would be.
        converted = type(dtype) is not DType
        self.__dict__.update(name=name, shape=tuple(map(int, shape)),
                             dtype=DType(dtype) if converted else dtype, data=data, variable=variable,
                             variable_name=variable_name, is_unranked=is_unranked,
                             block_scale=block_scale, _type=None, _assignments=9 + converted)

    @property
    def variable_key(self) -> str:
        """The name of the variable a variable tensor stands for (its variable_name, or name)."""
        return self.variable_name or self.name

    @property
    def type(self) -> TensorType:
        """Shape and dtype (the same object until either changes: compilers ask for it a lot)."""
        t = self._type
        if t is None or t.shape is not self.shape or t.dtype is not self.dtype:
            t = self._type = TensorType(self.shape, self.dtype)
        return t

    @property
    def element_count(self) -> int:
        return self.type.element_count

    @property
    def size_bytes(self) -> int:
        return self.type.size_bytes

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tensor):
            return NotImplemented
        same_data = (self.data is None and other.data is None) or (
            self.data is not None and other.data is not None
            and self.data.shape == other.data.shape
            and self.data.tobytes() == other.data.tobytes()
        )
        return (self.name, self.shape, self.dtype, self.variable, self.variable_name,
                self.is_unranked, self.block_scale) == (
                    other.name, other.shape, other.dtype, other.variable, other.variable_name,
                    other.is_unranked, other.block_scale) and same_data


@dataclass(frozen=True)
class BlockScale:
    """The scale part of a 1.1-draft block-scaled tensor (kept so files round-trip)."""

    dtype: DType
    block_size: int
    data: bytes = b""


@dataclass(init=False)
class Operator(_CountsAssignments):
    """One TOSA operator: inputs and outputs are tensor names of the enclosing block.

    ``attribute`` None at construction means the operator's default attribute.
    """

    op: Op
    inputs: list[str]
    outputs: list[str]
    attribute: Attribute
    location: str = ""

    def __init__(self, op: Op | int, inputs: Iterable[str], outputs: Iterable[str],
                 attribute: Attribute | None = None, location: str = "") -> None:
        op = op if type(op) is Op else Op(op)
        # straight into __dict__, counted as five assignments (see Tensor.__init__)
        self.__dict__.update(op=op, inputs=list(inputs), outputs=list(outputs),
                             attribute=attribute_class(op)() if attribute is None else attribute,
                             location=location, _assignments=5)

    @property
    def name(self) -> str:
        """A readable handle for messages: the op and its first output."""
        first = self.outputs[0] if self.outputs else (self.inputs[0] if self.inputs else "?")
        return f"{self.op.name}({first})"


@dataclass
class Block:
    """A basic block: operators in order, the tensors they use, and the block signature."""

    name: str
    operators: list[Operator] = field(default_factory=list)
    tensors: dict[str, Tensor] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def tensor(self, name: str) -> Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise GraphValidationError(f"block {self.name!r}: no tensor named {name!r}") from None

    def producers(self) -> dict[str, Operator]:
        """Tensor name -> the operator writing it."""
        return {out: op for op in self.operators for out in op.outputs}

    def readers(self) -> dict[str, list[Operator]]:
        """Tensor name -> the operators reading it, in order (one reading it twice, twice)."""
        found: dict[str, list[Operator]] = {}
        for op in self.operators:
            for name in op.inputs:
                found.setdefault(name, []).append(op)
        return found


@dataclass
class Region:
    name: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Graph:
    """A whole TOSA graph. The first block of the first region is the entry point."""

    regions: list[Region] = field(default_factory=list)
    version: tuple[int, int, int, bool] = (1, 0, 0, False)
    #: the serialization library that wrote the file, e.g. "2026.8.0" (informative only)
    software_version: str = field(default="", compare=False)
    #: the names a user knows for the graph's inputs and outputs (TOSA name -> name in the
    #: model they converted from, e.g. a TFLite signature); informative only
    original_names: dict[str, str] = field(default_factory=dict, compare=False)
    #: the graph's inputs and outputs that hold unsigned data in their signed storage type (a
    #: ``uint8`` model edge; see :mod:`npu_sim.tosa.unsigned_io`)
    unsigned_io: frozenset[str] = frozenset()
    #: the graph's outputs held as INT32 that the user gets widened to ``int64`` (a TFLite
    #: ARG_MAX's int64 indices; see :mod:`npu_sim.tosa.int64_outputs`)
    int64_outputs: frozenset[str] = frozenset()

    @property
    def main(self) -> Block:
        if not self.regions or not self.regions[0].blocks:
            raise GraphValidationError("graph has no main block")
        return self.regions[0].blocks[0]

    def blocks(self) -> Iterator[Block]:
        for region in self.regions:
            yield from region.blocks

    def block(self, name: str) -> Block:
        """A block by name, searching every region (control-flow branches).

        Also accepts a region's name, meaning that region's first block: tosa-tools
        2026.8 puts each branch in a region of its own and names the region.
        """
        for b in self.blocks():
            if b.name == name:
                return b
        for region in self.regions:
            if region.name == name and region.blocks:
                return region.blocks[0]
        raise GraphValidationError(f"no block or region named {name!r}")

    def has_block(self, name: str) -> bool:
        """True if :meth:`block` finds ``name``."""
        return any(b.name == name for b in self.blocks()) or any(
            r.name == name and r.blocks for r in self.regions)

    def variables(self) -> dict[str, Tensor]:
        """The graph's variables: variable key -> declaring tensor of the main block."""
        return {t.variable_key: t for t in self.main.tensors.values() if t.variable}

    @property
    def input_types(self) -> dict[str, TensorType]:
        return {n: self.main.tensor(n).type for n in self.main.inputs}

    @property
    def output_types(self) -> dict[str, TensorType]:
        return {n: self.main.tensor(n).type for n in self.main.outputs}

    def drop_unread_constants(self, names: Iterable[str]) -> None:
        """Remove the CONSTs among ``names`` that no operator of any block reads (a nested block
        may read its parent's tensors) and no block returns: what a rewrite of the graph left."""
        read = {name for block in self.blocks() for op in block.operators for name in op.inputs}
        read.update(name for block in self.blocks() for name in block.outputs)
        unread = set(names) - read
        if not unread:
            return
        for block in self.blocks():
            doomed = [op for op in block.operators if op.op is Op.CONST and op.outputs and op.outputs[0] in unread]
            for op in doomed:
                block.operators.remove(op)
                block.tensors.pop(op.outputs[0], None)

    def copy(self) -> Graph:
        """A copy whose blocks, operators and tensors can be edited without touching this graph."""
        return dataclasses.replace(self, regions=[
            Region(r.name, [_copy_block(b) for b in r.blocks]) for r in self.regions])


def _copy_block(block: Block) -> Block:
    operators = [dataclasses.replace(o, inputs=list(o.inputs), outputs=list(o.outputs)) for o in block.operators]
    tensors = {k: dataclasses.replace(t) for k, t in block.tensors.items()}
    return Block(block.name, operators, tensors, list(block.inputs), list(block.outputs))
