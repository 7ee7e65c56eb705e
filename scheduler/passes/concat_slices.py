"""Concat slices: a SLICE that takes its bytes from one input of a CONCAT reads that input.

TFLite's fused LSTM hands out the whole output sequence, and a Keras LSTM that returns only
its last output takes it with a strided slice: the converted graph CONCATs the 49 time
steps' outputs and SLICEs the last one out (the keyword LSTM: 3,136 bytes of sequence, and
every step's output kept live until the CONCAT, for 64 bytes read). Here a SLICE whose
window along the CONCAT's axis lies within one of its inputs (every other axis the same in
all inputs) reads that input instead: an IDENTITY of it where the window is the whole input,
else a SLICE of it with the start moved. Pure operators left without a reader (the CONCAT,
the RESHAPEs feeding only it) are then dropped, so are their constants. Same bits: the
window's elements are the same elements.

Takes and gives a :class:`Graph` (the one given when nothing applies); the other tensors and
operators are shared.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, Region, Tensor
from npu_sim.tosa.ops import Op

#: Operators that only compute their outputs (dropped when nothing reads them).
_PURE = frozenset({Op.CONCAT, Op.RESHAPE, Op.IDENTITY, Op.SLICE, Op.CONST, Op.CONST_SHAPE, Op.TRANSPOSE})


def slice_concats(graph: Graph) -> Graph:
    """``graph`` with its SLICEs of one CONCAT input reading that input (see the module doc)."""
    changed = False
    regions = []
    blocks_reading: Counter[str] = Counter()   # name -> how many blocks read it
    for region in graph.regions:
        for block in region.blocks:
            blocks_reading.update(_reads(block))
    for region in graph.regions:
        blocks = []
        for block in region.blocks:
            new = _block(block, blocks_reading)
            changed |= new is not block
            blocks.append(new)
        regions.append(Region(region.name, blocks))
    return dataclasses.replace(graph, regions=regions) if changed else graph


def _reads(block: Block) -> set[str]:
    return {name for op in block.operators for name in op.inputs}


def _block(block: Block, blocks_reading: Counter[str]) -> Block:
    """``block`` rewritten; a name another block reads (a value a nested block captures) stays."""
    producers = {name: op for op in block.operators for name in op.outputs}
    tensors = dict(block.tensors)
    operators = []
    rewritten = False
    for op in block.operators:
        new = _rewrite(op, producers, tensors) if op.op is Op.SLICE else None
        rewritten |= new is not None
        operators.extend(new if new is not None else [op])
    if not rewritten:
        return block
    own = _reads(block)
    read_elsewhere = {name for name, count in blocks_reading.items() if count > (name in own)}
    operators = _live(operators, set(block.outputs) | read_elsewhere)
    used = {name for op in operators for name in (*op.inputs, *op.outputs)} | set(block.inputs) | set(block.outputs)
    tensors = {name: t for name, t in tensors.items() if name in used}
    return dataclasses.replace(block, operators=operators, tensors=tensors)


def _rewrite(op: Operator, producers: dict[str, Operator], tensors: dict[str, Tensor]) -> list[Operator] | None:
    """The operators that replace SLICE ``op`` (None: it stays)."""
    concat = producers.get(op.inputs[0])
    start, size = (_shape_values(producers, tensors, name) for name in op.inputs[1:3])
    if concat is None or concat.op is not Op.CONCAT or start is None or size is None:
        return None
    axis = concat.attribute.axis
    offset = 0
    for name in concat.inputs:
        extent = tensors[name].shape[axis]
        if offset <= start[axis] and start[axis] + size[axis] <= offset + extent:
            break
        offset += extent
    else:
        return None
    moved = list(start)
    moved[axis] -= offset
    source = tensors[name]
    if all(m == 0 for m in moved) and tuple(size) == tuple(source.shape):
        return [Operator(Op.IDENTITY, [name], list(op.outputs), location=op.location)]
    start_name = _unique(tensors, f"{op.outputs[0]}_start")
    data = np.asarray(moved, dtype=np.int64)
    tensors[start_name] = Tensor(start_name, (len(moved),), DType.SHAPE, data)
    return [Operator(Op.CONST_SHAPE, [], [start_name], location=op.location),
            Operator(Op.SLICE, [name, start_name, op.inputs[2]], list(op.outputs), op.attribute, op.location)]


def _shape_values(producers: dict[str, Operator], tensors: dict[str, Tensor], name: str) -> list[int] | None:
    """The values of a CONST_SHAPE tensor (None for another producer)."""
    producer = producers.get(name)
    data = tensors[name].data
    if producer is None or producer.op is not Op.CONST_SHAPE or data is None:
        return None
    return [int(v) for v in np.asarray(data).reshape(-1)]


def _unique(tensors: dict[str, Tensor], name: str) -> str:
    candidate, k = name, 1
    while candidate in tensors:
        candidate, k = f"{name}_{k}", k + 1
    return candidate


def _live(operators: list[Operator], outputs: set[str]) -> list[Operator]:
    """``operators`` without the pure ones nothing reads (repeatedly: what fed only them too)."""
    kept = list(operators)
    while True:
        read = outputs | {name for op in kept for name in op.inputs}
        survivors = [op for op in kept if op.op not in _PURE or any(name in read for name in op.outputs)]
        if len(survivors) == len(kept):
            return kept
        kept = survivors
