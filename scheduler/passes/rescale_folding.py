"""Rescale folding: an elementwise operation with the RESCALEs around it as one vector operation.

TFLite's quantized MUL reaches TOSA as a RESCALE widening each input to int32 (a unit scale:
only the zero point goes), the int32 MUL and a RESCALE back (a CLAMP after it for a fused
activation). An NPU whose output unit scales its operands itself (``vector.scaled_ops``: Vela's
``GraphIrOptimiser::FuseRescale`` folds unit input scales into any elementwise operation, and
an output scale into one of 8/16-bit data) runs them as one operation on the narrow data: the
int32 intermediates never exist, and the rescales cost nothing of their own
(:func:`npu_sim.hw.compute_units.vector.rescale_folds`). This rule groups them where the
elementwise chains of :mod:`scheduler.passes.fusion` did not already.

Source operators (``npu_support.source_operators``): Vela compiles a .tflite itself, its TFLite
reader mapping each operator to one NPU operation, and the Ethos-U output unit applies the input
scales of an ADD/SUB and the output scale of any operation. So the RESCALEs (and CLAMP) that
one TFLite operator became around its elementwise operation or transposed convolution are no
operations of their own there, while on the TOSA of the same model regor runs an ADD's RESCALEs
apart (27 of them cost a 4-step Keras LSTM 9,090 of its 24,788 cycles on the U85, against 16,832
cycles for the .tflite). The converter's locations say which TFLite operator each TOSA operator
came from (:attr:`npu_sim.tosa.ir.Operator.location`): :data:`SOURCE_RULE` groups an anchor with
the RESCALEs and CLAMP of its own location, which the vector unit folds the same way (a
transposed convolution takes them as its epilogue). Graphs without locations (TOSA input) are
untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from npu_sim.hw.compute_units.vector import SOURCE_INPUT_SCALING, SOURCE_SCALED_OPS
from npu_sim.tosa.ops import Op

if TYPE_CHECKING:
    from npu_sim.tosa.ir import Operator
    from scheduler.passes.fusion_context import FusionContext


@dataclass(frozen=True)
class RescaleFoldRule:
    """An operator of ``anchors``, the RESCALEs only it reads, the RESCALE that alone reads its
    result and a CLAMP on that: one operation. ``by_location``: only operators of the anchor's
    own (non-empty) location join, and an anchor of ``epilogue_anchors`` takes only the RESCALE
    and CLAMP after it."""

    name: str = "rescale_fold"
    anchors: frozenset[Op] = frozenset()
    by_location: bool = False
    epilogue_anchors: frozenset[Op] = frozenset()

    def match(self, index: int, ctx: FusionContext) -> list[int] | None:
        anchor = ctx.block.operators[index]
        if anchor.op not in self.anchors | self.epilogue_anchors or len(anchor.outputs) != 1 \
                or not ctx.free(index) or (self.by_location and not anchor.location):
            return None
        inputs = [] if anchor.op in self.epilogue_anchors else self._inputs(index, ctx)
        group = sorted({index, *inputs, *self._outputs(index, ctx)})
        return group if len(group) > 1 else None

    def _inputs(self, index: int, ctx: FusionContext) -> list[int]:
        """The RESCALEs producing the anchor's operands that only it reads; ``by_location``, the
        chain of them each alone reading the one before (TFLite's ADD scales an input in two), and
        a 16x8 ADD's CAST and shift before them (:data:`SOURCE_INPUT_SCALING`)."""
        anchor, found = ctx.block.operators[index], []
        scaling = SOURCE_INPUT_SCALING if self.by_location else frozenset({Op.RESCALE})
        for name in anchor.inputs:
            reader = index
            while (producer := ctx.producer.get(name)) is not None and producer < reader \
                    and any(self._joins(producer, op, anchor, ctx) for op in scaling) \
                    and ctx.sole_consumer(name) == reader:
                found.append(producer)
                if not self.by_location:
                    break
                name, reader = ctx.block.operators[producer].inputs[0], producer
        return found

    def _outputs(self, index: int, ctx: FusionContext) -> list[int]:
        """The RESCALE alone reading the anchor's result (of its shape), and a CLAMP alone reading that's."""
        block, found, last = ctx.block, [], index
        anchor = block.operators[index]
        for op in (Op.RESCALE, Op.CLAMP):
            result = block.operators[last].outputs[0]
            nxt = ctx.sole_consumer(result)
            if nxt is None or nxt <= last or not self._joins(nxt, op, anchor, ctx) \
                    or block.operators[nxt].inputs[0] != result \
                    or block.tensor(block.operators[nxt].outputs[0]).shape != block.tensor(result).shape:
                break
            found.append(nxt)
            last = nxt
        return found

    def _joins(self, index: int, op: Op, anchor: Operator, ctx: FusionContext) -> bool:
        operator = ctx.block.operators[index]
        return operator.op is op and len(operator.outputs) == 1 and ctx.free(index) \
            and (not self.by_location or operator.location == anchor.location)



#: The rule of source operators (see the module doc): elementwise anchors take their input and
#: output RESCALEs, a transposed convolution its output RESCALE and CLAMP.
SOURCE_RULE = RescaleFoldRule(name="source_operator", by_location=True, anchors=SOURCE_SCALED_OPS,
                              epilogue_anchors=frozenset({Op.TRANSPOSE_CONV2D}))
