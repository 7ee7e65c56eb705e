"""Weights in place: a matrix-vector product reads its weights where they live.

On an NPU that reads constants from a slow memory through its weight decoder (the Ethos-U55
with its weights in flash: ``tcm.matrix_vector_weights_in_place``), Vela 5.2 buffers no
weights of an operation with one output position, a matrix-vector product (an LSTM or GRU
gate at one time step, a dense layer on one vector): each weight is read once, so an SRAM copy
would hide nothing. Its debug database for an unrolled LSTM on the U55 lists no weight buffer,
and each gate convolution's cycles equal its flash access cycles. Here such an operation's
weights stay in their home: the tiler gives them no buffer (:meth:`NpuOp.reads_in_place`), the
streamed pool does not take them (:func:`scheduler.memory.fixed_placements.tables_read_in_place`),
and its command moves their bytes over the DDR channel while it computes
(``ComputeCommand.weights_in_place``, :mod:`npu_sim.hw.compute`).

Takes the lowered graph after unit choice (before the weight streams copy shared weights);
marks operations in place.
"""

from __future__ import annotations

from npu_sim.hw.compute_units import MAC_ARRAY
from npu_sim.program import WEIGHT_OPS
from scheduler.ir.npu_ops import LoweredGraph, NpuOp, OpKind, ValueKind


def mark_weights_in_place(lowered: LoweredGraph) -> int:
    """Mark each main-block matrix-vector product whose weights are constants; how many."""
    marked = 0
    for op in lowered.main.ops:
        if _matrix_vector_product(op, lowered):
            op.weights_in_place = True
            marked += 1
    return marked


def _matrix_vector_product(op: NpuOp, lowered: LoweredGraph) -> bool:
    """One operation on the MAC array (not a fused composite) whose matrix products each have
    one output position and read a constant weight tensor."""
    if op.kind is not OpKind.COMPUTE or op.composite is not None or op.unit != MAC_ARRAY.name:
        return False
    products = [step for step in op.steps if step.op in WEIGHT_OPS]
    if not products:
        return False
    for step in products:
        weights = step.operands[1] if len(step.operands) > 1 else None
        if not isinstance(weights, str) or lowered.values[weights].kind is not ValueKind.CONSTANT:
            return False
        out = step.output_types[0]
        if out.element_count != out.shape[-1]:
            return False
    return True
