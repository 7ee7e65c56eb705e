"""Loop-invariant code motion: what a WHILE_LOOP body computes from loop-invariant values
alone is computed once, before the loop.

Converters leave such work in loop bodies: TFLite's WHILE form of a Keras RNN dequantizes
and requantizes the whole captured input sequence on every iteration before it gathers
the step's row. The NPU would redo it T times; a compiler does it once. The pass:

* finds the body's invariant inputs (a body input the body hands back unchanged at the
  same position) and, in body order, the operators whose operands are all invariant,
  constants or results of operators already chosen (pure operators only: no variable
  access, no control flow, no CUSTOM);
* moves them before the WHILE_LOOP in the enclosing block (their constants copied there),
  and passes each of their results that the rest of the body reads into the loop as a new
  invariant value (a new input and output of the WHILE_LOOP, its body and its condition).

Only loops proven to run at least once are changed (their condition, evaluated on the
constant initial values it reads, is true), so an operator that could break a REQUIRE
never runs where the original graph would not have run it. The bits are the same: the
same kernels run on the same values, only once. Names made here contain ``.hoisted.``.

Then every loop drops the values it only carries: a body input handed back unchanged at its
position that neither the body nor the condition reads, and whose result nothing after the
loop reads (what hoisting leaves of the captured sequence: a Keras GRU's whole dequantized
input, copied into the loop's state at entry for nobody). The loop computes the same values.

The graph given is not changed; the result is a copy (or the same graph when nothing moves).
A scheduler pass: ``npu-sim exec`` and ``npu-sim convert`` keep the graph as it was.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass

import numpy as np

from npu_sim.errors import NpuSimError
from npu_sim.reference.session import execute
from npu_sim.tosa.ir import Block, Graph, Operator, Region
from npu_sim.tosa.ops import Op

#: operators never moved: state, control flow, opaque ones, and constants (which stay where
#: they are and are copied to the enclosing block when a moved operator reads them)
_PINNED = frozenset({Op.VARIABLE, Op.VARIABLE_READ, Op.VARIABLE_WRITE, Op.COND_IF, Op.WHILE_LOOP,
                     Op.CUSTOM, Op.CONST, Op.CONST_SHAPE})
_CONSTANT_PRODUCERS = (Op.CONST, Op.CONST_SHAPE)
_MARK = ".hoisted."


@dataclass
class _Hoist:
    """What moves out of one loop: the operators (in body order), the constants they read,
    and the values the rest of the body reads from them (the new invariant inputs)."""

    operators: list[Operator]
    constants: list[Operator]
    frontier: list[str]


def hoist_loop_invariants(graph: Graph) -> Graph:
    """``graph`` with loop-invariant work moved out of its WHILE_LOOP bodies (see the module doc)."""
    if not any(op.op is Op.WHILE_LOOP for block in graph.blocks() for op in block.operators):
        return graph
    result = graph.copy()
    references = Counter(id(result.block(name)) for block in result.blocks() for op in block.operators
                         if op.op in (Op.WHILE_LOOP, Op.COND_IF) for name in _branch_names(op))
    changed = False
    for block in list(result.blocks()):
        for op in list(block.operators):
            if op.op is Op.WHILE_LOOP and _hoist_from(result, block, op, references):
                changed = True
            if op.op is Op.WHILE_LOOP and _drop_carried_only(result, block, op, references):
                changed = True
    return result if changed else graph


def _branch_names(op: Operator) -> tuple[str, ...]:
    attribute = op.attribute
    if op.op is Op.WHILE_LOOP:
        return attribute.cond_graph, attribute.body_graph
    return attribute.then_graph, attribute.else_graph


def _hoist_from(graph: Graph, block: Block, loop: Operator, references: Counter[int]) -> bool:
    """Move ``loop``'s invariant work into ``block``; False when nothing may move. (Blocks are
    counted by identity: an attribute may name a block or the region holding it.)"""
    cond, body = (graph.block(name) for name in _branch_names(loop))
    if references[id(cond)] != 1 or references[id(body)] != 1 or cond is body:
        return False   # a block shared by several loops: moving work out would change the others
    hoist = _invariant_work(body)
    if hoist is None or not _runs_at_least_once(block, loop, cond):
        return False
    _move(block, loop, cond, body, hoist)
    return True


def _drop_carried_only(graph: Graph, block: Block, loop: Operator, references: Counter[int]) -> bool:
    """Take out of ``loop`` the values it only carries (see the module doc); False if none."""
    cond, body = (graph.block(name) for name in _branch_names(loop))
    if references[id(cond)] != 1 or references[id(body)] != 1 or cond is body:
        return False
    dropped = _carried_only(block, loop, cond, body)
    for k in reversed(dropped):
        body.tensors.pop(body.inputs[k], None)
        cond.tensors.pop(cond.inputs[k], None)
        block.tensors.pop(loop.outputs[k], None)
        for names in (loop.inputs, loop.outputs, cond.inputs, body.inputs, body.outputs):
            del names[k]
    return bool(dropped)


def _carried_only(block: Block, loop: Operator, cond: Block, body: Block) -> list[int]:
    """Positions of ``loop``'s values that the body hands back unchanged and nothing reads: not the
    body, not the condition, nothing after the loop."""
    read_in_body = {name for op in body.operators for name in op.inputs}
    read_in_cond = {name for op in cond.operators for name in op.inputs} | set(cond.outputs)
    read_after = {name for op in block.operators for name in op.inputs} | set(block.outputs)
    return [k for k, name in enumerate(body.inputs)
            if k < len(body.outputs) and body.outputs[k] == name and body.outputs.count(name) == 1
            and name not in read_in_body and cond.inputs[k] not in read_in_cond
            and loop.outputs[k] not in read_after]


def _invariant_work(body: Block) -> _Hoist | None:
    """The body's operators computed from invariant values and constants only, or None."""
    constants: dict[str, Operator] = {out: op for op in body.operators if op.op in _CONSTANT_PRODUCERS
                                      for out in op.outputs}
    moved = _movable(body, constants)
    frontier = _frontier(body, moved)
    if not frontier:
        return None
    used_constants = dict.fromkeys(name for op in moved for name in op.inputs if name in constants)
    const_ops = list({id(constants[n]): constants[n] for n in used_constants}.values())
    return _Hoist(moved, const_ops, frontier)


