"""Table lookups written as TOSA operators, recognised so that the LUT unit runs them.

TOSA's TABLE interpolates 513 entries for int16 inputs; a function of an int16 value that
no interpolation reproduces (LiteRT's fixed-point sigmoid and tanh, see
:mod:`npu_sim.tosa.tflite.fixed_point`) is written instead as an exact lookup::

    index  = CAST(x) + 2^(bits - 1)          # int8/int16 x -> int32 index 0 .. 2^bits - 1
    result = RESHAPE(GATHER(table, RESHAPE(index, [1, N])), shape of x)

with a constant ``table`` of shape [1, 2^bits, 1]. This module recognises that chain:
:func:`match_lookup` gives its operators (anchored on the CAST), :func:`lookup_table` the
table and its index offset seen from any member, so the fusion rule puts the chain on the
LUT unit as one operation (the unit indexes its table with the value itself) and the
LSTM/GRU matchers classify the activation by the table's contents, as they do a TABLE's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Operator
from npu_sim.tosa.ops import Op

#: Value types a lookup indexes by (bits of the value -> table entries 2^bits).
INDEX_DTYPES = {DType.INT8: 8, DType.INT16: 16}
#: A lookup table may dip below its running maximum by this share of its range and still
#: count as monotone (LiteRT's 16-bit fixed-point sigmoid and tanh are staircases with dips).
LOOKUP_DIP_SHARE = 1 / 256


@dataclass(frozen=True)
class Lookup:
    """A recognised lookup: its operators (graph order), the table (entry k is the result for
    the value k - offset) and the tensor it reads and the one it gives."""

    indices: tuple[int, ...]
    table: np.ndarray
    offset: int
    source: str
    result: str


def match_lookup(block: Block, index: int, sole_user: Callable[[str], int | None]) -> Lookup | None:
    """The lookup whose CAST is operator ``index`` (None if it starts none).

    ``sole_user(tensor)``: the one operator reading ``tensor``, if it may stay inside a fused
    operation (not a block output, not a variable)."""
    cast = block.operators[index]
    if cast.op is not Op.CAST or len(cast.inputs) != 1 or len(cast.outputs) != 1:
        return None
    source = block.tensor(cast.inputs[0])
    bits = INDEX_DTYPES.get(source.dtype)
    if bits is None or block.tensor(cast.outputs[0]).dtype is not DType.INT32:
        return None
    chain = [index]
    add = _next(block, cast.outputs[0], Op.ADD, sole_user)
    if add is None:
        return None
    offset = _constant_operand(block, block.operators[add], cast.outputs[0])
    if offset is None or offset != 1 << (bits - 1):
        return None
    chain.append(add)
    reshape = _next(block, block.operators[add].outputs[0], Op.RESHAPE, sole_user)
    if reshape is None:
        return None
    chain.append(reshape)
    gather = _next(block, block.operators[reshape].outputs[0], Op.GATHER, sole_user)
    if gather is None or block.operators[gather].inputs[1:] != [block.operators[reshape].outputs[0]]:
        return None
    table = _table(block, block.operators[gather], 1 << bits)
    if table is None:
        return None
    chain.append(gather)
    result = block.operators[gather].outputs[0]
    back = _next(block, result, Op.RESHAPE, sole_user)
    if back is not None and block.tensor(block.operators[back].outputs[0]).shape == source.shape:
        chain.append(back)
        result = block.operators[back].outputs[0]
    return Lookup(tuple(chain), table, offset, cast.inputs[0], result)


def _next(block: Block, tensor: str, op: Op, sole_user: Callable[[str], int | None]) -> int | None:
    user = sole_user(tensor)
    if user is None or block.operators[user].op is not op or len(block.operators[user].outputs) != 1:
        return None
    return user


def _constant_operand(block: Block, add: Operator, tensor: str) -> int | None:
    """The one value of the ADD's constant operand (the other is ``tensor``), else None."""
    if len(add.inputs) != 2 or tensor not in add.inputs:
        return None
    other = block.tensor(add.inputs[1] if add.inputs[0] == tensor else add.inputs[0])
    if other.data is None or other.variable:
        return None
    values = np.unique(np.asarray(other.data))
    return int(values[0]) if values.size == 1 else None


def _table(block: Block, gather: Operator, entries: int) -> np.ndarray | None:
    """The GATHER's constant values as a flat table of ``entries`` entries, else None."""
    values = block.tensor(gather.inputs[0])
    if values.data is None or values.variable or tuple(values.shape) != (1, entries, 1):
        return None
    return np.asarray(values.data).reshape(-1)


def lookup_table(block: Block, index: int, producer: dict[str, int]) -> tuple[np.ndarray, int] | None:
    """``(table, offset)`` of the lookup operator ``index`` ends (its GATHER, or the RESHAPE
    after it), for classifying the function; None if it ends none. ``producer``: tensor ->
    index of the operator computing it."""
    op = block.operators[index]
    if op.op is Op.RESHAPE and op.inputs and op.inputs[0] in producer:
        op = block.operators[producer[op.inputs[0]]]
    if op.op is not Op.GATHER or len(op.inputs) != 2:
        return None
    values = block.tensor(op.inputs[0])
    bits = {256: 8, 65536: 16}.get(values.shape[1]) if len(values.shape) == 3 else None
    if bits is None or values.data is None or values.variable or values.shape[0] != 1 or values.shape[2] != 1:
        return None
    return np.asarray(values.data).reshape(-1), 1 << (bits - 1)


#: :func:`table_function`'s answers by the table's contents: every step of an unrolled or
#: legalized recurrent network asks again of the same few 65,536-entry tables (735 times, half a
#: second, for Keras' fused LSTM as TFLite writes it; the bytes are a fraction of that to hash).
#: Cleared when full.
_KINDS: dict[tuple[str, tuple[int, ...], bytes, int | None, int, float], str] = {}
_KINDS_MAX = 64


def table_function(table: np.ndarray, offset: int | None, zero_point: int, dip_share: float) -> str:
    """SIGMOID for a monotone table that stays at or above ``zero_point``, TANH for one on both
    sides of it (``offset``: the entry of input 0, where a lookup's tanh crosses zero)."""
    key = (table.dtype.str, table.shape, table.tobytes(), offset, zero_point, dip_share)
    kind = _KINDS.get(key)
    if kind is None:
        if len(_KINDS) >= _KINDS_MAX:
            _KINDS.clear()
        kind = _KINDS[key] = _table_function(table, offset, zero_point, dip_share)
    return kind


def _table_function(table: np.ndarray, offset: int | None, zero_point: int, dip_share: float) -> str:
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


def lookup_function(lookup: Lookup) -> str:
    """SIGMOID or TANH if the lookup's table is shaped like one (an NPU may compute those built
    in, without loading the table), else ""."""
    kind = table_function(lookup.table, lookup.offset, 0, LOOKUP_DIP_SHARE)
    return kind if kind in ("SIGMOID", "TANH") else ""
