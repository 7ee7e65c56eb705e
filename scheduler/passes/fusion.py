"""Fusion: group graph operators that one NPU operation computes together.

A pass over one block driven by a list of pattern rules (pluggable: later
rules such as the LSTM-cell composite slot in beside the epilogue rule). Each
rule looks at an anchor operator and returns the indices of the operators it
would fuse, or None; operators no rule claims stay alone.

Rules claim operators in priority order: each rule runs over the whole block
before the next one (the epilogue rule first, so a vector chain never takes the
epilogue of a convolution).

The epilogue rule: a MAC-array operator (CONV2D, CONV3D, DEPTHWISE_CONV2D,
TRANSPOSE_CONV2D, MATMUL) followed by a chain of RESCALE, CLAMP and
elementwise ADD becomes one NPU operation whose steps hand their result to the
next inside the unit. A link is fused only if the intermediate has exactly one
consumer, is no block output and no variable, keeps its shape, and the
epilogue operator can be tiled like its producer.

The elementwise rule: a tree of elementwise operators on the vector unit
(RESCALE, ADD, MUL, CLAMP, ...) whose intermediate results each feed exactly
one other member, with the shape of that member's result, becomes one vector
operation: one command setup per tile instead of one per operator, and the
intermediates stay in the unit instead of crossing the TCM ports (as the
chained elementwise operations of NPUs such as Ethos-U85 do). The tree grows
from its first operator along its sole consumers, taking in on the way the
other operands' producers that qualify the same way.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from npu_sim.errors import ScheduleError
from npu_sim.hw.compute_units import LUT, MAC_ARRAY
from npu_sim.hw.config import HwConfig
from npu_sim.hw.op_support import npu_operators
from npu_sim.program import CompositeCandidate
from npu_sim.reference.kernel_api import INPUT_WINDOWS
from npu_sim.tosa.ir import Block, Operator
from npu_sim.tosa.ops import Op
from scheduler.passes import gru_cell, lstm_cell
from scheduler.passes.cell_edges import with_edges
from scheduler.passes.cell_graph import CellGraph, CellMatch, NoMatch
from scheduler.passes.chaining import LookupChainRule
from scheduler.passes.fusion_context import FusedGroup, FusionContext, FusionRule
from scheduler.passes.rescale_folding import SOURCE_RULE, RescaleFoldRule
from scheduler.passes.source_activations import SourceActivationRule
from scheduler.passes.source_means import SourceMeanRule
from scheduler.passes.source_softmax import SourceSoftmaxRule
from scheduler.passes.source_squared_difference import SourceSquaredDifferenceRule
from scheduler.passes.table_lookup import lookup_function, match_lookup


@dataclass(frozen=True)
class CellRule:
    """One recurrent cell as one operation handing out its state: an LSTM cell (h', c'; see
    :mod:`scheduler.passes.lstm_cell`) or a GRU cell (h'; :mod:`scheduler.passes.gru_cell`)."""

    name: str
    matcher: Callable[[CellGraph, int, int | None], CellMatch | None]

    def match(self, index: int, ctx: FusionContext) -> FusedGroup | None:
        graph = ctx.cell_graph()
        anchor = ctx.block.operators[index]
        try:
            found = self.matcher(graph, index, ctx.max_composite_bytes)
        except NoMatch as exc:
            ctx.candidates.append(CompositeCandidate(self.name, anchor.inputs[0], ctx.block.name, False, str(exc)))
            return None
        if found is None:
            return None
        indices, outputs = with_edges(graph, found.indices, found.facts.outputs, found.late_inputs)
        names = tuple([ctx.block.operators[i].name for i in indices])
        ctx.candidates.append(CompositeCandidate(self.name, anchor.inputs[0], ctx.block.name, True, "", names))
        return FusedGroup(indices, outputs, found.facts, found.late_inputs)


@dataclass(frozen=True)
class TableLookupRule:
    """A lookup written as TOSA operators (CAST, ADD of the offset, RESHAPE, GATHER of a constant
    table, RESHAPE; see :mod:`scheduler.passes.table_lookup`) as one operation on the LUT unit."""

    name: str = "table_lookup"

    def match(self, index: int, ctx: FusionContext) -> FusedGroup | None:
        found = match_lookup(ctx.block, index, ctx.sole_consumer)
        if found is None or any(i in ctx.claimed for i in found.indices):
            return None
        return FusedGroup(list(found.indices), unit=LUT.name, lut_function=lookup_function(found))


@dataclass(frozen=True)
class EpilogueRule:
    """MAC operator + RESCALE / CLAMP / ADD epilogue chain: up to five epilogue operators,
    enough for a quantized residual add (RESCALE to the accumulator, RESCALE up for the
    add, ADD, RESCALE back, CLAMP), whose int32 intermediates then never leave the unit."""

    name: str = "epilogue"
    anchors: frozenset[Op] = MAC_ARRAY.ops - {Op.FFT2D, Op.RFFT2D}   # (a DFT has two results)
    epilogues: frozenset[Op] = frozenset({Op.RESCALE, Op.CLAMP, Op.ADD})
    max_length: int = 6
    widens: bool = True   # a RESCALE to a wider type may join (mac_array.epilogue_widens)

    def match(self, index: int, ctx: FusionContext) -> list[int] | None:
        block = ctx.block
        anchor = block.operators[index]
        if anchor.op not in self.anchors or len(anchor.outputs) != 1:
            return None
        if ctx.reads_variable(anchor):
            return None
        group = [index]
        current = block.operators[index]
        while len(group) < self.max_length:
            out = current.outputs[0]
            nxt = ctx.sole_consumer(out)
            if nxt is None or nxt in ctx.claimed or nxt <= group[-1]:
                break
            op = block.operators[nxt]
            if not self._links(op, out, block):
                break
            group.append(nxt)
            current = op
        return group if len(group) > 1 else None

    def _links(self, operator: Operator, tensor: str, block: Block) -> bool:
        if operator.op not in self.epilogues or operator.op not in INPUT_WINDOWS:
            return False
        if len(operator.outputs) != 1:
            return False
        if block.tensor(operator.outputs[0]).shape != block.tensor(tensor).shape:
            return False
        position = operator.inputs.index(tensor)
        if operator.op is Op.RESCALE and not self.widens \
                and block.tensor(operator.outputs[0]).dtype.bits > block.tensor(tensor).dtype.bits:
            return False
        if operator.op in (Op.RESCALE, Op.CLAMP):
            return position == 0
        if operator.op is Op.TABLE:   # the lookup as the output's activation (its table no variable)
            table = block.tensors.get(operator.inputs[1]) if len(operator.inputs) > 1 else None
            return position == 0 and table is not None and not table.variable
        # ADD: the other operand must not be a variable (it is read later than scheduled otherwise).
        other = operator.inputs[1 - position]
        t = block.tensors.get(other)
        return t is not None and not t.variable


@dataclass(frozen=True)
class ReductionPrologueRule:
    """A RESCALE that widens its input (int8 -> int32, say) for a REDUCE_SUM, its sole consumer:
    one vector operation that reads the narrow input and sums it, subtracting the zero point
    (as Vela folds the RESCALE into its ReduceSum and a Sub). Only on NPUs that lower such
    sums (``vector.transpose_reductions``)."""

    name: str = "reduction_prologue"

    def match(self, index: int, ctx: FusionContext) -> list[int] | None:
        block = ctx.block
        rescale = block.operators[index]
        if rescale.op is not Op.RESCALE or len(rescale.outputs) != 1 or ctx.reads_variable(rescale):
            return None
        source, result = block.tensor(rescale.inputs[0]), block.tensor(rescale.outputs[0])
        if source.dtype.bits >= result.dtype.bits:
            return None
        nxt = ctx.sole_consumer(rescale.outputs[0])
        if nxt is None or nxt in ctx.claimed or nxt <= index:
            return None
        reduction = block.operators[nxt]
        if reduction.op is not Op.REDUCE_SUM or reduction.inputs[0] != rescale.outputs[0] \
                or Op.REDUCE_SUM not in INPUT_WINDOWS or Op.RESCALE not in INPUT_WINDOWS:
            return None
        return [index, nxt]


#: Elementwise operators the vector unit can chain (each output element from the same
#: element of its operands, up to broadcasting of the other operands).
VECTOR_ELEMENTWISE = frozenset({
    Op.ADD, Op.SUB, Op.MUL, Op.RESCALE, Op.CLAMP, Op.MAXIMUM, Op.MINIMUM, Op.ABS, Op.NEGATE,
    Op.CAST, Op.ARITHMETIC_RIGHT_SHIFT, Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT,
    Op.BITWISE_AND, Op.BITWISE_OR, Op.BITWISE_XOR, Op.BITWISE_NOT, Op.LOGICAL_AND, Op.LOGICAL_OR,
    Op.LOGICAL_XOR, Op.LOGICAL_NOT, Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL, Op.SELECT, Op.CEIL, Op.FLOOR,
    Op.CLZ, Op.INTDIV})


@dataclass(frozen=True)
class ElementwiseRule:
    """A tree of vector elementwise operators (see the module doc)."""

    name: str = "elementwise"
    members: frozenset[Op] = VECTOR_ELEMENTWISE
    max_length: int = 8

    def match(self, index: int, ctx: FusionContext) -> list[int] | None:
        block = ctx.block
        if not self._member(index, ctx):
            return None
        group = {index}
        current = index
        while len(group) < self.max_length:
            nxt = self._consumer(current, ctx)
            if nxt is None or nxt in ctx.claimed or not self._member(nxt, ctx):
                break
            added = {nxt}
            for name in block.operators[nxt].inputs:
                producer = ctx.producer.get(name)
                if producer is not None and producer not in group:
                    added |= self._subtree(producer, nxt, ctx, group, self.max_length - len(group) - 1)
            if len(group) + len(added) > self.max_length:
                break
            group |= added
            current = nxt
        return sorted(group) if len(group) > 1 else None

    def _member(self, index: int, ctx: FusionContext) -> bool:
        operator = ctx.block.operators[index]
        if operator.op not in self.members or operator.op not in INPUT_WINDOWS or len(operator.outputs) != 1:
            return False
        return not ctx.reads_variable(operator)

    def _consumer(self, index: int, ctx: FusionContext) -> int | None:
        """The sole consumer of operator ``index``'s result if that result may stay in the unit."""
        block = ctx.block
        out = block.operators[index].outputs[0]
        nxt = ctx.sole_consumer(out)
        if nxt is None or nxt <= index or len(block.operators[nxt].outputs) != 1:
            return None   # (a VARIABLE_WRITE consumes without a result)
        if block.tensor(block.operators[nxt].outputs[0]).shape != block.tensor(out).shape:
            return None
        return nxt

    def _subtree(self, index: int, consumer: int, ctx: FusionContext, group: set[int], room: int) -> set[int]:
        """Operator ``index`` and its qualifying producers, if it may join ``consumer``'s tree."""
        if room <= 0 or index in ctx.claimed or index in group or not self._member(index, ctx) \
                or self._consumer(index, ctx) != consumer:
            return set()
        taken = {index}
        for name in ctx.block.operators[index].inputs:
            producer = ctx.producer.get(name)
            if producer is not None:
                taken |= self._subtree(producer, index, ctx, group | taken, room - len(taken))
        return taken


def rules_for(rules: Sequence[FusionRule], hw: HwConfig) -> tuple[FusionRule, ...]:
    """``rules`` as ``hw`` can apply them: the composites it has, the epilogue operators its
    MAC array's output pipeline applies, the elementwise chains its vector unit runs."""
    adapted = (_adapted(rule, hw) for rule in rules)
    return tuple(rule for rule in adapted if rule is not None)


def _applies(rule: FusionRule, hw: HwConfig) -> bool:
    """False for a rule ``hw`` has no use for: a composite it has no datapath for, the hardware
    mechanisms it lacks."""
    if rule in COMPOSITE_RULES:
        return rule.name in hw.composites
    if isinstance(rule, ReductionPrologueRule):
        return hw.vector.transpose_reductions
    if rule is SOURCE_RULE:
        return hw.npu_support.source_operators
    if isinstance(rule, SourceMeanRule):
        return hw.npu_support.source_operators and "source_mean" in hw.vector.cycles_per_element
    if isinstance(rule, SourceSoftmaxRule):
        return hw.npu_support.source_operators and "source_softmax" in hw.vector.cycles_per_element
    if isinstance(rule, SourceSquaredDifferenceRule):
        return hw.npu_support.source_operators and "source_squared_difference" in hw.vector.cycles_per_element
    if isinstance(rule, SourceActivationRule):
        return hw.npu_support.source_operators and "source_activation" in hw.vector.cycles_per_element
    if isinstance(rule, LookupChainRule):
        return hw.lut.chained_elementwise
    return True


def _adapted(rule: FusionRule, hw: HwConfig) -> FusionRule | None:
    """``rule`` as ``hw`` applies it, or None where ``hw`` has nothing it would fuse."""
    if not _applies(rule, hw):
        return None
    if rule is SOURCE_RULE:
        return rule
    if isinstance(rule, EpilogueRule):
        return dataclasses.replace(rule, epilogues=frozenset(Op[name] for name in hw.mac_array.epilogue_ops),
                                   max_length=1 + hw.mac_array.max_epilogue_ops,
                                   widens=hw.mac_array.epilogue_widens,
                                   anchors=rule.anchors - (set() if hw.mac_array.transpose_conv_epilogue
                                                           else {Op.TRANSPOSE_CONV2D}))
    if isinstance(rule, RescaleFoldRule):
        if not hw.vector.scaled_ops:
            return None
        return dataclasses.replace(rule, anchors=frozenset(Op[name] for name in hw.vector.scaled_ops))
    if isinstance(rule, ElementwiseRule):   # (what the NPU cannot run is no link: it goes to the CPU)
        return dataclasses.replace(rule, max_length=hw.vector.max_chained_ops,
                                   members=rule.members & (npu_operators(hw.npu_support.profile) or rule.members))
    return rule


#: Rules that fuse composites (left out by ``--no-composite-fusion``).
COMPOSITE_RULES: tuple[FusionRule, ...] = (CellRule(lstm_cell.KIND, lstm_cell.match_cell),
                                           CellRule(gru_cell.KIND, gru_cell.match_gru))
DEFAULT_RULES: tuple[FusionRule, ...] = (*COMPOSITE_RULES, TableLookupRule(), SourceSoftmaxRule(),
                                         SourceSquaredDifferenceRule(), LookupChainRule(),
                                         SOURCE_RULE, SourceMeanRule(), SourceActivationRule(), EpilogueRule(),
                                         ReductionPrologueRule(), ElementwiseRule(), RescaleFoldRule())
#: The default rules without the composites.
CHAIN_RULES: tuple[FusionRule, ...] = tuple(r for r in DEFAULT_RULES if r not in COMPOSITE_RULES)


@dataclass
class BlockFusion:
    """The groups of one block, in the order they run, and the composite candidates looked at."""

    groups: list[FusedGroup]
    candidates: list[CompositeCandidate]


def fuse_block(block: Block, rules: Sequence[FusionRule] = DEFAULT_RULES,
               max_composite_bytes: int | None = None) -> BlockFusion:
    """Groups of operators, one per NPU operation, in an order they can run.

    Every operator of the block appears in exactly one group; a group runs at the
    position of its last operator, or after the groups whose results it reads.
    """
    ctx = FusionContext.of(block, max_composite_bytes)
    groups: list[FusedGroup] = []
    for rule in rules:
        for index in range(len(block.operators)):
            if index not in ctx.claimed:
                found = rule.match(index, ctx)
                if found:
                    group = found if isinstance(found, FusedGroup) else FusedGroup(list(found))
                    ctx.claimed.update(group.indices)
                    groups.append(group)
    groups += [FusedGroup([index]) for index in range(len(block.operators)) if index not in ctx.claimed]
    return BlockFusion(_run_order(block, groups), ctx.candidates)


def fuse(block: Block, rules: Sequence[FusionRule] = DEFAULT_RULES) -> list[list[int]]:
    """The operator indices of each group of :func:`fuse_block`, in run order."""
    return [g.indices for g in fuse_block(block, rules).groups]


def _run_order(block: Block, groups: list[FusedGroup]) -> list[FusedGroup]:
    """Groups by their last operator, each moved after the groups it depends on: those
    computing its operands, per variable the group before it that reads or writes that
    variable, and control flow (a barrier: it may read any variable)."""
    groups = sorted(groups, key=lambda g: g.indices[-1])
    deps = _group_deps(block, groups)
    if all(d < k for k, ds in enumerate(deps) for d in ds):
        return groups
    return [groups[k] for k in _topological(deps)]


def _group_deps(block: Block, groups: list[FusedGroup]) -> list[set[int]]:
    """Per group (in ``groups``' order), the groups it must run after."""
    owner = {i: k for k, group in enumerate(groups) for i in group.indices}
    producer = {name: owner[i] for i, op in enumerate(block.operators) for name in op.outputs}
    deps: list[set[int]] = [set() for _ in groups]
    barrier: int | None = None
    for k, group in enumerate(groups):
        operators = [block.operators[i] for i in group.indices]
        if barrier is not None:
            deps[k].add(barrier)
        if any(o.op in (Op.COND_IF, Op.WHILE_LOOP) for o in operators):
            deps[k].update(range(k))
            barrier = k
        deps[k].update(producer[n] for o in operators for n in o.inputs if producer.get(n, k) != k)
    _keep_variable_order(block, owner, deps)
    return deps


def _keep_variable_order(block: Block, owner: dict[int, int], deps: list[set[int]]) -> None:
    """Each access of a variable after the group of the access before it, in graph order."""
    last_access: dict[str, int] = {}
    for index, name in _variable_accesses(block):
        k = owner[index]
        if last_access.get(name, k) != k:
            deps[k].add(last_access[name])
        last_access[name] = k


def _variable_accesses(block: Block) -> list[tuple[int, str]]:
    """``(operator index, variable)`` of every operator reading or writing a variable, in graph order."""
    tensors = block.tensors
    return [(i, tensors[n].variable_key) for i, op in enumerate(block.operators) for n in (*op.inputs, *op.outputs)
            if n in tensors and tensors[n].variable]


def _topological(deps: list[set[int]]) -> list[int]:
    """Indices in an order after their dependencies, the smallest ready one first."""
    users: list[list[int]] = [[] for _ in deps]
    waiting = [len(d) for d in deps]
    for k, ds in enumerate(deps):
        for d in ds:
            users[d].append(k)
    ready = [k for k, n in enumerate(waiting) if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for user in users[k]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, user)
    if len(order) != len(deps):
        raise ScheduleError("fused operations depend on each other in a cycle (a bug in a fusion rule)")
    return order
