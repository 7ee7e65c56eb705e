"""Elementwise chains of a compute command folded into lookup tables (a long stream's fast path).

A fused composite (the quantized LSTM cell of a converted model) runs dozens of small
elementwise steps per invocation: int8 -> int32 RESCALEs, an ADD or a MUL, a RESCALE back to
int8, a TABLE... Each is a few numpy calls on 16-64 elements, which costs microseconds of
call overhead whatever the size. Where a step's value depends, element by element, on at most
two int8 tensors (its *leaves*: the results of steps that are not folded, or operands read
from memory) and on constants, its result is a function of two int8 values: a table of
65,536 entries (256 for one leaf) computed once, by running the very kernels of the chain
on every pair of values, then looked up per element. Steps whose results only such tables
read are no longer run.

A step folds when it is elementwise the same way at every position: RESCALE with one scale
(``per_channel`` false), ADD, SUB, MUL, MAXIMUM and MINIMUM of operands of the output's
shape or of one-element constants (a zero point, a scale: the same at every position),
TABLE, CLAMP and CAST; every other operand (scales, zero points, MUL's shift, the table) a
constant of the command (its bytes never change once loaded, see
:class:`npu_sim.hw.compute.ComputeOp`). The chain's result may be of any type (a
dequantize, CAST to float, SUB and MUL, gives a table of floats). A chain of at least
:data:`MEMO_MIN_STEPS` steps over one wider operand read from memory (2 or 4 bytes an
element: a float state's quantize steps) is looked up in a table filled as the stream runs
(:class:`npu_sim.hw.value_memo.ValueMemo`: the chain's kernels run on every tensor with an
element value not seen before). The tables hold the kernels' own results for every
combination, so a lookup gives their bits; and a combination the kernels reject (a REQUIRE
some values break) makes the whole command keep its steps, so every error is still raised
as the kernel raises it. Nothing folds in a run that goes on past REQUIREs
(``--allow-unpredictable``): building the tables would record violations no data made.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from npu_sim.hw.value_memo import UNSIGNED, ValueMemo
from npu_sim.reference.kernel_api import KernelArgs, run_kernel
from npu_sim.reference.unpredictable import active_log
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op

#: A step's operands: (0, memory access) read, (1, k) step k's result, (2, array) a constant.
Feed = tuple[int, Any]
#: What a plan runs for one step: the step's index, the function, where its operands come from.
PlanEntry = tuple[int, Callable[[list[np.ndarray]], list[np.ndarray]], tuple[Feed, ...]]

#: The operators that fold: the positions of their data operands (the others must be constants).
_DATA_OPERANDS: dict[Op, tuple[int, ...]] = {
    Op.RESCALE: (0,), Op.ADD: (0, 1), Op.SUB: (0, 1), Op.MUL: (0, 1), Op.MAXIMUM: (0, 1), Op.MINIMUM: (0, 1),
    Op.TABLE: (0,), Op.CLAMP: (0,), Op.CAST: (0,),
}
#: Most leaves a table may have (two int8 values: 65,536 entries).
MAX_LEAVES = 2
#: The int8 values in the order of their bits (0..127, then -128..-1): a leaf's bits index its table.
_BY_BITS = np.arange(256, dtype=np.uint8).view(np.int8)


def _data_operands(step: Any) -> tuple[int, ...] | None:
    """The data operands of a step that may fold, None if it may not."""
    positions = _DATA_OPERANDS.get(step.op)
    if positions is None or len(step.output_types) != 1:
        return None
    if step.op is Op.RESCALE and step.attribute.per_channel:
        return None
    return positions


def _fixed(feed: Feed) -> bool:
    """A data operand the same at every position: a one-element constant (broadcast)."""
    return feed[0] == 2 and np.size(feed[1]) == 1


#: A way to compute a step from leaves: (its leaves in first-use order, the folded steps between,
#: whether its one leaf is wider than int8: a memo, see :mod:`npu_sim.hw.value_memo`).
Candidate = tuple[tuple[Feed, ...], frozenset[int], bool]
#: Fewest steps a memo replaces (a lookup costs about what two or three bound steps do).
MEMO_MIN_STEPS = 3
#: Most ways kept per step (each a choice of where to cut the chain).
_MAX_CANDIDATES = 6


def _candidates(index: int, step: Any, feeds: Sequence[Feed], folded: list[list[Candidate]]) -> list[Candidate]:
    """The ways a step's value may be computed from at most two int8 leaves or one wider one read
    from memory (none: it does not fold). An operand computed by a folded step is reached
    through one of that step's ways, or is a leaf itself when int8 (the chain is cut there)."""
    positions = _data_operands(step)
    if positions is None:
        return []
    options: list[list[Candidate]] = []
    shape = step.output_types[0].shape
    for p, feed in enumerate(feeds):
        if p not in positions or _fixed(feed):
            if feed[0] != 2:
                return []     # a scale, zero point, shift or table that is not a constant
            continue
        if feed[0] == 2 or step.input_types[p].shape != shape:
            return []         # a constant tensor operand may differ from element to element; a broadcast
        ways = _operand_ways(feed, step.input_types[p].dtype, folded)
        if not ways:
            return []
        options.append(ways)
    if not options:
        return []             # constants only: nothing to look up by
    found: list[Candidate] = [((), frozenset([index]), False)]
    for ways in options:
        found = [merged for known in found for way in ways
                 if (merged := _merge(known, way)) is not None][:_MAX_CANDIDATES]
    return found


