"""The GRU-cell composite: recognise one cell of a converted Keras GRU and fuse it into one NPU operation.

Keras' default GRU (``reset_after=True``) computes, with the gate order (z, r, h) along
the last axis of both matrix products::

    xz, xr, xh = split(x W + b_x)          hz, hr, hh = split(h U + b_h)
    z = sigmoid(xz + hz)    r = sigmoid(xr + hr)    n = tanh(xh + r * hh)
    h' = z * h + (1 - z) * n

TFLite writes it unrolled or as the body of a WHILE loop, in fp32 (SIGMOID, TANH) or int8
(TABLEs, RESCALEs on every edge); the converter keeps both forms. The matcher anchors on
the split of the first product in graph order (three SLICEs of its last axis), finds the
other product's split through the ADDs of slices z and r, and checks the rest by
structure through the quantisation steps (:mod:`scheduler.passes.cell_graph`):

* z and r go through a sigmoid, n through a tanh;
* r multiplies slice h of the recurrent product (the one whose data operand is h), and
  the input product's slice h is added to that before the tanh;
* z multiplies h, ``1 - z`` (a SUB from a constant) multiplies n, and the two products
  are added into h';
* both products are CONV2D or MATMUL with constant weights of 3H output channels;
* the cell is self-contained and convex, and the VARIABLE_READ of h that only the cell
  reads joins it.

A GRU with ``reset_after=False`` multiplies r into h before the candidate's product::

    xz, xr, xh = split(x W + b)            hz, hr = split(h U_zr)
    z = sigmoid(xz + hz)    r = sigmoid(xr + hr)    n = tanh(xh + (r * h) U_h)
    h' = z * h + (1 - z) * n

The input product's three-way split anchors it; the recurrent product splits in two, and a
third product of H channels reads ``r * h``. Anything else stays op by op with the reason.
"""

from __future__ import annotations

