"""A CAST from bool to float, which Arm's converter writes, made a SELECT of 1.0 and 0.0.

The converter lowers a float ``ReLU(threshold=...)`` (and whatever else TFLite writes as
GREATER then CAST) with ``tosa.cast`` from i1 to f32. TOSA 1.0's CAST takes bool only to
int8, int16 and int32: no profile has bool to a float type, so npu-sim's validation refuses
the graph (Arm's reference model runs it anyway). This pass rewrites each such CAST as
``SELECT(condition, 1.0, 0.0)`` in the float type, which every floating-point profile has and
which gives the same values (a cast bool is 1 where true, 0 where false). The validator stays
as strict as the specification.
"""

from __future__ import annotations

import numpy as np

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, Tensor
from npu_sim.tosa.ops import Op

#: The float types a bool is cast to by the converter that numpy holds as themselves.
_FLOATS = {DType.FP32: np.float32, DType.FP16: np.float16}


def select_bool_casts(graph: Graph) -> int:
    """Make every CAST from bool to fp32/fp16 of ``graph`` a SELECT of 1 and 0; how many."""
    changed = 0
    for block in graph.blocks():
        for cast in [op for op in block.operators if _casts_bool_to_float(block, op)]:
            _as_select(block, cast)
            changed += 1
    return changed


def _casts_bool_to_float(block: Block, op: Operator) -> bool:
    if op.op is not Op.CAST or len(op.inputs) != 1 or len(op.outputs) != 1:
        return False
    return block.tensor(op.inputs[0]).dtype is DType.BOOL and block.tensor(op.outputs[0]).dtype in _FLOATS


def _as_select(block: Block, cast: Operator) -> None:
    """Put constants 1 and 0 (of the output's rank, broadcast) before ``cast`` and make it a SELECT."""
    result = block.tensor(cast.outputs[0])
    rank_ones = (1,) * len(result.shape)
    added = []
    names = []
    for suffix, value in (("true", 1.0), ("false", 0.0)):
        name = f"{cast.outputs[0]}_when_{suffix}"
        block.tensors[name] = Tensor(name, rank_ones, result.dtype, np.full(rank_ones, value, _FLOATS[result.dtype]))
        added.append(Operator(Op.CONST, [], [name]))
        names.append(name)
    select = Operator(Op.SELECT, [cast.inputs[0], *names], list(cast.outputs), None, cast.location)
    at = block.operators.index(cast)
    block.operators[at:at + 1] = [*added, select]
