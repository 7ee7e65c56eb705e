"""An elementwise operation's result written over an input it alone reads (HwConfig
``tcm.elementwise_result_over_input``: Vela's ReuseIFM, regor live_range.cpp
``LiveRangeGraph::ReusableIFM``).

Where an operation computes each element of its result from the same element of an input of
the result's shape and dtype (a chain of elementwise steps on the vector unit or the LUT), and
nothing after it reads that input, the result can take the input's bytes: one buffer lives from
the input's producer to the result's last reader instead of two overlapping at the operation.
The compiler aliases the result to the input's root once the striped chains are chosen, outside
them (Vela reuses no IFM in a cascade: a rolling buffer cannot be a longer-lived value's), and
plans residency again (``_BlockCompiler._results_over_inputs``); a command reads all its operands
before it writes, and a tile's result covers the bytes of the same tile of the input, so the bits
stay the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from npu_sim.tosa.ops import Op
from scheduler.ir.npu_ops import NpuOp, OpKind, Value
from scheduler.passes.fusion import VECTOR_ELEMENTWISE

#: Steps whose every result element comes from the same element of their operands (up to
#: broadcasting of the others): Vela's DecomposeAsElementwise operators, its LUT included.
ONE_TO_ONE = VECTOR_ELEMENTWISE | {Op.TABLE}


def one_to_one(op: NpuOp) -> bool:
    """Whether compute operation ``op`` is a chain of elementwise steps with one result."""
    return (op.kind is OpKind.COMPUTE and op.composite is None and len(op.outputs) == 1
            and not op.output_steps and bool(op.steps) and all(s.op in ONE_TO_ONE for s in op.steps))


def reusable_input(i: int, op: NpuOp, values: Mapping[str, Value], root: Callable[[str], str],
                   offset: Callable[[str], int], local: Callable[[str], bool],
                   later_reader: Callable[[str, int], bool]) -> str | None:
    """The root of an input of operation ``i`` whose bytes its result may take, None if none:
    the input is a whole local value of the result's shape and dtype, and no operation after
    ``i`` reads it (``later_reader(root, i)``)."""
    if not one_to_one(op):
        return None
    dst = op.outputs[0]
    out = values[dst].type
    if not local(dst) or root(dst) != dst:
        return None
    for key in op.inputs:
        r = root(key)
        if r == dst or not local(r) or offset(key) != 0:
            continue
        source, home = values[key].type, values[r].type
        if source.shape != out.shape or source.dtype != out.dtype or home.dtype != out.dtype \
                or values[r].size_bytes != values[dst].size_bytes:
            continue
        if later_reader(r, i):
            continue
        return r
    return None


def readers_by_key(ops: Sequence[NpuOp], skip: set[int]) -> dict[str, list[int]]:
    """The operations (not skipped) reading each value key, in order."""
    readers: dict[str, list[int]] = {}
    for j, op in enumerate(ops):
        if j in skip:
            continue
        for key in op.inputs:
            readers.setdefault(key, []).append(j)
    return readers
