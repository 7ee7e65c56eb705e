"""Cascaded stripes: a chain of spatial operations runs in horizontal stripes, its
intermediates in rolling buffers of a few rows instead of whole activation maps.

Op by op, every intermediate of a CNN is a whole activation map, live from its producer to
its last reader, and the largest two or three of them set the TCM's peak. Run a chain of
consecutive operations stripe by stripe instead (Vela's cascading; MCUNetV2's patch-based
inference): the chain's last operation computes ``stripe_rows`` rows of its output per
stripe, and each earlier operation, walking back, the rows its readers in the chain need
next (their windows, halo included, from the kernels' window functions: the same kernels on
sub-regions, so the same bits). An *internal* value, written and read only inside the chain,
then lives in a :class:`RollingBuffer` of the few rows a stripe needs: at each stripe the
rows its readers still need (the halo) move to the top of the buffer (a TCM to TCM copy, in
chunks that never overlap), and its producer writes its new rows below them. Views stay plain
offsets and strides: no read ever wraps around.

Which chains: operations whose output is an NHWC map of batch 1 and two rows or more, that
the tiler can split (:class:`scheduler.passes.tiling.OpTiling`), not fused composites.
Starting at the operation where the most bytes are live (the block's peak), the chain of at
most :data:`MAX_CHAIN_OPS` operations around it, and the stripe height, that lower the bytes
live there the most are chosen; then the next peak, until a peak is inside a chain or no chain
lowers it; a chain whose operations run whole stay below the final peak is dropped. A graph
input staged into the TCM for the chain alone is not: the chain's first operation reads the rows
each stripe needs where the input lives; except, for performance, on a shared compute pipeline
(the Ethos-U presets, ``shared_compute_pipeline``), whose operations Vela times one after the other: there
the rows' DRAM reads would overlap the chain's later operations, where Vela's first operation
waits on its whole input (MobileNetV1 0.25/96 on the U85 ran 9% below Vela's cycles so; staged
as before, 0.85x), unless streaming takes most of the input off the block's peak (at least
:data:`STREAM_PEAK_SHARE` of its bytes: MobileNetV3-Small's 96x96x3 input set its peak on the
U85, 51,808 bytes staged against Vela's 46,448; 28,640 streamed). ``stripes.optimise: performance`` takes a chain only
when its estimated cycles (each operation's stripes as the tiler estimates a tile loop, loads
and stores included, and the halo copies at the vector unit's rate) stay within
``stripes.slack_fraction`` of its operations run whole (the tiler's fastest plans, and the copy
staging the input), and then its smallest stripes within that; ``size`` takes the smallest
stripes whatever they cost (Vela's ``--optimise Size``).

The search is the costly part of a block's compilation, and a graph that spills after its
first plan is compiled again: a :class:`ChainMemo` keeps every chain evaluated (and each
operation's stripes and plans) for the attempts after, which evaluate again only the chains
whose operands moved; a chain whose values live across it already hold more bytes than the
best found (or the peak) is not evaluated at all (:meth:`_ChainPlanner.least_bytes`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from npu_sim.hw.compute_units import CPU, VECTOR
from npu_sim.hw.config import HwConfig
from npu_sim.memory_layout import align_up, element_size_bytes
from npu_sim.reference.kernel_api import Region
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute
from scheduler import cost_model
from scheduler.ir.npu_ops import NpuOp, OpKind, Step
from scheduler.passes.tiling import TilePlan, Tiler, TilingProblem
from scheduler.passes.windows import region_size

#: Most operations in one chain (longer chains multiply the candidates the search evaluates).
MAX_CHAIN_OPS = 6
#: Stripe heights tried, in rows of the chain's last output.
STRIPE_ROWS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
#: Most stripes a chain runs in (lower stripes of a tall map cost setups and search time).
MAX_STRIPES = 64
#: Most peaks the search attacks in one block.
MAX_PEAKS = 32
#: On a shared compute pipeline (performance), chains stream staged inputs only where that takes
#: at least this share of their bytes off the block's peak (see the module doc).
STREAM_PEAK_SHARE = 0.5
H = 1   # the row dimension of an NHWC map


@dataclass(frozen=True)
class RollingBuffer:
    """An internal value of a chain kept ``rows`` rows at a time.

    At stripe ``s`` the buffer's first row holds row ``bases[s]`` of the value and rows
    ``[bases[s], ends[s])`` are in it once its producer's stripe is done."""

    key: str
    rows: int
    row_bytes: int
    whole_bytes: int
    bases: tuple[int, ...]
    ends: tuple[int, ...]

    @property
    def size_bytes(self) -> int:
        return self.rows * self.row_bytes

    def kept_rows(self, s: int) -> tuple[int, int]:
        """``(rows, from buffer row)``: the halo moved to the buffer's top before stripe ``s``
        (rows 0: nothing to move)."""
        if s == 0 or self.bases[s] == self.bases[s - 1]:
            return 0, 0
        kept = self.ends[s - 1] - self.bases[s]
        return max(0, kept), self.bases[s] - self.bases[s - 1]


