"""The LSTM-cell composite: recognise one cell of a converted LSTM and fuse it into one NPU operation.

Converters (tf-keras -> TFLite -> TOSA) unroll an LSTM layer into small operators per
time step. A cell computes, with the Keras/TFLite gate order (i, f, g, o) along the last
axis of the gate pre-activations ``z = x W + h U (+ b)``::

    i, f, g, o = sigmoid(z_i), sigmoid(z_f), tanh(z_g), sigmoid(z_o)
    c' = f * c + i * g
    h' = o * tanh(c')

In fp32 the activations are SIGMOID and TANH; in int8 they are TABLEs with RESCALEs
around them and around every product and sum (the quantisation steps). The matcher
anchors on the gate split (four SLICEs of one tensor along its last axis) and checks
the rest by structure, seeing through the quantisation steps (RESCALE, CAST) between
the operators that carry the meaning:

* the four slices take ``[0, H)``, ``[H, 2H)``, ``[2H, 3H)``, ``[3H, 4H)``;
* gate i, f and o go through a sigmoid, gate g through a tanh (an int8 TABLE is
  classified by its contents: monotone, and >= its output zero point for a sigmoid,
  on both sides of it for a tanh);
* f multiplies the previous cell state c; i multiplies g; the two products are added
  (c'); c' goes through a tanh, which multiplies o (h');
* the pre-activations are a sum of one or two matrix products (CONV2D or MATMUL)
  with constant weights of 4H output channels, whose data operands are the step
  input x and the previous output h;
* the cell is self-contained: every intermediate is read only inside it (c' and h'
  leave it), it reads no variable directly, and nothing it hands out comes back in;
  the VARIABLE_READs of h and c that only the cell reads join it (the fused operation
  reads its state straight from the variable SRAM bank).

Anything else stays op by op, and the candidate says why ("gate 2 (g) activation is
CLAMP, expected TANH"). The matched operators run as one NPU operation whose steps are
exactly their kernels, in graph order, so the bits are those of the op-by-op graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from npu_sim.hw.compute_units.mac_array import MAC_OPS
from npu_sim.program import CompositeFacts
from npu_sim.tosa.ir import Block, Operator
from npu_sim.tosa.ops import Op
from scheduler.passes.table_lookup import Lookup, match_lookup

GATE_NAMES = ("i", "f", "g", "o")
#: The activation each gate needs, in gate order.
GATE_ACTIVATIONS = ("SIGMOID", "SIGMOID", "TANH", "SIGMOID")
#: Operators that only change the encoding of a value (quantisation steps, reshapes).
TRANSPARENT = frozenset({Op.RESCALE, Op.CAST, Op.RESHAPE})
#: Operators a cell may contain.
CELL_OPS = frozenset({Op.CONV2D, Op.MATMUL, Op.RESHAPE, Op.RESCALE, Op.CAST, Op.ADD, Op.MUL, Op.SLICE,
                      Op.TABLE, Op.SIGMOID, Op.TANH, Op.GATHER, Op.CLAMP})
#: A lookup table may dip below its running maximum by this share of its range and still
#: count as monotone (LiteRT's 16-bit fixed-point sigmoid and tanh are staircases with dips).
LOOKUP_DIP_SHARE = 1 / 256
KIND = "lstm_cell"
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


def match_cell(g: CellGraph, index: int, max_working_bytes: int | None) -> CellMatch | None:
    """The cell anchored on the gate split read by SLICE ``index`` (its first reader), or None
    if ``index`` is no such anchor. NoMatch if it is an anchor but not an LSTM cell."""
    anchor = g.op(index)
    if anchor.op is not Op.SLICE or not anchor.inputs:
        return None
    z = anchor.inputs[0]
    readers = g.users(z)
    if len(readers) != 4 or readers[0] != index or any(g.op(r).op is not Op.SLICE for r in readers):
        return None
    split = _gate_slices(g, z, readers)
    if split is None:
        return None
    gates, hidden = split
    activations = [_activation(g, gates[k], k) for k in range(4)]
    a_i, a_f, a_g, a_o = (out for out, _ in activations)
    f_mul, c_prev = _product_with(g, a_f, None, "f")
    ig_mul, _ = _product_with(g, a_i, a_g, "i")
    c_sum = _sum_of(g, f_mul, ig_mul)
    c_next = _requantised(g, g.op(c_sum).outputs[0])
    tanh_c = _tanh_of(g, c_next)
    o_mul, _ = _product_with(g, a_o, tanh_c, "o")
    h_next = _requantised(g, g.op(o_mul).outputs[0])
    macs, x, h_prev, input_size = _preactivation(g, z, hidden)
    boundary = {x, h_prev, c_prev}
    members = _closure(g, [h_next, c_next], boundary)
    _check_members(g, members, {h_next, c_next}, macs)
    members |= _state_reads(g, members, (h_prev, c_prev))
    facts = CompositeFacts(KIND, hidden, input_size, (h_next, c_next))
    if max_working_bytes is not None:
        working = _working_bytes(g, members)
        if working > max_working_bytes:
            raise NoMatch(f"its working set ({working} bytes) exceeds the TCM budget ({max_working_bytes} bytes)")
    # the state arrives first when it is read from a variable or given: the recurrent product
    # may then run while x is loaded (not when the previous cell computes it)
    early_state = x != h_prev and all(_is_given(g, t) for t in (h_prev, c_prev))
    return CellMatch(sorted(members), facts, (x,) if early_state else ())


def _gate_slices(g: CellGraph, z: str, readers: list[int]) -> tuple[list[str], int] | None:
    """The four gate tensors in gate order and H, if the slices cut the last axis of ``z`` into
    four equal parts (None otherwise: no gate split, so no candidate)."""
    shape = tensor_shape(g.block, z)
    if not shape or shape[-1] % 4:
        return None
    hidden = shape[-1] // 4
    gates: list[str | None] = [None] * 4
    for r in readers:
        k = _gate_index(g, g.op(r), shape, hidden)
        if k is None:
            return None
        gates[k] = g.op(r).outputs[0]
    if any(t is None for t in gates):
        return None
    return [t for t in gates if t is not None], hidden


def _gate_index(g: CellGraph, op: Operator, shape: tuple[int, ...], hidden: int) -> int | None:
    """Which gate a SLICE takes: the k-th run of ``hidden`` channels of the last axis, the
    other axes whole (None for any other slice)."""
    start = g.constant(op.inputs[1]) if len(op.inputs) == 3 else None
    size = g.constant(op.inputs[2]) if len(op.inputs) == 3 else None
    if start is None or size is None or start.size != len(shape) or size.size != len(shape):
        return None
    start_l, size_l = [int(v) for v in start.reshape(-1)], [int(v) for v in size.reshape(-1)]
    whole = all(a == 0 and n == d for a, n, d in zip(start_l[:-1], size_l[:-1], shape[:-1]))
    if not whole or size_l[-1] != hidden or start_l[-1] % hidden or start_l[-1] // hidden > 3:
        return None
    return start_l[-1] // hidden


def _activation(g: CellGraph, gate: str, k: int) -> tuple[str, int]:
    """Gate ``k``'s activation result (checked against the gate's function) and its operator."""
    label = f"gate {k} ({GATE_NAMES[k]})"
    tensor = gate
    while True:   # through the quantisation steps to the activation
        user = g.sole_user(tensor)
        if user is None:
            raise NoMatch(f"{label} is read by {len(g.users(tensor))} operators, expected one activation")
        op = g.op(user)
        if op.op not in TRANSPARENT or len(op.outputs) != 1 or op.inputs[0] != tensor or _lookup(g, user):
            break
        tensor = op.outputs[0]
    kind, result = activation_at(g, user)
    if kind != GATE_ACTIVATIONS[k]:
        raise NoMatch(f"{label} activation is {kind}, expected {GATE_ACTIVATIONS[k]}")
    return result, user


def _lookup(g: CellGraph, index: int) -> Lookup | None:
    return match_lookup(g.block, index, g.sole_user)


def activation_at(g: CellGraph, index: int) -> tuple[str, str]:
    """What the activation starting at operator ``index`` computes (as :func:`activation_kind`
    names it) and its result: a lookup (CAST ... GATHER ... RESHAPE) or one operator."""
    found = _lookup(g, index)
    if found is not None:
        return _table_kind(found.table, found.offset, 0, LOOKUP_DIP_SHARE), found.result
    outputs = g.op(index).outputs
    return activation_kind(g, index), outputs[0] if outputs else ""


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
    return _table_kind(table, None, _output_zero_point(g, op.outputs[0]), 0.0)


def _table_kind(table: np.ndarray, offset: int | None, zero_point: int, dip_share: float) -> str:
    """SIGMOID for a monotone table that stays at or above ``zero_point``, TANH for one on both
    sides of it (``offset``: the entry of input 0, where a lookup's tanh crosses zero)."""
    values = table.astype(np.int64).reshape(-1)
    if values.size < 2:
        return "a non-monotone TABLE"
    dips = np.maximum.accumulate(values) - values
    if dips.max() > dip_share * (values.max() - values.min()):
        return "a non-monotone TABLE"
    centred = values - zero_point
    if offset is not None and centred[offset] != 0 and centred.min() < 0:
        return "a TABLE not centred on zero"
    if centred.min() >= 0 and centred.max() > 0:
        return "SIGMOID"
    if centred.min() < 0 < centred.max():
        return "TANH"
    return "a constant TABLE"


def _output_zero_point(g: CellGraph, tensor: str) -> int:
    """The zero point the reader of a table's result subtracts (a RESCALE's input_zp), else 0."""
    user = g.sole_user(tensor)
    if user is None or g.op(user).op is not Op.RESCALE or len(g.op(user).inputs) < 4:
        return 0
    zp = g.constant(g.op(user).inputs[3])
    return int(zp.reshape(-1)[0]) if zp is not None and zp.size else 0


def _product_with(g: CellGraph, left: str, right: str | None, gate: str) -> tuple[int, str]:
    """The MUL reading ``left`` (and ``right``, if given) through quantisation steps, and its
    other operand traced back to where it comes from."""
    reached, _ = g.forward(left)
    user = g.sole_user(reached)
    if user is None or g.op(user).op is not Op.MUL:
        raise NoMatch(f"gate {gate} is not multiplied ({_reader_name(g, reached)})")
    mul = g.op(user)
    other = mul.inputs[1] if mul.inputs[0] == reached else mul.inputs[0]
    if right is not None:
        other_reached, _ = g.forward(right)
        if other_reached != other:
            raise NoMatch(f"gate {gate} is multiplied by {other}, expected the value from {right}")
    return user, g.backward(other)


def _reader_name(g: CellGraph, tensor: str) -> str:
    users = g.users(tensor)
    if len(users) != 1:
        return f"{len(users)} readers"
    return f"read by {g.op(users[0]).name}"


def _sum_of(g: CellGraph, first: int, second: int) -> int:
    """The ADD of two products' results (through quantisation steps): c'."""
    a, _ = g.forward(g.op(first).outputs[0])
    b, _ = g.forward(g.op(second).outputs[0])
    user = g.sole_user(a)
    if user is None or g.op(user).op is not Op.ADD or set(g.op(user).inputs) != {a, b}:
        raise NoMatch("f * c and i * g are not added into the new cell state")
    return user


def _requantised(g: CellGraph, tensor: str) -> str:
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


def _tanh_of(g: CellGraph, c_next: str) -> str:
    """tanh(c'): the result of the one TANH-like activation among c''s readers (through
    quantisation steps)."""
    found = []
    for user in g.users(c_next):
        index = user
        op = g.op(index)
        while op.op in TRANSPARENT and not _lookup(g, index) and g.sole_user(op.outputs[0]) is not None:
            index = g.sole_user(op.outputs[0])   # type: ignore[assignment]
            op = g.op(index)
        kind, result = activation_at(g, index)
        if kind == "TANH":
            found.append(result)
    if len(found) != 1:
        raise NoMatch(f"the new cell state {c_next} goes through {len(found)} tanh activations, expected 1")
    return found[0]


def _preactivation(g: CellGraph, z: str, hidden: int) -> tuple[list[int], str, str, int]:
    """The matrix products behind the gate pre-activations: their indices, the step input x,
    the previous output h and the input size."""
    macs = _gate_products(g, z)
    sources = [_product_source(g, index, hidden) for index in macs]
    sizes = [g.block.tensor(s).element_count // max(1, _batch(g, z)) for s in sources]
    if len(sources) == 1:
        return macs, sources[0], sources[0], sizes[0] - hidden
    recurrent = 1 if sizes[1] == hidden else 0 if sizes[0] == hidden else -1
    if recurrent < 0:
        raise NoMatch(f"neither matrix product reads a previous output of {hidden} units")
    return macs, sources[1 - recurrent], sources[recurrent], sizes[1 - recurrent]


def _gate_products(g: CellGraph, z: str) -> list[int]:
    """The one or two matrix products whose sum (with constants) the pre-activations are."""
    macs: list[int] = []

    def follow(index: int) -> list[str]:
        op = g.op(index)
        if op.op in MAC_OPS:
            macs.append(index)
            return []
        if op.op not in (Op.ADD, Op.RESCALE, Op.CAST, Op.RESHAPE):
            raise NoMatch(f"the gate pre-activations come from {op.op.name} ({op.name}), "
                          "expected a sum of matrix products")
        return op.inputs[: 2 if op.op is Op.ADD else 1]

    _walk_back(g, [z], set(), "the gate pre-activations depend on {tensor}, not on matrix products", follow)
    if not 1 <= len(macs) <= 2:
        raise NoMatch(f"the gate pre-activations sum {len(macs)} matrix products, expected 1 or 2")
    return sorted(macs)


def _product_source(g: CellGraph, index: int, hidden: int) -> str:
    """The data operand of a gate product (before its RESHAPEs), checked: a CONV2D or MATMUL
    with constant weights and 4H outputs."""
    op = g.op(index)
    if op.op not in (Op.CONV2D, Op.MATMUL):
        raise NoMatch(f"{op.name} is a {op.op.name}, expected CONV2D or MATMUL")
    if not g.is_constant_derived(op.inputs[1]):
        raise NoMatch(f"the weights of {op.name} are not constant")
    out = tensor_shape(g.block, op.outputs[0])
    if not out or out[-1] != 4 * hidden:
        raise NoMatch(f"{op.name} computes {out[-1] if out else 0} channels, expected {4 * hidden}")
    return g.backward(op.inputs[0], frozenset({Op.RESHAPE}))


def _is_given(g: CellGraph, tensor: str) -> bool:
    """A block input or a variable's value (not computed in the block)."""
    index = g.producer.get(tensor)
    return index is None or g.op(index).op is Op.VARIABLE_READ


def _batch(g: CellGraph, z: str) -> int:
    shape = tensor_shape(g.block, z)
    return int(np.prod(shape[:-1])) if len(shape) > 1 else 1


def _closure(g: CellGraph, outputs: Iterable[str], boundary: set[str]) -> set[int]:
    """Operators computing ``outputs`` from the boundary tensors and constants."""
    members: set[int] = set()

    def follow(index: int) -> list[str]:
        op = g.op(index)
        if op.op not in CELL_OPS:
            raise NoMatch(f"the cell contains {op.op.name} ({op.name})")
        members.add(index)
        return op.inputs

    _walk_back(g, outputs, boundary, "the cell reads {tensor}, which is neither x, h, c nor a constant", follow)
    return members


def _walk_back(g: CellGraph, starts: Iterable[str], boundary: set[str], missing: str,
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


def _check_members(g: CellGraph, members: set[int], outputs: set[str], macs: list[int]) -> None:
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


def _state_reads(g: CellGraph, members: set[int], state: Iterable[str]) -> set[int]:
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
    operation then)."""
    stack = [u for t in outputs for u in g.users(t) if u not in members]
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
                stack.append(user)


def _working_bytes(g: CellGraph, members: set[int]) -> int:
    """Bytes of every distinct tensor the cell reads or writes (whole-tensor execution), but
    the tables of its lookups, which the LUT reads where they live."""
    names = {n for i in members for n in (*g.op(i).inputs, *g.op(i).outputs)}
    tables = {g.op(i).inputs[0] for i in members
              if g.op(i).op is Op.GATHER and g.constant(g.op(i).inputs[0]) is not None}
    return sum(g.block.tensor(n).size_bytes for n in names - tables)
