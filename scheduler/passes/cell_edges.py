"""A fused cell takes in the quantisation steps at its edges when its state crosses a loop.

TFLite's WHILE form of a quantized Keras RNN carries the state between iterations in
float: the body quantizes h (and c) to int8 for the cell (MUL, CAST, ADD, CAST) and
dequantizes the new state and the step's output back (CAST, SUB, MUL). Op by op each of
these is an operation of its own on 16 or so elements, paying a command's setup every
iteration; a fused cell's datapath runs them in its input and output stages. So, after a
cell is matched:

* **prologue**: a chain of such steps from a block input (a loop-carried value) to a cell
  input, every step reading that one value and constants, every intermediate read only by
  the chain or the cell, joins the cell;
* **epilogue**: a chain of such steps from a cell result to block outputs only (each step
  reading one cell or chain value and constants) joins it too, its ends handed out.

Chains that lead anywhere else (the next cell of an unrolled sequence reads h' itself)
stay outside, so the cells of an unrolled sequence are matched as before. The cell runs
the same kernels in graph order, so the bits are the same.
"""

from __future__ import annotations

from npu_sim.tosa.ops import Op
from scheduler.passes.cell_graph import CellGraph

#: Elementwise steps that re-encode one value with constant operands.
EDGE_OPS = frozenset({Op.CAST, Op.MUL, Op.ADD, Op.SUB, Op.RESCALE, Op.RESHAPE, Op.MAXIMUM, Op.MINIMUM})


def with_edges(g: CellGraph, members: list[int], outputs: tuple[str, ...],
               keep_inputs: tuple[str, ...] = ()) -> tuple[list[int], tuple[str, ...]]:
    """``members`` and ``outputs`` of a matched cell grown by its prologue and epilogue chains
    (see the module doc); the inputs in ``keep_inputs`` keep their producers outside."""
    group = set(members)
    for index in _prologue(g, group, set(keep_inputs)):
        group.add(index)
    epilogue = _epilogue(g, group, outputs)
    group |= epilogue
    handed = tuple(dict.fromkeys(
        out for index in sorted(group) for out in g.op(index).outputs
        if out in g.block.outputs or any(u not in group for u in g.users(out))))
    return sorted(group), handed if epilogue else outputs


def _single_operand(g: CellGraph, index: int) -> str | None:
    """The one non-constant operand of edge step ``index``, None if it is no such step."""
    op = g.op(index)
    if op.op not in EDGE_OPS or len(op.outputs) != 1 or g.is_variable(op.outputs[0]):
        return None
    varying = [n for n in op.inputs if not g.is_constant_derived(n)]
    return varying[0] if len(varying) == 1 and not g.is_variable(varying[0]) else None


def _prologue(g: CellGraph, group: set[int], keep: set[str]) -> set[int]:
    """The edge chains from block inputs into the cell."""
    found: set[int] = set()
    entries = {n for i in group for n in g.op(i).inputs
               if g.producer.get(n) not in group and n not in keep and not g.is_constant_derived(n)}
    for tensor in sorted(entries):
        found.update(_chain_from_input(g, tensor, group | found))
    return found


def _chain_from_input(g: CellGraph, tensor: str, inside: set[int]) -> list[int]:
    """The edge steps computing ``tensor`` from a block input, each result read only by the
    steps after it or ``inside``; empty if ``tensor`` comes from anything else."""
    chain: list[int] = []
    while tensor not in g.block.inputs:
        index = g.producer.get(tensor)
        if index is None or index in g.claimed or tensor in g.block.outputs:
            return []
        if any(u not in inside and u not in chain for u in g.users(tensor)):
            return []
        source = _single_operand(g, index)
        if source is None:
            return []
        chain.append(index)
        tensor = source
    return chain


def _epilogue(g: CellGraph, group: set[int], outputs: tuple[str, ...]) -> set[int]:
    """The edge chains from the cell's results to block outputs only."""
    found: set[int] = set()
    for start in outputs:
        for user in g.users(start):
            chain = _chain_to_outputs(g, user, group | found)
            found.update(chain)
    return found


def _chain_to_outputs(g: CellGraph, index: int, inside: set[int]) -> set[int]:
    """Edge steps from ``index`` on whose every end is a block output (empty if any is not)."""
    chain: set[int] = set()
    stack = [index]
    while stack:
        current = stack.pop()
        if current in chain or current in inside:
            continue
        if current in g.claimed or _single_operand(g, current) is None:
            return set()
        chain.add(current)
        out = g.op(current).outputs[0]
        users = g.users(out)
        if not users and out not in g.block.outputs:
            return set()
        stack += users
    return chain
