"""Fusion: group graph operators that one NPU operation computes together.

A pass over one block driven by a list of pattern rules (pluggable: later
rules such as the LSTM-cell composite slot in beside the epilogue rule). Each
rule looks at an anchor operator and returns the indices of the operators it
would fuse, or None; operators no rule claims stay alone.

The epilogue rule: a MAC-array operator (CONV2D, CONV3D, DEPTHWISE_CONV2D,
TRANSPOSE_CONV2D, MATMUL) followed by a chain of RESCALE, CLAMP and
elementwise ADD becomes one NPU operation whose steps hand their result to the
next inside the unit. A link is fused only if the intermediate has exactly one
consumer, is no block output and no variable, keeps its shape, and the
epilogue operator can be tiled like its producer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from npu_sim.reference.kernel_api import INPUT_WINDOWS
from npu_sim.tosa.ir import Block
from npu_sim.tosa.ops import Op


@dataclass
class FusionContext:
    """Facts about a block that rules need."""

    block: Block
    consumers: dict[str, list[int]]   # tensor name -> indices of operators reading it (one per use)
    claimed: set[int]                 # operator indices already in a group

    @classmethod
    def of(cls, block: Block) -> "FusionContext":
        consumers: dict[str, list[int]] = {}
        for index, operator in enumerate(block.operators):
            for name in operator.inputs:
                consumers.setdefault(name, []).append(index)
        return cls(block, consumers, set())

    def sole_consumer(self, tensor: str) -> int | None:
        """Index of the only operator reading ``tensor`` once, if the tensor may stay in the unit."""
        users = self.consumers.get(tensor, [])
        if len(users) != 1 or tensor in self.block.outputs:
            return None
        t = self.block.tensors.get(tensor)
        if t is None or t.variable:
            return None
        return users[0]


class FusionRule(Protocol):
    name: str

    def match(self, index: int, ctx: FusionContext) -> list[int] | None:
        """Operator indices (anchor first, in order) to fuse starting at ``index``, or None."""


@dataclass(frozen=True)
class EpilogueRule:
    """MAC operator + RESCALE / CLAMP / ADD epilogue chain."""

    name: str = "epilogue"
    anchors: frozenset[Op] = frozenset({Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D,
                                        Op.TRANSPOSE_CONV2D, Op.MATMUL})
    epilogues: frozenset[Op] = frozenset({Op.RESCALE, Op.CLAMP, Op.ADD})
    max_length: int = 4

    def match(self, index: int, ctx: FusionContext) -> list[int] | None:
        block = ctx.block
        anchor = block.operators[index]
        if anchor.op not in self.anchors or len(anchor.outputs) != 1:
            return None
        if any(block.tensors.get(n) is not None and block.tensors[n].variable for n in anchor.inputs):
            return None  # moving a variable read past other operators could change what it sees
        group = [index]
        current = block.operators[index]
        while len(group) < self.max_length:
            out = current.outputs[0]
            nxt = ctx.sole_consumer(out)
            if nxt is None or nxt in ctx.claimed or nxt <= group[-1]:
                break
            op = block.operators[nxt]
            if not self._links(op, out, block):
                break
            group.append(nxt)
            current = op
        return group if len(group) > 1 else None

    def _links(self, operator, tensor: str, block: Block) -> bool:
        if operator.op not in self.epilogues or operator.op not in INPUT_WINDOWS:
            return False
        if len(operator.outputs) != 1:
            return False
        if block.tensor(operator.outputs[0]).shape != block.tensor(tensor).shape:
            return False
        position = operator.inputs.index(tensor)
        if operator.op in (Op.RESCALE, Op.CLAMP):
            return position == 0
        # ADD: the other operand must not be a variable (it is read later than scheduled otherwise).
        other = operator.inputs[1 - position]
        t = block.tensors.get(other)
        return t is not None and not t.variable


DEFAULT_RULES: tuple[FusionRule, ...] = (EpilogueRule(),)


def fuse(block: Block, rules: Sequence[FusionRule] = DEFAULT_RULES) -> list[list[int]]:
    """Groups of operator indices, one per NPU operation, ordered by their last operator.

    Every operator of the block appears in exactly one group; a group runs at the
    position of its last operator (all its operands exist by then).
    """
    ctx = FusionContext.of(block)
    groups: list[list[int]] = []
    for index in range(len(block.operators)):
        if index in ctx.claimed:
            continue
        for rule in rules:
            group = rule.match(index, ctx)
            if group:
                ctx.claimed.update(group)
                groups.append(group)
                break
        else:
            ctx.claimed.add(index)
            groups.append([index])
    groups.sort(key=lambda g: g[-1])
    return groups
