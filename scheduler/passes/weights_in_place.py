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

With ``tcm.read_once_weights_in_place`` (the U55) so does any product whose weights the array reads
once (:func:`_weights_read_once`: its output one OFM block in H x W), however many depth slices
its weights would take: Vela 5.2 leaves those unbuffered too (regor ProposeSlicedWeightBuffering
rejects a buffer for weights fetched once whose transfer and read from the SRAM take longer than
the operation unbuffered, as from the flash they always do), as a Keras Conv1D net's second
convolution in its debug database (10 KB of weights for a [64, 64] output: no weight buffer,
flash-bound cycles; 5 KB for [64, 128] and 21 KB for [64, 512] alike) and a ResNet-18's every
convolution from its 8x8x128 stage on (75 KB to 2.3 MB of weights, one OFM block each: none buffered).

With ``tcm.matrix_vector_weights_buffered_when_hidden`` (the U85) an operation keeps its load where
a buffer makes it no slower (:func:`_buffer_pays`): Vela buffers the weights of a product read once
only where their transfer and the read from SRAM fit within the operation's own cycles: an LSTM's
gate weights (1.5 KB for 1,400 cycles, the DRAM latency of its state's read among them), not an
autoencoder's dense layers (16-80 KB, each bound by its weights' DRAM reads) nor an unrolled GRU's
recurrent product (13 KB for 4,700 cycles). And, with ``tcm.weight_buffer_visible_cycles`` (the U85),
only where the NPU operation before it hides most of the transfer (:func:`_transfer_hidden`): a Keras
GRU's WHILE body on the U85, Vela reads its recurrent product's weights in place (2,688 B, its first
product, after a scalar counter update) and buffers its input product's (1,440 B, after the first).
Both weigh the transfer at ``tcm.weight_buffer_transfer_bytes_per_cycle`` where set (Vela's
MemToMemCycles: the U85's Mem2Mem channel, 2.66 B/cycle): an unrolled GRU(96)'s input product at
each step (19,872 B, 7,564 cycles) reads its weights in place, as in Vela's per-layer figures.

With ``tcm.parameters_in_command_stream`` (the Ethos-U presets) every NPU operation reads its
parameters (SHAPE tensors, single values: :func:`npu_sim.program.is_command_parameter`) where they
live, as its command stream's registers (:func:`mark_parameters_in_place`): the constant pool does
not take them (a recurrent network's zero points and shifts, read at every step, held chunks of the
TCM throughout).

Where the LUT loads its table from the constants' memory (``lut.table_source_latency_cycles``), a
TABLE reads its table where it lives too (:func:`mark_tables_in_place`): no TCM copy.

Takes the lowered graph after unit choice (before the weight streams copy shared weights);
marks operations in place.
"""

from __future__ import annotations

import math

from npu_sim.hw.compute_units import CPU, LUT, MAC_ARRAY, VECTOR
from npu_sim.hw.config import HwConfig
from npu_sim.hw.dma import read_cap_bytes_per_cycle
from npu_sim.program import WEIGHT_OPS, is_command_parameter, reads_weight_stream
from npu_sim.tosa.ops import Op
from scheduler import cost_model
from scheduler.ir.npu_ops import LoweredGraph, NpuOp, OpKind, Step, ValueKind, copied_graph_input, copy_producers


def mark_weights_in_place(lowered: LoweredGraph, hw: HwConfig) -> int:
    """Mark each matrix-vector product whose weights are constants, in every block (a loop body's
    gates too: Vela's WHILE body of a Keras GRU reads them from the flash, no SRAM buffer; but,
    where the config buffers them when that pays, those :func:`_buffer_pays` keeps loading); how many."""
    marked = 0
    for block in lowered.main.walk_blocks():
        producers = copy_producers(block)
        previous: NpuOp | None = None   # the last compute operation so far
        for op in block.ops:
            before = previous
            if op.kind is OpKind.COMPUTE:
                previous = op
            if not _matrix_vector_product(op, lowered) and not (hw.tcm.read_once_weights_in_place
                                                                and _weights_read_once(hw, op, lowered)):
                continue
            stream = _stream_bytes(op, lowered)
            if hw.tcm.matrix_vector_weights_buffered_when_hidden and \
                    _buffer_pays(hw, stream, _op_cycles(hw, op, lowered, producers)) and \
                    _transfer_hidden(hw, stream, before, lowered, producers):
                continue
            op.weights_in_place = True
            marked += 1
    return marked


def mark_tables_in_place(lowered: LoweredGraph) -> None:
    """Mark every TABLE operation on the LUT unit, in every block, as loading its table into the LUT
    memory from where it lives (``lut.table_source_latency_cycles``: the load from the source is
    timed in the lookup; Vela 5.2's TABLE copies its 256-byte int8 table from the flash or DRAM into
    the LUT memory, no SRAM copy: an unrolled Keras GRU's sigmoid and tanh tables take none of its
    1,088 bytes of SRAM on the U55)."""
    for block in lowered.main.walk_blocks():
        for op in block.ops:
            if op.kind is OpKind.COMPUTE and op.unit == LUT.name and any(s.op is Op.TABLE for s in op.steps):
                op.table_in_place = True


def _hiding_cycles(hw: HwConfig, before: NpuOp | None, lowered: LoweredGraph, producers: dict[str, NpuOp]) -> float:
    """The cycles the compute operation ``before`` a product gives its weight transfer to hide in:
    its estimated cycles if it runs on the NPU, none on the CPU or at the block's start."""
    if before is None or before.unit == CPU.name:
        return 0.0
    return _op_cycles(hw, before, lowered, producers)


#: Elementwise steps whose operands 0 and 1 are data an operation may read where it lives: the
#: arithmetic, and a CAST (a 16x8 model's int16 bias widened before its ADD).
ELEMENTWISE_DATA_OPS = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.MAXIMUM, Op.MINIMUM, Op.CAST})


