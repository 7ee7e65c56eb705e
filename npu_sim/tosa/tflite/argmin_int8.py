"""An int8 ARG_MIN's order reversal as a NEGATE: ``-x - 1``, TOSA 1.0's bitwise NOT of int8.

Arm's converter lowers an int8 ARG_MIN as an identity CAST from int8 to int8, a SUB of that
from a constant -1 (``-1 - x``, which reverses the order without overflow), and an ARGMAX.
Neither the int8 CAST to itself nor an int8 SUB is in a TOSA 1.0 profile (Arm's reference
model refuses them too), so every int8 ARG_MIN was refused. A NEGATE with input zero point 0 and
output zero point -1 computes ``-(x - 0) + (-1)``, the same value for every int8 ``x`` (-128 gives
127), in the int8 profile: this pass writes the pair so. Found by the TFLite ARG_MIN's output
tensor name, the location of the three operators.
"""

from __future__ import annotations

import numpy as np

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, Tensor
from npu_sim.tosa.ops import Op
from npu_sim.tosa.tflite.flatbuffer import TfliteModel, operators_by_output

#: BuiltinOperator code of ARG_MIN (schema.fbs)
ARG_MIN = 79


def negate_int8_argmins(graph: Graph, model: TfliteModel) -> int:
    """Write each converted int8 ARG_MIN's CAST and SUB as one NEGATE; how many."""
    argmins = {name for name, _ in operators_by_output(model, ARG_MIN)}
    if not argmins:
        return 0
    changed = 0
    for block in graph.blocks():
        for cast in [op for op in block.operators if op.op is Op.CAST and op.location in argmins]:
            sub = _reversing_sub(block, cast)
            if sub is not None:
                _as_negate(block, cast, sub)
                graph.drop_unread_constants([sub.inputs[0]])   # (the -1, where the SUB alone read it)
                changed += 1
    return changed


def _reversing_sub(block: Block, cast: Operator) -> Operator | None:
    """The SUB from -1 that alone reads ``cast``'s result, where ``cast`` is int8 to int8."""
    source, result = block.tensor(cast.inputs[0]), block.tensor(cast.outputs[0])
    if source.dtype is not DType.INT8 or result.dtype is not DType.INT8 or result.name in block.outputs:
        return None
    users = block.readers().get(result.name, [])
    if len(users) != 1 or users[0].op is not Op.SUB or users[0].inputs[1] != result.name \
            or users[0].location != cast.location:
        return None
    minuend = block.tensors.get(users[0].inputs[0])
    if minuend is None or minuend.data is None or not np.all(np.asarray(minuend.data) == -1):
        return None
    return users[0]


def _as_negate(block: Block, cast: Operator, sub: Operator) -> None:
    """Replace ``cast`` by the zero points and ``sub`` by a NEGATE of the CAST's input."""
    names = []
    added = []
    for suffix, value in (("input_zp", 0), ("output_zp", -1)):
        name = f"{sub.outputs[0]}_not_{suffix}"
        block.tensors[name] = Tensor(name, (1,), DType.INT8, np.array([value], np.int8))
        added.append(Operator(Op.CONST, [], [name]))
        names.append(name)
    negate = Operator(Op.NEGATE, [cast.inputs[0], *names], list(sub.outputs), None, sub.location)
    block.operators.remove(cast)
    block.tensors.pop(cast.outputs[0], None)
    at = block.operators.index(sub)
    block.operators[at:at + 1] = [*added, negate]