from npu_sim.hw.compute_units.mac_array import MAC_OPS
from npu_sim.program import CompositeFacts
from npu_sim.tosa.ops import Op
from scheduler.passes.cell_graph import (
    TRANSPARENT,
    CellGraph,
    CellMatch,
    NoMatch,
    activation,
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

KIND = "gru_cell"
#: Operators a GRU cell may contain.
CELL_OPS = frozenset({Op.CONV2D, Op.MATMUL, Op.RESHAPE, Op.RESCALE, Op.CAST, Op.ADD, Op.SUB, Op.MUL, Op.SLICE,
                      Op.TABLE, Op.SIGMOID, Op.TANH, Op.GATHER, Op.CLAMP})


def match_gru(g: CellGraph, index: int, max_working_bytes: int | None) -> CellMatch | None:
    """The GRU cell anchored on the split read by SLICE ``index`` (the first reader of the
    product split first in graph order), or None if ``index`` is no such anchor; NoMatch if
    it is one but the rest is not a GRU cell."""
    anchor = g.op(index)
    if anchor.op is not Op.SLICE or not anchor.inputs:
        return None
    split = gate_split(g, anchor.inputs[0], index, 3)
    if split is None:
        return None
    first, hidden = split
    z_sum, partner_z = _summed_with(g, first[0])
    partner = _split_of(g, partner_z, 3)
    if partner is None:
        reset_first = _split_of(g, partner_z, 2)
        if reset_first is None or reset_first[0] != partner_z:
            return None
        return _match_reset_before(g, first, reset_first, hidden, z_sum, max_working_bytes)
    if partner[0] != partner_z or g.users(g.op(g.producer[partner_z]).inputs[0])[0] < index:
        return None   # not a GRU split, or the other product's split comes first (it anchors)
    z, r = _gates(g, first, partner, z_sum)
    reset_mul, recurrent_h = product_with(g, r, None, "r")
    if recurrent_h not in (first[2], partner[2]):
        raise NoMatch("r does not multiply slice h of a gate product")
    input_h = partner[2] if recurrent_h == first[2] else first[2]
    n_sum, other = _summed_with(g, g.op(reset_mul).outputs[0])
    if other != input_h:
        raise NoMatch("r * hh is not added to the input product's slice h")
    n, _ = activation(g, g.op(n_sum).outputs[0], "candidate n", "TANH")
    keep_mul, h_prev, update_mul = _interpolation(g, z, n)
    h_next = requantised(g, g.op(sum_of(g, keep_mul, update_mul, "z * h and (1 - z) * n")).outputs[0])
    recurrent = first if recurrent_h == first[2] else partner
    macs, x, input_size = _products(g, recurrent[0], (partner if recurrent is first else first)[0], hidden, h_prev)
    return _cell(g, macs, x, h_prev, h_next, hidden, input_size, max_working_bytes)


def _match_reset_before(g: CellGraph, given: list[str], recurrent: list[str], hidden: int, z_sum: int,
                        max_working_bytes: int | None) -> CellMatch:
    """A ``reset_after=False`` cell: ``given`` the input product's slices (z, r, h),
    ``recurrent`` the recurrent product's (z, r)."""
    z, r = _gates(g, given, recurrent, z_sum)
    reset_mul, h_reset = product_with(g, r, None, "r")
    reset_h = g.op(reset_mul).outputs[0]
    reached, passed = g.forward(reset_h)
    candidate_mac = g.sole_user(reached)
    if candidate_mac is None or g.op(candidate_mac).op not in MAC_OPS:
        raise NoMatch("r * h is not the data of a matrix product")
    # r * h reaches the product through its requantisation (int8) and RESHAPEs
    if product_source(g, candidate_mac, hidden) not in {reset_h, *(g.op(i).outputs[0] for i in passed)}:
        raise NoMatch("the candidate's product does not read r * h")
    n_sum, other = _summed_with(g, g.op(candidate_mac).outputs[0])
    if other != given[2]:
        raise NoMatch("(r * h) U is not added to the input product's slice h")
    n, _ = activation(g, g.op(n_sum).outputs[0], "candidate n", "TANH")
    keep_mul, h_prev, update_mul = _interpolation(g, z, n)
    if h_reset != h_prev:
        raise NoMatch("r multiplies another value than the h that z multiplies")
    h_next = requantised(g, g.op(sum_of(g, keep_mul, update_mul, "z * h and (1 - z) * n")).outputs[0])
    rec_mac, in_mac = _single_product(g, recurrent[0]), _single_product(g, given[0])
    if product_source(g, rec_mac, 2 * hidden) != h_prev:
        raise NoMatch("the recurrent product does not read the h that z multiplies")
    x = product_source(g, in_mac, 3 * hidden)
    input_size = g.block.tensor(x).element_count // max(1, batch(g, given[0]))
    macs = sorted([rec_mac, in_mac, candidate_mac])
    return _cell(g, macs, x, h_prev, h_next, hidden, input_size, max_working_bytes)


def _gates(g: CellGraph, first: list[str], partner: list[str], z_sum: int) -> tuple[str, str]:
    """Gates z and r: the sigmoids of the sums of the two products' slices z and r."""
    r_sum, partner_r = _summed_with(g, first[1])
    if partner_r != partner[1]:
        raise NoMatch("slices z and r are summed with different products")
    z, _ = activation(g, g.op(z_sum).outputs[0], "gate z", "SIGMOID")
    r, _ = activation(g, g.op(r_sum).outputs[0], "gate r", "SIGMOID")
    return z, r


def _cell(g: CellGraph, macs: list[int], x: str, h_prev: str, h_next: str, hidden: int, input_size: int,
          max_working_bytes: int | None) -> CellMatch:
    """The matched cell, checked self-contained, convex and within the budget, with the
    VARIABLE_READ of h that only it reads."""
    members = closure(g, [h_next], {x, h_prev}, CELL_OPS)
    check_members(g, members, {h_next}, macs)
    members |= state_reads(g, members, (h_prev,))
    if max_working_bytes is not None:
        working = working_bytes(g, members)
        if working > max_working_bytes:
            raise NoMatch(f"its working set ({working} bytes) exceeds the TCM budget ({max_working_bytes} bytes)")
    early_state = x != h_prev and is_given(g, h_prev)
    return CellMatch(sorted(members), CompositeFacts(KIND, hidden, input_size, (h_next,)), (x,) if early_state else ())


def _summed_with(g: CellGraph, tensor: str) -> tuple[int, str]:
    """The ADD ``tensor`` reaches through quantisation steps, and its other operand traced back."""
    reached, _ = g.forward(tensor)
    user = g.sole_user(reached)
    if user is None or g.op(user).op is not Op.ADD:
        raise NoMatch(f"{tensor} is not added to another gate product")
    add = g.op(user)
    other = add.inputs[1] if add.inputs[0] == reached else add.inputs[0]
    return user, g.backward(other)


def _split_of(g: CellGraph, tensor: str, parts: int) -> list[str] | None:
    """The ``parts`` gate slices of the product ``tensor`` is a slice of (None if it is none)."""
    producer = g.producer.get(tensor)
    if producer is None or g.op(producer).op is not Op.SLICE:
        return None
    source = g.op(producer).inputs[0]
    split = gate_split(g, source, g.users(source)[0], parts)
    return split[0] if split is not None else None


def _interpolation(g: CellGraph, z: str, n: str) -> tuple[int, str, int]:
    """``z * h`` and ``(1 - z) * n``: the two MULs and h traced back."""
    keep = update = None
    h_prev = ""
    for user in g.users(z):
        tensor, index = z, user
        while g.op(index).op in TRANSPARENT and g.op(index).inputs[0] == tensor and len(g.op(index).outputs) == 1:
            tensor = g.op(index).outputs[0]
            follower = g.sole_user(tensor)
            if follower is None:
                break
            index = follower
        op = g.op(index)
        if op.op is Op.MUL and tensor in op.inputs:
            keep = index
            h_prev = g.backward(op.inputs[1] if op.inputs[0] == tensor else op.inputs[0])
        elif op.op is Op.SUB and op.inputs[1:] == [tensor] and g.is_constant_derived(op.inputs[0]):
            update, _ = product_with(g, op.outputs[0], n, "1 - z")
    if keep is None or update is None:
        raise NoMatch("z does not interpolate between h and the candidate (z * h + (1 - z) * n)")
    return keep, h_prev, update


def _products(g: CellGraph, recurrent: str, given: str, hidden: int, h_prev: str) -> tuple[list[int], str, int]:
    """The recurrent and input products (MAC indices), the step input x and its size."""
    rec_mac = _single_product(g, recurrent)
    in_mac = _single_product(g, given)
    if product_source(g, rec_mac, 3 * hidden) != h_prev:
        raise NoMatch("the recurrent product does not read the h that z multiplies")
    x = product_source(g, in_mac, 3 * hidden)
    return sorted([rec_mac, in_mac]), x, g.block.tensor(x).element_count // max(1, batch(g, recurrent))


def _single_product(g: CellGraph, sliced: str) -> int:
    """The one matrix product behind the gate slice ``sliced`` (through bias ADDs and quantisation)."""
    macs: list[int] = []

    def follow(index: int) -> list[str]:
        op = g.op(index)
        if op.op in MAC_OPS:
            macs.append(index)
            return []
        if op.op not in (Op.ADD, Op.RESCALE, Op.CAST, Op.RESHAPE, Op.SLICE):
            raise NoMatch(f"a gate product comes from {op.op.name} ({op.name}), expected a matrix product")
        return op.inputs[: 2 if op.op is Op.ADD else 1]

    walk_back(g, [sliced], set(), "a gate product depends on {tensor}, not on a matrix product", follow)
    if len(macs) != 1:
        raise NoMatch(f"a gate split comes from {len(macs)} matrix products, expected 1")
    return macs[0]