def _operand_ways(feed: Feed, dtype: DType, folded: list[list[Candidate]]) -> list[Candidate]:
    """The ways a data operand is reached: through its folded step's ways, or as a leaf (int8;
    a wider one read from memory: a memo)."""
    kind, source = feed
    ways: list[Candidate] = list(folded[source]) if kind == 1 else []
    if dtype is DType.INT8:
        ways.append(((feed,), frozenset(), False))
    elif kind == 0 and dtype.numpy_dtype.itemsize in UNSIGNED:
        ways.append(((feed,), frozenset(), True))
    return ways


def _merge(a: Candidate, b: Candidate) -> Candidate | None:
    """Both ways at once, if that needs at most two int8 leaves (or one wider one) and no leaf is
    computed in the chain."""
    leaves = list(a[0]) + [leaf for leaf in b[0] if not any(_same(leaf, known) for known in a[0])]
    cone, memo = a[1] | b[1], a[2] or b[2]
    if len(leaves) > (1 if memo else MAX_LEAVES) or any(kind == 1 and source in cone for kind, source in leaves):
        return None
    return tuple(leaves), cone, memo


def _same(a: Feed, b: Feed) -> bool:
    return a[0] == b[0] and a[1] is b[1] if a[0] == 0 else a == b


def _choose(count: int, outputs: Sequence[int], feeds: Sequence[Sequence[Feed]],
            folded: list[list[Candidate]]) -> tuple[list[bool], list[Candidate | None]]:
    """The steps a plan must run (the command's outputs and what the steps that run read) and,
    for each folded one, the way it is computed: the one needing the fewest other steps run."""
    live = [False] * count
    chosen: list[Candidate | None] = [None] * count
    for s in outputs:
        live[s] = True
    for i in range(count - 1, -1, -1):
        if not live[i]:
            continue
        ways = [c for c in folded[i] if not c[2] or len(c[1]) >= MEMO_MIN_STEPS]
        if ways:
            way = min(ways, key=lambda c: (sum(1 for kind, source in c[0] if kind == 1 and not live[source]
                                               and folded[source]), c[2], len(c[1]) == 1, len(c[0])))
            chosen[i] = way
            reads: Sequence[Feed] = way[0]
        else:
            reads = feeds[i]
        for kind, source in reads:
            if kind == 1:
                live[source] = True
    return live, chosen


