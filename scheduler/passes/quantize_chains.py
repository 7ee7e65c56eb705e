"""Dequantization and quantization chains as a converter writes them between int8 and float,
and whether a quantization gives back what a dequantization was given.

A dequantization is ``CAST`` to fp32, ``SUB`` of the zero point, ``MUL`` by the scale; a
quantization ``MUL`` by the inverse scale, ``CAST`` to int32, ``ADD`` of the zero point, a
clamp or not (``MAXIMUM``, ``MINIMUM``: npu_sim.tosa.tflite.saturation writes LiteRT's), and
``CAST`` to int8. Each step's other operands are constants. Whether the two undo each other is
decided by running their own kernels on all 256 int8 values.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from npu_sim.errors import NpuSimError
from npu_sim.reference.session import execute
from npu_sim.tosa.ir import Block, Graph, Operator, Region
from npu_sim.tosa.ops import Op

#: what a dequantization and a quantization are made of, in order (a quantization clamped
#: before it narrows, as npu_sim.tosa.tflite.saturation writes LiteRT's, or not)
DEQUANTIZE = (Op.CAST, Op.SUB, Op.MUL)
QUANTIZE = (Op.MUL, Op.CAST, Op.ADD, Op.CAST)
SATURATING_QUANTIZE = (Op.MUL, Op.CAST, Op.ADD, Op.MAXIMUM, Op.MINIMUM, Op.CAST)


def readers_of(block: Block) -> dict[str, list[Operator]]:
    """Each tensor's readers in ``block``, in operator order."""
    readers: dict[str, list[Operator]] = {}
    for op in block.operators:
        for name in op.inputs:
            readers.setdefault(name, []).append(op)
    return readers


def chain_back(block: Block, producer: dict[str, Operator], readers: dict[str, list[Operator]], tensor: str,
               kinds: tuple[Op, ...]) -> list[Operator] | None:
    """The operators of kinds ``kinds`` (in order) ending in ``tensor``, each read by the next
    one only (the last may have other readers), each with constant other operands."""
    chain: list[Operator] = []
    for kind in reversed(kinds):
        op = producer.get(tensor)
        if op is None or op.op is not kind or not constant_others(block, op):
            return None
        if chain and (len(readers.get(tensor, [])) != 1 or tensor in block.outputs):
            return None
        chain.insert(0, op)
        tensor = op.inputs[0]
    return chain


def chain_forward(block: Block, readers: dict[str, list[Operator]], tensor: str,
                  kinds: tuple[Op, ...]) -> list[Operator] | None:
    """The operators of kinds ``kinds`` (in order) from the sole reader of ``tensor`` on, each
    the sole reader of the one before, each with constant other operands."""
    chain: list[Operator] = []
    for kind in kinds:
        users = readers.get(tensor, [])
        if len(users) != 1 or tensor in block.outputs or users[0].op is not kind or users[0].inputs[0] != tensor \
                or not constant_others(block, users[0]):
            return None
        chain.append(users[0])
        tensor = users[0].outputs[0]
    return chain


def constant_others(block: Block, op: Operator) -> bool:
    return len(op.outputs) == 1 and all(block.tensor(n).data is not None and not block.tensor(n).variable
                                        for n in op.inputs[1:])


def undo_each_other(block: Block, dequantize: list[Operator], quantize: list[Operator]) -> bool:
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
