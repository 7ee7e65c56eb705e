"""Block compilation: lowered operations to abstract commands, block by block.

For one block: alias RESHAPE/IDENTITY copies where the bytes can be shared,
group each intermediate with its aliases, decide which groups stay in TCM
(:mod:`scheduler.passes.residency`, which also picks every operation's tile plan),
place the groups (TCM activation buffers or DDR spill buffers) and emit the
commands (:mod:`scheduler.codegen.emit`).

Control flow: the values a COND_IF/WHILE_LOOP reads and writes are planned
like any other (TCM if they fit, else DDR). Branch blocks are compiled
recursively with their inputs bound (by position) to the operator's operands
and their outputs to the operator's results; a result that is not computed in
place (a block input passed through, a constant, a repeat) is copied. A
WHILE_LOOP keeps its loop-carried state in TCM buffers when they leave room
for the body (else in DDR): the operands are copied in before the loop, the
condition block reads the state and writes the condition, the body writes
fresh buffers that are copied back at the end of each iteration, and the state
is copied to the results after the loop (unless the results are the state).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeGuard

import numpy as np

from npu_sim.errors import ScheduleError
from npu_sim.memory_layout import align_up, element_size_bytes
from npu_sim.program import MemorySpace, RollingBufferStats, StripedChainStats
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op
from scheduler.codegen.concat_in_place import Spans, live_spans, merge_spans, slice_offsets_bytes, worth_it
from scheduler.codegen.emit import Emitter, staging_need_bytes
from scheduler.codegen.result_over_input import readers_by_key, reusable_input
from scheduler.codegen.stream import ACommand, ACompute, ACond, ADma, ALoop, OpRecord
from scheduler.codegen.stripe_emit import emit_chain
from scheduler.cost_model import dma_issue_cycles
from scheduler.ir.npu_ops import LoweredBlock, NpuOp, OpKind, Value, ValueKind, copied_graph_input, copy_producers
from scheduler.memory.buffers import Buffer, Placement
from scheduler.memory.fixed_placements import Fixed
from scheduler.passes.cascade import follow_producers
from scheduler.passes.residency import Group, ResidencyResult, decide
from scheduler.passes.stripes import ChainMemo, ChainValues, StripedChain, chain_plan, find_chains
from scheduler.passes.tiling import TilePlan, Tiler

DDR, TCM = MemorySpace.DDR, MemorySpace.TCM


#: Staged inputs are loaded in up to this many row bands of at least STAGING_BAND_BYTES
#: (the first tiles start after the first band).
STAGING_BANDS = 4
STAGING_BAND_BYTES = 8192

@dataclass
class _Emitted:
    """One operation's commands; ``hoisted`` loads of later operations go in after its own loads."""

    index: int
    kind: OpKind
    commands: list
    cut: int
    hoisted: list = field(default_factory=list)
    chain: bool = False   # a striped chain: later loads do not move into it (its tiles fill its room)


class NeedRoom(Exception):
    """A control-flow block did not fit beside the resident values live across it."""

    def __init__(self, keys: set[str], error: ScheduleError):
        self.keys = keys
        self.error = error
        super().__init__(str(error))


@dataclass
class CompileContext:
    """Everything block compilation shares across blocks and attempts."""

    values: dict[str, Value]
    fixed: dict[str, Placement]          # inputs, outputs, constants, variables
    const_ddr: dict[str, Placement]      # DDR home of every constant (pooled ones too)
    tiler: Tiler
    emitter: Emitter
    alignment: int
    max_iterations: int
    evicted: set[str] = field(default_factory=set)
    records: list[OpRecord] = field(default_factory=list)
    group_buffers: dict[int, str] = field(default_factory=dict)   # buffer serial -> group root
    #: the LSTM cells' state values, kept in the DDR (``tcm.ddr_recurrent_state``)
    recurrent_state: frozenset[str] = frozenset()
    striped: list[StripedChainStats] = field(default_factory=list)   # chains run in stripes, for reports
    rolling_whole: dict[int, int] = field(default_factory=dict)   # rolling buffer serial -> whole bytes
    #: the striped chains evaluated so far, for the searches of later attempts (with ``tiler``)
    chain_memo: ChainMemo = field(default_factory=ChainMemo)

    def const_lookup(self, key: str) -> np.ndarray | None:
        value = self.values.get(key)
        return value.data if value is not None and value.kind is ValueKind.CONSTANT else None

    def record(self, op: NpuOp, block: str, plan: TilePlan | None = None) -> int:
        """A record of ``op`` (and of its tiling) for reports; its index."""
        record = OpRecord(op.name, op.op_label, op.unit or _unit_name(op), op.graph_ops, op.macs, block=block,
                          composite=op.composite)
        if plan is not None:
            record.tile_shape, record.tile_count = plan.tile_shape, plan.tile_count
            record.working_set_bytes = plan.working_set_bytes
        self.records.append(record)
        return len(self.records) - 1


def _unit_name(op: NpuOp) -> str:
    return "dma" if op.kind is OpKind.COPY else "sequencer"