@dataclass(frozen=True)
class StripedChain:
    """Operations ``first``..``last`` of a block run stripe by stripe.

    ``regions[i][s]``: the output region operation ``i`` computes in stripe ``s`` (None: none);
    ``rolling``: the internal values' buffers; ``est_cycles`` and ``whole_cycles``: the cost
    model's estimate of the chain striped and of its operations run whole; ``peak_bytes``: the
    bytes live during the chain (every value it touches, the internal ones as rolling buffers,
    and its operations' tile buffers); ``whole_peak_bytes``: the most live at one of its
    operations run whole."""

    first: int
    last: int
    stripe_rows: int
    stripe_count: int
    regions: dict[int, tuple[Region | None, ...]]
    rolling: dict[str, RollingBuffer]
    est_cycles: float
    whole_cycles: float
    peak_bytes: int
    whole_peak_bytes: int = 0
    plans: dict[int, TilePlan] = field(default_factory=dict)
    streamed: tuple[str, ...] = ()   # staged inputs the chain reads from their home instead

    @property
    def ops(self) -> range:
        return range(self.first, self.last + 1)


@dataclass
class ChainValues:
    """What the search needs to know of the block's values: each local value's TCM bytes and
    the operations using it (by its own key: the search leaves aliased values out), and
    which of them may become rolling buffers (local, unaliased, not forced to the DDR)."""

    sizes: dict[str, int]
    users: dict[str, set[int]]
    may_roll: Callable[[str], bool]
    #: staged copies of graph inputs (:mod:`scheduler.passes.staging`) -> the copying operation: a
    #: chain that is their only reader streams the rows each stripe needs from the input instead
    staged: dict[str, int] = field(default_factory=dict)


def output_rows(op: NpuOp) -> int:
    """Rows of ``op``'s NHWC output (0 if it is none: the operation cannot be striped)."""
    shape = tuple(op.output_type(0).shape) if op.outputs else ()
    return shape[H] if len(shape) == 4 and shape[0] == 1 else 0


def stripable(op: NpuOp, tiler: Tiler) -> bool:
    """An operation a chain may hold: one compute operation with one NHWC output of batch 1 and
    two rows or more, which the tiler can split (not a composite, not on the host CPU)."""
    return op.kind is OpKind.COMPUTE and op.composite is None and len(op.outputs) == 1 and \
        op.unit != CPU.name and output_rows(op) >= 2 and tiler.tiling(op).tileable


