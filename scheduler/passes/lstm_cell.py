"""The LSTM-cell composite: recognise one cell of a converted LSTM and fuse it into one NPU operation.

Converters (tf-keras -> TFLite -> TOSA) unroll an LSTM layer into small operators per
time step. A cell computes, with the Keras/TFLite gate order (i, f, g, o) along the last
axis of the gate pre-activations ``z = x W + h U (+ b)``::

    i, f, g, o = sigmoid(z_i), sigmoid(z_f), tanh(z_g), sigmoid(z_o)
    c' = f * c + i * g
    h' = o * tanh(c')

In fp32 the activations are SIGMOID and TANH; in int8 they are TABLEs with RESCALEs
around them and around every product and sum (the quantisation steps). The gates come in
one of two forms: split from one tensor (a converted Keras LSTM: four SLICEs of one
tensor along its last axis, the anchor), or each computed by products of its own (a
legalized TFLite LSTM, as TFLite stores it: the anchor is the ADD of c', whose terms
name the gates). The matcher checks the rest by structure, seeing through the
quantisation steps (RESCALE, CAST) between the operators that carry the meaning:

* split gates: the four slices take ``[0, H)``, ``[H, 2H)``, ``[2H, 3H)``, ``[3H, 4H)``;
  gates of their own: one is the sum f * c + i * g (through quantisation steps) of a
  product of a sigmoid with another value and of a sigmoid with a tanh, and o is the
  sigmoid that multiplies tanh(c');
* gate i, f and o go through a sigmoid (or Keras' hard sigmoid: a MUL and an ADD of
  constants, then MINIMUM/MAXIMUM/CLAMP bounds), gate g through a tanh (an int8 TABLE is
  classified by its contents: monotone, and >= its output zero point for a sigmoid,
  on both sides of it for a tanh);
* f multiplies the previous cell state c; i multiplies g; the two products are added
  (c'); c' goes through a tanh, which multiplies o (h');
* the pre-activations are a sum of one or two matrix products (CONV2D or MATMUL)
  with constant weights of 4H output channels (H for gates of their own, the same two
  data operands for every gate), whose data operands are the step input x and the
  previous output h;
* the cell is self-contained: every intermediate is read only inside it (c' and h'
  leave it), it reads no variable directly, and nothing it hands out comes back in;
  the VARIABLE_READs of h and c that only the cell reads join it (the fused operation
  reads its state straight from the variable SRAM bank).

Anything else stays op by op, and the candidate says why ("gate 2 (g) activation is
CLAMP, expected TANH"). The matched operators run as one NPU operation whose steps are
exactly their kernels, in graph order, so the bits are those of the op-by-op graph.
"""

from __future__ import annotations

from npu_sim.hw.compute_units.mac_array import MAC_OPS
from npu_sim.program import CompositeFacts
from npu_sim.tosa.ops import Op
from scheduler.passes.cell_graph import (
    CellGraph,
    CellMatch,
    NoMatch,
    activation,
    activation_of,
    activation_source,
    batch,
    check_members,
    closure,
    gate_split,
    is_given,
    product_source,
    product_with,
    reader_name,
    requantised,
    state_reads,
    sum_of,
    tensor_shape,
    walk_back,
    working_bytes,
)

GATE_NAMES = ("i", "f", "g", "o")
#: The activation each gate needs, in gate order.
GATE_ACTIVATIONS = ("SIGMOID", "SIGMOID", "TANH", "SIGMOID")
#: Operators a cell may contain.
CELL_OPS = frozenset({Op.CONV2D, Op.MATMUL, Op.RESHAPE, Op.RESCALE, Op.CAST, Op.ADD, Op.MUL, Op.SLICE,
                      Op.TABLE, Op.SIGMOID, Op.TANH, Op.GATHER, Op.CLAMP, Op.MINIMUM, Op.MAXIMUM})
KIND = "lstm_cell"


def match_cell(g: CellGraph, index: int, max_working_bytes: int | None) -> CellMatch | None:
    """The cell anchored on operator ``index``: the first SLICE of a gate split, or the ADD of
    c' where each gate has products of its own. None if ``index`` is no such anchor; NoMatch
    if it is one but not an LSTM cell."""
    anchor = g.op(index)
    if anchor.op is Op.SLICE and anchor.inputs:
        split = gate_split(g, anchor.inputs[0], index, 4)
        if split is None:
            return None
        gates, hidden = split
        preactivations = [anchor.inputs[0]]
    elif anchor.op is Op.ADD:
        gates_found = _gates_of_cell_sum(g, index)
        if gates_found is None:
            return None
        gates = preactivations = gates_found
        hidden = tensor_shape(g.block, gates[0])[-1]
    else:
        return None
    activations = [activation(g, gates[k], f"gate {k} ({GATE_NAMES[k]})", GATE_ACTIVATIONS[k]) for k in range(4)]
    a_i, a_f, a_g, a_o = (out for out, _ in activations)
    f_mul, c_prev = product_with(g, a_f, None, "f")
    ig_mul, _ = product_with(g, a_i, a_g, "i")
    c_sum = sum_of(g, f_mul, ig_mul, "f * c and i * g")
    c_next = requantised(g, g.op(c_sum).outputs[0])
    tanh_c = activation_of(g, c_next)
    o_mul, _ = product_with(g, a_o, tanh_c, "o")
    h_next = requantised(g, g.op(o_mul).outputs[0])
    macs, x, h_prev, input_size = _preactivation(g, preactivations, hidden)
    boundary = {x, h_prev, c_prev}
    members = closure(g, [h_next, c_next], boundary, CELL_OPS)
    check_members(g, members, {h_next, c_next}, macs)
    members |= state_reads(g, members, (h_prev, c_prev))
    facts = CompositeFacts(KIND, hidden, input_size, (h_next, c_next))
    if max_working_bytes is not None:
        working = working_bytes(g, members)
        if working > max_working_bytes:
            raise NoMatch(f"its working set ({working} bytes) exceeds the TCM budget ({max_working_bytes} bytes)")
    # the state arrives first when it is read from a variable or given: the recurrent product
    # may then run while x is loaded (not when the previous cell computes it)
    early_state = x != h_prev and all(is_given(g, t) for t in (h_prev, c_prev))
    return CellMatch(sorted(members), facts, (x,) if early_state else (), (h_prev, c_prev))


