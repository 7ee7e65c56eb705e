"""TFLite's QUANTIZE saturates; the converted one is made to saturate too.

Arm's converter writes a QUANTIZE of float data to an 8- or 16-bit integer as ``MUL`` by the
inverse scale, ``CAST`` to int32 (rounding), ``ADD`` of the zero point and ``CAST`` to the
narrow type. TOSA's CAST from int32 to int8 or int16 keeps the low bits, where LiteRT
clamps to the type's range: a value past the quantization range wraps around (-136 becomes
120) instead of saturating to -128. That happens when a float the model carries leaves the
range it was calibrated on, as the state of a stateful int8 RNN returning sequences does
over a stream of invocations. This pass puts a clamp to the narrow type's range (MAXIMUM and MINIMUM: TOSA's CLAMP takes
no int32) between
the ``ADD`` and the final ``CAST`` of each such chain: LiteRT's saturation, in plain TOSA.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, Tensor
from npu_sim.tosa.ops import Op, make_attribute
from npu_sim.tosa.schema_generated import NanPropagationMode

_NARROW = {DType.INT8: (-128, 127), DType.INT16: (-32768, 32767)}


def saturate_quantizations(graph: Graph) -> int:
    """Clamp every converted float quantization of ``graph`` before its narrowing CAST; how many."""
    return clamp_before_each(graph, _narrowing_casts_of_quantizations)


def clamp_before_each(graph: Graph, casts_of: Callable[[Block], list[Operator]]) -> int:
    """Clamp the input of each narrowing CAST ``casts_of`` finds in a block of ``graph``; how many."""
    changed = 0
    for block in graph.blocks():
        for cast in casts_of(block):
            clamp_before(block, cast)
            changed += 1
    return changed


def _narrowing_casts_of_quantizations(block: Block) -> list[Operator]:
    """The final CASTs (int32 to int8/int16) of MUL, CAST, ADD, CAST chains from float data."""
    producer = block.producers()
    found = []
    for cast in block.operators:
        if cast.op is not Op.CAST or len(cast.outputs) != 1 or block.tensor(cast.outputs[0]).dtype not in _NARROW:
            continue
        add = producer.get(cast.inputs[0])
        if add is None or add.op is not Op.ADD or block.tensor(add.outputs[0]).dtype is not DType.INT32:
            continue
        rounding = producer.get(add.inputs[0])
        if rounding is None or rounding.op is not Op.CAST or block.tensor(rounding.inputs[0]).dtype is not DType.FP32:
            continue
        zero_point = block.tensors.get(add.inputs[1])
        if zero_point is not None and zero_point.data is not None:
            found.append(cast)
    return found


def clamp_before(block: Block, cast: Operator) -> None:
    """Saturate the int32 input of ``cast`` (to int8/int16) to its output type's range first:
    MAXIMUM and MINIMUM with the narrow type's bounds (TOSA's CLAMP takes no int32)."""
    source = cast.inputs[0]
    shape = block.tensor(source).shape
    low, high = _NARROW[block.tensor(cast.outputs[0]).dtype]
    base = f"{cast.outputs[0]}_saturated"
    added = []
    for suffix, bound in (("low", low), ("high", high)):
        name = f"{base}_{suffix}"
        block.tensors[name] = Tensor(name, (1,) * len(shape), DType.INT32, np.full((1,) * len(shape), bound, np.int32))
        added.append(Operator(Op.CONST, [], [name]))
    for name in (f"{base}_above", base):
        block.tensors[name] = Tensor(name, shape, DType.INT32)
    nan = NanPropagationMode.PROPAGATE   # (integers: no NaN)
    added += [Operator(Op.MAXIMUM, [source, f"{base}_low"], [f"{base}_above"],
                       make_attribute(Op.MAXIMUM, nan_mode=nan), cast.location),
              Operator(Op.MINIMUM, [f"{base}_above", f"{base}_high"], [base],
                       make_attribute(Op.MINIMUM, nan_mode=nan), cast.location)]
    at = block.operators.index(cast)
    block.operators[at:at] = added
    cast.inputs = [base, *cast.inputs[1:]]
