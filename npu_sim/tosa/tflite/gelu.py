"""A float GELU as LiteRT computes it, restored in the converted graph.

Arm's converter lowers every float ``GELU`` to the tanh approximation,
``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 POW(x, 3))))``, whatever the operator's
``approximate`` option says. Two things then go wrong against LiteRT:

* TOSA's POW requires a positive base (a negative one gives an unpredictable result), so any
  real input stops the run: the converter meant ``x^3``, which LiteRT computes as
  ``x * x * x``;
* Keras' default ``gelu`` is the exact one (``approximate=False``), which LiteRT computes with
  the error function, ``0.5 x (1 + erf(x / sqrt 2))``: the tanh form is up to 1.5e-4 away.

This pass finds the converter's pattern (POW by a constant 3, MUL by 0.044715, ADD of x, MUL by
sqrt(2/pi), TANH, ADD of 1, times x / 2). Where the TFLite GELU it came from (the operator whose
output tensor the pattern's location names) is exact, the pattern becomes
``MUL(x, 0.5) * (ERF(MUL(x, 1/sqrt 2)) + 1)``; elsewhere (``approximate=True``, or a pattern no
GELU claims) only the cube is rewritten, as ``((0.044715 x) x) x``, LiteRT's order. Plain TOSA
either way: Arm's reference model runs it to the same values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, Tensor
from npu_sim.tosa.ops import Op
from npu_sim.tosa.tflite.flatbuffer import TfliteModel, operators_by_output, option

#: BuiltinOperator code of GELU (schema.fbs) and the slot of ``approximate`` in GeluOptions.
GELU = 150
_APPROXIMATE_SLOT = 0
#: The approximation's constants, as float32.
_CUBE_COEFFICIENT = np.float32(0.044715)
_SQRT_2_OVER_PI = np.float32(math.sqrt(2 / math.pi))
_FLOATS = (DType.FP32, DType.FP16, DType.BF16)


@dataclass
class _Gelu:
    """One match of the converter's pattern in a block."""

    x: str
    power: Operator     # POW(x, 3)
    cubic: Operator     # MUL(power, 0.044715)
    inner: Operator     # ADD(x, cubic)
    scaled: Operator    # MUL(inner, sqrt(2/pi))
    tanh: Operator
    plus_one: Operator  # ADD(tanh, 1)
    half_x: Operator    # MUL(x, 0.5)
    result: Operator    # MUL(half_x, plus_one)


def exact_gelus(model: TfliteModel) -> dict[str, bool]:
    """Output tensor name -> whether that GELU is exact (``approximate`` false), all subgraphs."""
    return {name: not option(op.options, _APPROXIMATE_SLOT, "bool", False)
            for name, op in operators_by_output(model, GELU)}


def restore_gelus(graph: Graph, model: TfliteModel) -> int:
    """Rewrite every converted float GELU of ``graph`` as LiteRT computes it; how many."""
    exact = exact_gelus(model)
    if not exact:
        return 0
    changed = 0
    orphans: set[str] = set()   # the replaced operators' constant operands
    for block in graph.blocks():
        for match in _matches(block):
            dropped = (match.power, match.cubic, match.inner, match.scaled, match.tanh) \
                if exact.get(match.result.location, False) else (match.power,)
            orphans |= {name for op in dropped for name in op.inputs if block.tensors.get(name) is not None
                        and block.tensors[name].data is not None}
            if len(dropped) > 1:
                _to_erf(block, match)
            else:
                _cube_by_products(block, match)
            changed += 1
    graph.drop_unread_constants(orphans)
    return changed


def _matches(block: Block) -> list[_Gelu]:
    """The converter's GELU patterns in ``block``, found from each POW by a constant 3."""
    producer, readers = block.producers(), block.readers()
    found = []
    for power in block.operators:
        if power.op is Op.POW and _constant_equal(block, power.inputs[1], 3.0):
            match = _match_from(block, power, producer, readers)
            if match is not None:
                found.append(match)
    return found


def _match_from(block: Block, power: Operator, producer: dict[str, Operator],
                readers: dict[str, list[Operator]]) -> _Gelu | None:
    x = power.inputs[0]
    if block.tensor(x).dtype not in _FLOATS:
        return None
    cubic = _only_reader(power, readers, Op.MUL)
    if cubic is None or not _constant_equal(block, _other(cubic, power.outputs[0]), _CUBE_COEFFICIENT):
        return None
    inner = _only_reader(cubic, readers, Op.ADD)
    if inner is None or _other(inner, cubic.outputs[0]) != x:
        return None
    scaled = _only_reader(inner, readers, Op.MUL)
    if scaled is None or not _constant_equal(block, _other(scaled, inner.outputs[0]), _SQRT_2_OVER_PI):
        return None
    tail = _tail(block, x, scaled, producer, readers)
    return None if tail is None else _Gelu(x, power, cubic, inner, scaled, *tail)


