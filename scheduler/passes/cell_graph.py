"""Matching recurrent cells in a block: what the LSTM and GRU composite rules share.

A converted recurrent cell is a handful of operators that carry its meaning (matrix
products, gate splits, activations, products and sums) with quantisation steps (RESCALE,
CAST, RESHAPE) between them, in int8 graphs on every edge. :class:`CellGraph` gives a
block's def-use facts and walks through those steps forward and backward; the helpers
here find the pieces every cell has: a split of the gate pre-activations into equal
runs of the last axis (:func:`gate_split`), an activation and what it computes (SIGMOID
and TANH operators, int8 TABLEs and exact lookups classified by their tables), the
product of a gate with another value, the matrix product behind pre-activations, and
the checks that make the matched operators one operation: self-contained, convex, within
the TCM budget, the variable reads of the state joined in. A mismatch raises
:class:`NoMatch` with the reason ``npu-sim plan`` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from npu_sim.program import CompositeFacts
from npu_sim.tosa.ir import Block, Operator
from npu_sim.tosa.ops import Op
from scheduler.passes.table_lookup import LOOKUP_DIP_SHARE, Lookup, match_lookup, table_function

#: Operators that only change the encoding of a value (quantisation steps, reshapes).
TRANSPARENT = frozenset({Op.RESCALE, Op.CAST, Op.RESHAPE})
#: Operators of a lookup written as TOSA operators (CAST, ADD, RESHAPE, GATHER, RESHAPE).
LOOKUP_LENGTH = 5
#: Operators whose results are leaves of the constant analysis (a CONST is constant if it has data).
_LEAF_PRODUCERS = frozenset({Op.CONST, Op.CONST_SHAPE, Op.VARIABLE_READ, Op.COND_IF, Op.WHILE_LOOP})


class NoMatch(Exception):
    """The candidate is not an LSTM cell (the message says why)."""


@dataclass
class CellGraph:
    """Def-use facts of a block the matcher walks."""

    block: Block
    consumers: dict[str, list[int]]
    producer: dict[str, int]
    claimed: set[int]
    constant_derived: dict[str, bool] = field(default_factory=dict)
    #: memos by operator index (the block does not change while cells are matched)
    lookups: dict[int, Lookup | None] = field(default_factory=dict)
    activations: dict[int, tuple[str, str]] = field(default_factory=dict)

    def op(self, index: int) -> Operator:
        return self.block.operators[index]

    def users(self, tensor: str) -> list[int]:
        return self.consumers.get(tensor, [])

    def sole_user(self, tensor: str) -> int | None:
        users = self.users(tensor)
        if len(users) != 1 or tensor in self.block.outputs or self.is_variable(tensor):
            return None
        return users[0]

    def is_variable(self, tensor: str) -> bool:
        t = self.block.tensors.get(tensor)
        return t is not None and t.variable

    def constant(self, tensor: str) -> np.ndarray | None:
        t = self.block.tensors.get(tensor)
        return None if t is None or t.data is None or t.variable else np.asarray(t.data)

    def is_constant_derived(self, tensor: str) -> bool:
        """A constant, or computed from constants only (constant folding turns it into one)."""
        memo = self.constant_derived
        known = memo.get(tensor)
        if known is not None:
            return known
        stack = [(tensor, False)]
        while stack:   # iterative post-order: chains of constant arithmetic can be long
            name, expanded = stack.pop()
            if name in memo:
                continue
            inputs = self._producer_inputs(name)
            if expanded or inputs is None:
                memo[name] = inputs is None and self._is_constant(name) or \
                    inputs is not None and all(memo.get(n, False) for n in inputs)
                continue
            stack.append((name, True))
            stack += [(n, False) for n in inputs if n not in memo]
        return memo[tensor]

    def _is_constant(self, name: str) -> bool:
        t = self.block.tensors.get(name)
        return t is not None and t.data is not None and not t.variable

    def _producer_inputs(self, name: str) -> list[str] | None:
        """The inputs of the operator computing ``name``, None for a leaf (a constant, a
        variable, a block input, a variable read or a control-flow result)."""
        t = self.block.tensors.get(name)
        if t is None or t.variable or t.data is not None:
            return None
        index = self.producer.get(name)
        if index is None or self.op(index).op in _LEAF_PRODUCERS:
            return None
        return self.op(index).inputs

    def forward(self, tensor: str, ops: frozenset[Op] = TRANSPARENT) -> tuple[str, list[int]]:
        """Follow ``tensor`` through sole consumers in ``ops``: the last tensor reached and the
        operators passed."""
        passed: list[int] = []
        while True:
            user = self.sole_user(tensor)
            if user is None or self.op(user).op not in ops or len(self.op(user).outputs) != 1 \
                    or self.op(user).inputs[0] != tensor:
                return tensor, passed
            passed.append(user)
            tensor = self.op(user).outputs[0]

    def backward(self, tensor: str, ops: frozenset[Op] = TRANSPARENT) -> str:
        """Follow ``tensor`` back through producers in ``ops`` whose result only that path reads."""
        while True:
            index = self.producer.get(tensor)
            if index is None or self.op(index).op not in ops or self.sole_user(tensor) is None:
                return tensor
            source = self.op(index).inputs[0]
            if self.is_constant_derived(source):
                return tensor
            tensor = source


def tensor_shape(block: Block, name: str) -> tuple[int, ...]:
    return tuple(block.tensor(name).shape)


@dataclass
class CellMatch:
    """A matched cell: the operator indices (graph order) and what it computes."""

    indices: list[int]
    facts: CompositeFacts
    late_inputs: tuple[str, ...] = ()   # the step input x (the state is there first)
    state_inputs: tuple[str, ...] = ()  # the previous state the cell reads (h, c), where known


def gate_split(g: CellGraph, z: str, anchor: int, parts: int) -> tuple[list[str], int] | None:
    """The ``parts`` gate tensors in order and their width H, if the readers of ``z`` are
    ``parts`` SLICEs (the first of them ``anchor``) cutting its last axis into equal runs;
    None otherwise (no gate split, so no candidate)."""
    readers = g.users(z)
    if len(readers) != parts or readers[0] != anchor or any(g.op(r).op is not Op.SLICE for r in readers):
        return None
    shape = tensor_shape(g.block, z)
    if not shape or shape[-1] % parts:
        return None
    hidden = shape[-1] // parts
    gates: list[str | None] = [None] * parts
    for r in readers:
        k = _gate_index(g, g.op(r), shape, hidden, parts)
        if k is None:
            return None
        gates[k] = g.op(r).outputs[0]
    if any(t is None for t in gates):
        return None
    return [t for t in gates if t is not None], hidden


def _gate_index(g: CellGraph, op: Operator, shape: tuple[int, ...], hidden: int, parts: int) -> int | None:
    """Which gate a SLICE takes: the k-th run of ``hidden`` channels of the last axis, the
    other axes whole (None for any other slice)."""
    start = g.constant(op.inputs[1]) if len(op.inputs) == 3 else None
    size = g.constant(op.inputs[2]) if len(op.inputs) == 3 else None
    if start is None or size is None or start.size != len(shape) or size.size != len(shape):
        return None
    start_l, size_l = [int(v) for v in start.reshape(-1)], [int(v) for v in size.reshape(-1)]
    whole = all(a == 0 and n == d for a, n, d in zip(start_l[:-1], size_l[:-1], shape[:-1]))
    if not whole or size_l[-1] != hidden or start_l[-1] % hidden or start_l[-1] // hidden >= parts:
        return None
    return start_l[-1] // hidden


def activation(g: CellGraph, gate: str, label: str, expected: str) -> tuple[str, int]:
    """The result of the activation ``gate`` goes through (checked to be ``expected``, SIGMOID
    or TANH; ``label`` names the gate in the reason) and its first operator."""
    tensor = gate
    while True:   # through the quantisation steps to the activation
        user = g.sole_user(tensor)
        if user is None:
            raise NoMatch(f"{label} is read by {len(g.users(tensor))} operators, expected one activation")
        op = g.op(user)
        if op.op not in TRANSPARENT or len(op.outputs) != 1 or op.inputs[0] != tensor or lookup(g, user):
            break
        tensor = op.outputs[0]
    kind, result = activation_at(g, user)
    if kind != expected and not (kind == "HARD_SIGMOID" and expected == "SIGMOID"):
        raise NoMatch(f"{label} activation is {kind}, expected {expected}")
    return result, user


def lookup(g: CellGraph, index: int) -> Lookup | None:
    try:
        return g.lookups[index]
    except KeyError:
        found = g.lookups[index] = match_lookup(g.block, index, g.sole_user)
        return found


def activation_at(g: CellGraph, index: int) -> tuple[str, str]:
    """What the activation starting at operator ``index`` computes (as :func:`activation_kind`
    names it) and its result: a lookup (CAST ... GATHER ... RESHAPE) or one operator."""
    known = g.activations.get(index)
    if known is None:
        known = g.activations[index] = _activation_at(g, index)
    return known


def _activation_at(g: CellGraph, index: int) -> tuple[str, str]:
    found = lookup(g, index)
    if found is not None:
        return table_function(found.table, found.offset, 0, LOOKUP_DIP_SHARE), found.result
    hard = hard_sigmoid_at(g, index)
    if hard is not None:
        return "HARD_SIGMOID", hard
    outputs = g.op(index).outputs
    return activation_kind(g, index), outputs[0] if outputs else ""


def activation_source(g: CellGraph, result: str) -> tuple[str, str] | None:
    """What the activation giving ``result`` computes (as :func:`activation_kind` names it) and
    the tensor it reads; None if no activation (a lookup, SIGMOID, TANH or TABLE) gives it."""
    tensor = result
    for _ in range(LOOKUP_LENGTH):
        index = g.producer.get(tensor)
        if index is None:
            return None
        op = g.op(index)
        if op.op in (Op.SIGMOID, Op.TANH, Op.TABLE):
            return (activation_kind(g, index), op.inputs[0]) if tensor == result else None
        found = lookup(g, index)
        if found is not None:
            ends = (found.result, g.backward(found.result))   # (seen from before its last RESHAPE)
            return (activation_at(g, index)[0], found.source) if result in ends else None
        computed = [name for name in op.inputs if not g.is_constant_derived(name)]
        if len(computed) != 1:
            return None
        tensor = computed[0]
    return None


def hard_sigmoid_at(g: CellGraph, index: int) -> str | None:
    """The result of a hard sigmoid starting at operator ``index`` (Keras' ``hard_sigmoid``:
    ``clip(a * x + b, 0, 1)``, a MUL and an ADD of constants, then bounds: MINIMUM, MAXIMUM or
    CLAMP, with quantisation steps between them; the result of its last bound); None if none
    starts there."""
    op = g.op(index)
    if op.op is not Op.MUL or len(op.outputs) != 1 or not any(g.is_constant_derived(t) for t in op.inputs[:2]):
        return None
    tensor, added, bounded = op.outputs[0], False, None
    while True:
        follower = _chain_follower(g, tensor)
        if follower is None:
            break
        stage = _hard_sigmoid_stage(g, follower, tensor, bounded is not None)
        if stage is None:
            break
        added |= stage == "add"
        tensor = follower.outputs[0]
        if stage == "bound":
            bounded = tensor
    return bounded if added else None


def _chain_follower(g: CellGraph, tensor: str) -> Operator | None:
    """The sole reader of ``tensor`` with one result that reads it first (or as either operand
    of an ADD, MINIMUM or MAXIMUM)."""
    user = g.sole_user(tensor)
    if user is None:
        return None
    op = g.op(user)
    if len(op.outputs) != 1 or op.inputs[0] != tensor and op.op not in (Op.ADD, Op.MINIMUM, Op.MAXIMUM):
        return None
    return op


def _hard_sigmoid_stage(g: CellGraph, op: Operator, tensor: str, bounded: bool) -> str | None:
    """What ``op`` (reading ``tensor``) is in a hard sigmoid: a quantisation "step" or the
    "add" of the offset (before the bounds), a "bound"; None if it ends the chain."""
    constant_others = all(g.is_constant_derived(t) for t in op.inputs if t != tensor)
    if op.op in TRANSPARENT and op.inputs[0] == tensor:
        return "step"   # (int8: between the bounds too, as MINIMUM, RESCALEs, CLAMP)
    if op.op is Op.ADD and constant_others and not bounded:
        return "add"
    if op.op in (Op.MINIMUM, Op.MAXIMUM) and constant_others or op.op is Op.CLAMP:
        return "bound"
    return None


def activation_kind(g: CellGraph, index: int) -> str:
    """SIGMOID or TANH for those operators and for TABLEs shaped like them; else the operator's
    name (or a description of the table)."""
    op = g.op(index)
    if op.op in (Op.SIGMOID, Op.TANH):
        return op.op.name
    if op.op is not Op.TABLE:
        return op.op.name
    table = g.constant(op.inputs[1]) if len(op.inputs) > 1 else None
    if table is None:
        return "a TABLE without a constant table"
    return table_function(table, None, _output_zero_point(g, op.outputs[0]), 0.0)


def _output_zero_point(g: CellGraph, tensor: str) -> int:
    """The zero point the readers of a table's result subtract (their RESCALEs' input_zp, when
    they all agree), else 0."""
    points = set()
    for user in g.users(tensor):
        op = g.op(user)
        if op.op is not Op.RESCALE or len(op.inputs) < 4 or op.inputs[0] != tensor:
            return 0
        zp = g.constant(op.inputs[3])
        points.add(int(zp.reshape(-1)[0]) if zp is not None and zp.size else 0)
    return points.pop() if len(points) == 1 else 0


def product_with(g: CellGraph, left: str, right: str | None, gate: str) -> tuple[int, str]:
    """The MUL reading ``left`` (and ``right``, if given) through quantisation steps, and its
    other operand traced back to where it comes from."""
    reached, _ = g.forward(left)
    user = g.sole_user(reached)
    if user is None or g.op(user).op is not Op.MUL:
        raise NoMatch(f"gate {gate} is not multiplied ({reader_name(g, reached)})")
    mul = g.op(user)
    other = mul.inputs[1] if mul.inputs[0] == reached else mul.inputs[0]
    if right is not None:
        other_reached, _ = g.forward(right)
        if other_reached != other:
            raise NoMatch(f"gate {gate} is multiplied by {other}, expected the value from {right}")
    return user, g.backward(other)


def reader_name(g: CellGraph, tensor: str) -> str:
    users = g.users(tensor)
    if len(users) != 1:
        return f"{len(users)} readers"
    return f"read by {g.op(users[0]).name}"


def sum_of(g: CellGraph, first: int, second: int, what: str) -> int:
    """The ADD of two products' results (through quantisation steps): c' in an LSTM, h' in a GRU."""
    a, _ = g.forward(g.op(first).outputs[0])
    b, _ = g.forward(g.op(second).outputs[0])
    user = g.sole_user(a)
    if user is None or g.op(user).op is not Op.ADD or set(g.op(user).inputs) != {a, b}:
        raise NoMatch(f"{what} are not added")
    return user