def _movable(body: Block, constants: dict[str, Operator]) -> list[Operator]:
    """In body order, the pure operators reading invariant values (and constants) only."""
    available = {name for k, name in enumerate(body.inputs) if k < len(body.outputs) and body.outputs[k] == name}
    moved: list[Operator] = []
    for op in body.operators:
        if op.op in _PINNED or not op.outputs:
            continue
        reads_invariant = any(name in available for name in op.inputs)
        if reads_invariant and all(name in available or name in constants for name in op.inputs):
            moved.append(op)
            available.update(op.outputs)
    return moved


def _frontier(body: Block, moved: list[Operator]) -> list[str]:
    """The results of ``moved`` that the rest of the body reads or hands back."""
    moved_ids = {id(op) for op in moved}
    read_by_rest = {name for op in body.operators if id(op) not in moved_ids for name in op.inputs}
    return [name for name in dict.fromkeys(out for op in moved for out in op.outputs)
            if name in read_by_rest or name in body.outputs]


def _runs_at_least_once(block: Block, loop: Operator, cond: Block) -> bool:
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


def _move(block: Block, loop: Operator, cond: Block, body: Block, hoist: _Hoist) -> None:
    """Rewrite ``block``, ``loop``, ``cond`` and ``body`` as the module doc says."""
    outer = _copy_before(block, loop, body, hoist)
    results = [f"{loop.outputs[0]}{_MARK}{k}" for k in range(len(hoist.frontier))]
    cond_names = [f"{cond.name}{_MARK}{name}" for name in hoist.frontier]
    for name, result, cond_name in zip(hoist.frontier, results, cond_names, strict=True):
        block.tensors[result] = dataclasses.replace(body.tensors[name], name=result)
        cond.tensors[cond_name] = dataclasses.replace(body.tensors[name], name=cond_name)
    loop.inputs = [*loop.inputs, *(outer[n] for n in hoist.frontier)]
    loop.outputs = [*loop.outputs, *results]
    cond.inputs = [*cond.inputs, *cond_names]
    body.inputs = [*body.inputs, *hoist.frontier]
    body.outputs = [*body.outputs, *hoist.frontier]
    _strip_body(body, hoist)


def _copy_before(block: Block, loop: Operator, body: Block, hoist: _Hoist) -> dict[str, str]:
    """Copy the moved operators and their constants into ``block`` before ``loop``: the
    name in ``block`` of every body tensor they read or write."""
    outer = {name: loop.inputs[k] for k, name in enumerate(body.inputs)}
    prefix = f"{body.name}{_MARK}"
    for op in (*hoist.constants, *hoist.operators):
        for name in op.outputs:
            outer[name] = prefix + name
            block.tensors[prefix + name] = dataclasses.replace(body.tensors[name], name=prefix + name)
    copies = [Operator(op.op, [outer[n] for n in op.inputs], [outer[n] for n in op.outputs],
                       op.attribute, op.location) for op in (*hoist.constants, *hoist.operators)]
    at = next(i for i, op in enumerate(block.operators) if op is loop)
    block.operators[at:at] = copies
    return outer


def _strip_body(body: Block, hoist: _Hoist) -> None:
    """Take the moved operators out of the body, with what only they used."""
    moved = {id(op) for op in hoist.operators}
    body.operators = [op for op in body.operators if id(op) not in moved]
    for op in hoist.operators:
        for name in op.outputs:
            if name not in hoist.frontier:
                body.tensors.pop(name, None)
    _drop_unread_constants(body)


def _drop_unread_constants(body: Block) -> None:
    """Take out the body's constants that nothing reads any more (only moved operators did)."""
    read = {name for op in body.operators for name in op.inputs} | set(body.outputs)
    dead = [op for op in body.operators if op.op in _CONSTANT_PRODUCERS and not set(op.outputs) & read]
    dead_ids = {id(op) for op in dead}
    body.operators = [op for op in body.operators if id(op) not in dead_ids]
    for op in dead:
        for name in op.outputs:
            body.tensors.pop(name, None)
