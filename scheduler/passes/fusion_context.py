"""What fusion rules see and say: the facts about a block (:class:`FusionContext`), the group of
operators one NPU operation computes (:class:`FusedGroup`) and the rule protocol
(:class:`FusionRule`).

Apart from :mod:`scheduler.passes.fusion`, which drives the rules, so that a rule module imports
these without importing the driver that imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from npu_sim.program import CompositeCandidate, CompositeFacts
from npu_sim.reference.kernel_api import INPUT_WINDOWS
from npu_sim.tosa.ir import Block, Operator
from scheduler.passes.cell_graph import CellGraph


@dataclass
class FusionContext:
    """Facts about a block that rules need."""

    block: Block
    consumers: dict[str, list[int]]   # tensor name -> indices of operators reading it (one per use)
    claimed: set[int]                 # operator indices already in a group
    producer: dict[str, int] = field(default_factory=dict)   # tensor name -> index of its operator
    #: composite candidates looked at, fused or not (for ``npu-sim plan``)
    candidates: list[CompositeCandidate] = field(default_factory=list)
    #: a composite whose tensors take more bytes is not fused (None: no limit)
    max_composite_bytes: int | None = None
    #: the def-use view the cell matchers walk, made once (it memoises which tensors are
    #: computed from constants only: made per anchor, that costs a walk of the block each)
    _cell_graph: CellGraph | None = None

    def cell_graph(self) -> CellGraph:
        if self._cell_graph is None:
            self._cell_graph = CellGraph(self.block, self.consumers, self.producer, self.claimed)
        return self._cell_graph

    @classmethod
    def of(cls, block: Block, max_composite_bytes: int | None = None) -> FusionContext:
        consumers: dict[str, list[int]] = {}
        producer: dict[str, int] = {}
        for index, operator in enumerate(block.operators):
            for name in operator.inputs:
                consumers.setdefault(name, []).append(index)
            for name in operator.outputs:
                producer[name] = index
        return cls(block, consumers, set(), producer, max_composite_bytes=max_composite_bytes)

    def sole_consumer(self, tensor: str) -> int | None:
        """Index of the only operator reading ``tensor`` once, if the tensor may stay in the unit."""
        users = self.consumers.get(tensor, [])
        if len(users) != 1 or tensor in self.block.outputs:
            return None
        t = self.block.tensors.get(tensor)
        if t is None or t.variable:
            return None
        return users[0]

    def free(self, index: int) -> bool:
        """True if operator ``index`` may join a group: unclaimed, reading no variable, and of
        an operator whose tiles have input windows (it can be tiled with the others)."""
        operator = self.block.operators[index]
        return index not in self.claimed and not self.reads_variable(operator) and operator.op in INPUT_WINDOWS

    def reads_variable(self, operator: Operator) -> bool:
        """True if ``operator`` reads a variable: moving it past other operators could change
        what it sees, so it anchors or joins no group."""
        tensors = self.block.tensors
        return any(tensors.get(n) is not None and tensors[n].variable for n in operator.inputs)


@dataclass
class FusedGroup:
    """Operators (indices, graph order) one NPU operation computes.

    ``outputs``: the tensors it hands out (empty: its last operator's results);
    ``composite``: what a composite rule recognised (None for chains)."""

    indices: list[int]
    outputs: tuple[str, ...] = ()
    composite: CompositeFacts | None = None
    late_inputs: tuple[str, ...] = ()   # a composite's inputs that arrive last (an LSTM's step input)
    unit: str | None = None             # the unit that runs it, where not its first operator's
    lut_function: str = ""              # a lookup: the function its table holds (SIGMOID, TANH)


class FusionRule(Protocol):
    @property
    def name(self) -> str: ...

    def match(self, index: int, ctx: FusionContext) -> list[int] | FusedGroup | None:
        """Operator indices (anchor first, in order) to fuse starting at ``index``, or None."""