def requantised(g: CellGraph, tensor: str) -> str:
    """A product or sum after the RESCALEs that bring it back from the accumulator width and
    the CLAMP of a cell clip."""
    while True:
        user = g.sole_user(tensor)
        t = g.block.tensor(tensor)
        if user is None:
            return tensor
        op = g.op(user)
        wide = t.dtype.bits >= 32 and t.dtype.is_integer
        if not (op.op is Op.RESCALE and wide or op.op is Op.CLAMP and op.inputs[0] == tensor):
            return tensor
        tensor = op.outputs[0]


def activation_of(g: CellGraph, c_next: str, kind_wanted: str = "TANH") -> str:
    """The result of the one activation of ``kind_wanted`` among ``c_next``'s readers (through
    quantisation steps): tanh(c') in an LSTM."""
    found = []
    for user in g.users(c_next):
        index = user
        op = g.op(index)
        while op.op in TRANSPARENT and not lookup(g, index) and g.sole_user(op.outputs[0]) is not None:
            index = g.sole_user(op.outputs[0])   # type: ignore[assignment]
            op = g.op(index)
        kind, result = activation_at(g, index)
        if kind == kind_wanted:
            found.append(result)
    if len(found) != 1:
        raise NoMatch(f"the new cell state {c_next} goes through {len(found)} {kind_wanted.lower()} activations, "
                      "expected 1")
    return found[0]


