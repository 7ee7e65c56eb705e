"""Source activations: a TFLite activation that requantizes, as Vela compiles a .tflite, one pass.

A quantized RELU (or RELU6) whose output scale is not its input's reaches TOSA as a RESCALE and a
CLAMP of its location. Vela's TFLite reader makes it one operation, an average-pool no-op on the
pooling path (regor ``ArchEthosU55::UseAvgPoolNop``: 4 x ifmBits / 2 cycles per OFM
micro-block). Where the vector unit chains elementwise operators (the U55) the pair is already one
operation; where each elementwise operator is one of its own (the U65), :class:`SourceActivationRule`
groups them. The vector unit times the pair at ``vector.cycles_per_element.source_activation`` per
output element (:func:`npu_sim.hw.compute_units.vector.source_activation_cycles`); its steps run as
before, so the bits are the same. A QUANTIZE that requantizes (a 16x8 model's before a
CONCATENATION) is a lone RESCALE of 8 or 16 bits each way, one operation already, timed the same
way (:func:`npu_sim.hw.compute_units.vector.is_source_requantize`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from npu_sim.tosa.ops import Op

if TYPE_CHECKING:
    from scheduler.passes.fusion_context import FusionContext


@dataclass(frozen=True)
class SourceActivationRule:
    """A RESCALE and the CLAMP alone reading it, both of one location that nothing before or after
    them shares in their data path (see the module doc)."""

    name: str = "source_activation"

    def match(self, index: int, ctx: FusionContext) -> list[int] | None:
        block = ctx.block
        rescale = block.operators[index]
        if rescale.op is not Op.RESCALE or not rescale.location or len(rescale.outputs) != 1 or not ctx.free(index):
            return None
        clamp_index = ctx.sole_consumer(rescale.outputs[0])
        if clamp_index is None or clamp_index <= index or not ctx.free(clamp_index):
            return None
        clamp = block.operators[clamp_index]
        if clamp.op is not Op.CLAMP or clamp.location != rescale.location or clamp.inputs[0] != rescale.outputs[0]:
            return None
        producer = ctx.producer.get(rescale.inputs[0])
        readers = ctx.consumers.get(clamp.outputs[0], [])
        if (producer is not None and block.operators[producer].location == rescale.location) or \
                any(block.operators[r].location == rescale.location for r in readers):
            return None
        return [index, clamp_index]
