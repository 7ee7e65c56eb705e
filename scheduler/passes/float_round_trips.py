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

import dataclasses

import numpy as np

from npu_sim.errors import NpuSimError
from npu_sim.reference.session import execute
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, Region
from npu_sim.tosa.ops import Op

#: what a dequantization and a quantization are made of, in order (a quantization clamped
#: before it narrows, as npu_sim.tosa.tflite.saturation writes LiteRT's, or not)
DEQUANTIZE = (Op.CAST, Op.SUB, Op.MUL)
QUANTIZE = (Op.MUL, Op.CAST, Op.ADD, Op.CAST)
SATURATING_QUANTIZE = (Op.MUL, Op.CAST, Op.ADD, Op.MAXIMUM, Op.MINIMUM, Op.CAST)


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


def _readers(block: Block) -> dict[str, list[Operator]]:
    readers: dict[str, list[Operator]] = {}
    for op in block.operators:
        for name in op.inputs:
            readers.setdefault(name, []).append(op)
    return readers


def _rewrite_block(block: Block) -> bool:
    changed = False
    readers = _readers(block)
    producer = {out: op for op in block.operators for out in op.outputs}
    for slice_op in [op for op in block.operators if op.op is Op.SLICE]:
        dequantize = _chain_back(block, producer, readers, slice_op.inputs[0], DEQUANTIZE)
        quantize = _chain_forward(block, readers, slice_op.outputs[0], SATURATING_QUANTIZE) or \
            _chain_forward(block, readers, slice_op.outputs[0], QUANTIZE)
        if dequantize is None or quantize is None:
            continue
        source, result = dequantize[0].inputs[0], quantize[-1].outputs[0]
        if block.tensor(source).dtype is not DType.INT8 or block.tensor(result).dtype is not DType.INT8 \
                or not _undo_each_other(block, dequantize, quantize):
            continue
        at = block.operators.index(quantize[-1])
        block.operators[at] = Operator(Op.SLICE, [source, *slice_op.inputs[1:]], [result],
                                       slice_op.attribute, slice_op.location)
        for op in (slice_op, *quantize[:-1]):
            block.operators.remove(op)
        _drop_unread(block, dequantize)
        changed = True
        readers = _readers(block)
    return changed


def _chain_back(block: Block, producer: dict[str, Operator], readers: dict[str, list[Operator]], tensor: str,
                kinds: tuple[Op, ...]) -> list[Operator] | None:
    """The operators of kinds ``kinds`` (in order) ending in ``tensor``, each read by the next
    one only (the last may have other readers), each with constant other operands."""
    chain: list[Operator] = []
    for kind in reversed(kinds):
        op = producer.get(tensor)
        if op is None or op.op is not kind or not _constant_others(block, op):
            return None
        if chain and (len(readers.get(tensor, [])) != 1 or tensor in block.outputs):
            return None
        chain.insert(0, op)
        tensor = op.inputs[0]
    return chain


def _chain_forward(block: Block, readers: dict[str, list[Operator]], tensor: str,
                   kinds: tuple[Op, ...]) -> list[Operator] | None:
    """The operators of kinds ``kinds`` (in order) from the sole reader of ``tensor`` on, each
    the sole reader of the one before, each with constant other operands."""
    chain: list[Operator] = []
    for kind in kinds:
        users = readers.get(tensor, [])
        if len(users) != 1 or tensor in block.outputs or users[0].op is not kind or users[0].inputs[0] != tensor \
                or not _constant_others(block, users[0]):
            return None
        chain.append(users[0])
        tensor = users[0].outputs[0]
    return chain


def _constant_others(block: Block, op: Operator) -> bool:
    return len(op.outputs) == 1 and all(block.tensor(n).data is not None and not block.tensor(n).variable
                                        for n in op.inputs[1:])


def _undo_each_other(block: Block, dequantize: list[Operator], quantize: list[Operator]) -> bool:
    """Whether the quantization gives back every int8 value the dequantization is given: the
    two chains, one after the other, run by the reference kernels on all 256 of them."""
    first = dequantize[0].inputs[0]
    shape = (1,) * (len(block.tensor(first).shape) - 1) + (256,)
    probe = Block("main", inputs=[first], outputs=[quantize[-1].outputs[0]])
    previous = first
    for op in (*dequantize, *quantize):
        probe.operators.append(Operator(op.op, [previous, *op.inputs[1:]], op.outputs, op.attribute))
        for name in op.inputs[1:]:
            probe.tensors[name] = block.tensor(name)
        previous = op.outputs[0]
        probe.tensors[previous] = dataclasses.replace(block.tensor(previous), shape=shape)
    probe.tensors[first] = dataclasses.replace(block.tensor(first), shape=shape)
    values = np.arange(-128, 128, dtype=np.int8)
    try:
        (back,) = execute(Graph(regions=[Region("main", [probe])]), {first: values.reshape(shape)}).values()
    except (NpuSimError, ValueError):
        return False
    return bool(np.array_equal(np.asarray(back).reshape(-1), values))


def _drop_unread(block: Block, chain: list[Operator]) -> None:
    """Take out the operators of ``chain`` (a dequantization) whose results nobody reads now."""
    for op in reversed(chain):
        read = {name for other in block.operators for name in other.inputs} | set(block.outputs)
        if op in block.operators and not set(op.outputs) & read:
            block.operators.remove(op)
