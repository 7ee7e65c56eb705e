"""An identity RESCALE of a 48-bit accumulator with ``scale32``: the same identity in 16 bits.

Arm's converter writes each group of a 16x8 grouped Conv2D (``groups > 1``) as a CONV2D with an
int48 accumulator, then an identity RESCALE to int32 (multiplier ``1 << 30``, shift 30, scale32,
DOUBLE_ROUND) before the bias ADD. TOSA 1.0 forbids scale32 on an int48 input
(``ERROR_IF(scale32 && is_same<in_t, i48_t>())``; Arm's reference model refuses the graph too),
so every 16x8 grouped convolution was refused. The 16-bit multiplier ``1 << 14`` with shift 14 and
SINGLE_ROUND is the same identity (DOUBLE_ROUND needs scale32): this pass writes it so, with
constants of its own (the converter shares its multiplier and shift). Only an identity qualifies.
"""

from __future__ import annotations

import numpy as np

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, Tensor
from npu_sim.tosa.ops import Op
from npu_sim.tosa.schema_generated import RoundingMode

#: the identity as a 16-bit multiplier: 1 << 14, shift 14
_SHIFT = 14


def narrow_wide_identity_rescales(graph: Graph) -> int:
    """Give each scale32 identity RESCALE of an int48 value a 16-bit multiplier; how many."""
    wide = [(block, op) for block in graph.blocks() for op in block.operators if _is_wide_identity(block, op)]
    for block, rescale in wide:
        _narrow(block, rescale)
    return len(wide)


def _scalar(block: Block, name: str) -> int | None:
    """The one value of the constant ``name`` (None: not a constant of one element)."""
    tensor = block.tensors.get(name)
    data = None if tensor is None else tensor.data
    return int(np.asarray(data).reshape(-1)[0]) if data is not None and np.size(data) == 1 else None


def _is_wide_identity(block: Block, op: Operator) -> bool:
    """``op`` is a per-tensor scale32 RESCALE of int48 by exactly ``2**shift >> shift``."""
    if op.op is not Op.RESCALE or len(op.inputs) != 5 or not op.attribute.scale32 or op.attribute.per_channel:
        return False
    if block.tensor(op.inputs[0]).dtype is not DType.INT48:
        return False
    multiplier, shift = _scalar(block, op.inputs[1]), _scalar(block, op.inputs[2])
    return multiplier is not None and shift is not None and 0 <= shift < 63 and multiplier == 1 << shift


def _narrow(block: Block, rescale: Operator) -> None:
    """Put the 16-bit multiplier and its shift before ``rescale`` and make it read them."""
    base = rescale.outputs[0]
    names = []
    added = []
    for suffix, dtype, value in (("multiplier", DType.INT16, 1 << _SHIFT), ("shift", DType.INT8, _SHIFT)):
        name = f"{base}_identity_{suffix}"
        block.tensors[name] = Tensor(name, (1,), dtype, np.array([value], dtype.numpy_dtype))
        added.append(Operator(Op.CONST, [], [name]))
        names.append(name)
    rescale.inputs = [rescale.inputs[0], *names, *rescale.inputs[3:]]
    rescale.attribute = type(rescale.attribute)(**{**rescale.attribute.to_dict(), "scale32": False,
                                                   "rounding_mode": RoundingMode.SINGLE_ROUND})
    at = block.operators.index(rescale)
    block.operators[at:at] = added
