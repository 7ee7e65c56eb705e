"""Empty tensors: what computes nothing is taken out of the graph before it is scheduled.

Converters leave tensors without elements behind (TFLite's SPLIT_V of a Keras GRU with
``reset_after=False`` has a [1, 0] output, which can reach a CONST, an elementwise operator
or a CONCAT). The reference executor runs them as TOSA says; the scheduler has nothing to
place or move for them, so this pass gives it an equivalent graph (same bits):

* operators whose results are all empty are dropped, and the empty constants with them;
* a CONCAT forgets its empty inputs (one input left: an IDENTITY);
* anything else that reads an empty tensor yet computes a non-empty one, an empty graph
  output, or an empty value passed through control flow is refused, naming the tensor
  (exit 2; ``npu-sim exec`` runs such a graph).

The graph given is not changed; the result shares its unchanged tensors and operators.
"""

from __future__ import annotations

import dataclasses

from npu_sim.errors import UnsupportedFeatureError
from npu_sim.tosa.ir import Block, Graph, Operator, Region
from npu_sim.tosa.ops import Op


def _empty(block: Block, name: str) -> bool:
    shape = block.tensor(name).shape
    return bool(shape) and 0 in shape


def has_empty_tensor(graph: Graph) -> bool:
    return any(_empty(block, name) for block in graph.blocks() for name in block.tensors)


def drop_empty_tensors(graph: Graph) -> Graph:
    """``graph`` without its empty tensors (itself when it has none); see the module doc."""
    if not has_empty_tensor(graph):
        return graph
    regions = [Region(r.name, [_block(b) for b in r.blocks]) for r in graph.regions]
    return dataclasses.replace(graph, regions=regions)


def _block(block: Block) -> Block:
    for name in (*block.inputs, *block.outputs):
        if _empty(block, name):
            raise UnsupportedFeatureError(f"tensor {name!r} of block {block.name!r} has shape "
                                          f"{list(block.tensor(name).shape)}: npu-sim does not schedule an empty "
                                          "graph or block input or output (npu-sim exec runs the graph)")
    operators = [kept for op in block.operators if (kept := _operator(block, op)) is not None]
    tensors = {n: t for n, t in block.tensors.items() if not _empty(block, n)}
    return dataclasses.replace(block, operators=operators, tensors=tensors)


def _operator(block: Block, op: Operator) -> Operator | None:
    """``op`` without its empty tensors: None if it computes nothing, a CONCAT of the others."""
    if op.outputs and all(_empty(block, n) for n in op.outputs):
        return None
    empty_inputs = [n for n in op.inputs if _empty(block, n)]
    if not empty_inputs:
        return op
    if op.op is Op.CONCAT:
        kept = [n for n in op.inputs if not _empty(block, n)]
        return dataclasses.replace(op, inputs=kept) if len(kept) > 1 else \
            Operator(Op.IDENTITY, kept, list(op.outputs), location=op.location)
    raise UnsupportedFeatureError(f"{op.name} reads the empty tensor {empty_inputs[0]!r} and computes a "
                                  "tensor with elements: npu-sim does not schedule that (npu-sim exec "
                                  "runs the graph)")
