"""Source softmax: TFLite's SOFTMAX as Vela compiles a .tflite, one operation over its input.

The converter writes TFLite's int8 SOFTMAX as some forty TOSA operators of its location (the
input widened, a REDUCE_MAX over the last axis, the difference's exp in four 16-bit TABLEs, a
REDUCE_SUM, CLZ, shifts and a Newton reciprocal of MULs and ADDs, a RESCALE back). On the
Ethos-U85 each is an operation of ours: an int32 REDUCE_MAX alone takes 9 cycles an element.
Vela's TFLite reader lowers the SOFTMAX itself to a few passes (a MaxPool, a LUT, a ReduceSum,
MULs, shifts): 2.94 cycles an element over the softmaxes of a keyword transformer and of a
4-block one on the U85 (37,828 cycles for 9,604 elements, 182,976 for 65,536).

:class:`SourceSoftmaxRule` (with ``npu_support.source_operators`` and a
``vector.cycles_per_element.source_softmax`` rate) makes one vector operation of the
operators of one location that hold a REDUCE_MAX, a TABLE and a REDUCE_SUM (the TOSA form of a
source softmax) when nothing outside reads what they compute but the last one's result; the
vector unit times it at that rate per element of its input
(:func:`npu_sim.hw.compute_units.vector.source_softmax_cycles`). Its steps run as before, so the
bits are the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from npu_sim.hw.compute_units import VECTOR
from npu_sim.hw.compute_units.vector import SOFTMAX_MARKS
from npu_sim.tosa.ops import Op
from scheduler.passes.fusion_context import FusedGroup, FusionContext

#: Operators that are values, not work: they stay out of the group.
VALUES = frozenset({Op.CONST, Op.CONST_SHAPE})


@dataclass(frozen=True)
class SourceSoftmaxRule:
    """The operators of a source softmax as one operation (see the module doc)."""

    name: str = "source_softmax"

    def match(self, index: int, ctx: FusionContext) -> FusedGroup | None:
        members = location_members(index, ctx, Op.REDUCE_MAX)
        if not members or not SOFTMAX_MARKS <= {ctx.block.operators[i].op for i in members} \
                or not closed_group(members, ctx):
            return None
        return FusedGroup(members, unit=VECTOR.name)


def location_members(index: int, ctx: FusionContext, anchor_op: Op) -> list[int]:
    """The operators (values aside) of the location of operator ``index``, in graph order, where it is
    an ``anchor_op`` with a location (the converter's form of one source operator); else none."""
    block = ctx.block
    anchor = block.operators[index]
    if anchor.op is not anchor_op or not anchor.location:
        return []
    return [i for i, op in enumerate(block.operators) if op.location == anchor.location and op.op not in VALUES]


def closed_group(members: list[int], ctx: FusionContext) -> bool:
    """True if the members are free and one-result operators, and only the last one's result
    leaves them (read by an operator outside, or a block output)."""
    block, inside = ctx.block, set(members)
    for i in members:
        operator = block.operators[i]
        if not ctx.free(i) or len(operator.outputs) != 1:
            return False
        if i == members[-1]:
            continue
        out = operator.outputs[0]
        if out in block.outputs or any(reader not in inside for reader in ctx.consumers.get(out, [])):
            return False
    return True