def mark_elementwise_constants_in_place(lowered: LoweredGraph) -> int:
    """Mark the constant operands of every elementwise operation on the vector unit, in every
    block, as read where they live (``NpuOp.constant_operands_in_place``; ``tcm.elementwise_constants_in_place``):
    no TCM copy, no pool entry; the operation reads their bytes over the DDR channel while it
    computes: the tensor (not single-value) data operands of its arithmetic and CAST steps
    (:data:`ELEMENTWISE_DATA_OPS`). Its command
    parameters are registers already (:func:`mark_parameters_in_place`); a RESCALE's multipliers
    and shifts are scale parameters (the vector unit's cost model times their per-channel reads)
    and a lookup's table is the LUT's. How many operations."""
    marked = 0
    for block in lowered.main.walk_blocks():
        for op in block.ops:
            if op.kind is not OpKind.COMPUTE or op.unit != VECTOR.name or op.composite is not None:
                continue
            operands = tuple((s, j) for s, step in enumerate(op.steps) for j, key in enumerate(step.operands)
                             if _elementwise_constant(op, step, j, key, lowered))
            if operands:
                op.constant_operands_in_place = operands
                marked += 1
    return marked


def _elementwise_constant(op: NpuOp, step: Step, j: int, key: str | int, lowered: LoweredGraph) -> bool:
    """Whether operand ``j`` (``key``) of ``step`` is a constant tensor an arithmetic step reads as
    data (not a single value, not a command parameter)."""
    if j >= 2 or step.op not in ELEMENTWISE_DATA_OPS or not isinstance(key, str):
        return False
    value = lowered.values[key]
    return value.kind is ValueKind.CONSTANT and math.prod(value.type.shape) > 1 and \
        not (op.parameters_in_place and is_command_parameter(step.op, j, step.input_types[j]))


def mark_parameters_in_place(lowered: LoweredGraph) -> None:
    """Mark every compute operation on an NPU unit, in every block, as reading its parameters in place."""
    for block in lowered.main.walk_blocks():
        for op in block.ops:
            if op.kind is OpKind.COMPUTE and op.unit != CPU.name:
                op.parameters_in_place = True


def _buffer_pays(hw: HwConfig, stream_bytes: int, op_cycles: float) -> bool:
    """Whether a weight buffer makes a matrix-vector product no slower than reading its weights in
    place (Vela 5.2, regor scheduler.cpp ProposeSlicedWeightBuffering, for weights read once: no
    buffer where the whole transfer and the read from SRAM take longer than the operation
    unbuffered): the transfer (its bytes at one read stream's rate, ``dma.max_outstanding_bursts``
    in flight, and the DDR's latency) and the read from the TCM fit within the operation's cycles."""
    from_tcm = stream_bytes / hw.tcm.bandwidth_bytes_per_cycle + hw.tcm.read_latency_cycles
    return _weight_transfer_cycles(hw, stream_bytes) + from_tcm <= op_cycles


