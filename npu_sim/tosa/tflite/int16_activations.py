"""A 16-bit LOGISTIC or TANH as LiteRT computes it, in place of the converter's TABLE.

Arm's converter lowers an int16 ``LOGISTIC`` (sigmoid) or ``TANH`` to a TOSA TABLE of 513
entries sampled from the real function, interpolated, then a RESCALE to int16. LiteRT's
reference kernels (``reference_integer_ops::Logistic``/``Tanh`` for int16, which its default
interpreter also runs whenever the input scale is not a power of two) compute something else:

* the input is brought to a fixed scale of 1/(3 * 4096) (tanh: twice that):
  ``x' = (x * m + 2^(s - 1)) >> s``, with ``m`` the input scale times 3 * 4096 doubled ``s``
  times until it passes 2^14 - 1/2, truncated to an integer (a scale of 2^-12, or 2^-11 for
  tanh, counts as a power of two: ``m = 3 << shift``, ``s = 0``);
* ``|x'|`` indexes a 256-entry table of sigmoid(i/24) in Q0.16 (:data:`SIGMOID_Q16`) above 9
  bits (tanh: 8), the bits below interpolate between two entries, past the table it saturates;
* the sign is restored (sigmoid: ``1 - y``; tanh: ``2y - 1``) and the result rounded to Q0.15.

Its results are 1 to 3 LSB away from the converter's table on many inputs. As a function of
one int16 value, though, they are a table of 65,536 entries: :func:`litert_lookups` evaluates
it for each LOGISTIC/TANH of the ``.tflite`` that LiteRT accepts (input and output zero point
0, output scale 2^-15) and :func:`exact_int16_activations` replaces the converted TABLE and
its RESCALE (found by their location, the TFLite operator's output tensor name) with an exact
lookup (CAST, ADD 32768, RESHAPE, GATHER, RESHAPE: what the LSTM legalization uses, and what
the scheduler runs as one table lookup). An operator LiteRT would refuse keeps the
converter's TABLE. Plain TOSA either way: Arm's reference model runs it to the same bits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, Tensor
from npu_sim.tosa.ops import Op
from npu_sim.tosa.tflite.fixed_point import INT16_DOMAIN
from npu_sim.tosa.tflite.flatbuffer import TfliteModel

#: BuiltinOperator codes (schema.fbs).
LOGISTIC, TANH = 14, 28
#: Where LiteRT's table of sigmoid(i/24) in Q0.16 is one above round(65536 sigmoid(i/24)), i = 0..255.
_ROUNDED_UP = ("0000100010001011110111100101111101110101110111100110001000000011"
               "1010000000000000001000100000010000001001000000001000100000000000"
               "0000000100000000000000000000000000000000000000000000000000000000"
               "0000000000000000000000000000000000000000000000000000000000000001")
#: LiteRT's ``sigmoid_table_uint16``: sigmoid(i/24) in Q0.16 for i = 0..255, as it rounds it.
SIGMOID_Q16 = (np.round(65536 / (1 + np.exp(-np.arange(256) / 24))).astype(np.int64)
               + np.array([int(c) for c in _ROUNDED_UP], dtype=np.int64))
#: Q0.15, the only output scale LiteRT's int16 kernels accept.
_OUTPUT_LOG2 = -15


def _checked_log2(scale: float) -> tuple[int, bool]:
    """TFLite's ``CheckedLog2`` (in float32): the rounded log2 of ``scale`` and whether it is
    a power of two within 1e-3 of an exponent."""
    if scale <= 0:
        return 0, False
    exact = np.float32(np.log(np.float32(scale))) * np.float32(1.0 / np.log(np.float32(2.0)))
    rounded = np.round(exact)
    return int(rounded), bool(abs(np.float32(exact - rounded)) < np.float32(1e-3))


def input_scaling(scale: float, tanh: bool) -> tuple[int, int]:
    """The (multiplier, right shift) LiteRT's int16 LOGISTIC/TANH bring an input of ``scale``
    to 1/(3 * 4096) with (as its Prepare and the reference kernel's power-of-two case set them)."""
    log2, power_of_two = _checked_log2(scale)
    shift = 12 + log2
    if power_of_two and (shift == 0 or tanh and shift == 1):
        return 3 << shift, 0
    multiplier, shift = float(np.float32(scale)) * 4096.0 * 3.0, 0
    while multiplier <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        multiplier *= 2.0
    return int(multiplier), shift


def logistic_table(scale: float) -> np.ndarray | None:
    """LiteRT's int16 sigmoid of every int16 input of ``scale`` (index = input + 32768), or None
    where its int32 arithmetic would overflow."""
    found = _table_reading(scale, tanh=False)
    if found is None:
        return None
    x, y = found   # sigmoid(|x|) in Q0.16 times 2^9: add 1/2 or take 1 - y, then Q0.15
    return _frozen(np.where(x >= 0, y + (1 << 9), (1 << 25) - y + (1 << 9) - 1) >> 10)


def tanh_table(scale: float) -> np.ndarray | None:
    """LiteRT's int16 tanh of every int16 input of ``scale`` (index = input + 32768), or None
    where its int32 arithmetic would overflow."""
    found = _table_reading(scale, tanh=True)
    if found is None:
        return None
    x, y = found   # sigmoid(2|x|) in Q0.16 times 2^8: 2y - 1 with its sign, then Q0.15
    half, nudge = 1 << 23, 1 << 7
    return _frozen(np.where(x >= 0, y - half + nudge, half - y + nudge - 1) >> 8)


def _table_reading(scale: float, tanh: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """The scaled input ``x`` of every int16 value and the sigmoid table read at ``|x|``: above
    9 bits (tanh: 8) it indexes, the bits below interpolate; past the table it saturates."""
    multiplier, shift = input_scaling(scale, tanh)
    nudge = 1 << (shift - 1) if shift > 0 else 0
    product = INT16_DOMAIN * multiplier + nudge
    if np.abs(product).max() >= 1 << 31:
        return None
    x = product >> shift
    bits = 8 if tanh else 9
    magnitude = np.abs(x)
    high, low = magnitude >> bits, magnitude & ((1 << bits) - 1)
    inside = high < 255
    at = np.where(inside, high, 0)
    below, above = SIGMOID_Q16[at], SIGMOID_Q16[at + 1]
    saturated = 0xFFFF << 8 if tanh else 0x7FFF << 10
    return x, np.where(inside, (below << bits) + low * (above - below), saturated)


def _frozen(values: np.ndarray) -> np.ndarray:
    table = values.astype(np.int16)
    table.flags.writeable = False
    return table


def litert_lookups(model: TfliteModel) -> dict[str, np.ndarray]:
    """Output tensor name -> LiteRT's result for every int16 input (index = input + 32768), for
    each int16 LOGISTIC and TANH of ``model`` (all subgraphs) that LiteRT's kernels accept."""
    found = {}
    for subgraph in range(model.subgraph_count):
        for op in model.operators(subgraph):
            if op.code not in (LOGISTIC, TANH) or not op.inputs or not op.outputs or min(op.inputs[0],
                                                                                            op.outputs[0]) < 0:
                continue
            x, y = model.tensor(op.inputs[0], subgraph), model.tensor(op.outputs[0], subgraph)
            if x.type_name != "int16" or y.type_name != "int16" or x.quantization is None or y.quantization is None:
                continue
            table = litert_table(op.code, x.quantization.per_tensor, y.quantization.per_tensor)
            if table is not None and y.name:
                found[y.name] = table
    return found


def litert_table(code: int, x: tuple[float, int], y: tuple[float, int]) -> np.ndarray | None:
    """LiteRT's int16 LOGISTIC or TANH (``code``) from input (scale, zero point) ``x`` to output
    ``y`` for every int16 input; None where LiteRT refuses the operator (a zero point other than
    0, an output scale other than 2^-15) or its arithmetic would overflow."""
    if x[1] != 0 or y[1] != 0 or _checked_log2(y[0]) != (_OUTPUT_LOG2, True):
        return None
    return tanh_table(x[0]) if code == TANH else logistic_table(x[0])


@dataclass
class _Converted:
    """One converted activation: TABLE(x) then the RESCALE to int16 that gives its result."""

    table: Operator
    rescale: Operator


def exact_int16_activations(graph: Graph, model: TfliteModel) -> int:
    """Replace each converted int16 LOGISTIC/TANH of ``graph`` by a lookup of LiteRT's values;
    how many."""
    lookups = litert_lookups(model)
    return look_up_activations(graph, lookups) if lookups else 0


def look_up_activations(graph: Graph, lookups: dict[str, np.ndarray]) -> int:
    """Replace each int16 TABLE + RESCALE of ``graph`` located at a name of ``lookups`` by a
    lookup of that name's 65,536 values; how many."""
    replaced: list[_Converted] = []
    for block in graph.blocks():
        for found in _converted(block, lookups):
            _replace(block, found, lookups[found.table.location])
            replaced.append(found)
    graph.drop_unread_constants(name for found in replaced
                                for name in (*found.table.inputs[1:], *found.rescale.inputs[1:]))
    return len(replaced)


def _converted(block: Block, lookups: dict[str, np.ndarray]) -> list[_Converted]:
    """The int16 TABLEs of ``block`` located at a LiteRT activation, each with its one reader, a
    RESCALE to int16 with zero points 0 in the same location."""
    readers = block.readers()
    found = []
    for table in block.operators:
        if table.op is not Op.TABLE or table.location not in lookups or len(table.inputs) != 2:
            continue
        if block.tensor(table.inputs[0]).dtype is not DType.INT16 or table.outputs[0] in block.outputs:
            continue
        users = readers.get(table.outputs[0], [])
        if len(users) != 1 or users[0].op is not Op.RESCALE or users[0].location != table.location:
            continue
        rescale = users[0]
        if block.tensor(rescale.outputs[0]).dtype is DType.INT16 and \
                all(_constant_zero(block, name) for name in rescale.inputs[3:5]):
            found.append(_Converted(table, rescale))
    return found


def _constant_zero(block: Block, name: str) -> bool:
    tensor = block.tensors.get(name)
    return tensor is not None and tensor.data is not None and not np.any(tensor.data)


def _replace(block: Block, found: _Converted, values: np.ndarray) -> None:
    """``found``'s TABLE and RESCALE become CAST, ADD, RESHAPE, GATHER, RESHAPE of ``values``."""
    x_name, result = found.table.inputs[0], found.rescale.outputs[0]
    x = block.tensor(x_name)
    count = math.prod(x.shape)
    base, where = f"{result}_litert", found.table.location

    def tensor(suffix: str, shape: tuple[int, ...], dtype: DType, data: np.ndarray | None = None) -> str:
        name = f"{base}_{suffix}"
        block.tensors[name] = Tensor(name, shape, dtype, data)
        return name

    table = tensor("table", (1, values.size, 1), DType.INT16, values.reshape(1, values.size, 1))
    offset = tensor("offset", (1,) * len(x.shape), DType.INT32, np.full((1,) * len(x.shape), 32768, np.int32))
    flat_shape = tensor("flat_shape", (2,), DType.SHAPE, np.array([1, count], np.int64))
    x_shape = tensor("shape", (len(x.shape),), DType.SHAPE, np.array(x.shape, np.int64))
    wide, index = tensor("wide", x.shape, DType.INT32), tensor("index", x.shape, DType.INT32)
    flat, found_values = tensor("flat", (1, count), DType.INT32), tensor("found", (1, count, 1), DType.INT16)
    operators = [Operator(Op.CONST, [], [table]), Operator(Op.CONST, [], [offset]),
                 Operator(Op.CONST_SHAPE, [], [flat_shape]), Operator(Op.CONST_SHAPE, [], [x_shape]),
                 Operator(Op.CAST, [x_name], [wide], None, where),
                 Operator(Op.ADD, [wide, offset], [index], None, where),
                 Operator(Op.RESHAPE, [index, flat_shape], [flat], None, where),
                 Operator(Op.GATHER, [table, flat], [found_values], None, where),
                 Operator(Op.RESHAPE, [found_values, x_shape], [result], None, where)]
    at = block.operators.index(found.table)
    block.operators.remove(found.rescale)
    block.operators[at:at + 1] = operators
    block.tensors.pop(found.table.outputs[0], None)