class _BlockCompiler:
    def __init__(self, ctx: CompileContext, block: LoweredBlock, bindings: dict[str, Placement],
                 capacity_bytes: int):
        self.ctx = ctx
        self.block = block
        self.bindings = dict(bindings)
        self.capacity = capacity_bytes
        self.alias: dict[str, str] = {}
        self.alias_offset: dict[str, int] = {}   # bytes into the aliased value (SLICE)
        self.skip: set[int] = set()
        self.cascades: dict[int, list[int]] = {}   # consumer op index -> producer tile each tile waits for
        self.chains: list[StripedChain] = []        # operations run in stripes (passes/stripes.py)
        self.buffers: dict[str, Buffer] = {}
        self.placed: dict[str, Placement] = {}   # place() results
        self.pool_chunks: Callable[[int], list[ACommand]] | None = None   # main block: constant pool loads
        self.copy_producers: dict[str, NpuOp] | None = None   # value -> the COPY operation writing it

    # -- values
    def root(self, key: str) -> str:
        while key in self.alias:
            key = self.alias[key]
        return key

    def offset(self, key: str) -> int:
        """Bytes from the start of ``key``'s root to ``key`` (aliased slices)."""
        total = 0
        while key in self.alias:
            total += self.alias_offset.get(key, 0)
            key = self.alias[key]
        return total

    def is_local(self, key: str) -> bool:
        """A value this block computes and places (not bound, not fixed)."""
        return key not in self.bindings and key not in self.ctx.fixed and \
            self.ctx.values[key].kind is ValueKind.INTERMEDIATE

    def place(self, key: str) -> Placement:
        """Where value ``key`` lives (remembered until aliases or buffers change)."""
        placement = self.placed.get(key)
        if placement is None:
            placement = self.placed[key] = self._place(key)
        return placement

    def _place(self, key: str) -> Placement:
        type_ = self.ctx.values[key].type
        root = self.root(key)
        if root in self.buffers:
            return Placement(self.buffers[root], self.offset(key), type_)
        if root in self.bindings:
            return self.bindings[root].shifted(self.offset(key), type_)
        if root in self.ctx.fixed:
            return self.ctx.fixed[root].shifted(self.offset(key), type_)
        raise ScheduleError(f"block {self.block.name!r}: value {key!r} is read before it is computed")

    def ddr_place(self, key: str) -> Placement:
        root = self.root(key)
        if root in self.ctx.const_ddr:
            return self.ctx.const_ddr[root].shifted(self.offset(key), self.ctx.values[key].type)
        return self.place(key)

    def copy_source(self, op: NpuOp) -> Placement:
        """What a COPY operation reads: its source, or the slice of it (SLICE copies)."""
        src, dst = op.sources[0], op.outputs[0]
        return self.place(src).shifted(_slice_offset_bytes(op, self.ctx.values[src]), self.ctx.values[dst].type) \
            if op.slice_offset_elements is not None else self.place(src)

    def _copied_graph_input(self, key: str) -> bool:
        """Whether value ``key`` is a copy of part of a graph input made in this block (a SLICE of
        it: an LSTM's time step), a feature map Vela's NPU reads where it lives, the DDR, at every
        use; we copy it into the TCM ahead (the latency of a whole graph input, loaded or staged
        before the first operation, is already on the way)."""
        root, sliced = self._graph_input_copy(key)
        return root is not None and sliced

    def _graph_input_home(self, key: str) -> bool:
        """Whether value ``key`` is a copy (whole or a slice, staged ahead into the TCM) of a graph
        input whose home is the DDR: an NPU without input staging reads it there."""
        root, _ = self._graph_input_copy(key)
        return root is not None and root != key and self.place(root).memory is DDR

    def _graph_input_copy(self, key: str) -> tuple[str | None, bool]:
        """The graph input value ``key`` is (a copy made in this block of), None if none; and whether
        a SLICE is among the copies."""
        if self.copy_producers is None:
            self.copy_producers = copy_producers(self.block)
        return copied_graph_input(key, self.copy_producers, self.ctx.values)

    def make_alias(self, i: int, op: NpuOp) -> None:
        """COPY operation ``i`` moves nothing: its result is (a slice of) its source's bytes."""
        dst, src = op.outputs[0], op.sources[0]
        self.alias[dst] = src
        self.alias_offset[dst] = _slice_offset_bytes(op, self.ctx.values[src])
        self.placed.clear()
        self.skip.add(i)

    def write_in_place(self, i: int, op: NpuOp) -> None:
        """COPY operation ``i`` moves nothing: its source is computed into its result's bytes."""
        self.alias[op.sources[0]] = op.outputs[0]
        self.alias_offset[op.sources[0]] = 0
        self.placed.clear()
        self.skip.add(i)

    # -- passes
    def find_aliases(self) -> None:
        concats = []
        for i, op in enumerate(self.block.ops):
            if op.kind is OpKind.COPY and op.alias_ok and not op.staged:
                dst, src = op.outputs[0], op.sources[0]
                if self.is_local(dst) and self.ctx.values[src].kind is not ValueKind.VARIABLE:
                    self.make_alias(i, op)
                elif self._receives_in_place(op):
                    self.write_in_place(i, op)
            elif op.kind is OpKind.COMPUTE and op.steps and op.steps[0].op is Op.CONCAT:
                concats.append(i)
        spans: Spans | None = None   # (the block's live spans, computed once: see _concat_in_place)
        for i in concats:
            found = self._concat_operands(self.block.ops[i])
            if found is not None:
                spans = spans if spans is not None else self._live_spans()
                self._concat_in_place(i, self.block.ops[i], *found, spans)

    def _results_over_inputs(self) -> bool:
        """Alias each elementwise result to an input it may be written over
        (:mod:`scheduler.codegen.result_over_input`), outside the striped chains (Vela reuses no
        IFM in a cascade); whether any was."""
        ops = self.block.ops
        chained = {i for chain in self.chains for i in chain.ops}
        readers = readers_by_key(ops, self.skip)
        keys_of: dict[str, list[str]] = {}   # root -> the keys read whose root it is
        for key in readers:
            keys_of.setdefault(self.root(key), []).append(key)
        written: dict[str, int] = {}   # root -> the operation whose result last took its bytes

        def later_reader(r: str, i: int) -> bool:
            since = written.get(r, -1)
            return any(j != i and j > since for k in keys_of.get(r, ()) for j in readers[k])

        for i, op in enumerate(ops):
            if i in self.skip or i in chained:
                continue
            r = reusable_input(i, op, self.ctx.values, self.root, self.offset, self.is_local, later_reader)
            if r is None:
                continue
            dst = op.outputs[0]
            self.alias[dst] = r
            self.alias_offset[dst] = 0
            keys_of.setdefault(r, []).extend(keys_of.pop(dst, ()))
            written[r] = i
        self.placed.clear()
        return bool(written)

    def _live_spans(self) -> Spans:
        """The block's values' spans for :func:`worth_it` (a home in the TCM: from the start or to the end)."""
        ops = self.block.ops
        spans = live_spans(ops, self.skip, self.root, lambda r: self.is_local(r) or self._tcm_home(r))
        for r, span in spans.items():
            if not self.is_local(r):
                span[0], span[1] = 0 if self._home_from_start(r) else span[0], len(ops) - 1
        return spans

    def _concat_in_place(self, i: int, op: NpuOp, operands: list[str], offsets: tuple[int, ...],
                         spans: Spans) -> None:
        """Compute the inputs of CONCAT operation ``i`` into their slices of its result where
        :mod:`scheduler.codegen.concat_in_place` says so; the CONCAT then runs nothing (``spans``
        then take the inputs into the result's)."""
        result = self.root(op.outputs[0])
        values, alignment = self.ctx.values, self.ctx.alignment
        if not all(k in spans for k in (*operands, result)) or \
                not worth_it(spans, operands, result, lambda r: align_up(values[r].size_bytes, alignment),
                             len(self.block.ops)):
            return
        merge_spans(spans, operands, result)
        for key, at in zip(operands, offsets):
            self.alias[key] = op.outputs[0]
            self.alias_offset[key] = at
        self.placed.clear()
        self.skip.add(i)

    def _concat_operands(self, op: NpuOp) -> tuple[list[str], tuple[int, ...]] | None:
        """The values a CONCAT's inputs are (the roots of RESHAPEs of them) and their offsets in
        its result, if each may take its slice of the result; else None."""
        offsets = slice_offsets_bytes(op, self.ctx.values)
        if offsets is None:
            return None
        values = self.ctx.values
        keys = [str(k) for k in op.steps[0].operands]
        operands = [self.root(k) for k in keys]
        result = self.root(op.outputs[0])
        if len(set(operands)) != len(operands) or result in operands or \
                not (self.is_local(result) or self._tcm_home(result)):
            return None
        if not all(self.is_local(r) and self.offset(k) == 0 and values[r].size_bytes == values[k].size_bytes
                   for k, r in zip(keys, operands)):
            return None
        return operands, offsets

    def _tcm_home(self, key: str) -> bool:
        """Whether ``key`` is a tensor whose home is the TCM (not the block's to place)."""
        home = self.ctx.fixed.get(key)
        return home is not None and home.memory is TCM and not self.is_local(key)

    def _home_from_start(self, key: str) -> bool:
        buffer = self.ctx.fixed[key].buffer
        return buffer.whole_program or buffer.host_writes

    def _receives_in_place(self, op: NpuOp) -> bool:
        """Whether a RESHAPE's result whose home is the TCM (a graph output in the arena of a
        Shared_Sram NPU) can take its source's bytes: the source is computed there, as Vela
        writes a graph's last feature map into its output tensor."""
        dst, src = op.outputs[0], op.sources[0]
        home = self.ctx.fixed.get(dst)
        return (op.slice_offset_elements is None and home is not None and home.memory is TCM
                and self.is_local(src) and src not in self.alias
                and self.ctx.values[src].size_bytes == self.ctx.values[dst].size_bytes)

    def groups(self) -> tuple[dict[str, Group], set[str]]:
        """Groups of local values (by root) and the roots that must live in DDR."""
        groups: dict[str, Group] = {}
        forced: set[str] = set()
        for i, op in enumerate(self.block.ops):
            if i in self.skip:
                continue
            for key in (*op.inputs, *op.outputs):
                root = self.root(key)
                if not self.is_local(root):
                    continue
                group = groups.get(root)
                if group is None:
                    size = align_up(self.ctx.values[root].size_bytes, self.ctx.alignment)
                    group = groups[root] = Group(root, max(size, self.ctx.alignment))
                group.users.add(i)
                if root in self.ctx.evicted:
                    forced.add(root)
        return groups, forced

    def compile(self) -> list[ACommand]:
        self.find_aliases()
        groups, forced = self.groups()
        eligible = {r: g for r, g in groups.items() if r not in forced}
        ops = self.block.ops

        def root_of(key: str) -> str | None:
            r = self.root(key)
            return r if r in eligible else None

        def fixed_tcm(key: str) -> bool:
            r = self.root(key)
            if r in groups:
                return False
            p = self.bindings.get(r) or self.ctx.fixed.get(r)
            return p is not None and p.memory is TCM

        def copy_need(i: int, in_tcm: Callable[[str], bool]) -> int:
            op = ops[i]
            if i in self.skip or op.staged:   # a staged input that does not fit is not copied
                return 0
            src, dst = op.sources[0], op.outputs[0]
            src_mem = TCM if in_tcm(src) else self._static_memory(src)
            dst_mem = TCM if in_tcm(dst) else self._static_memory(dst)
            return staging_need_bytes(src_mem, dst_mem, self.ctx.values[dst].size_bytes, self.ctx.alignment)

        result = self._striped_residency(eligible, root_of, fixed_tcm, copy_need)
        if self.ctx.emitter.hw.tcm.elementwise_result_over_input and self._results_over_inputs():
            result = self._regroup(groups, eligible, root_of, fixed_tcm, copy_need)

        def in_tcm(key: str) -> bool:
            r = root_of(key)
            return r in result.resident if r is not None else fixed_tcm(key)

        self._cascade_and_stripe(result, in_tcm)
        for i, op in enumerate(ops):   # staged inputs that did not fit: read the input where it is
            if op.kind is OpKind.COPY and op.staged and self.root(op.outputs[0]) not in result.resident:
                groups.pop(self.root(op.outputs[0]), None)
                self.make_alias(i, op)
        rolling = {key for chain in self.chains for key in chain.rolling}
        for root, group in groups.items():
            memory = TCM if root in result.resident else DDR
            buffer = Buffer(root, memory, group.size_bytes, kind=_buffer_kind(memory, root in rolling))
            self.buffers[root] = buffer
            if root in rolling:
                self.ctx.rolling_whole[buffer.serial] = align_up(self.ctx.values[root].size_bytes, self.ctx.alignment)
            if memory is TCM:
                self.ctx.group_buffers[buffer.serial] = root
        self.placed.clear()
        return self.emit(result)

    def _chain_stats(self, chain: StripedChain) -> StripedChainStats:
        values, ops = self.ctx.values, self.block.ops
        buffers = tuple(RollingBufferStats(values[key].name, b.rows, b.size_bytes, b.whole_bytes)
                        for key, b in chain.rolling.items())
        return StripedChainStats(tuple(ops[i].name for i in chain.ops), chain.stripe_rows, chain.stripe_count,
                                 buffers, chain.est_cycles, chain.whole_cycles)

    def _cascade_and_stripe(self, result: ResidencyResult, in_tcm: Callable[[str], bool]) -> None:
        """Pairs that cascade (:mod:`scheduler.passes.cascade`, outside the striped chains) and the
        striped chains' plans with their operands where residency left them."""
        ops = self.block.ops
        chained = {i for chain in self.chains for i in chain.ops}
        plans = {i: plan for i, plan in result.plans.items() if i not in chained and i not in self.skip}
        self.cascades = follow_producers(ops, plans, self.ctx.tiler, in_tcm, _cascade_budgets(result, self.capacity))
        result.plans.update(plans)
        for chain in self.chains:
            self.ctx.striped.append(self._chain_stats(chain))
            for i in chain.ops:
                result.plans[i] = chain.plans[i] = chain_plan(ops[i], chain.regions[i], in_tcm, self.ctx.tiler,
                                                               self.ctx.alignment)

    def _striped_residency(self, eligible: dict[str, Group], root_of: Callable[[str], str | None],
                           fixed_tcm: Callable[[str], bool],
                           copy_need: Callable[[int, Callable[[str], bool]], int]) -> ResidencyResult:
        """Residency with the block's striped chains (:mod:`scheduler.passes.stripes`): their
        internal values take the bytes of their rolling buffers; a chain one of whose internal
        values would not stay in the TCM runs op by op after all."""
        ops, ctx = self.block.ops, self.ctx
        values = self._chain_values(eligible)
        whole = dict(values.sizes)
        self.chains = [c for c in find_chains(ops, ctx.tiler, values,
                                              lambda key: root_of(key) is not None or fixed_tcm(key),
                                              ctx.alignment, ctx.chain_memo)
                       if self.skip.isdisjoint(c.ops)]
        return self._chain_residency(eligible, whole, root_of, fixed_tcm, copy_need)

    def _regroup(self, groups: dict[str, Group], eligible: dict[str, Group], root_of: Callable[[str], str | None],
                 fixed_tcm: Callable[[str], bool],
                 copy_need: Callable[[int, Callable[[str], bool]], int]) -> ResidencyResult:
        """``groups`` and ``eligible`` again after new aliases, and residency with the chains found."""
        fresh, forced = self.groups()
        groups.clear()
        groups.update(fresh)
        eligible.clear()
        eligible.update((r, g) for r, g in groups.items() if r not in forced)
        return self._chain_residency(eligible, dict(self._chain_values(eligible).sizes), root_of, fixed_tcm, copy_need)

    def _chain_residency(self, eligible: dict[str, Group], whole: dict[str, int],
                         root_of: Callable[[str], str | None], fixed_tcm: Callable[[str], bool],
                         copy_need: Callable[[int, Callable[[str], bool]], int]) -> ResidencyResult:
        """Residency with the chains found (``whole``: the groups' bytes unstriped)."""
        ops, ctx = self.block.ops, self.ctx
        while True:
            _size_groups(eligible, whole, self.chains, ctx.alignment)
            streamed = {key for chain in self.chains for key in chain.streamed}   # (read where the input lives)
            planned = {r: g for r, g in eligible.items() if r not in streamed}
            result = decide(ops, planned, _except(root_of, streamed), self.capacity, ctx.tiler, fixed_tcm, copy_need)
            kept = [c for c in self.chains if all(k in result.resident for k in c.rolling)]
            if len(kept) == len(self.chains):
                return result
            self.chains = kept

    def _chain_values(self, eligible: dict[str, Group]) -> ChainValues:
        """What the stripes' search needs of the block's groups: their bytes and users, which may
        roll (not aliased), and the staged graph inputs with the copy staging each."""
        aliased = {self.root(k) for k in self.alias}
        staged = {self.root(op.outputs[0]): i for i, op in enumerate(self.block.ops)
                  if op.kind is OpKind.COPY and op.staged}
        return ChainValues({r: g.size_bytes for r, g in eligible.items()},
                           {r: set(g.users) for r, g in eligible.items()},
                           lambda key: key in eligible and key not in aliased,
                           {k: i for k, i in staged.items() if k in eligible})

    def _static_memory(self, key: str) -> MemorySpace:
        r = self.root(key)
        if r in self.bindings:
            return self.bindings[r].memory
        if r in self.ctx.fixed:
            return self.ctx.fixed[r].memory
        return DDR  # a spilled local value

    # -- emission
    def emit(self, result: ResidencyResult) -> list[ACommand]:
        """Commands of every operation in order, with prefetching.

        The leading loads of an operation (weights, constant-pool chunks, graph
        inputs: nothing in the block writes them) move back into earlier
        operations, after their own loads, as far as needed to cover the loads'
        estimated time (at most ``dma.prefetch_operations`` operations) while every working set on
        the way still fits beside the hoisted buffers.
        """
        done: list[_Emitted] = []
        extra: dict[int, int] = {}   # op index -> bytes of later operations' buffers hoisted over it
        heads = {chain.first: chain for chain in self.chains}
        chained = {i for chain in self.chains for i in chain.ops}
        for i, op in enumerate(self.block.ops):
            if i in self.skip or (i in chained and i not in heads):
                continue
            if i in heads:
                own = self._hoist(i, op, self.chain_commands(heads[i], result), done, result, extra)
                done.append(_Emitted(i, op.kind, own, _load_cut(own), chain=True))
                continue
            own = self._hoist(i, op, self.operation_commands(i, op, result), done, result, extra)
            if not self._follow_producer(i, own, done):
                done.append(_Emitted(i, op.kind, own, _load_cut(own)))
        cmds: list[ACommand] = []
        last_tile = self.ctx.emitter.hw.dma.prefetch_under_last_tile
        for e in done:
            cut = _last_compute_cut(e.commands, e.cut) if last_tile and e.hoisted and not e.chain else e.cut
            cmds += e.commands[:cut] + e.hoisted + e.commands[cut:]
        return cmds

    def operation_commands(self, i: int, op: NpuOp, result: ResidencyResult) -> list[ACommand]:
        """Operation ``i``'s own commands (after its constant-pool chunk in the main block)."""
        ctx = self.ctx
        budget = self.capacity - result.live_bytes[i]
        own: list[ACommand] = []
        if self.pool_chunks is not None:
            own += self.pool_chunks(i)
        if op.kind is OpKind.COMPUTE:
            plan = result.plans[i]
            rec = ctx.record(op, self.block.name, plan)
            cmds = ctx.emitter.compute(op, plan, self.place, ctx.tiler.tiling(op).windows, rec,
                                       self._graph_input_home)
            self._mark_ddr_operands(op, cmds)
            return own + cmds
        rec = ctx.record(op, self.block.name)
        if op.kind is OpKind.COPY:
            return own + ctx.emitter.copy(self.copy_source(op), self.place(op.outputs[0]), op.name, rec, budget,
                                          bands=self._bands(op))
        live_roots = {r for r in result.resident if self._group_live_at(r, i, result)}
        try:
            return own + (self.cond_if(op, budget, rec) if op.kind is OpKind.COND_IF
                          else self.while_loop(op, budget, rec))
        except ScheduleError as exc:
            if live_roots:
                raise NeedRoom(live_roots, exc) from None
            raise

    def chain_commands(self, chain: StripedChain, result: ResidencyResult) -> list[ACommand]:
        """A striped chain's commands (:mod:`scheduler.codegen.stripe_emit`), after the
        constant-pool chunks of all its operations."""
        ctx, ops = self.ctx, self.block.ops
        loads: list[ACommand] = []
        records = {}
        for i in chain.ops:
            if self.pool_chunks is not None:
                loads += self.pool_chunks(i)
            records[i] = ctx.record(ops[i], self.block.name, chain.plans[i])
        cmds, own = emit_chain(chain, ops, ctx.emitter, ctx.tiler, self.place, records,
                               self.capacity - result.live_bytes[chain.first], self._graph_input_home)
        for i in chain.ops:
            self._mark_ddr_operands(ops[i], own[i])
        return loads + cmds

    def _mark_ddr_operands(self, op: NpuOp, cmds: list[ACommand]) -> None:
        """Mark the commands of compute operation ``op`` that read a value whose home is the DDR
        (a copied slice of a graph input) or read or write an LSTM cell's state kept there."""
        home = any(self._copied_graph_input(k) for k in op.inputs)
        state_in = any(k in self.ctx.recurrent_state for k in op.inputs)
        state_out = any(k in self.ctx.recurrent_state for k in op.outputs)
        for c in cmds:
            if isinstance(c, ACompute):
                c.reads_ddr_home |= home
                c.reads_ddr_state |= state_in
                c.writes_ddr_state |= state_out
                c.weights_in_place |= op.weights_in_place
                c.parameters_in_place |= op.parameters_in_place
                c.table_in_place |= op.table_in_place
                c.table_load_hidden_cycles = max(c.table_load_hidden_cycles, op.table_load_hidden_cycles)
                c.constant_operands_in_place = op.constant_operands_in_place

    def _hoist(self, i: int, op: NpuOp, own: list[ACommand], done: list[_Emitted], result: ResidencyResult,
               extra: dict[int, int]) -> list[ACommand]:
        """Move the leading loads of compute operation ``i`` into an earlier operation (see
        :meth:`emit`); its remaining commands."""
        loads = _leading_loads(own) if op.kind is OpKind.COMPUTE else []
        if loads and done:
            target = self._hoist_target(i, done, result, extra, loads)
            if target is not None:
                target.hoisted += loads
                return own[len(loads):]
        return own

    def _follow_producer(self, i: int, own: list[ACommand], done: list[_Emitted]) -> bool:
        """Interleave operation ``i`` with the one before it if it cascades on it (its tiles
        right after the producer tiles they need); False if it does not."""
        if i not in self.cascades or not done or done[-1].index != i - 1:
            return False
        merged = _interleave(done[-1].commands, own, self.block.ops[i - 1].unit, self.cascades[i])
        if merged is None:
            return False
        # loads hoisted into the pair (the consumer's constants among them) go in before its
        # first consumer tile
        first = next(k for k, c in enumerate(merged) if c is own[0])
        done[-1].commands = merged
        done[-1].cut = min(_load_cut(merged), first)
        return True

    def _bands(self, op: NpuOp) -> int:
        if not op.staged:
            return 1
        size = self.ctx.values[op.outputs[0]].size_bytes
        return max(1, min(STAGING_BANDS, size // STAGING_BAND_BYTES))

    def _ws(self, i: int, result: ResidencyResult) -> int:
        """Operation ``i``'s tile buffers (a striped chain's first: the whole chain's)."""
        chain = next((c for c in self.chains if c.first == i), None)
        ops = chain.ops if chain is not None else (i,)
        return sum(plan.working_set_bytes for j in ops for plan in (result.plans.get(j),) if plan is not None)

    def _hoist_target(self, i: int, done: list[_Emitted], result: ResidencyResult, extra: dict[int, int],
                      loads: list[ADma]) -> _Emitted | None:
        """The earliest operation (going back) that the loads of operation ``i`` may move into."""
        hw = self.ctx.emitter.hw   # the loads pipeline on their engines: one latency for all
        need = sum(dma_issue_cycles(hw, c.src.size_bytes) for c in loads) + hw.ddr.read_latency_cycles
        ws = self._ws(i, result)
        covered = 0.0
        target = None
        lookback = hw.dma.prefetch_operations
        for e in reversed(done[max(0, len(done) - lookback):]):
            if e.kind not in (OpKind.COMPUTE, OpKind.COPY) or e.chain:
                break
            if result.live_bytes[e.index] + self._ws(e.index, result) + extra.get(e.index, 0) + ws > self.capacity:
                break
            target = e
            plan = result.plans.get(e.index)
            covered += plan.est_cycles if plan is not None else 0
            if covered >= need:
                break
        if target is not None:   # (``done`` is in operation order: the target and those after it end it)
            for e in reversed(done):
                if e.index < target.index:
                    break
                extra[e.index] = extra.get(e.index, 0) + ws
        return target

    def _group_live_at(self, root: str, i: int, result: ResidencyResult) -> bool:
        users = [j for j, op in enumerate(self.block.ops)
                 if j not in self.skip and root in {self.root(k) for k in (*op.inputs, *op.outputs)}]
        return bool(users) and min(users) <= i <= max(users)

    def copy(self, src: Placement, dst: Placement, name: str, rec: int, budget: int) -> list[ACommand]:
        return self.ctx.emitter.copy(src, dst, name, rec, budget)

    def compile_branch(self, block: LoweredBlock, inputs: list[Placement], outputs: list[Placement],
                       budget: int, rec: int) -> list[ACommand]:
        """Compile ``block`` with inputs/outputs bound by position; copy results not made in place."""
        values = self.ctx.values
        bindings: dict[str, Placement] = {}
        for key, placement in zip(block.inputs, inputs):
            bindings.setdefault(key, placement.retyped(values[key].type))
        produced = {k for op in block.ops for k in op.outputs}
        trailing: list[tuple[str, Placement]] = []
        for key, target in zip(block.outputs, outputs):
            if key in produced and key not in bindings and values[key].kind is not ValueKind.VARIABLE:
                bindings[key] = target.retyped(values[key].type)
            else:
                trailing.append((key, target))
        compiler = _BlockCompiler(self.ctx, block, bindings, budget)
        cmds = compiler.compile()
        for key, target in trailing:
            cmds += self.copy(compiler.ddr_place(key), target, f"{block.name}: result {values[key].name}",
                              rec, budget)
        return cmds

    def _tcm_or_ddr(self, key: str, attempt: Callable[[str | None], list[ACommand]]) -> list[ACommand]:
        """``attempt(key)`` (control-flow buffers in TCM, registered under ``key``) unless those
        were spilled or leave too little room (ScheduleError), then ``attempt(None)``."""
        if key not in self.ctx.evicted:
            records = len(self.ctx.records)
            try:
                return attempt(key)
            except ScheduleError:
                del self.ctx.records[records:]
        return attempt(None)

    def _tcm_buffer(self, name: str, key: str, tcm_key: str) -> Placement:
        """A TCM buffer for value ``key`` that spills with the others of ``tcm_key``."""
        ctx = self.ctx
        b = Buffer(name, TCM, align_up(max(1, ctx.values[key].size_bytes), ctx.alignment), kind="activation")
        ctx.group_buffers[b.serial] = tcm_key
        return Placement(b, 0, ctx.values[key].type)

    def cond_if(self, op: NpuOp, budget: int, rec: int) -> list[ACommand]:
        """The branches; operands in DDR that both branches read are loaded into TCM before the
        decision when that leaves room for the branches (the loads overlap the condition's)."""
        return self._tcm_or_ddr(f"{op.name}:operands", lambda key: self._cond_if(op, budget, rec, key))

    def _cond_if(self, op: NpuOp, budget: int, rec: int, tcm_key: str | None) -> list[ACommand]:
        values = self.ctx.values
        condition = self.ddr_place(op.sources[0]).whole()
        args = [self.ddr_place(k) for k in op.sources[1:]]
        results = [self.place(k) for k in op.outputs]
        cmds: list[ACommand] = []
        inner = budget
        if tcm_key is not None:
            for i, (key, arg) in enumerate(zip(op.sources[1:], args)):
                if arg.memory is DDR and all(_reads(block, block.inputs[i]) for block in op.blocks):
                    staged = self._tcm_buffer(f"{op.name}: operand {values[key].name}", key, tcm_key)
                    inner -= staged.buffer.size_bytes
                    cmds += self.copy(arg, staged, f"{op.name}: load {values[key].name}", rec, inner)
                    args[i] = staged
            if not cmds:
                raise ScheduleError(f"{op.name}: no operand to load before the decision")
            if inner < budget // 2:
                raise ScheduleError(f"{op.name}: loaded operands do not leave room for the branches")
        branches = [self.compile_branch(block, args, results, inner, rec) for block in op.blocks]
        return cmds + [ACond(condition, branches[0], branches[1], op.name, rec)]

    def while_loop(self, op: NpuOp, budget: int, rec: int) -> list[ACommand]:
        """The loop with its carried state in TCM if it fits beside the body, else in DDR."""
        return self._tcm_or_ddr(f"{op.name}:loop state", lambda key: self._while_loop(op, budget, rec, key))

    def _while_loop(self, op: NpuOp, budget: int, rec: int, tcm_key: str | None) -> list[ACommand]:
        """``tcm_key``: keep the state, the body's fresh results and the condition in TCM
        buffers registered under this key (spilled as one if the TCM plan overflows);
        None: keep them in DDR."""
        ctx = self.ctx
        values = ctx.values
        cond_block, body_block = op.blocks
        loop = self._loop_buffers(op, tcm_key)
        inner = budget - loop.reserved_bytes
        if tcm_key is not None and inner < budget // 2:
            raise ScheduleError(f"{op.name}: loop state does not leave room for the body")
        cmds: list[ACommand] = []
        for key, target in zip(op.sources, loop.state):
            cmds += self.copy(self.ddr_place(key), target, f"{op.name}: init {values[key].name}", rec, inner)
        # condition block: reads the state, writes a one-element BOOL
        cond_cmds = self.compile_branch(cond_block, loop.state, [loop.condition], inner, rec)
        # body: writes fresh buffers, copied back into the state at the end of each iteration
        targets = [f if f is not None else s for f, s in zip(loop.fresh, loop.state)]
        body_cmds = self.compile_branch(body_block, loop.state, targets, inner, rec)
        for i, f in enumerate(loop.fresh):
            if f is not None:
                body_cmds += self.copy(f, loop.state[i], f"{op.name}: carry {values[op.outputs[i]].name}", rec,
                                       inner)
        cmds.append(ALoop(cond_cmds, loop.condition.whole(), body_cmds, ctx.max_iterations, op.name, rec))
        for k, s, r in zip(op.outputs, loop.state, loop.results):
            if s is not r:
                cmds += self.copy(s, r, f"{op.name}: result {values[k].name}", rec, budget)
        return cmds

    def _loop_buffers(self, op: NpuOp, tcm_key: str | None) -> _LoopBuffers:
        """The loop's state (the results' own buffers when they are in the chosen memory), its
        condition and the body's fresh results, in TCM under ``tcm_key`` or else in DDR."""
        cond_block, body_block = op.blocks
        memory = DDR if tcm_key is None else TCM
        reserved: list[Buffer] = []
        results = [self.place(k) for k in op.outputs]
        state = [r if r.memory is memory else self._loop_buffer(op, f"state{i}", k, tcm_key, reserved)
                 for i, (k, r) in enumerate(zip(op.outputs, results))]
        condition = self._loop_buffer(op, "condition", cond_block.outputs[0], tcm_key, reserved)
        fresh = [None if key == inp else self._loop_buffer(op, f"next{i}", key, tcm_key, reserved)
                 for i, (key, inp) in enumerate(zip(body_block.outputs, body_block.inputs))]  # None: unchanged
        return _LoopBuffers(results, state, condition, fresh, sum(b.size_bytes for b in reserved))

    def _loop_buffer(self, op: NpuOp, name: str, key: str, tcm_key: str | None, reserved: list[Buffer]) -> Placement:
        if tcm_key is not None:
            placement = self._tcm_buffer(f"{op.name}:{name}", key, tcm_key)
            reserved.append(placement.buffer)
            return placement
        value = self.ctx.values[key]
        size = align_up(max(1, value.size_bytes), self.ctx.alignment)
        return Placement(Buffer(f"{op.name}:{name}", DDR, size, kind="spill"), 0, value.type)


@dataclass
class _LoopBuffers:
    """Where a WHILE_LOOP keeps its values: ``reserved_bytes`` of them in TCM."""

    results: list[Placement]
    state: list[Placement]
    condition: Placement
    fresh: list[Placement | None]
    reserved_bytes: int


def _size_groups(groups: dict[str, Group], whole: dict[str, int], chains: list[StripedChain], alignment: int) -> None:
    """Each group at its ``whole`` bytes, those of the ``chains``' rolling values at their buffers'."""
    for root, group in groups.items():
        group.size_bytes = whole[root]
    for chain in chains:
        for key, buffer in chain.rolling.items():
            groups[key].size_bytes = max(alignment, align_up(buffer.size_bytes, alignment))


def _except(root_of: Callable[[str], str | None], left_out: set[str]) -> Callable[[str], str | None]:
    """``root_of`` with the groups ``left_out`` not planned (None)."""
    def root(key: str) -> str | None:
        r = root_of(key)
        return r if r not in left_out else None
    return root


def _buffer_kind(memory: MemorySpace, rolling: bool) -> str:
    """The allocation kind of a group's buffer: a spill in the DDR, a striped chain's rolling
    buffer, or a whole activation."""
    if memory is not TCM:
        return "spill"
    return "stripe" if rolling else "activation"


def _slice_offset_bytes(op: NpuOp, source: Value) -> int:
    return (op.slice_offset_elements or 0) * element_size_bytes(source.type.dtype)


def _reads(block: LoweredBlock, key: str) -> bool:
    """True if an operation of ``block`` reads value ``key``."""
    return any(key in op.inputs for op in block.ops)


def _is_load(cmd: ACommand) -> TypeGuard[ADma]:
    return isinstance(cmd, ADma) and cmd.dst.memory is TCM


def _load_cut(cmds: list[ACommand]) -> int:
    """Where loads hoisted from later operations go: after the last load of ``cmds``."""
    return max((k + 1 for k, c in enumerate(cmds) if _is_load(c)), default=0)


def _last_compute_cut(cmds: list[ACommand], cut: int) -> int:
    """Where loads hoisted under an operation's last tile go (``dma.prefetch_under_last_tile``): before
    its last compute command, if that comes after ``cut`` (its own last load)."""
    last = max((k for k, c in enumerate(cmds) if isinstance(c, ACompute)), default=-1)
    return max(cut, last)


def _interleave(producer: list[ACommand], consumer: list[ACommand], producer_unit: str,
                waits: list[int]) -> list[ACommand] | None:
    """The producer's commands with consumer tile ``k`` right after the producer's compute
    command ``waits[k]`` (see :mod:`scheduler.passes.cascade`); None unless the consumer is exactly
    one compute command per tile and the producer one per tile it waits for."""
    if len(consumer) != len(waits) or not all(isinstance(c, ACompute) for c in consumer):
        return None
    computes = [k for k, c in enumerate(producer) if isinstance(c, ACompute) and c.unit == producer_unit]
    if not computes or max(waits) >= len(computes):
        return None
    after: dict[int, list[ACommand]] = {}
    for cmd, wait in zip(consumer, waits):
        after.setdefault(computes[wait], []).append(cmd)
    merged: list[ACommand] = []
    for k, cmd in enumerate(producer):
        merged.append(cmd)
        merged += after.get(k, [])
    return merged


def _leading_loads(cmds: list[ACommand]) -> list[ADma]:
    """The commands at the start that load constants or graph inputs into TCM.

    Nothing in the block writes those, so they may move earlier (prefetch)."""
    loads = []
    for cmd in cmds:
        if not (_is_load(cmd) and cmd.src.buffer is not None and cmd.src.buffer.kind in ("constant", "input")):
            break
        loads.append(cmd)
    return loads


def _cascade_budgets(result: ResidencyResult, capacity: int) -> list[int]:
    """What each operation's working set may take when a cascade re-splits it: no more than the
    bytes it may use without raising the block's peak (the residents live beside it and the
    largest working set), nor than its own plan already takes, within the TCM's capacity."""
    working = [result.plans[i].working_set_bytes if i in result.plans else 0 for i in range(len(result.live_bytes))]
    peak = max((live + ws for live, ws in zip(result.live_bytes, working)), default=0)
    return [min(capacity - live, max(ws, peak - live)) for live, ws in zip(result.live_bytes, working)]


def compile_block(ctx: CompileContext, block: LoweredBlock, bindings: dict[str, Placement],
                  capacity_bytes: int,
                  pool_chunks: Callable[[int], list[ACommand]] | None = None) -> list[ACommand]:
    """Abstract commands for ``block`` within ``capacity_bytes`` of TCM.

    ``pool_chunks(i)``: constant-pool loads to issue before operation ``i`` (main block)."""
    compiler = _BlockCompiler(ctx, block, bindings, capacity_bytes)
    compiler.pool_chunks = pool_chunks
    return compiler.compile()


def constant_pool_loads(fixed: Fixed, ctx: CompileContext) -> Callable[[int], list[ACommand]] | None:
    """The constant-pool chunk loads to issue before each main-block operation (into the
    resident pool, or into the streamed pool's buffers of their own)."""
    pool_ddr, pool_tcm = fixed.pool_ddr, fixed.pool_tcm
    if pool_ddr is None or pool_tcm is None and not fixed.segment_loads:
        return None
    record: list[int] = []

    def load(offset: int, size: int, target: Buffer, target_offset: int) -> list[ACommand]:
        assert pool_ddr is not None
        if not record:
            record.append(len(ctx.records))
            ctx.records.append(OpRecord("constant_pool", "LOAD", "dma", ()))
        t = TensorType((size,), DType.INT8)
        return ctx.emitter.dma(Placement(pool_ddr, offset, t).whole(), Placement(target, target_offset, t).whole(),
                               f"load constant pool [{offset}, {offset + size})", record[0])

    def chunks(index: int) -> list[ACommand]:
        cmds: list[ACommand] = []
        for offset, size, buffer in fixed.segment_loads.get(index, ()):
            cmds += load(offset, size, buffer, 0)
        chunk = fixed.pool_chunks.get(index)
        if chunk is not None and pool_tcm is not None:
            cmds += load(chunk[0], chunk[1], pool_tcm, chunk[0])
        return cmds

    return chunks
