"""TFLite's 16-bit SOFTMAX saturates its table indices; the converted one is made to saturate too.

LiteRT's int16 softmax (``SoftmaxInt16``) looks up two tables: exp over [-10, 0] at the
scaled difference ``x - max`` recentred by +32767, and 1/(1 + x) at the normalized sum of
those exponentials recentred to [-32768, 32767]. Both indices are computed in int32 and
saturated to int16 before the lookup. Arm's converter computes the same int32 values but
narrows them with a TOSA CAST, which keeps the low bits: logits spanning more than about ten
real units (an attention score, a softmax after a large scale) make ``x - max`` leave the
table's range, and the index wraps round to the top of the table (a tiny probability becomes
a large one). This pass finds the two converted index computations and clamps each to the
int16 range before its CAST (:func:`npu_sim.tosa.tflite.saturation.clamp_before`), so that
the graph gives LiteRT's bits and stays plain TOSA. Other CASTs are left alone: a TFLite CAST
wraps too.

The converted forms it recognises (each CAST to int16 read only by int16 TABLEs):

* exp index: ``CAST(ADD(RESCALE(SUB(x, REDUCE_MAX(x))), const))``;
* reciprocal index: ``CAST(SUB(ARITHMETIC_RIGHT_SHIFT(SUB(LOGICAL_LEFT_SHIFT(REDUCE_SUM(e), n),
  const), s), const))``.
"""

from __future__ import annotations

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator
from npu_sim.tosa.ops import Op
from npu_sim.tosa.tflite.saturation import clamp_before_each


def saturate_softmax_lookups(graph: Graph) -> int:
    """Clamp the table indices of every converted int16 softmax of ``graph``; how many."""
    return clamp_before_each(graph, _softmax_index_casts)


class _Chain:
    """Walks from a value to the operators that made it, within one block."""

    def __init__(self, block: Block):
        self.block = block
        self.producer = block.producers()

    def made_by(self, name: str | None, kind: Op) -> Operator | None:
        """The operator of kind ``kind`` whose output ``name`` is (None if another made it)."""
        op = self.producer.get(name) if name is not None else None
        return op if op is not None and op.op is kind else None

    def constant(self, name: str) -> bool:
        tensor = self.block.tensors.get(name)
        return tensor is not None and tensor.data is not None

    def with_constant(self, name: str, kind: Op) -> str | None:
        """The other operand of the binary ``kind`` operator making ``name``, when one is constant."""
        op = self.made_by(name, kind)
        if op is None or len(op.inputs) != 2 or not self.constant(op.inputs[1]):
            return None
        return op.inputs[0]


def _softmax_index_casts(block: Block) -> list[Operator]:
    """The int32-to-int16 CASTs of ``block`` that narrow a converted softmax's table index."""
    chain = _Chain(block)
    readers = block.readers()
    found = []
    for cast in block.operators:
        if cast.op is not Op.CAST or len(cast.inputs) != 1 or len(cast.outputs) != 1:
            continue
        narrowing = (block.tensor(cast.inputs[0]).dtype, block.tensor(cast.outputs[0]).dtype)
        if narrowing != (DType.INT32, DType.INT16):
            continue
        users = readers.get(cast.outputs[0], [])
        if not users or any(u.op is not Op.TABLE or block.tensor(u.inputs[1]).dtype is not DType.INT16 for u in users):
            continue
        if _exp_index(chain, cast.inputs[0]) or _reciprocal_index(chain, cast.inputs[0]):
            found.append(cast)
    return found


def _exp_index(chain: _Chain, index: str) -> bool:
    """``index`` is ``RESCALE(x - REDUCE_MAX(x)) + const``: the recentred scaled difference."""
    rescale = chain.made_by(chain.with_constant(index, Op.ADD), Op.RESCALE)
    difference = chain.made_by(rescale.inputs[0], Op.SUB) if rescale is not None else None
    if difference is None or len(difference.inputs) != 2:
        return False
    top = chain.made_by(difference.inputs[1], Op.REDUCE_MAX)
    return top is not None and top.inputs[0] == difference.inputs[0]


def _reciprocal_index(chain: _Chain, index: str) -> bool:
    """``index`` is the normalized sum of exponentials, shifted down and recentred by a constant."""
    shift = chain.made_by(chain.with_constant(index, Op.SUB), Op.ARITHMETIC_RIGHT_SHIFT)
    if shift is None:
        return False
    normalized = chain.made_by(chain.with_constant(shift.inputs[0], Op.SUB), Op.LOGICAL_LEFT_SHIFT)
    return normalized is not None and chain.made_by(normalized.inputs[0], Op.REDUCE_SUM) is not None
