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
reader of a variable never moves (its value may change in between). A move can make another
worth it (an operation whose reader was the next one waits once that reader has moved): the
pass runs again, up to :data:`MAX_ROUNDS` times, while that lowers the feature-map peak (a fused
TFLite LSTM's input projections and their casts on the U85: 2,767 -> 1,280 bytes).
"""

from __future__ import annotations

from scheduler.ir.npu_ops import LoweredBlock, LoweredGraph, NpuOp, OpKind, Value, ValueKind

#: Most rounds of moves per block (each taken only where it lowers the feature-map peak).
MAX_ROUNDS = 4
#: Value kinds an operation that moves may read (a variable's reads stay in place).
_STILL = frozenset({ValueKind.INTERMEDIATE, ValueKind.CONSTANT, ValueKind.INPUT, ValueKind.BOUND})


def sink_feature_maps(lowered: LoweredGraph, chunk_bytes: int) -> None:
    """Move the operations worth sinking in every block of ``lowered`` (in place).

    Moving a result's renaming copies with it (:func:`_worth_sinking`) puts more operations,
    with their weights, beside new neighbours; it is done where the feature-map bytes it saves
    (:func:`feature_map_peak_bytes`) exceed the largest constants of the operations it adds,
    each counted up to ``chunk_bytes`` (what one load of streamed constants holds whole;
    larger weights stream in stripes): what a neighbour may then hold at once. Constants an
    operation reads where they live count nothing (a Keras unrolled GRU's input projections on
    the U55, matrix-vector products with their weights in the flash, had stayed computed up
    front, 18 of their 96-byte results live at once: 2.2x Vela's SRAM)."""
    for block in lowered.main.walk_blocks():
        before = block.ops
        block.ops, peak = _sunk_order_and_peak(block, lowered.values, chunk_bytes)
        if all(a is b for a, b in zip(block.ops, before)):
            continue   # nothing moved: the next round would find the same
        if peak is None:
            peak = feature_map_peak_bytes(block.ops, lowered.values)
        for _ in range(MAX_ROUNDS - 1):   # a move can free another (its input's producer may follow it)
            order, lower = _sunk_order_and_peak(block, lowered.values, chunk_bytes)
            if lower is None:
                lower = feature_map_peak_bytes(order, lowered.values)
            if lower >= peak:
                break
            block.ops, peak = order, lower


def sunk_order(block: LoweredBlock, values: dict[str, Value], chunk_bytes: int) -> list[NpuOp]:
    """``block``'s operations in the order :func:`sink_feature_maps` gives them."""
    return _sunk_order_and_peak(block, values, chunk_bytes)[0]


def _sunk_order_and_peak(block: LoweredBlock, values: dict[str, Value], chunk_bytes: int
                         ) -> tuple[list[NpuOp], int | None]:
    """:func:`sunk_order`, and its feature-map peak where choosing it took that (else None:
    the rounds of :func:`sink_feature_maps` compute it only when they need it)."""
    alone, together = _worth_sinking(block, values)
    order = _moved(block, alone)
    if together == alone:
        return order, None
    added = max((min(chunk_bytes, _constant_bytes(block.ops[i], values)) for i in together - alone), default=0)
    order_together = _moved(block, together)
    peak, peak_together = feature_map_peak_bytes(order, values), feature_map_peak_bytes(order_together, values)
    if peak - peak_together > added:
        return order_together, peak_together
    return order, peak


def _moved(block: LoweredBlock, sinking: set[int]) -> list[NpuOp]:
    """``block``'s operations with those of ``sinking`` (indices) just before their first
    reader (a topological order still: an operation only moves later, before anything reading
    it)."""
    ops = block.ops
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


class _Readers:
    """Who reads what in a block: each value's readers (indices), and how many barriers
    (operations other than compute and copies) precede each index."""

    def __init__(self, ops: list[NpuOp]):
        self.of: dict[str, list[int]] = {}
        self.barriers_before = [0] * (len(ops) + 1)
        for j, op in enumerate(ops):
            for key in op.inputs:
                self.of.setdefault(key, []).append(j)
            barrier = op.kind is not OpKind.COMPUTE and op.kind is not OpKind.COPY
            self.barriers_before[j + 1] = self.barriers_before[j] + barrier

    def barrier_between(self, i: int, first: int) -> bool:
        """Whether an operation of ``ops[i + 1:first]`` is a barrier."""
        return self.barriers_before[first] > self.barriers_before[i + 1]


def _worth_sinking(block: LoweredBlock, values: dict[str, Value]) -> tuple[set[int], set[int]]:
    """Indices of the operations whose result is larger than the inputs they would keep live
    longer, moved to their result's first reader (not the next operation already): alone, and
    with their renaming copies.

    A result that RESHAPE or contiguous SLICE copies only rename (``alias_ok``: they share its
    bytes) moves with those copies, to the first reader of any of their results: an unrolled
    GRU's input projection is split into its three gates' slices at once, each read steps
    later."""
    ops = block.ops
    readers = _Readers(ops)
    outputs = set(block.outputs)
    alone: set[int] = set()
    together: set[int] = set()
    for i, op in enumerate(ops):
        if not _may_move(op, values, outputs):
            continue
        renames = _renames(ops, i, readers.of, values, outputs)
        worth_alone = _worth_moving(ops, {i}, readers, values, i)
        if worth_alone:
            alone.add(i)
        if renames:
            if _worth_moving(ops, {i, *renames}, readers, values, i):
                together |= {i, *renames}
        elif worth_alone:   # (no renaming copies: the family is the operation alone)
            together.add(i)
    return alone, together


def _worth_moving(ops: list[NpuOp], family: set[int], readers: _Readers, values: dict[str, Value], i: int) -> bool:
    """Whether operation ``i``'s ``family`` may move to its first reader, and its result is larger
    than the inputs it would then keep live longer (those whose last reader it was)."""
    first = _first_outside_reader(ops, family, readers, i)
    if first is None:
        return False
    longer = sum(values[k].size_bytes for k in ops[i].inputs
                 if values[k].kind is ValueKind.INTERMEDIATE and readers.of[k][-1] < first)
    return values[ops[i].outputs[0]].size_bytes > longer


def _first_outside_reader(ops: list[NpuOp], family: set[int], readers: _Readers, i: int) -> int | None:
    """The first reader of operation ``i``'s family (it and its renaming copies) outside it, if
    the family may move to it: past the next operation, across compute and copies only, and
    with every copy before it."""
    first = min((r for j in family for r in readers.of.get(ops[j].outputs[0], ()) if r not in family),
                default=i + 1)
    if first <= i + 1 or readers.barrier_between(i, first):
        return None
    return None if any(j > first for j in family) else first


def feature_map_peak_bytes(ops: list[NpuOp], values: dict[str, Value]) -> int:
    """The most bytes of feature maps live at once when ``ops`` run in this order, each from
    its producer to its last reader (a renaming copy's result is its source's bytes)."""
    root: dict[str, str] = {}
    born: dict[str, int] = {}
    dies: dict[str, int] = {}
    for i, op in enumerate(ops):
        for key in op.inputs:
            if key in root:
                dies[root[key]] = i
        renames = op.kind is OpKind.COPY and op.alias_ok and len(op.sources) == 1 and op.sources[0] in root
        for key in op.outputs:
            if values[key].kind is not ValueKind.INTERMEDIATE:
                continue
            root[key] = root[op.sources[0]] if renames else key
            if not renames:
                born[key] = dies[key] = i
    deltas = [0] * (len(ops) + 1)
    for key, start in born.items():
        deltas[start] += values[key].size_bytes
        deltas[dies[key] + 1] -= values[key].size_bytes
    live = peak = 0
    for delta in deltas:
        live += delta
        peak = max(peak, live)
    return peak


def _constant_bytes(op: NpuOp, values: dict[str, Value]) -> int:
    """The constant bytes ``op`` brings into the TCM (its streamed weights and parameters): not
    those it reads where they live (:meth:`NpuOp.reads_in_place`: the U55's matrix-vector
    weights, the command stream's parameters, a lookup's table), which hold no TCM beside it."""
    loaded = {key for key in op.sources if values[key].kind is ValueKind.CONSTANT}
    for s, step in enumerate(op.steps):
        for k, key in enumerate(step.operands):
            if isinstance(key, str) and values[key].kind is ValueKind.CONSTANT and not op.reads_in_place(s, k):
                loaded.add(key)
    return sum(values[key].size_bytes for key in loaded)


def _renames(ops: list[NpuOp], i: int, readers: dict[str, list[int]], values: dict[str, Value],
             block_outputs: set[str]) -> set[int]:
    """Indices of the copies that only rename operation ``i``'s result (``alias_ok`` copies
    of it, and of those, transitively) and whose results stay in the block."""
    found: set[int] = set()
    frontier = [ops[i].outputs[0]]
    while frontier:
        key = frontier.pop()
        for r in readers.get(key, ()):
            op = ops[r]
            if r in found or op.kind is not OpKind.COPY or not op.alias_ok or len(op.outputs) != 1:
                continue
            if op.outputs[0] in block_outputs or values[op.outputs[0]].kind is not ValueKind.INTERMEDIATE:
                continue
            found.add(r)
            frontier.append(op.outputs[0])
    return found


def _may_move(op: NpuOp, values: dict[str, Value], block_outputs: set[str]) -> bool:
    """One compute operation (not a composite) whose one result is local to the block, and which
    reads no variable."""
    if op.kind is not OpKind.COMPUTE or op.composite is not None or len(op.outputs) != 1:
        return False
    return values[op.outputs[0]].kind is ValueKind.INTERMEDIATE and op.outputs[0] not in block_outputs and \
        all(values[k].kind in _STILL for k in op.inputs)