def product_source(g: CellGraph, index: int, channels: int) -> str:
    """The data operand of a gate product (before its RESHAPEs), checked: a CONV2D or MATMUL
    with constant weights and ``channels`` outputs."""
    op = g.op(index)
    if op.op not in (Op.CONV2D, Op.MATMUL):
        raise NoMatch(f"{op.name} is a {op.op.name}, expected CONV2D or MATMUL")
    if not g.is_constant_derived(op.inputs[1]):
        raise NoMatch(f"the weights of {op.name} are not constant")
    out = tensor_shape(g.block, op.outputs[0])
    if not out or out[-1] != channels:
        raise NoMatch(f"{op.name} computes {out[-1] if out else 0} channels, expected {channels}")
    return g.backward(op.inputs[0], frozenset({Op.RESHAPE}))


def is_given(g: CellGraph, tensor: str) -> bool:
    """A block input or a variable's value (not computed in the block)."""
    index = g.producer.get(tensor)
    return index is None or g.op(index).op is Op.VARIABLE_READ


def batch(g: CellGraph, z: str) -> int:
    shape = tensor_shape(g.block, z)
    return int(np.prod(shape[:-1])) if len(shape) > 1 else 1


def closure(g: CellGraph, outputs: Iterable[str], boundary: set[str], ops: frozenset[Op]) -> set[int]:
    """Operators computing ``outputs`` from the boundary tensors and constants (each one of ``ops``)."""
    members: set[int] = set()

    def follow(index: int) -> list[str]:
        op = g.op(index)
        if op.op not in ops:
            raise NoMatch(f"the cell contains {op.op.name} ({op.name})")
        members.add(index)
        return op.inputs

    walk_back(g, outputs, boundary, "the cell reads {tensor}, which is neither x, h, c nor a constant", follow)
    return members


