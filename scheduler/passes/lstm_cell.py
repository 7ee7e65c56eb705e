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

from npu_sim.hw.compute_units.mac_array import MAC_OPS
from npu_sim.program import CompositeFacts
from npu_sim.tosa.ops import Op
from scheduler.passes.cell_graph import (
    CellGraph,
    CellMatch,
    NoMatch,
    activation,
    activation_of,
    batch,
    check_members,
    closure,
    gate_split,
    is_given,
    product_source,
    product_with,
    requantised,
    state_reads,
    sum_of,
    walk_back,
    working_bytes,
)

GATE_NAMES = ("i", "f", "g", "o")
#: The activation each gate needs, in gate order.
GATE_ACTIVATIONS = ("SIGMOID", "SIGMOID", "TANH", "SIGMOID")
#: Operators a cell may contain.
CELL_OPS = frozenset({Op.CONV2D, Op.MATMUL, Op.RESHAPE, Op.RESCALE, Op.CAST, Op.ADD, Op.MUL, Op.SLICE,
                      Op.TABLE, Op.SIGMOID, Op.TANH, Op.GATHER, Op.CLAMP})
KIND = "lstm_cell"


def match_cell(g: CellGraph, index: int, max_working_bytes: int | None) -> CellMatch | None:
    """The cell anchored on the gate split read by SLICE ``index`` (its first reader), or None
    if ``index`` is no such anchor. NoMatch if it is an anchor but not an LSTM cell."""
    anchor = g.op(index)
    if anchor.op is not Op.SLICE or not anchor.inputs:
        return None
    z = anchor.inputs[0]
    split = gate_split(g, z, index, 4)
    if split is None:
        return None
    gates, hidden = split
    activations = [activation(g, gates[k], f"gate {k} ({GATE_NAMES[k]})", GATE_ACTIVATIONS[k]) for k in range(4)]
    a_i, a_f, a_g, a_o = (out for out, _ in activations)
    f_mul, c_prev = product_with(g, a_f, None, "f")
    ig_mul, _ = product_with(g, a_i, a_g, "i")
    c_sum = sum_of(g, f_mul, ig_mul, "f * c and i * g")
    c_next = requantised(g, g.op(c_sum).outputs[0])
    tanh_c = activation_of(g, c_next)
    o_mul, _ = product_with(g, a_o, tanh_c, "o")
    h_next = requantised(g, g.op(o_mul).outputs[0])
    macs, x, h_prev, input_size = _preactivation(g, z, hidden)
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
    return CellMatch(sorted(members), facts, (x,) if early_state else ())


def _preactivation(g: CellGraph, z: str, hidden: int) -> tuple[list[int], str, str, int]:
    """The matrix products behind the gate pre-activations: their indices, the step input x,
    the previous output h and the input size."""
    macs = _gate_products(g, z)
    sources = [product_source(g, index, 4 * hidden) for index in macs]
    sizes = [g.block.tensor(s).element_count // max(1, batch(g, z)) for s in sources]
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

    walk_back(g, [z], set(), "the gate pre-activations depend on {tensor}, not on matrix products", follow)
    if not 1 <= len(macs) <= 2:
        raise NoMatch(f"the gate pre-activations sum {len(macs)} matrix products, expected 1 or 2")
    return sorted(macs)