def _table(root: int, way: Candidate, steps: Sequence[Any], feeds: Sequence[Sequence[Feed]]) -> np.ndarray:
    """The root's results for every combination of its leaves' values (by their bits), computed
    by the kernels of its chain; raises what a kernel raises on some combination."""
    leaves, cone, _ = way
    grids = [_BY_BITS] if len(leaves) == 1 else [np.repeat(_BY_BITS, 256), np.tile(_BY_BITS, 256)]
    size = grids[0].size
    values: dict[int, np.ndarray] = {}
    for j in sorted(cone):
        step = steps[j]
        inputs, types = [], list(step.input_types)
        data = _DATA_OPERANDS[step.op]
        for p, (kind, source) in enumerate(feeds[j]):
            if kind == 2 and p in data:   # a one-element constant, of the rank of the other operands
                types[p] = TensorType((1,), types[p].dtype)
                inputs.append(np.reshape(source, (1,)))
                continue
            if kind == 2:
                inputs.append(source)
                continue
            types[p] = TensorType((size,), types[p].dtype)
            if kind == 1 and source in cone:
                inputs.append(values[source])
            else:
                inputs.append(grids[next(k for k, leaf in enumerate(leaves) if _same(leaf, (kind, source)))])
        out_type = TensorType((size,), step.output_types[0].dtype)
        result = run_kernel(KernelArgs(step.op, step.attribute, inputs, types, [out_type], step.name))[0]
        if result.shape != (size,) or result.dtype != out_type.dtype.numpy_dtype:
            raise ValueError(f"step {j}: the kernel gave {result.dtype} {result.shape}")
        values[j] = result
    table = values[root]
    return table if len(leaves) == 1 else table.reshape(256, 256)


def _chain(root: int, way: Candidate, bound: Sequence[Callable[[list[np.ndarray]], list[np.ndarray]]],
           feeds: Sequence[Sequence[Feed]]) -> Callable[[np.ndarray], np.ndarray]:
    """The root's result from the value of the way's one leaf, by the bound kernels of its chain."""
    cone = sorted(way[1])

    def run(leaf: np.ndarray) -> np.ndarray:
        values: dict[int, np.ndarray] = {}
        for j in cone:
            values[j] = bound[j]([source if kind == 2 else values[source] if kind == 1 and source in values
                                  else leaf for kind, source in feeds[j]])[0]
        return values[root]

    return run


class Lookup:
    """A folded chain's table of two leaves, looked up by their bits (``[a, b] -> [result]``)."""

    __slots__ = ("table",)

    def __init__(self, table: np.ndarray):
        self.table = table

    def __call__(self, leaves: list[np.ndarray]) -> list[np.ndarray]:
        return [self.table[leaves[0].view(np.uint8), leaves[1].view(np.uint8)]]


def _look_up(table: np.ndarray) -> Callable[[list[np.ndarray]], list[np.ndarray]]:
    if table.ndim == 1:
        return lambda leaves: [table.take(leaves[0].view(np.uint8))]
    return Lookup(table)


def fold_plan(steps: Sequence[Any], bound: Sequence[Callable[[list[np.ndarray]], list[np.ndarray]]],
              feeds: Sequence[Sequence[Feed]], outputs: Sequence[int]) -> list[PlanEntry] | None:
    """The steps to run, elementwise chains over at most two int8 leaves as table lookups
    (``steps``: the command's KernelSteps; ``bound``/``feeds``: each step's bound kernel and
    where its operands come from; ``outputs``: the steps whose results the command writes).
    None if nothing folds, or a kernel rejects some combination of leaf values."""
    if active_log() is not None:
        return None
    folded: list[list[Candidate]] = []
    for i, (step, step_feeds) in enumerate(zip(steps, feeds)):
        folded.append(_candidates(i, step, step_feeds, folded))
    live, chosen = _choose(len(steps), outputs, feeds, folded)
    if not any(way is not None and len(way[1]) > 1 for way in chosen):
        return None   # no chain to shorten: a lone elementwise step is as fast bound
    plan: list[PlanEntry] = []
    with np.errstate(all="ignore"):
        for i in range(len(steps)):
            way = chosen[i]
            if not live[i]:
                continue
            if way is None:
                plan.append((i, bound[i], tuple(feeds[i])))
                continue
            if way[2]:
                plan.append((i, ValueMemo(_chain(i, way, bound, feeds)), way[0]))
                continue
            try:
                table = _table(i, way, steps, feeds)
            except Exception:   # some combination breaks a REQUIRE: the kernels run and report it
                return None
            table.flags.writeable = False
            plan.append((i, _look_up(table), way[0]))
    return plan
