"""A 48-bit accumulator reshaped before its rescale: the rescale moved first, as TOSA 1.0 has it.

Arm's converter writes a 16-bit batched matrix product of rank 4 (a 16x8 attention's scores,
``tf.matmul`` of two [1, heads, rows, columns] tensors) as RESHAPEs to rank 3, a MATMUL whose
int48 result is RESHAPEd back to rank 4, then the RESCALE to int16. TOSA 1.0 has no RESHAPE of
int48 (no profile lists it; Arm's reference model refuses the graph too), so every 16x8
MultiHeadAttention was refused. A RESHAPE only renumbers elements, and a per-tensor RESCALE
maps each element alone (a per-channel one too, when the reshape keeps the last axis, the
channel's), so the two commute: this pass rescales the MATMUL's result in its own shape and
reshapes the int16 values, the same bits in plain TOSA.
"""

from __future__ import annotations

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, Tensor
from npu_sim.tosa.ops import Op


def rescale_before_wide_reshapes(graph: Graph) -> int:
    """Swap each RESHAPE of an int48 value with the RESCALE reading it; how many."""
    changed = 0
    for block in graph.blocks():
        readers = block.readers()
        for reshape in [op for op in block.operators if op.op is Op.RESHAPE]:
            rescale = _only_rescale_reader(block, reshape, readers)
            if rescale is not None:
                _swap(block, reshape, rescale)
                changed += 1
    return changed


def _only_rescale_reader(block: Block, reshape: Operator, readers: dict[str, list[Operator]]) -> Operator | None:
    """The RESCALE that alone reads ``reshape``'s int48 result, where the two commute."""
    if len(reshape.outputs) != 1 or block.tensor(reshape.inputs[0]).dtype is not DType.INT48:
        return None
    result = reshape.outputs[0]
    users = readers.get(result, [])
    if len(users) != 1 or users[0].op is not Op.RESCALE or users[0].inputs[0] != result or result in block.outputs:
        return None
    rescale = users[0]
    before, after = block.tensor(reshape.inputs[0]).shape, block.tensor(result).shape
    if getattr(rescale.attribute, "per_channel", False) and (not before or not after or before[-1] != after[-1]):
        return None
    return rescale


def _swap(block: Block, reshape: Operator, rescale: Operator) -> None:
    """RESCALE the int48 value in its own shape, then RESHAPE the narrow result."""
    wide = reshape.inputs[0]
    narrow = block.tensor(rescale.outputs[0])
    early = f"{rescale.outputs[0]}_before_reshape"
    block.tensors[early] = Tensor(early, block.tensor(wide).shape, narrow.dtype)
    block.tensors.pop(reshape.outputs[0], None)
    rescale.inputs = [wide, *rescale.inputs[1:]]
    reshape.inputs = [early, *reshape.inputs[1:]]
    reshape.outputs = [rescale.outputs[0]]
    rescale.outputs = [early]
    block.operators.remove(reshape)   # (after the RESCALE now: whatever it reads is defined by then)
    block.operators.insert(block.operators.index(rescale) + 1, reshape)
