"""Source means: TFLite's MEAN as Vela compiles a .tflite, one operation over its input.

TOSA writes a quantized TFLite MEAN over height and width as a RESCALE widening the input to
int32, a REDUCE_SUM per axis and a RESCALE scaling the sum back (the converter's locations give
all four the MEAN's). On TOSA input Vela lowers each sum over H or W to a transpose and a
ReduceSum (``vector.transpose_reductions``); its TFLite reader instead makes one depthwise
convolution of the MEAN with a kernel of the pooled extent and its 1/N in the output unit: on
EfficientNet-style's squeeze-and-excite pools 1.38 (U55), 1.35 (U65) and 1.27 (U85) cycles an
input element, where the transposes take more than twice that on the U85.

:class:`SourceMeanRule` (with ``npu_support.source_operators``) groups a REDUCE_SUM with the
operators of its location around it, the chain of sole readers from the widening RESCALE to the
last RESCALE (or RESHAPE); the vector unit times such a group at
``vector.cycles_per_element.source_mean`` per element the first sum reads
(:func:`npu_sim.hw.compute_units.vector.source_mean_cycles`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from npu_sim.tosa.ops import Op

if TYPE_CHECKING:
    from scheduler.passes.fusion_context import FusionContext

#: The operators a MEAN's chain may hold besides its sums.
MEAN_LINKS = frozenset({Op.RESCALE, Op.REDUCE_SUM, Op.RESHAPE})


@dataclass(frozen=True)
class SourceMeanRule:
    """A REDUCE_SUM and the operators of its location chained around it (see the module doc)."""

    name: str = "source_mean"

    def match(self, index: int, ctx: FusionContext) -> list[int] | None:
        block = ctx.block
        anchor = block.operators[index]
        if anchor.op is not Op.REDUCE_SUM or not anchor.location or not ctx.free(index):
            return None
        group = [index]
        producer = ctx.producer.get(anchor.inputs[0])
        if producer is not None and producer < index and self._joins(producer, anchor.location, ctx) \
                and block.operators[producer].op is Op.RESCALE and ctx.sole_consumer(anchor.inputs[0]) == index:
            group.insert(0, producer)
        last = index
        while True:
            nxt = ctx.sole_consumer(block.operators[last].outputs[0])
            if nxt is None or nxt <= last or not self._joins(nxt, anchor.location, ctx) \
                    or block.operators[nxt].inputs[0] != block.operators[last].outputs[0]:
                break
            group.append(nxt)
            last = nxt
        return group if len(group) > 1 else None

    def _joins(self, index: int, location: str, ctx: FusionContext) -> bool:
        operator = ctx.block.operators[index]
        return operator.op in MEAN_LINKS and operator.location == location and len(operator.outputs) == 1 \
            and ctx.free(index)

