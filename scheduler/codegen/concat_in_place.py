"""Concatenation in place: each input of a CONCAT computed straight into its slice of the result.

Vela rewrites a CONCAT into one copy per input, into an offset of the output, and then moves the
offset into the input's producer where that input has no other reader (regor's
``GraphIrOptimiser::RewriteConcat`` and its fold of a MemoryCopy into the producer): the producers
write the output's slices and no copy runs. The block compiler (:mod:`scheduler.codegen.compiler`)
aliases each input to its slice of the result, and the CONCAT runs no command, where

* each input is one contiguous run of the result (every axis before the concatenation axis has
  size 1), the inputs are distinct values the block computes, aliased to nothing else, and the
  result is the block's too or a tensor whose home is the TCM (a graph output in the arena);
* every input's only reader is the CONCAT (Vela's rule), or taking the result's bytes from the
  first input's producer on lowers the most bytes live at once, counted operation by operation
  (an LSTM's step outputs, each read by the next step too, gathered into its output sequence:
  they no longer stay live beside the sequence, each padded to the TCM alignment). A U-Net's skip
  connection, read by its pooling as well, keeps its copy: its result would hold the decoder's
  bytes through the bottleneck.

Pure functions over the block's operations; the compiler supplies the roots and sizes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from npu_sim.tosa.ops import Op
from scheduler.ir.npu_ops import NpuOp, OpKind, Value

#: root -> [first operation index, last operation index, readers]
Spans = dict[str, list[int]]


def slice_offsets_bytes(op: NpuOp, values: dict[str, Value]) -> tuple[int, ...] | None:
    """The byte offset of each input in the result of ``op`` if it is a CONCAT whose inputs are
    contiguous runs of it, distinct values; else None."""
    if op.kind is not OpKind.COMPUTE or op.composite is not None or len(op.steps) != 1 \
            or op.steps[0].op is not Op.CONCAT:
        return None
    step = op.steps[0]
    operands = step.operands
    if len(operands) < 2 or not all(isinstance(k, str) for k in operands) or len(set(operands)) != len(operands):
        return None
    shape = values[op.outputs[0]].type.shape
    axis = int(getattr(step.attribute, "axis", -1))
    if not 0 <= axis < len(shape) or math.prod(shape[:axis]) != 1:
        return None
    offsets, at = [], 0
    for key in operands:
        offsets.append(at)
        at += values[str(key)].size_bytes
    return tuple(offsets) if at == values[op.outputs[0]].size_bytes else None


def live_spans(ops: Sequence[NpuOp], skip: set[int], root: Callable[[str], str],
               counted: Callable[[str], bool]) -> Spans:
    """Each counted root's first and last operation using it (skipped operations aside) and how
    many operations read it."""
    spans: Spans = {}
    for i, op in enumerate(ops):
        if i in skip:
            continue
        for key in op.outputs:
            _touch(spans, root(key), i, counted, 0)
        for key in op.inputs:
            _touch(spans, root(key), i, counted, 1)
    return spans


def _touch(spans: Spans, r: str, i: int, counted: Callable[[str], bool], reads: int) -> None:
    span = spans.get(r)
    if span is None:
        if counted(r):
            spans[r] = [i, i, reads]
        return
    span[1] = i
    span[2] += reads


def worth_it(spans: Spans, operands: Sequence[str], result: str, size_bytes: Callable[[str], int],
             op_count: int) -> bool:
    """Whether the inputs ``operands`` (roots) may be computed into the result's root: each read
    by the CONCAT alone, or the most bytes live at once lower when they are (see the module doc)."""
    if all(spans[k][2] == 1 for k in operands):
        return True
    merged = dict(spans)
    merge_spans(merged, operands, result)
    return _peak(merged, size_bytes, op_count) < _peak(spans, size_bytes, op_count)


def merge_spans(spans: Spans, operands: Sequence[str], result: str) -> None:
    """``spans`` with the inputs ``operands`` taken into the result's span (computed in place)."""
    first = min(spans[k][0] for k in (*operands, result))
    last = max(spans[k][1] for k in (*operands, result))
    reads = spans[result][2]
    for k in operands:
        del spans[k]
    spans[result] = [first, last, reads]


def _peak(spans: Spans, size_bytes: Callable[[str], int], op_count: int) -> int:
    deltas = [0] * (op_count + 1)
    for key, (first, last, _) in spans.items():
        size = size_bytes(key)
        deltas[first] += size
        deltas[last + 1] -= size
    live = peak = 0
    for delta in deltas:
        live += delta
        peak = max(peak, live)
    return peak
