"""Chaining: an elementwise operation run in the output pipeline of the lookup before it.

The Ethos-U85 chains up to four elementwise operations onto an operation (regor's
``EthosU85OpGroup::Chain``): the chained operation reads the previous one's result inside the
NPU, which never writes it, and costs no pass of its own. Vela's EfficientNet swish,
``x * sigmoid(x)``, is a Sigmoid lookup of 10,991 cycles and a Mul of 0 on the U85 (on its
.tflite and on the TOSA of it alike), where the U55 runs the Mul apart (6,144 cycles).

:class:`LookupChainRule` (``lut.chained_elementwise``) makes one LUT operation of a TABLE and
the elementwise operation alone reading its result with that result's shape (ADD, SUB, MUL,
MAXIMUM, MINIMUM, and the shifts: a TOSA softmax shifts each of its exponential's int16 lookups,
which Vela chains at no cost of their own: 4 x 8,192 cycles of a vision transformer's softmax on
the U85), with the RESCALEs between them and around it: those only it reads (the
TABLE's result widened, the other operand widened) and the RESCALE, then CLAMP, alone reading
its result. The LUT unit times the chained steps as nothing of their own
(:func:`npu_sim.hw.compute_units.lut.step_cycles`).
"""

from __future__ import annotations

from dataclasses import dataclass

from npu_sim.hw.compute_units import LUT
from npu_sim.tosa.ops import Op
from scheduler.passes.fusion_context import FusedGroup, FusionContext

#: Elementwise operators that chain onto a lookup.
CHAINED_OPS = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.MAXIMUM, Op.MINIMUM,
                         Op.LOGICAL_LEFT_SHIFT, Op.ARITHMETIC_RIGHT_SHIFT})


@dataclass(frozen=True)
class LookupChainRule:
    """A TABLE and the elementwise operation chained onto it (see the module doc)."""

    name: str = "lookup_chain"

    def match(self, index: int, ctx: FusionContext) -> FusedGroup | None:
        block = ctx.block
        table = block.operators[index]
        if table.op is not Op.TABLE or len(table.outputs) != 1 or not ctx.free(index):
            return None
        group, current = [index], index
        nxt = self._reader(current, ctx)
        if nxt is not None and block.operators[nxt].op is Op.RESCALE:   # the lookup's result widened
            group.append(nxt)
            current, nxt = nxt, self._reader(nxt, ctx)
        if nxt is None or block.operators[nxt].op not in CHAINED_OPS \
                or block.tensor(block.operators[nxt].outputs[0]).shape != block.tensor(table.outputs[0]).shape:
            return None
        chained = nxt
        group += self._widened_operands(chained, current, ctx) + [chained]
        last = chained
        for op in (Op.RESCALE, Op.CLAMP):
            after = self._reader(last, ctx)
            if after is None or block.operators[after].op is not op:
                break
            group.append(after)
            last = after
        return FusedGroup(sorted(group), unit=LUT.name)

    def _reader(self, index: int, ctx: FusionContext) -> int | None:
        """The free operator alone reading operator ``index``'s result (as its first operand for a
        RESCALE or CLAMP), after it, with one result."""
        operators = ctx.block.operators
        result = operators[index].outputs[0]
        nxt = ctx.sole_consumer(result)
        if nxt is None or nxt <= index or not ctx.free(nxt) or len(operators[nxt].outputs) != 1:
            return None
        if operators[nxt].op in (Op.RESCALE, Op.CLAMP) and operators[nxt].inputs[0] != result:
            return None
        return nxt

    def _widened_operands(self, chained: int, chain_input: int, ctx: FusionContext) -> list[int]:
        """The RESCALEs producing the chained operation's other operands that only it reads."""
        found = []
        for name in ctx.block.operators[chained].inputs:
            producer = ctx.producer.get(name)
            if producer is not None and producer != chain_input and producer < chained and ctx.free(producer) \
                    and ctx.block.operators[producer].op is Op.RESCALE and ctx.sole_consumer(name) == chained:
                found.append(producer)
        return found