class ChainMemo:
    """The chains the searches of one graph evaluated, for the searches after them.

    Each compile attempt searches every block again, with the values spilled so far out of the
    TCM; a chain is evaluated again only if what it depends on changed: which values its
    operations read and write are in the TCM, which of its values may roll, and which staged
    inputs it streams (its ``peak_bytes``, which every value live across it makes, is summed
    at each search). Within an evaluation, its stripes and rolling buffers depend only on which
    values roll, and each operation's plan only on its stripes and which of its operands are
    in the TCM: those are kept too (chains that share an operation and its stripes share its
    plan). The memo belongs to one Tiler (the plans are its plans)."""

    def __init__(self) -> None:
        self._chains: dict[tuple, StripedChain | None] = {}
        self._shapes: dict[tuple, StripedChain | None] = {}
        self._plans: dict[tuple, TilePlan] = {}
        self._blocks: dict[int, Sequence[NpuOp]] = {}   # (kept so that their ids stay theirs)
        #: chains evaluated (a search that finds every chain here evaluates none)
        self.evaluations = 0

    def chain(self, ops: Sequence[NpuOp], key: tuple, evaluate: Callable[[], StripedChain | None]
              ) -> StripedChain | None:
        """The chain of block ``ops`` under ``key``, evaluated the first time it is asked for."""
        full = self._full(ops, key)
        if full not in self._chains:
            self.evaluations += 1
            self._chains[full] = evaluate()
        return self._chains[full]

    def shape(self, ops: Sequence[NpuOp], key: tuple, evaluate: Callable[[], StripedChain | None]
              ) -> StripedChain | None:
        """A chain's stripes and rolling buffers (no plans yet) under ``key``."""
        full = self._full(ops, key)
        if full not in self._shapes:
            self._shapes[full] = evaluate()
        return self._shapes[full]

    def plan(self, ops: Sequence[NpuOp], key: tuple, evaluate: Callable[[], TilePlan]) -> TilePlan:
        """An operation's plan in a chain under ``key``."""
        full = self._full(ops, key)
        plan = self._plans.get(full)
        if plan is None:
            plan = self._plans[full] = evaluate()
        return plan

    def _full(self, ops: Sequence[NpuOp], key: tuple) -> tuple:
        self._blocks.setdefault(id(ops), ops)
        return (id(ops), *key)


