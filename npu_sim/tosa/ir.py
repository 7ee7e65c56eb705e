"""The TOSA graph IR: Graph -> Region -> Block -> Operators and Tensors.

Mirrors the serialization format (seed 003): tensors are referenced by name
within a block; constant data is held decoded as a numpy array of the tensor's
storage dtype (see :mod:`npu_sim.tosa.dtype`); control-flow operators name the
blocks they run in their attributes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple

import numpy as np

from npu_sim.errors import GraphValidationError
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Attribute, Op, attribute_class


class TensorType(NamedTuple):
    """Shape and element type of a value (what kernels need to know of an operand)."""

    shape: tuple[int, ...]
    dtype: DType

    @property
    def element_count(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def size_bytes(self) -> int:
        return self.dtype.nbytes(self.element_count)


@dataclass
class Tensor:
    """A named tensor of a block. ``data`` is set for constants (and variable initial values)."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    data: np.ndarray | None = None
    variable: bool = False
    variable_name: str = ""
    is_unranked: bool = False

    def __post_init__(self) -> None:
        self.shape = tuple(int(d) for d in self.shape)
        self.dtype = DType(self.dtype)

    @property
    def type(self) -> TensorType:
        return TensorType(self.shape, self.dtype)

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
                self.is_unranked) == (other.name, other.shape, other.dtype, other.variable,
                                      other.variable_name, other.is_unranked) and same_data


@dataclass
class Operator:
    """One TOSA operator: inputs and outputs are tensor names of the enclosing block."""

    op: Op
    inputs: list[str]
    outputs: list[str]
    attribute: Attribute | None = None
    location: str = ""

    def __post_init__(self) -> None:
        self.op = Op(self.op)
        self.inputs = list(self.inputs)
        self.outputs = list(self.outputs)
        if self.attribute is None:
            self.attribute = attribute_class(self.op)()

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


@dataclass
class Region:
    name: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Graph:
    """A whole TOSA graph. The first block of the first region is the entry point."""

    regions: list[Region] = field(default_factory=list)
    version: tuple[int, int, int, bool] = (1, 0, 0, False)

    @property
    def main(self) -> Block:
        if not self.regions or not self.regions[0].blocks:
            raise GraphValidationError("graph has no main block")
        return self.regions[0].blocks[0]

    def blocks(self) -> Iterator[Block]:
        for region in self.regions:
            yield from region.blocks

    def block(self, name: str) -> Block:
        """A block by name, searching every region (control-flow branches)."""
        for b in self.blocks():
            if b.name == name:
                return b
        raise GraphValidationError(f"no block named {name!r}")

    @property
    def input_types(self) -> dict[str, TensorType]:
        return {n: self.main.tensor(n).type for n in self.main.inputs}

    @property
    def output_types(self) -> dict[str, TensorType]:
        return {n: self.main.tensor(n).type for n in self.main.outputs}

    def copy(self) -> "Graph":
        return dataclasses.replace(self, regions=[
            Region(r.name, [Block(b.name, [dataclasses.replace(o, inputs=list(o.inputs), outputs=list(o.outputs)) for o in b.operators],
                                  {k: dataclasses.replace(t) for k, t in b.tensors.items()},
                                  list(b.inputs), list(b.outputs)) for b in r.blocks])
            for r in self.regions])
