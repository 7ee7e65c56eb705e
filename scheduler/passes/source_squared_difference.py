"""Source squared difference: TFLite's SQUARED_DIFFERENCE as Vela compiles a .tflite, one operation.

The converter writes an int8 SQUARED_DIFFERENCE (a LayerNormalization's variance term, (x - mean)^2)
as RESCALEs widening both inputs to int32, a SUB, a MUL of the difference by itself and a RESCALE
back, all of the operator's location. Vela's TFLite reader lowers it itself (regor
tflite_graph_optimiser.cpp, RewriteSquaredDifference): both inputs cast to int32 and scaled by MULs,
the SUB, the square and a scaling MUL: 6.4-6.6 cycles an output element on the U55-256, 2.7-3.1 on the
U85-256. On an NPU without double broadcast (the Ethos-U55 and U65), where the operator has fewer than
four dimensions (a Keras LayerNormalization over [1, 64, 96]), Vela adds an ADD that materialises a
broadcast operand from an int32 zero constant of the output's shape, read from the flash on the U55
(graphir_optimiser.cpp, ReplaceBroadcastWithAdd): 8.0 more cycles an element (a BERT's LayerNorms:
89,490 cycles for 6,144 elements, a ViT's 59,778 for 4,096).

:class:`SourceSquaredDifferenceRule` (with ``npu_support.source_operators`` and a
``vector.cycles_per_element.source_squared_difference`` rate) makes one vector operation of the
operators of one location that hold a SUB and a MUL of its result by itself, and RESCALEs (and
RESHAPEs), when nothing outside reads what they compute but the last one's result; the vector unit
times it per output element and counts the bytes of the zero constant its broadcast pass reads
(:func:`npu_sim.hw.compute_units.vector.source_squared_difference_cycles`,
:func:`npu_sim.hw.compute_units.vector.source_operator_bytes`). Its steps run as before, so the bits
are the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from npu_sim.hw.compute_units import VECTOR
from npu_sim.hw.compute_units.vector import SQUARED_DIFFERENCE_OPS
from npu_sim.tosa.ops import Op
from scheduler.passes.fusion_context import FusedGroup, FusionContext
from scheduler.passes.source_softmax import closed_group, location_members


@dataclass(frozen=True)
class SourceSquaredDifferenceRule:
    """The operators of a source SQUARED_DIFFERENCE as one operation (see the module doc)."""

    name: str = "source_squared_difference"

    def match(self, index: int, ctx: FusionContext) -> FusedGroup | None:
        block = ctx.block
        members = location_members(index, ctx, Op.SUB)
        if not members or any(block.operators[i].op not in SQUARED_DIFFERENCE_OPS for i in members):
            return None
        difference = block.operators[index].outputs[0]
        squares = [i for i in members if block.operators[i].op is Op.MUL
                   and list(block.operators[i].inputs[:2]) == [difference, difference]]
        if not squares or not closed_group(members, ctx):
            return None
        return FusedGroup(members, unit=VECTOR.name)