class _ChainPlanner:
    """Evaluates chains of one block: their stripes, rolling buffers, cycles and bytes."""

    def __init__(self, ops: Sequence[NpuOp], tiler: Tiler, values: ChainValues,
                 in_tcm: Callable[[str], bool], alignment: int, memo: ChainMemo, stream_inputs: bool = True):
        self.ops, self.tiler, self.values, self.in_tcm = ops, tiler, values, in_tcm
        self.stream_inputs = stream_inputs   # a chain may read a staged input where it lives
        self.hw: HwConfig = tiler.hw
        self.alignment = alignment
        self.ok = [stripable(op, tiler) for op in ops]
        self.memo = memo
        self._chains: dict[tuple[int, int, int], StripedChain | None] = {}   # (first, last, rows): the peaks share
        self._resident: dict[int, tuple[bool, ...]] = {}
        self._halo: dict[tuple[TensorType, int], float] = {}
        #: ``(key, first user, last user, bytes)`` of every value with users
        self._spans = [(key, min(users), max(users), values.sizes[key]) for key, users in values.users.items() if users]

    def stripes(self, first: int, last: int, rows: int) -> StripedChain | None:
        """The chain ``first``..``last`` in stripes of ``rows`` rows (see :meth:`_stripes`; each
        evaluated once, and once for the searches after this one while nothing it depends on
        changes: :class:`ChainMemo`), with its peak bytes."""
        key = (first, last, rows)
        if key not in self._chains:
            depends = self._depends(first, last)
            chain = self.memo.chain(self.ops, (first, last, rows, depends),
                                    lambda: self._stripes(first, last, rows, depends[1]))
            self._chains[key] = None if chain is None else dataclasses.replace(   # (plans: the compiler's to change)
                chain, plans=dict(chain.plans), peak_bytes=self._live_across(first, last, chain.rolling, chain.streamed)
                + sum(p.working_set_bytes for p in chain.plans.values()))
        return self._chains[key]

    def _depends(self, first: int, last: int) -> tuple:
        """What the chain ``first``..``last`` depends on beyond the operations themselves: which
        values they read and write are in the TCM, which of their results may roll, the staged
        inputs the chain streams."""
        ops = self.ops
        for j in range(first, last + 1):
            if j not in self._resident:
                self._resident[j] = tuple(self.in_tcm(k) for k in (*ops[j].inputs, *ops[j].outputs))
        return (tuple(self._resident[j] for j in range(first, last + 1)),
                tuple(self._may_roll(ops[j].outputs[0], first, last) for j in range(first, last + 1)),
                self._streamed(first, last))

    # -- one chain, one stripe height
    def _stripes(self, first: int, last: int, rows: int, rolls: tuple[bool, ...]) -> StripedChain | None:
        """The chain ``first``..``last`` in stripes of ``rows`` rows of its last output (see
        :meth:`_shape`; ``rolls``: which of its operations' results may roll), with its plans."""
        shape = self.memo.shape(self.ops, (first, last, rows, rolls), lambda: self._shape(first, last, rows))
        return None if shape is None else self._with_plans(shape)

    def _shape(self, first: int, last: int, rows: int) -> StripedChain | None:
        """The chain ``first``..``last`` in stripes of ``rows`` rows of its last output, without
        plans, or None when it cannot be (a window of an internal value not whole across its
        width and channels, rows that would have to come back) or has nothing to roll."""
        ops = self.ops
        height = output_rows(ops[last])
        edges = list(range(0, height, rows)) + [height]
        count = len(edges) - 1
        produced = {ops[j].outputs[0]: j for j in range(first, last + 1)}
        rolling_keys = [k for k, j in produced.items() if self._may_roll(k, first, last)]
        if not rolling_keys:
            return None
        reads: dict[str, list[list[tuple[int, int]]]] = {k: [[] for _ in range(count)] for k in produced}
        ends_of: dict[str, list[int]] = {}
        regions = self._walk_back(first, last, edges, produced, set(rolling_keys), reads, ends_of)
        if regions is None:
            return None
        rolling = {key: self._rolling(key, ops[produced[key]], reads[key], ends_of[key]) for key in rolling_keys}
        if not _saves(rolling):
            return None
        buffers = {key: b for key, b in rolling.items() if b is not None}
        return StripedChain(first, last, rows, count, regions, buffers, 0.0, 0.0, 0)

    def _with_plans(self, chain: StripedChain) -> StripedChain:
        """``chain`` with its operations' plans and the staged inputs it streams (its peak bytes
        are :meth:`stripes`')."""
        streamed = self._streamed(chain.first, chain.last)

        def in_tcm(key: str) -> bool:
            return key not in streamed and self.in_tcm(key)

        plans = {j: self._plan(j, chain.regions[j], in_tcm) for j in chain.ops}
        est, whole = self._cycles(chain, plans, streamed)
        return dataclasses.replace(chain, plans=plans, streamed=streamed, est_cycles=est, whole_cycles=whole)

    def _plan(self, j: int, regions: tuple[Region | None, ...], in_tcm: Callable[[str], bool]) -> TilePlan:
        """Operation ``j``'s plan in stripes with output ``regions`` (:func:`chain_plan`; it
        depends on which of the operation's operands are in the TCM)."""
        op = self.ops[j]
        resident = tuple(in_tcm(k) for k in (*op.inputs, *op.outputs))
        return self.memo.plan(self.ops, (j, regions, resident),
                              lambda: chain_plan(op, regions, in_tcm, self.tiler, self.alignment))

    def _streamed(self, first: int, last: int) -> tuple[str, ...]:
        """The staged inputs the chain ``first``..``last`` reads where they live (see the module doc)."""
        if not self.stream_inputs:
            return ()
        return tuple(k for k, copy in self.values.staged.items()
                     if copy < first and self._may_stream(k, copy, first, last))

    def _may_stream(self, key: str, copy: int, first: int, last: int) -> bool:
        """True if the chain ``first``..``last`` is the only reader of staged input ``key``."""
        readers = self.values.users.get(key, set()) - {copy}
        return bool(readers) and all(first <= u <= last for u in readers)

    def _walk_back(self, first: int, last: int, edges: list[int], produced: dict[str, int], rolling: set[str],
                   reads: dict[str, list[list[tuple[int, int]]]], ends_of: dict[str, list[int]]
                   ) -> dict[int, tuple[Region | None, ...]] | None:
        """Each operation's output region per stripe, from the last operation (its stripes at
        ``edges``) back to the first (the rows its readers read), filling in ``reads`` and each
        value's rows done by each stripe's end (``ends_of``); None if an operation cannot follow."""
        regions: dict[int, tuple[Region | None, ...]] = {}
        for j in range(last, first - 1, -1):
            op = self.ops[j]
            key = op.outputs[0]
            ends = ends_of[key] = _ends(reads[key], edges if j == last else None, output_rows(op))
            found = self._regions(j, ends, produced, rolling, reads)
            if found is None:
                return None
            regions[j] = found
        return regions

    def _may_roll(self, key: str, first: int, last: int) -> bool:
        users = self.values.users.get(key, set())
        return bool(users) and self.values.may_roll(key) and all(first <= u <= last for u in users)

    def _regions(self, j: int, ends: list[int], produced: dict[str, int], rolling: set[str],
                 reads: dict[str, list[list[tuple[int, int]]]]) -> tuple[Region | None, ...] | None:
        """Operation ``j``'s output region in each stripe (new rows up to ``ends[s]``), recording
        the rows of values produced in the chain each stripe reads; None if an internal value's
        window is not whole across its width and channels."""
        op = self.ops[j]
        tiling = self.tiler.tiling(op)
        shape = tiling.out_shape
        out: list[Region | None] = []
        done = 0
        for s, end in enumerate(ends):
            if end <= done:
                out.append(None)
                continue
            region: Region = tuple((done, end) if d == H else (0, n) for d, n in enumerate(shape))
            for step, tile in zip(op.steps, tiling.windows(region)):
                for operand, window, type_ in zip(step.operands, tile.windows, step.input_types):
                    if not isinstance(operand, str) or produced.get(operand, j) >= j:
                        continue
                    if operand in rolling and not _whole_but_rows(window, tuple(type_.shape)):
                        return None
                    reads[operand][s].append(window[H])
            out.append(region)
            done = end
        return tuple(out)

    def _rolling(self, key: str, producer: NpuOp, reads: list[list[tuple[int, int]]], ends: list[int]
                 ) -> RollingBuffer | None:
        """The rolling buffer of internal value ``key`` (``producer``'s output; None if its readers
        would need a row back that an earlier stripe let go)."""
        count = len(ends)
        rows = ends[-1]
        needed = [rows] * count   # the first row a stripe from s on still reads
        low = rows
        for s in range(count - 1, -1, -1):
            low = min([low] + [a for a, b in reads[s] if b > a])
            needed[s] = low
        bases, previous_end, previous_base = [], 0, 0
        for s in range(count):
            base = min(needed[s], previous_end)
            if base < previous_base:
                return None
            bases.append(base)
            previous_end, previous_base = ends[s], base
        height = max(e - b for b, e in zip(bases, ends))
        type_ = producer.output_type(0)
        row_bytes = math.prod(type_.shape[H + 1:]) * element_size_bytes(type_.dtype)   # (batch 1)
        return RollingBuffer(key, height, row_bytes, rows * row_bytes, tuple(bases), tuple(ends))

    def _cycles(self, chain: StripedChain, plans: dict[int, TilePlan], streamed: tuple[str, ...]
                ) -> tuple[float, float]:
        """Estimated cycles of the chain striped (its operations' stripe plans, loads and stores
        included, and the halo copies on the vector unit) and of its operations run whole (the
        tiler's fastest plans, and the copies staging the inputs the chain streams instead)."""
        hw = self.hw
        striped = sum(plan.est_cycles for plan in plans.values())
        whole = sum(self.tiler.best_estimate(self.ops[j], self.in_tcm) for j in chain.ops)
        whole += sum(cost_model.dma_issue_cycles(hw, self.values.sizes[key]) for key in streamed)
        copy_setup = cost_model.unit_setup_cycles(hw, VECTOR.name)
        for key, buffer in chain.rolling.items():
            type_ = self.ops[_producer(self.ops, chain, key)].output_type(0)
            for s in range(len(buffer.bases)):
                for _, rows in halo_chunks(*buffer.kept_rows(s)):
                    striped += copy_setup + self._halo_copy_cycles(type_, rows)
        return striped, whole

    def _halo_copy_cycles(self, type_: TensorType, rows: int) -> float:
        """:func:`halo_copy_cycles` on this planner's machine, once per map type and rows (every
        stripe height of every chain asks again for the same few)."""
        cycles = self._halo.get((type_, rows))
        if cycles is None:
            cycles = self._halo[(type_, rows)] = halo_copy_cycles(self.hw, type_, rows)
        return cycles

    def least_bytes(self, first: int, last: int) -> int:
        """A floor under the peak bytes of the chain ``first``..``last`` in any stripes: the
        values live across it but those that may roll (whole; the staged inputs it streams not
        at all), no rolling buffer and no tile buffer."""
        produced = {self.ops[j].outputs[0] for j in range(first, last + 1)}
        rolls = {k for k in produced if self._may_roll(k, first, last)}
        streamed = self._streamed(first, last)
        return sum(size for key, lo, hi, size in self._spans
                   if hi >= first and lo <= last and key not in streamed and key not in rolls)

    def _live_across(self, first: int, last: int, rolling: dict[str, RollingBuffer], streamed: tuple[str, ...]) -> int:
        """Bytes of the values live during operations ``first``..``last`` run in stripes: every
        value used there or live across them, whole, the internal ones as rolling buffers (the
        ``streamed`` staged inputs not at all: their tiles are the operations' working sets)."""
        total = 0
        for key, lo, hi, size in self._spans:
            if hi < first or lo > last or key in streamed:
                continue
            buffer = rolling.get(key)
            total += align_up(buffer.size_bytes, self.alignment) if buffer is not None else size
        return total

    # -- the search
    def best(self, first: int, last: int, slack: float | None, beat_bytes: int | None = None) -> StripedChain | None:
        """The chain ``first``..``last`` in the stripes that need the fewest bytes (with
        ``slack``: among those whose estimated cycles stay within it; ties: fewer cycles), or
        None. Heights go up from one row; taller stripes need more bytes, so the search stops at
        the first that needs more than a stripe height that fits, or than ``beat_bytes`` (what a
        chain must need less than to be taken: the bytes live at the peak it is for)."""
        height = output_rows(self.ops[last])
        best: StripedChain | None = None
        for rows in STRIPE_ROWS:
            if rows >= height:
                break
            chain = self.stripes(first, last, rows) if -(-height // rows) <= MAX_STRIPES else None
            if chain is None:
                continue
            if best is not None and chain.peak_bytes > best.peak_bytes or \
                    beat_bytes is not None and chain.peak_bytes >= beat_bytes:
                break
            if (slack is None or chain.est_cycles <= chain.whole_cycles * (1 + slack)) and \
                    (best is None or (chain.peak_bytes, chain.est_cycles) < (best.peak_bytes, best.est_cycles)):
                best = chain
        return best


def _saves(rolling: dict[str, RollingBuffer | None]) -> bool:
    """True if every internal value got a rolling buffer and one of them is smaller than whole."""
    buffers = list(rolling.values())
    return all(b is not None for b in buffers) and any(b.size_bytes < b.whole_bytes for b in buffers if b is not None)


def _ends(reads: list[list[tuple[int, int]]], edges: list[int] | None, rows: int) -> list[int]:
    """Rows of an operation's output done by the end of each stripe: the stripe edges for the
    chain's last operation, else what its readers in the chain read up to; all of them at the last."""
    ends, done = [], 0
    for s, windows in enumerate(reads):
        want = edges[s + 1] if edges is not None else max([b for a, b in windows if b > a], default=0)
        done = max(done, min(want, rows))
        ends.append(done)
    ends[-1] = rows
    return ends


def _whole_but_rows(window: Region, shape: tuple[int, ...]) -> bool:
    """True if ``window`` covers a value of ``shape`` whole in every dimension but the rows."""
    return len(window) == 4 == len(shape) and all(window[d] == (0, shape[d]) for d in (0, 2, 3))


def _producer(ops: Sequence[NpuOp], chain: StripedChain, key: str) -> int:
    return next(j for j in chain.ops if ops[j].outputs[0] == key)


def halo_copy_cycles(hw: HwConfig, type_: TensorType, rows: int) -> float:
    """The vector unit's cycles copying ``rows`` rows of an NHWC map of ``type_`` within the TCM
    (an IDENTITY, as :meth:`scheduler.codegen.emit.Emitter.copy` makes it; setup excluded)."""
    slab = TensorType(tuple(rows if d == H else n for d, n in enumerate(type_.shape)), type_.dtype)
    step = Step(Op.IDENTITY, make_attribute(Op.IDENTITY), ("halo",), (slab,), (slab,), "halo")
    region = tuple((0, n) for n in slab.shape)
    size = slab.element_count * element_size_bytes(slab.dtype)
    return max(cost_model.command_cycles(hw, VECTOR.name, [step], [region]), cost_model.tcm_cycles(hw, 2 * size))


def halo_chunks(kept: int, shift: int) -> list[tuple[int, int]]:
    """``(from row, rows)`` of each copy moving ``kept`` rows up by ``shift`` rows, in chunks of
    at most ``shift`` rows (a chunk's source and destination never overlap), first to last."""
    if kept <= 0 or shift <= 0:
        return []
    return [(start, min(shift, kept - start)) for start in range(0, kept, shift)]


def chain_plan(op: NpuOp, regions: Sequence[Region | None], in_tcm: Callable[[str], bool], tiler: Tiler,
               alignment: int) -> TilePlan:
    """The tile plan of one operation of a chain: a tile per stripe, each streamed operand in
    buffers as large as its largest window (two when the windows move), each output not in the
    TCM in two buffers as large as its largest stripe; its cycles as the tiler estimates a tile
    loop (the operands that do not move loaded once, the others per stripe, the stores)."""
    problem = TilingProblem(op, in_tcm, tiler.const_lookup, tiler.hw, alignment)
    tiling = tiler.tiling(op)
    stripes = [region for region in regions if region is not None]
    windows = {slot: [tiling.windows(r)[slot[0]].windows[slot[1]] for r in stripes] for slot, _ in problem.slots()}
    moving = {slot for slot, seen in windows.items() if len(set(seen)) > 1}
    slot_bytes = {slot: _largest_window_bytes(op, slot, seen, alignment) for slot, seen in windows.items()}
    slot_buffers = {slot: 2 if slot in moving else 1 for slot in windows}
    out_rows = max([1] + [r[H][1] - r[H][0] for r in stripes])
    tile = tuple(out_rows if d == H else n for d, n in enumerate(tiling.out_shape))
    outputs = problem.streamed_outputs()
    output_bytes = {k: align_up(math.prod(tile) * element_size_bytes(op.output_type(k).dtype), alignment)
                    for k in outputs}
    working_set = sum(slot_bytes[s] * slot_buffers[s] for s in slot_bytes) + 2 * sum(output_bytes.values())
    est, moved = _loop_estimate(op, tiler, stripes, windows, moving, outputs)
    return TilePlan(tiling.out_shape, tile, (H,), slot_bytes, slot_buffers, output_bytes, 2, working_set, est, moved)


def _largest_window_bytes(op: NpuOp, slot: tuple[int, int], windows: list[Region], alignment: int) -> int:
    return align_up(max([1] + [region_size(w) for w in windows]) * _element_bytes(op, slot), alignment)


def _loop_estimate(op: NpuOp, tiler: Tiler, stripes: list[Region], windows: dict[tuple[int, int], list[Region]],
                   moving: set[tuple[int, int]], outputs: list[int]) -> tuple[float, int]:
    """Estimated cycles of ``op``'s stripes as a tile loop (:func:`scheduler.cost_model.tile_loop_cycles`),
    and the bytes its DMAs move."""
    invariant = [region_size(seen[0]) * _element_bytes(op, slot) for slot, seen in windows.items()
                 if slot not in moving and seen]
    varying = sum(region_size(w) * _element_bytes(op, slot) for slot in moving for w in windows[slot])
    stored = sum(region_size(r) for r in stripes) * sum(element_size_bytes(op.output_type(k).dtype) for k in outputs)
    count = max(1, len(stripes))
    setup = cost_model.unit_setup_cycles(tiler.hw, op.unit)
    compute = sum(tiler.tiling(op).compute_cycles(tiler.hw, r) + setup for r in stripes)
    est = cost_model.tile_loop_cycles(tiler.hw, invariant, varying, len(moving) * count, stored,
                                      len(outputs) * count, compute / count, count)
    return est, int(sum(invariant) + varying + stored)


def _element_bytes(op: NpuOp, slot: tuple[int, int]) -> int:
    return element_size_bytes(op.steps[slot[0]].input_types[slot[1]].dtype)


def find_chains(ops: Sequence[NpuOp], tiler: Tiler, values: ChainValues, in_tcm: Callable[[str], bool],
                alignment: int, memo: ChainMemo | None = None) -> list[StripedChain]:
    """The block's striped chains, peak by peak (see the module doc); none unless the config's
    ``stripes`` asks for them. ``memo``: the chains earlier searches with ``tiler`` evaluated."""
    config = tiler.hw.stripes
    if not config.enabled:
        return []
    slack = None if config.optimise == "size" else config.slack_fraction
    memo = memo if memo is not None else ChainMemo()
    sequential = tiler.hw.shared_compute_pipeline and config.optimise == "performance"
    chains, peak = _search(_ChainPlanner(ops, tiler, values, in_tcm, alignment, memo, not sequential), values, slack)
    if sequential and values.staged:
        streaming, streamed_peak = _search(_ChainPlanner(ops, tiler, values, in_tcm, alignment, memo, True),
                                           values, slack)
        staged_bytes = sum([values.sizes[key] for key in values.staged])
        if peak - streamed_peak >= staged_bytes * STREAM_PEAK_SHARE:
            return streaming
    return chains


def _search(planner: _ChainPlanner, values: ChainValues, slack: float | None) -> tuple[list[StripedChain], int]:
    """The chains :func:`find_chains` takes with ``planner``, and the block's peak bytes then."""
    ops = planner.ops
    live = _live_profile(len(ops), values)
    taken = [False] * len(ops)
    chains: list[StripedChain] = []
    for _ in range(MAX_PEAKS):
        if not live:
            break
        peak = int(np.argmax(live))
        if taken[peak] or not planner.ok[peak]:
            break
        chain = _best_around(planner, peak, taken, live[peak], slack)
        if chain is None:
            break
        chains.append(dataclasses.replace(chain, whole_peak_bytes=max(live[chain.first:chain.last + 1])))
        for j in chain.ops:
            taken[j] = True
            live[j] = chain.peak_bytes
    peak_bytes = max(live, default=0)
    return _needed(chains, peak_bytes), peak_bytes


def _needed(chains: list[StripedChain], peak_bytes: int) -> list[StripedChain]:
    """``chains`` by their first operation, without those whose operations run whole stay at or
    below the block's peak with the others striped, ``peak_bytes`` (they would cost for nothing)."""
    return [c for c in sorted(chains, key=lambda c: c.first) if c.whole_peak_bytes > peak_bytes]


def _best_around(planner: _ChainPlanner, peak: int, taken: list[bool], live_bytes: int,
                 slack: float | None) -> StripedChain | None:
    """The chain through operation ``peak`` (of free, stripable operations) that lowers the
    bytes live there the most (ties: fewer cycles, then the earliest and shortest)."""
    # the candidates with the lowest floor first (they prune the others the soonest); the first
    # in the order of _spans_around wins ties
    spans = _spans_around(planner, peak, taken)
    floors = [planner.least_bytes(first, last) for first, last in spans]
    best: tuple[int, float, int, StripedChain] | None = None
    for floor, k in sorted(zip(floors, range(len(spans)))):
        if floor >= live_bytes or (best is not None and floor > best[0]):
            break   # (no stripes of it, nor of those after it, can be chosen)
        # (a chain must need fewer bytes than are live here, and no more than the best so far)
        chain = planner.best(*spans[k], slack, live_bytes if best is None else min(live_bytes, best[0] + 1))
        if chain is not None and chain.peak_bytes < live_bytes and \
                (best is None or (chain.peak_bytes, chain.est_cycles, k) < best[:3]):
            best = (chain.peak_bytes, chain.est_cycles, k, chain)
    return best[3] if best is not None else None


def _spans_around(planner: _ChainPlanner, peak: int, taken: list[bool]) -> list[tuple[int, int]]:
    """``(first, last)`` of every chain through operation ``peak`` of free, stripable operations,
    at most :data:`MAX_CHAIN_OPS` of them, the earliest first, then the shortest."""
    def free(j: int) -> bool:
        return 0 <= j < len(taken) and planner.ok[j] and not taken[j]

    lo = peak
    while lo - 1 > peak - MAX_CHAIN_OPS and free(lo - 1):
        lo -= 1
    hi = peak
    while hi + 1 < peak + MAX_CHAIN_OPS and free(hi + 1):
        hi += 1
    return [(first, last) for first in range(lo, peak + 1)
            for last in range(max(peak, first + 1), min(hi, first + MAX_CHAIN_OPS - 1) + 1)]


def _live_profile(count: int, values: ChainValues) -> list[int]:
    """Bytes of the local values live at each operation (op by op, whole)."""
    live = [0] * count
    for key, users in values.users.items():
        if users:
            for i in range(min(users), max(users) + 1):
                live[i] += values.sizes[key]
    return live
