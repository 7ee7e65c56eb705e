"""An ARGMAX with int64 indices (``tf.argmax``'s default) computed in INT32, widened for the user.

Arm's converter writes a TFLite ARG_MAX (an ARG_MIN too) of output type int64 as a TOSA ARGMAX
to ``i64``; TOSA 1.0 gives ARGMAX an INT32 output only, so every model exported with
``tf.argmax``'s default (most segmentation heads) was refused. The indices are below the axis'
length, so INT32 holds them exactly: this pass narrows each such ARGMAX's output to INT32 (and
the RESHAPEs and IDENTITYs that carry it on, a keepdims' reshape), and records those that are
the graph's outputs in :attr:`Graph.int64_outputs`, which a user gets as ``int64`` as from
LiteRT (:mod:`npu_sim.tosa.int64_outputs`).
"""

from __future__ import annotations

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph
from npu_sim.tosa.ops import Op

#: the operators that carry the indices on unchanged in value
_CARRIERS = {Op.RESHAPE, Op.IDENTITY}


def narrow_int64_argmaxes(graph: Graph) -> int:
    """Make each ARGMAX to INT64 of ``graph`` give INT32 and record the outputs; how many."""
    changed = 0
    widened: set[str] = set()
    for block in graph.blocks():
        for argmax in [op for op in block.operators if op.op is Op.ARGMAX]:
            if block.tensor(argmax.outputs[0]).dtype is DType.INT64:
                widened |= _narrow_from(block, argmax.outputs[0])
                changed += 1
    if widened:
        graph.int64_outputs = graph.int64_outputs | (widened & set(graph.main.outputs))
    return changed


def _narrow_from(block: Block, name: str) -> set[str]:
    """Narrow ``name`` and the INT64 values carried on from it to INT32; their names."""
    narrowed: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        block.tensor(current).dtype = DType.INT32
        narrowed.add(current)
        pending += [op.outputs[0] for op in block.operators
                    if op.op in _CARRIERS and op.inputs[0] == current
                    and block.tensor(op.outputs[0]).dtype is DType.INT64]
    return narrowed