def _tail(block: Block, x: str, scaled: Operator, producer: dict[str, Operator],
          readers: dict[str, list[Operator]]) -> tuple[Operator, Operator, Operator, Operator] | None:
    """TANH of ``scaled``, ADD of 1, MUL by MUL(x, 0.5): the pattern's last four operators."""
    tanh = _only_reader(scaled, readers, Op.TANH)
    if tanh is None:
        return None
    plus_one = _only_reader(tanh, readers, Op.ADD)
    if plus_one is None or not _constant_equal(block, _other(plus_one, tanh.outputs[0]), 1.0):
        return None
    result = _only_reader(plus_one, readers, Op.MUL)
    if result is None:
        return None
    half_x = producer.get(_other(result, plus_one.outputs[0]))
    if half_x is None or half_x.op is not Op.MUL or x not in half_x.inputs[:2] \
            or not _constant_equal(block, _other(half_x, x), 0.5):
        return None
    return tanh, plus_one, half_x, result


def _only_reader(op: Operator, readers: dict[str, list[Operator]], kind: Op) -> Operator | None:
    """The one operator reading ``op``'s result, if it is a ``kind``."""
    found = readers.get(op.outputs[0], [])
    return found[0] if len(found) == 1 and found[0].op is kind else None


def _other(op: Operator, operand: str) -> str:
    """The other of a binary operator's two data operands (MUL's third input is its shift)."""
    first, second = op.inputs[:2]
    return second if first == operand else first if second == operand else ""


def _constant_equal(block: Block, name: str, value: float | np.floating) -> bool:
    tensor = block.tensors.get(name)
    if tensor is None or tensor.data is None or tensor.data.size == 0:
        return False
    return bool(np.all(tensor.data == tensor.data.dtype.type(value)))


def _constant(block: Block, name: str, like: Tensor, value: float) -> Operator:
    """A CONST of ``value`` in ``like``'s dtype, broadcastable to it, named ``name``."""
    shape = (1,) * len(like.shape)
    block.tensors[name] = Tensor(name, shape, like.dtype, np.full(shape, value, like.dtype.numpy_dtype))
    return Operator(Op.CONST, [], [name])


def _to_erf(block: Block, match: _Gelu) -> None:
    """``half_x * (ERF(x / sqrt 2) + 1)``: the tanh chain's operators become the erf chain's."""
    x = block.tensor(match.x)
    base = f"{match.result.outputs[0]}_erf"
    one = _other(match.plus_one, match.tanh.outputs[0])
    shift = match.scaled.inputs[2:]   # MUL's shift operand (TOSA 1.0), kept as the converter wrote it
    scale = _constant(block, f"{base}_inverse_sqrt2", x, 1 / math.sqrt(2))
    block.tensors[f"{base}_scaled"] = Tensor(f"{base}_scaled", x.shape, x.dtype)
    block.tensors[f"{base}_erf"] = Tensor(f"{base}_erf", x.shape, x.dtype)
    location = match.result.location
    erf_ops = [scale,
               Operator(Op.MUL, [match.x, scale.outputs[0], *shift], [f"{base}_scaled"], match.scaled.attribute,
                        location),
               Operator(Op.ERF, [f"{base}_scaled"], [f"{base}_erf"], None, location)]
    at = block.operators.index(match.power)
    dropped = {id(op) for op in (match.power, match.cubic, match.inner, match.scaled, match.tanh)}
    block.operators[at:at + 1] = erf_ops
    block.operators = [op for op in block.operators if id(op) not in dropped]
    match.plus_one.inputs = [f"{base}_erf", one]
    for op in (match.power, match.cubic, match.inner, match.scaled, match.tanh):
        for name in op.outputs:
            block.tensors.pop(name, None)


def _cube_by_products(block: Block, match: _Gelu) -> None:
    """POW(x, 3) * 0.044715 as ``((0.044715 x) x) x`` (no POW, so no REQUIRE on the base's sign)."""
    x = block.tensor(match.x)
    coefficient = _other(match.cubic, match.power.outputs[0])
    shift = match.cubic.inputs[2:]
    base = f"{match.cubic.outputs[0]}_cube"
    for name in (f"{base}_1", f"{base}_2"):
        block.tensors[name] = Tensor(name, x.shape, x.dtype)
    location = match.cubic.location
    products = [Operator(Op.MUL, [match.x, coefficient, *shift], [f"{base}_1"], match.cubic.attribute, location),
                Operator(Op.MUL, [f"{base}_1", match.x, *shift], [f"{base}_2"], match.cubic.attribute, location)]
    at = block.operators.index(match.power)
    block.operators[at:at + 1] = products
    match.cubic.inputs = [f"{base}_2", match.x, *shift]
    block.tensors.pop(match.power.outputs[0], None)