def walk_back(g: CellGraph, starts: Iterable[str], boundary: set[str], missing: str,
               follow: Callable[[int], list[str]]) -> None:
    """Visit the producers of ``starts`` and of what ``follow(index)`` names next, once each,
    stopping at ``boundary`` tensors and constants; a tensor nobody produces is NoMatch
    (``missing``, with ``{tensor}``)."""
    stack, seen = list(starts), set()
    while stack:
        tensor = stack.pop()
        if tensor in seen or tensor in boundary or g.is_constant_derived(tensor):
            continue
        seen.add(tensor)
        index = g.producer.get(tensor)
        if index is None:
            raise NoMatch(missing.format(tensor=tensor))
        stack += follow(index)


def check_members(g: CellGraph, members: set[int], outputs: set[str], macs: list[int]) -> None:
    """Self-contained, unclaimed, no variable read, and nothing it hands out comes back in."""
    if not set(macs) <= members:
        raise NoMatch("a matrix product of the gates lies outside the cell")
    for index in sorted(members):
        op = g.op(index)
        if index in g.claimed:
            raise NoMatch(f"{op.name} already belongs to another fused operation")
        if any(g.is_variable(n) for n in (*op.inputs, *op.outputs)):
            raise NoMatch(f"{op.name} reads or writes a variable directly")
        for out in op.outputs:
            if out in outputs:
                continue
            outside = [u for u in g.users(out) if u not in members]
            if outside or out in g.block.outputs:
                reader = g.op(outside[0]).name if outside else "the block's results"
                raise NoMatch(f"{out} is also read by {reader}, outside the cell")
    _check_convex(g, members, outputs)


