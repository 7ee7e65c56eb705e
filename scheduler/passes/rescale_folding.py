"""Rescale folding: an elementwise operation with the RESCALEs around it as one vector operation.

TFLite's quantized MUL reaches TOSA as a RESCALE widening each input to int32 (a unit scale:
only the zero point goes), the int32 MUL and a RESCALE back (a CLAMP after it for a fused
activation). An NPU whose output unit scales its operands itself (``vector.scaled_ops``: Vela's
``GraphIrOptimiser::FuseRescale`` folds unit input scales into any elementwise operation, and
an output scale into one of 8/16-bit data) runs them as one operation on the narrow data: the
int32 intermediates never exist, and the rescales cost nothing of their own
(:func:`npu_sim.hw.compute_units.vector.rescale_folds`). This rule groups them where the
elementwise chains of :mod:`scheduler.passes.fusion` did not already.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from npu_sim.reference.kernel_api import INPUT_WINDOWS
from npu_sim.tosa.ops import Op

if TYPE_CHECKING:
    from scheduler.passes.fusion import FusionContext


@dataclass(frozen=True)
class RescaleFoldRule:
    """An operator of ``anchors``, the RESCALEs only it reads, the RESCALE that alone reads its
    result and a CLAMP on that: one operation."""

    name: str = "rescale_fold"
    anchors: frozenset[Op] = frozenset()

    def match(self, index: int, ctx: FusionContext) -> list[int] | None:
        anchor = ctx.block.operators[index]
        if anchor.op not in self.anchors or len(anchor.outputs) != 1 or not self._free(index, ctx):
            return None
        group = sorted({index, *self._inputs(index, ctx), *self._outputs(index, ctx)})
        return group if len(group) > 1 else None

    def _inputs(self, index: int, ctx: FusionContext) -> list[int]:
        """The RESCALEs producing the anchor's operands that only it reads."""
        found = []
        for name in ctx.block.operators[index].inputs:
            producer = ctx.producer.get(name)
            if producer is not None and producer < index and self._joins(producer, Op.RESCALE, ctx) \
                    and ctx.sole_consumer(name) == index:
                found.append(producer)
        return found

    def _outputs(self, index: int, ctx: FusionContext) -> list[int]:
        """The RESCALE alone reading the anchor's result, and a CLAMP alone reading that's."""
        block, found, last = ctx.block, [], index
        for op in (Op.RESCALE, Op.CLAMP):
            result = block.operators[last].outputs[0]
            nxt = ctx.sole_consumer(result)
            if nxt is None or nxt <= last or not self._joins(nxt, op, ctx) or block.operators[nxt].inputs[0] != result:
                break
            found.append(nxt)
            last = nxt
        return found

    def _joins(self, index: int, op: Op, ctx: FusionContext) -> bool:
        operator = ctx.block.operators[index]
        return operator.op is op and len(operator.outputs) == 1 and self._free(index, ctx)

    @staticmethod
    def _free(index: int, ctx: FusionContext) -> bool:
        operator = ctx.block.operators[index]
        return index not in ctx.claimed and not ctx.reads_variable(operator) and operator.op in INPUT_WINDOWS