def _weight_transfer_cycles(hw: HwConfig, stream_bytes: int) -> float:
    """Cycles a weight stream's transfer into the TCM is estimated to take: its bytes at
    ``tcm.weight_buffer_transfer_bytes_per_cycle`` (Vela 5.2's Mem2Mem channel rate), else at one
    read stream's rate (``dma.max_outstanding_bursts`` in flight), and the DDR's latency."""
    latency = hw.ddr.read_latency_cycles
    rate = hw.tcm.weight_buffer_transfer_bytes_per_cycle or read_cap_bytes_per_cycle(hw, latency)
    return stream_bytes / rate + latency


def _transfer_hidden(hw: HwConfig, stream_bytes: int, before: NpuOp | None, lowered: LoweredGraph,
                     producers: dict[str, NpuOp]) -> bool:
    """Whether a weight buffer's transfer, less the cycles of the compute operation ``before`` the
    product (:func:`_hiding_cycles`), leaves less than ``tcm.weight_buffer_visible_cycles`` (or a
    twentieth of it) in sight (Vela 5.2, regor ProposeSlicedWeightBuffering's fullBufferingHidden: a
    product with no NPU operation before it buffers its weights only where their transfer is that short)."""
    most = hw.tcm.weight_buffer_visible_cycles
    if most <= 0:
        return True
    transfer = _weight_transfer_cycles(hw, stream_bytes)
    visible = max(transfer - _hiding_cycles(hw, before, lowered, producers), 0.0)
    return visible < most or visible < transfer / 20


def _op_cycles(hw: HwConfig, op: NpuOp, lowered: LoweredGraph, producers: dict[str, NpuOp]) -> float:
    """``op``'s estimated cycles as the simulator charges them: its body and the latencies of its
    first input block and last output block (the DDR's read latency where it reads a graph input,
    or a copy of one, or a recurrent state the NPU keeps there: ``hw.cost``'s block latencies)."""
    from_ddr = any(k in lowered.recurrent_state or copied_graph_input(k, producers, lowered.values)[0] is not None
                   for k in op.inputs)
    read = hw.ddr.read_latency_cycles if from_ddr else hw.tcm.read_latency_cycles
    return cost_model.whole_op_cycles(hw, op) + read + hw.tcm.write_latency_cycles


def _stream_bytes(op: NpuOp, lowered: LoweredGraph) -> int:
    """Bytes of ``op``'s constant weight stream (weights, bias, scaling parameters)."""
    return sum([lowered.values[operand].size_bytes for step in op.steps
                for j, operand in enumerate(step.operands)
                if isinstance(operand, str) and reads_weight_stream(step.op, j)
                and lowered.values[operand].kind is ValueKind.CONSTANT])


def _weights_read_once(hw: HwConfig, op: NpuOp, lowered: LoweredGraph) -> bool:
    """One operation on the MAC array (not a fused composite) whose matrix products read constant
    weights, each product's whole output one OFM block in H x W (``mac_array.ofm_block_elements``
    results of at most ``ofm_block_max_depth`` channels: the array reads each weight once)."""
    capacity, depth_cap = hw.mac_array.ofm_block_elements, hw.mac_array.ofm_block_max_depth
    if capacity <= 0 or depth_cap <= 0 or not _constant_products(op, lowered):
        return False
    shallowest = hw.mac_array.ofm_block_min_depth
    for step in op.steps:
        if step.op not in WEIGHT_OPS:
            continue
        shape = step.output_types[0].shape
        channels = shape[-1] if shape else 1
        depth = min(channels, depth_cap, shallowest or channels)
        if math.prod(shape[:-1]) > capacity // max(depth, 1):
            return False
    return True


def _constant_products(op: NpuOp, lowered: LoweredGraph) -> bool:
    """One operation on the MAC array (not a fused composite) whose matrix products all read a
    constant weight tensor."""
    if op.kind is not OpKind.COMPUTE or op.composite is not None or op.unit != MAC_ARRAY.name:
        return False
    products = [step for step in op.steps if step.op in WEIGHT_OPS]
    if not products:
        return False
    for step in products:
        weights = step.operands[1] if len(step.operands) > 1 else None
        if not isinstance(weights, str) or lowered.values[weights].kind is not ValueKind.CONSTANT:
            return False
    return True


def _matrix_vector_product(op: NpuOp, lowered: LoweredGraph) -> bool:
    """One operation on the MAC array (not a fused composite) whose matrix products each have
    one output position and read a constant weight tensor."""
    return _constant_products(op, lowered) and all(
        step.output_types[0].element_count == step.output_types[0].shape[-1]
        for step in op.steps if step.op in WEIGHT_OPS)
