"""Data movement done in float between a dequantization and a quantization that undo each
other runs on the integers instead.

TFLite's quantizer sometimes leaves a SPLIT in float inside an int8 graph (a Keras GRU with
``reset_after=False``: its recurrent product's split has an empty third part), so the
converter writes: dequantize (``CAST`` to fp32, ``SUB`` of the zero point, ``MUL`` by the
scale), the float ``SLICE``s, and a quantization of each part (``MUL`` by the inverse scale,
``CAST`` to int32, ``ADD`` of the zero point, a clamp, ``CAST`` to int8). When quantizing the
dequantized value gives every int8 value back (checked by running the two chains' own
kernels on all 256 of them), each part is the ``SLICE`` of the int8 tensor itself: this pass
writes it so, which leaves the int8 cell whole for the composite matchers and saves the
float passes. Same bits by construction; anything else is left as it is.

The graph given is not changed; the result is a copy (or the same graph when nothing changes).
"""

from __future__ import annotations

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator
from npu_sim.tosa.ops import Op
from scheduler.passes.quantize_chains import (
    DEQUANTIZE,
    QUANTIZE,
    SATURATING_QUANTIZE,
    chain_back,
    chain_forward,
    readers_of,
    undo_each_other,
)


def integer_data_movement(graph: Graph) -> Graph:
    """``graph`` with float round trips around SLICEs taken out (see the module doc)."""
    if not any(op.op is Op.SLICE and block.tensor(op.outputs[0]).dtype is DType.FP32
               for block in graph.blocks() for op in block.operators if op.outputs):
        return graph
    result = graph.copy()
    changed = False
    for block in result.blocks():
        changed |= _rewrite_block(block)
    return result if changed else graph


def _rewrite_block(block: Block) -> bool:
    changed = False
    readers = readers_of(block)
    producer = {out: op for op in block.operators for out in op.outputs}
    for slice_op in [op for op in block.operators if op.op is Op.SLICE]:
        dequantize = chain_back(block, producer, readers, slice_op.inputs[0], DEQUANTIZE)
        quantize = chain_forward(block, readers, slice_op.outputs[0], SATURATING_QUANTIZE) or \
            chain_forward(block, readers, slice_op.outputs[0], QUANTIZE)
        if dequantize is None or quantize is None:
            continue
        source, result = dequantize[0].inputs[0], quantize[-1].outputs[0]
        if block.tensor(source).dtype is not DType.INT8 or block.tensor(result).dtype is not DType.INT8 \
                or not undo_each_other(block, dequantize, quantize):
            continue
        at = block.operators.index(quantize[-1])
        block.operators[at] = Operator(Op.SLICE, [source, *slice_op.inputs[1:]], [result],
                                       slice_op.attribute, slice_op.location)
        for op in (slice_op, *quantize[:-1]):
            block.operators.remove(op)
        _drop_unread(block, dequantize)
        changed = True
        readers = readers_of(block)
    return changed


def _drop_unread(block: Block, chain: list[Operator]) -> None:
    """Take out the operators of ``chain`` (a dequantization) whose results nobody reads now."""
    for op in reversed(chain):
        read = {name for other in block.operators for name in other.inputs} | set(block.outputs)
        if op in block.operators and not set(op.outputs) & read:
            block.operators.remove(op)