def state_reads(g: CellGraph, members: set[int], state: Iterable[str]) -> set[int]:
    """The VARIABLE_READs of h and c that only the cell reads: the fused operation reads the
    state straight from the variable SRAM bank."""
    reads = set()
    for tensor in state:
        index = g.producer.get(tensor)
        if index is not None and index not in g.claimed and g.op(index).op is Op.VARIABLE_READ \
                and tensor not in g.block.outputs and all(u in members for u in g.users(tensor)):
            reads.add(index)
    return reads


def _check_convex(g: CellGraph, members: set[int], outputs: set[str]) -> None:
    """No path leaves the cell through an output and comes back in (it could not run as one
    operation then). Operators run after the cell's last one cannot lead back into it (a
    block's operators come after what they read), so the walk stays near the cell: linear
    in the cells of an unrolled sequence, not quadratic."""
    last = max(members)
    stack = [u for t in outputs for u in g.users(t) if u not in members and u < last]
    seen: set[int] = set()
    while stack:
        index = stack.pop()
        if index in seen:
            continue
        seen.add(index)
        for out in g.op(index).outputs:
            for user in g.users(out):
                if user in members:
                    raise NoMatch(f"{g.op(user).name} reads a result of the cell through {g.op(index).name}")
                if user < last:
                    stack.append(user)


def working_bytes(g: CellGraph, members: set[int]) -> int:
    """Bytes of every distinct tensor the cell reads or writes (whole-tensor execution), but
    the tables of its lookups, which the LUT reads where they live."""
    names = {n for i in members for n in (*g.op(i).inputs, *g.op(i).outputs)}
    tables = {g.op(i).inputs[0] for i in members
              if g.op(i).op is Op.GATHER and g.constant(g.op(i).inputs[0]) is not None}
    return sum(g.block.tensor(n).size_bytes for n in names - tables)