def _preactivation(g: CellGraph, preactivations: list[str], hidden: int) -> tuple[list[int], str, str, int]:
    """The matrix products behind the gate pre-activations (one tensor of the four gates, or
    one a gate): their indices, the step input x, the previous output h and the input size.
    Every gate's products read the same data operands."""
    channels = hidden * 4 // len(preactivations)
    macs: list[int] = []
    found = None
    for z in preactivations:
        products = _gate_products(g, z)
        sources = [product_source(g, index, channels) for index in products]
        if found is not None and sources != found:
            raise NoMatch(f"the gates' matrix products read different data ({', '.join(found)} and "
                          f"{', '.join(sources)})")
        found = sources
        macs += products
    assert found is not None
    z = preactivations[0]
    sizes = [g.block.tensor(s).element_count // max(1, batch(g, z)) for s in found]
    if len(found) == 1:
        return sorted(macs), found[0], found[0], sizes[0] - hidden
    recurrent = 1 if sizes[1] == hidden else 0 if sizes[0] == hidden else -1
    if recurrent < 0:
        raise NoMatch(f"neither matrix product reads a previous output of {hidden} units")
    return sorted(macs), found[1 - recurrent], found[recurrent], sizes[1 - recurrent]


def _gates_of_cell_sum(g: CellGraph, index: int) -> list[str] | None:
    """The pre-activations of gates i, f, g, o when ADD ``index`` is c' = f * c + i * g of a
    cell whose gates have products of their own; None when it is no such sum (gates split
    from one tensor are the SLICE anchor's)."""
    named = _gates_of_terms(g, g.op(index).inputs[:2])
    if named is None or any(g.producer.get(z) is not None and g.op(g.producer[z]).op is Op.SLICE
                            for z in named.values()):
        return None
    c_next = requantised(g, g.op(index).outputs[0])
    tanh_c = activation_of(g, c_next)
    reached, _ = g.forward(tanh_c)
    user = g.sole_user(reached)
    if user is None or g.op(user).op is not Op.MUL:
        raise NoMatch(f"tanh of the new cell state is not multiplied ({reader_name(g, reached)})")
    mul = g.op(user)
    other = g.backward(mul.inputs[1] if mul.inputs[0] == reached else mul.inputs[0])
    source = activation_source(g, other)
    if source is None or source[0] != "SIGMOID":
        raise NoMatch(f"tanh of the new cell state is multiplied by {other}, expected a sigmoid (gate o)")
    return [named["i"], named["f"], named["g"], source[1]]


def _gates_of_terms(g: CellGraph, terms: list[str]) -> dict[str, str] | None:
    """Gates i, g (a sigmoid times a tanh) and f (a sigmoid times another value) from the two
    terms of c' = f * c + i * g; None if they are not such products."""
    named: dict[str, str] = {}
    for term in terms:
        operands = _product_operands(g, term)
        if operands is None:
            return None
        found = sorted(source for source in (activation_source(g, o) for o in operands) if source is not None)
        kinds = [kind for kind, _ in found]
        if kinds == ["SIGMOID", "TANH"]:
            named["i"], named["g"] = found[0][1], found[1][1]
        elif kinds == ["SIGMOID"]:
            named["f"] = found[0][1]
    return named if len(terms) == 2 and set(named) == {"i", "f", "g"} else None


def _product_operands(g: CellGraph, tensor: str) -> list[str] | None:
    """The operands (before their quantisation steps) of the MUL behind ``tensor``, if any."""
    index = g.producer.get(g.backward(tensor))
    if index is None or g.op(index).op is not Op.MUL:
        return None
    return [g.backward(operand) for operand in g.op(index).inputs[:2]]


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

    walk_back(g, [z], set(), "the gate pre-activations depend on {tensor}, not on matrix products", follow)
    if not 1 <= len(macs) <= 2:
        raise NoMatch(f"the gate pre-activations sum {len(macs)} matrix products, expected 1 or 2")
    return sorted(macs)


