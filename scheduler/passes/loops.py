"""What the passes that rewrite WHILE_LOOPs share: which loops a pass may change on its own,
whether a loop is proven to run at least once, and tidying a block after a rewrite.

A pass may change a loop's condition and body only where no other control-flow operator
names them (blocks are counted by identity: an attribute may name a block or the region
holding it, tosa-tools' layout).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator

import numpy as np

from npu_sim.errors import NpuSimError
from npu_sim.reference.session import execute
from npu_sim.tosa.ir import Block, Graph, Operator, Region
from npu_sim.tosa.ops import Op

CONSTANT_PRODUCERS = (Op.CONST, Op.CONST_SHAPE)


def branch_names(op: Operator) -> tuple[str, ...]:
    """The blocks a WHILE_LOOP (condition, body) or COND_IF (then, else) names."""
    attribute = op.attribute
    if op.op is Op.WHILE_LOOP:
        return attribute.cond_graph, attribute.body_graph
    return attribute.then_graph, attribute.else_graph


def own_loops(graph: Graph) -> Iterator[tuple[Block, Operator, Block, Block]]:
    """(enclosing block, loop, condition, body) of each WHILE_LOOP of ``graph`` whose condition
    and body no other control-flow operator names, in block order. The graph may be
    rewritten between two loops (each is looked up when reached)."""
    references = Counter(id(graph.block(name)) for block in graph.blocks() for op in block.operators
                         if op.op in (Op.WHILE_LOOP, Op.COND_IF) for name in branch_names(op))
    for block in list(graph.blocks()):
        for op in list(block.operators):
            if op.op is not Op.WHILE_LOOP:
                continue
            cond, body = (graph.block(name) for name in branch_names(op))
            if references[id(cond)] == 1 and references[id(body)] == 1 and cond is not body:
                yield block, op, cond, body


def runs_at_least_once(block: Block, loop: Operator, cond: Block) -> bool:
    """True if the condition is true on the loop's initial values (all constants it reads)."""
    if any(op.op in (Op.VARIABLE_READ, Op.VARIABLE, Op.WHILE_LOOP, Op.COND_IF, Op.CUSTOM)
           for op in cond.operators):
        return False
    read = {name for op in cond.operators for name in op.inputs} | set(cond.outputs)
    inputs: dict[str, np.ndarray] = {}
    for k, name in enumerate(cond.inputs):
        tensor = cond.tensor(name)
        if name not in read:
            inputs[name] = np.zeros(tensor.shape, tensor.dtype.numpy_dtype)
            continue
        outer = block.tensors.get(loop.inputs[k])
        if outer is None or outer.data is None or outer.variable:
            return False
        inputs[name] = np.asarray(outer.data)
    probe = Graph(regions=[Region("main", [dataclasses.replace(cond, name="main")])])
    try:
        result = execute(probe, inputs)
    except (NpuSimError, ValueError, TypeError):
        return False
    return bool(np.asarray(result[cond.outputs[0]]).reshape(-1)[0])


def drop_unread_constants(block: Block) -> None:
    """Take out the block's constants that nothing reads any more."""
    read = {name for op in block.operators for name in op.inputs} | set(block.outputs)
    dead = [op for op in block.operators if op.op in CONSTANT_PRODUCERS and not set(op.outputs) & read]
    dead_ids = {id(op) for op in dead}
    block.operators = [op for op in block.operators if id(op) not in dead_ids]
    for op in dead:
        for name in op.outputs:
            block.tensors.pop(name, None)
