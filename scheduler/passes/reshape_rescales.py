"""Rescales before reshapes: a product's per-tensor RESCALE moves ahead of the RESHAPE between them.

The converter writes TFLite's BATCH_MATMUL as a rank-3 MATMUL, a RESHAPE of its int32 result back to
the operator's rank and a RESCALE to int8 (an attention's Q x K^T and its x V). Vela scales a
product's result in its output unit (the BatchMatMul's own cycles: 1,432 for a BERT head on the
Ethos-U85-256); with the RESHAPE between them here the RESCALE was an int32 pass of its own over the
whole [4, 64, 64] scores (32,840 cycles on the U85-256) and the int32 map a TCM buffer.

:func:`rescale_before_reshape` swaps the two where the RESHAPE reads the result of a MAC-array operator
and only the RESCALE reads the RESHAPE's result, and the RESCALE is per tensor (one multiplier, one
shift): the RESCALE then scales the product's result in its own shape and the RESHAPE reshapes the
scaled result, which keeps its name. A per-tensor RESCALE works element by element and a RESHAPE keeps
the elements' order, so the bits are the same; the product's epilogue may now take the RESCALE
(:class:`scheduler.passes.fusion.EpilogueRule`).

Stage contract: a graph rewrite before lowering, after the other graph passes of
:func:`scheduler.schedule.schedule`; returns ``graph`` itself where nothing moves, else a copy.
"""

from __future__ import annotations

from npu_sim.hw.compute_units import MAC_ARRAY
from npu_sim.tosa.ir import Block, Graph, Operator, Tensor
from npu_sim.tosa.ops import Op


def rescale_before_reshape(graph: Graph) -> Graph:
    """``graph`` with each product's per-tensor RESCALE ahead of the RESHAPE between them (see the
    module doc)."""
    if not any(_movable(block) for block in graph.blocks()):
        return graph
    result = graph.copy()
    for block in result.blocks():
        for reshape, rescale in _movable(block):
            _swap(block, reshape, rescale)
    return result


def _movable(block: Block) -> list[tuple[Operator, Operator]]:
    """The (RESHAPE, RESCALE) pairs of ``block`` to swap."""
    producers = block.producers()
    readers = block.readers()
    pairs = []
    for op in block.operators:
        if op.op is not Op.RESCALE or getattr(op.attribute, "per_channel", True):
            continue
        reshape = producers.get(op.inputs[0])
        if reshape is None or reshape.op is not Op.RESHAPE or len(readers.get(reshape.outputs[0], [])) != 1:
            continue
        product = producers.get(reshape.inputs[0])
        if product is None or product.op not in MAC_ARRAY.ops or reshape.outputs[0] in block.outputs:
            continue
        pairs.append((reshape, op))
    return pairs


def _swap(block: Block, reshape: Operator, rescale: Operator) -> None:
    """The RESCALE reads the RESHAPE's input into a new tensor of that shape; the RESHAPE then writes
    the RESCALE's result from it, in the RESCALE's place (its other inputs are defined by then)."""
    source = block.tensor(reshape.inputs[0])
    scaled = _fresh_name(block, f"{rescale.outputs[0]}_scaled")
    block.tensors[scaled] = Tensor(scaled, source.shape, block.tensor(rescale.outputs[0]).dtype)
    at = block.operators.index(rescale)
    block.operators[at:at + 1] = [
        Operator(Op.RESCALE, [reshape.inputs[0], *rescale.inputs[1:]], [scaled], rescale.attribute,
                 rescale.location),
        Operator(Op.RESHAPE, [scaled, *reshape.inputs[1:]], list(rescale.outputs), reshape.attribute,
                 reshape.location)]
    block.operators.remove(reshape)
    del block.tensors[reshape.outputs[0]]


def _fresh_name(block: Block, name: str) -> str:
    candidate, n = name, 1
    while candidate in block.tensors:
        candidate, n = f"{name}{n}", n + 1
    return candidate
