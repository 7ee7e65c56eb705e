"""Sinking: an operation whose feature map waits long for its reader runs just before it.

The list schedule (:mod:`scheduler.passes.ordering`) starts an operation as early as its
unit is free: a residual branch's RESCALE to int32 right after its input exists, its result
(four times the int8 map) then live across the whole block until the ADD that reads it. Where
the cascaded stripes (:mod:`scheduler.passes.stripes`) are on, the TCM's peak is what the
planner minimises, and such a map sets it: this pass moves each compute operation whose one
result is read only later to just before its first reader, when its result is larger than the
inputs it would then keep live longer (those whose last reader it was). The result may be a
vector too: an unrolled LSTM's input projections, each computed from the sequence input long
before its time step reads it, had kept 23 KB of the U55's TCM live (lstm_kws_int8). On
a machine whose compute units serve one operation at a time (the Ethos-U presets) the move
costs no overlap. Control-flow operations are barriers: nothing moves across them, and a
reader of a variable never moves (its value may change in between).
"""

from __future__ import annotations

from scheduler.ir.npu_ops import LoweredBlock, LoweredGraph, NpuOp, OpKind, Value, ValueKind

#: Value kinds an operation that moves may read (a variable's reads stay in place).
_STILL = frozenset({ValueKind.INTERMEDIATE, ValueKind.CONSTANT, ValueKind.INPUT, ValueKind.BOUND})


def sink_feature_maps(lowered: LoweredGraph) -> None:
    """Move the operations worth sinking in every block of ``lowered`` (in place)."""
    for block in lowered.main.walk_blocks():
        block.ops = sunk_order(block, lowered.values)


def sunk_order(block: LoweredBlock, values: dict[str, Value]) -> list[NpuOp]:
    """``block``'s operations with those worth sinking just before their first reader (a
    topological order still: an operation only moves later, before anything reading it)."""
    ops = block.ops
    sinking = _worth_sinking(block, values)
    pending: dict[str, NpuOp] = {}   # result key -> an operation held back until its first reader
    order: list[NpuOp] = []

    def emit(op: NpuOp) -> None:
        for key in op.inputs:
            held = pending.pop(key, None)
            if held is not None:
                emit(held)
        order.append(op)

    for i, op in enumerate(ops):
        if op.kind not in (OpKind.COMPUTE, OpKind.COPY):   # a barrier: what is held goes first
            for key in list(pending):
                if key in pending:
                    emit(pending.pop(key))
        if i in sinking:
            pending[op.outputs[0]] = op
            continue
        emit(op)
    for key in list(pending):
        if key in pending:
            emit(pending.pop(key))
    return order


def _worth_sinking(block: LoweredBlock, values: dict[str, Value]) -> set[int]:
    """Indices of the operations whose result is larger than the inputs they would keep live
    longer, moved to their result's first reader (not the next operation already)."""
    ops = block.ops
    readers: dict[str, list[int]] = {}
    for j, op in enumerate(ops):
        for key in op.inputs:
            readers.setdefault(key, []).append(j)
    outputs = set(block.outputs)
    chosen = set()
    for i, op in enumerate(ops):
        if not _may_move(op, values, outputs):
            continue
        first = min(readers.get(op.outputs[0], [i + 1]))
        if first <= i + 1 or any(o.kind not in (OpKind.COMPUTE, OpKind.COPY) for o in ops[i + 1:first]):
            continue
        longer = sum(values[k].size_bytes for k in op.inputs
                     if values[k].kind is ValueKind.INTERMEDIATE and max(readers[k]) < first)
        if values[op.outputs[0]].size_bytes > longer:
            chosen.add(i)
    return chosen


def _may_move(op: NpuOp, values: dict[str, Value], block_outputs: set[str]) -> bool:
    """One compute operation (not a composite) whose one result is local to the block, and which
    reads no variable."""
    if op.kind is not OpKind.COMPUTE or op.composite is not None or len(op.outputs) != 1:
        return False
    return values[op.outputs[0]].kind is ValueKind.INTERMEDIATE and op.outputs[0] not in block_outputs and \
        all(values[k].kind in _STILL for k in op.inputs)
