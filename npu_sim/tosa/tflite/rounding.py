"""LiteRT's rounding of a FULLY_CONNECTED's requantization, restored in the converted graph.

LiteRT (since TF 2.20, and ``ai-edge-litert``) requantizes the accumulators of its
integer FULLY_CONNECTED kernels with one rounding, ``(acc * m + 2^(s-1)) >> s``, where its
CONV_2D and DEPTHWISE_CONV_2D kernels (and TFLite's older reference) round twice
(gemmlowp's ``MultiplyByQuantizedMultiplier``). Arm's converter writes every one of them
as a RESCALE with ``rounding_mode = DOUBLE_ROUND``, so a converted Dense layer's output
differs from LiteRT's by one LSB wherever the two roundings part (a few elements in a
thousand). This pass finds the converted FULLY_CONNECTEDs (a CONV2D whose constant
weights are, byte for byte, the weights of a FULLY_CONNECTED of the .tflite: the
converter writes them as [out, 1, 1, in], TFLite's [out, in] layout; where several share those
weights, the one the CONV2D's location names: the converter's, its output tensor's name) and gives
the RESCALE of their accumulators ``SINGLE_ROUND``: then LiteRT's outputs come out bit for
bit (checked against ``ai-edge-litert``'s builtin kernels in the test suite). The graph
stays plain TOSA: Arm's reference model runs it to the same bits.

A 16-bit FULLY_CONNECTED (int16 activations, int8 weights) accumulates in int48, and TOSA
rescales an int48 with a 16-bit multiplier only, where LiteRT multiplies by the 32-bit one:
when the weights bound every accumulator within int32 (``32768 * sum|w| + |bias|``), the
accumulator first moves to int32 unchanged (a RESCALE by 4 / 2^2) and is then rescaled
with LiteRT's 32-bit multipliers (``QuantizeMultiplier`` of ``s_in * s_w / s_out``), once
rounded; wider ones keep the converter's 16-bit form (then within one LSB).

The other way round for a RELU, RELU_N1_TO_1 or RELU6 whose output is quantized differently
from its input (a ReLU after an ADD or a MINIMUM, as Keras' hard_sigmoid ends, whose output
scale a later CONCATENATION sets): LiteRT requantizes it with ``MultiplyByQuantizedMultiplier``,
rounding twice, and the converter writes the RESCALE before its CLAMP with ``SINGLE_ROUND``
(one LSB off on one element in twelve of such a layer). That RESCALE (found by the RELU's
output tensor, the name the converter gives its operators' location) rounds twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from npu_sim.errors import TosaFormatError
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, Tensor
from npu_sim.tosa.ops import Op
from npu_sim.tosa.schema_generated import RoundingMode
from npu_sim.tosa.tflite.fixed_point import quantize_multiplier
from npu_sim.tosa.tflite.flatbuffer import FULLY_CONNECTED, TfliteModel, TfliteTensor


@dataclass(frozen=True)
class _FullyConnected:
    """What LiteRT requantizes a FULLY_CONNECTED's accumulators with: per output channel, the
    effective scale ``s_in * s_w / s_out`` (None without quantization)."""

    scales: tuple[float, ...] | None


#: (weights' shape [out, in], their bytes) -> (output tensor name, requantization) of each
#: FULLY_CONNECTED with those weights (an unrolled RNN's steps share one weight tensor)
WeightUses = dict[tuple[tuple[int, int], bytes], list[tuple[str, _FullyConnected]]]


def fully_connected_weights(model: TfliteModel) -> WeightUses:
    """The constant weights of every FULLY_CONNECTED, all subgraphs, with each one's output
    tensor name and requantization."""
    found: WeightUses = {}
    for subgraph in range(model.subgraph_count):
        for op in model.operators(subgraph):
            if op.code != FULLY_CONNECTED or len(op.inputs) < 2 or op.inputs[1] < 0 or not op.outputs:
                continue
            weights = model.tensor(op.inputs[1], subgraph)
            data = weights.data
            if data is None or data.ndim != 2:
                continue
            key = ((int(data.shape[0]), int(data.shape[1])), np.ascontiguousarray(data).tobytes())
            requantization = _FullyConnected(_effective_scales(model, subgraph, op.inputs[0], weights, op.outputs[0]))
            found.setdefault(key, []).append((model.tensor(op.outputs[0], subgraph).name, requantization))
    return found


def _requantization_of(conv: Operator, uses: list[tuple[str, _FullyConnected]]) -> _FullyConnected:
    """The requantization of the FULLY_CONNECTED ``conv`` was converted from: the one its location
    (the converter's, the operator's output tensor name) names; else the one all users of these
    weights share; else an unknown one (FULLY_CONNECTEDs sharing weights requantize differently: an
    unrolled 16x8 LSTM's steps, whose multipliers would otherwise all be the last step's; only the
    rounding of an int32 accumulator changes then)."""
    named = [fc for name, fc in uses if name == conv.location]
    if named:
        return named[0]
    distinct = {fc for _, fc in uses}
    return uses[0][1] if len(distinct) == 1 else _FullyConnected(None)


def _effective_scales(model: TfliteModel, subgraph: int, data: int, weights: TfliteTensor,
                      output: int) -> tuple[float, ...] | None:
    """LiteRT's ``s_in * s_w[c] / s_out`` (in double, from the float32 scales) per channel."""
    if data < 0 or weights.quantization is None:
        return None
    given, result = model.tensor(data, subgraph).quantization, model.tensor(output, subgraph).quantization
    if given is None or result is None:
        return None
    channels = weights.shape[0]
    scales = weights.quantization.scale
    if len(scales) not in (1, channels):
        return None
    per_channel = scales if len(scales) == channels else scales * channels
    return tuple(float(np.float64(given.scale[0]) * np.float64(w) / np.float64(result.scale[0])) for w in per_channel)


def round_fully_connected_once(graph: Graph, model: TfliteModel) -> int:
    """Give the accumulator RESCALEs of the converted FULLY_CONNECTEDs of ``graph`` single
    rounding, as LiteRT computes them; the number of RESCALEs changed."""
    weights = fully_connected_weights(model)
    if not weights:
        return 0
    changed = 0
    for block in graph.blocks():
        added = _Added()
        for conv, data, fc in _fully_connected_products(block, weights):
            for rescale in [op for op in block.operators if op.op is Op.RESCALE and op.inputs[0] == conv.outputs[0]]:
                changed += _round_once(block, conv, rescale, data, fc, added)
        for before, operator in added.operators:
            block.operators.insert(block.operators.index(before), operator)
        block.operators[0:0] = added.constants
    return changed


def _fully_connected_products(block: Block, weights: WeightUses) -> list[tuple[Operator, np.ndarray, _FullyConnected]]:
    """The CONV2Ds of ``block`` that are converted FULLY_CONNECTEDs, with their weights."""
    producer = {name: op for op in block.operators for name in op.outputs}
    found = []
    for op in block.operators:
        if op.op is not Op.CONV2D or len(op.inputs) < 2 or not op.outputs:
            continue
        shape = block.tensor(op.inputs[1]).shape
        data = _constant_through_reshapes(block, producer, op.inputs[1])
        if data is None or len(shape) != 4 or tuple(shape[1:3]) != (1, 1):
            continue
        key = ((int(shape[0]), int(shape[3])), np.ascontiguousarray(data).tobytes())
        if key in weights:
            found.append((op, data, _requantization_of(op, weights[key])))
    return found


def _round_once(block: Block, conv: Operator, rescale: Operator, data: np.ndarray, fc: _FullyConnected,
                added: _Added) -> int:
    """Round ``rescale`` of ``conv``'s accumulators once (1), or leave it (0)."""
    accumulator = block.tensor(rescale.inputs[0]).dtype
    if accumulator is DType.INT48:
        return _rescale_wide_accumulator(block, conv, rescale, data, fc, added)
    if accumulator is DType.INT32 and rescale.attribute.rounding_mode != RoundingMode.SINGLE_ROUND:
        _set(rescale, rounding_mode=RoundingMode.SINGLE_ROUND)
        return 1
    return 0


@dataclass
class _Added:
    """Operators a block gains: constants (they go first) and (operator, the one it precedes)."""

    constants: list[Operator] = field(default_factory=list)
    operators: list[tuple[Operator, Operator]] = field(default_factory=list)


def _set(operator: Operator, **fields: object) -> None:
    operator.attribute = type(operator.attribute)(**{**operator.attribute.to_dict(), **fields})


def _rescale_wide_accumulator(block: Block, conv: Operator, rescale: Operator, weights: np.ndarray,
                              fc: _FullyConnected, added: _Added) -> int:
    """An int48 accumulator that the weights keep within int32: moved to int32 unchanged, then
    rescaled with LiteRT's 32-bit multipliers, once rounded. 0 when it cannot be (left as is)."""
    pairs = _wide_multipliers(block, conv, rescale, weights, fc)
    if pairs is None:
        return 0
    base = rescale.outputs[0]
    narrow = _tensor(block, added, f"{base}_accumulator32", block.tensor(conv.outputs[0]).shape, DType.INT32)
    identity = [_tensor(block, added, f"{base}_identity_multiplier", (1,), DType.INT16, np.array([4], np.int16)),
                _tensor(block, added, f"{base}_identity_shift", (1,), DType.INT8, np.array([2], np.int8)),
                rescale.inputs[3],   # the int48 zero point (zero, checked)
                _tensor(block, added, f"{base}_identity_output_zp", (1,), DType.INT32, np.zeros(1, np.int32))]
    move = Operator(Op.RESCALE, [conv.outputs[0], *identity], [narrow],
                    type(rescale.attribute)(**{**rescale.attribute.to_dict(), "scale32": False, "per_channel": False,
                                               "rounding_mode": RoundingMode.SINGLE_ROUND}))
    added.operators.append((rescale, move))
    multipliers = _tensor(block, added, f"{base}_multiplier32", (len(pairs),), DType.INT32,
                          np.array([m for m, _ in pairs], np.int32))
    shifts = _tensor(block, added, f"{base}_shift32", (len(pairs),), DType.INT8,
                     np.array([31 - e for _, e in pairs], np.int8))
    zero = _tensor(block, added, f"{base}_input_zp32", (1,), DType.INT32, np.zeros(1, np.int32))
    rescale.inputs = [narrow, multipliers, shifts, zero, *rescale.inputs[4:]]
    _set(rescale, scale32=True, rounding_mode=RoundingMode.SINGLE_ROUND)
    return 1


def _wide_multipliers(block: Block, conv: Operator, rescale: Operator, weights: np.ndarray,
                      fc: _FullyConnected) -> list[tuple[int, int]] | None:
    """LiteRT's (multiplier, exponent) per channel (one if not per channel) when the int48
    accumulator fits int32 and the RESCALE takes 32-bit ones; None otherwise."""
    if fc.scales is None or rescale.attribute.input_unsigned or rescale.attribute.output_unsigned:
        return None
    input_zp = _constant(block, rescale.inputs[3]) if len(rescale.inputs) > 3 else None
    if input_zp is None or np.any(input_zp != 0) or not _fits_int32(block, conv, weights):
        return None
    pairs = [quantize_multiplier(scale) for scale in fc.scales]
    if any(m <= 0 or not 2 <= 31 - e <= 62 for m, e in pairs):
        return None
    if rescale.attribute.per_channel:
        return pairs
    return pairs[:1] if len(set(pairs)) == 1 else None


def _fits_int32(block: Block, conv: Operator, weights: np.ndarray) -> bool:
    """Whether every accumulator of ``conv`` (int16 data, these weights and its bias) stays
    within int32: ``32768 * sum|w| + |bias|`` per output channel."""
    channels = weights.shape[0]
    bias = _constant(block, conv.inputs[2]) if len(conv.inputs) > 2 else None
    bias_bound = np.abs(bias.astype(np.int64)).reshape(-1) if bias is not None else np.zeros(1, np.int64)
    if bias_bound.size not in (1, channels):
        return False
    largest = np.abs(weights.astype(np.int64)).reshape(channels, -1).sum(axis=1) * 32768 + bias_bound
    return int(largest.max()) < 1 << 31


def _tensor(block: Block, added: _Added, name: str, shape: tuple[int, ...], dtype: DType,
            data: np.ndarray | None = None) -> str:
    """A new tensor of ``block``; with ``data``, a constant: its CONST goes first in the block."""
    if name in block.tensors:
        raise TosaFormatError(f"block {block.name}: tensor {name} exists already")
    block.tensors[name] = Tensor(name, tuple(shape), dtype, data)
    if data is not None:
        added.constants.append(Operator(Op.CONST, [], [name]))
    return name


def _constant(block: Block, name: str) -> np.ndarray | None:
    return _constant_through_reshapes(block, {o: op for op in block.operators for o in op.outputs}, name)


def _constant_through_reshapes(block: Block, producer: dict[str, Operator], name: str) -> np.ndarray | None:
    """The constant data behind ``name``, through the RESHAPEs the converter puts before a
    FULLY_CONNECTED's weights ([out, in] to [out, 1, 1, in]); None if not a constant."""
    for _ in range(8):
        tensor = block.tensors.get(name)
        if tensor is None:
            return None
        if tensor.data is not None:
            return np.asarray(tensor.data)
        op = producer.get(name)
        if op is None or op.op is not Op.RESHAPE or not op.inputs:
            return None
        name = op.inputs[0]
    return None


#: BuiltinOperator codes of the ReLUs LiteRT requantizes with double rounding (schema.fbs).
RELU_CODES = (19, 20, 21)   # RELU, RELU_N1_TO_1, RELU6


def requantizing_relus(model: TfliteModel) -> dict[str, float]:
    """Output tensor name -> LiteRT's requantization scale of each ReLU whose input and output
    quantizations differ, all subgraphs: ``s_in / s_out`` divided in float32, as its ReluPrepare
    divides the tensors' float scales (the converter divides in double: a multiplier a few units
    apart, one LSB on near-ties)."""
    found = {}
    for subgraph in range(model.subgraph_count):
        for op in model.operators(subgraph):
            if op.code not in RELU_CODES or not op.inputs or not op.outputs or min(op.inputs[0], op.outputs[0]) < 0:
                continue
            given, result = model.tensor(op.inputs[0], subgraph).quantization, \
                model.tensor(op.outputs[0], subgraph).quantization
            if given is not None and result is not None and given != result \
                    and len(given.scale) == len(result.scale) == 1:
                found[model.tensor(op.outputs[0], subgraph).name] = float(np.float32(given.scale[0])
                                                                          / np.float32(result.scale[0]))
    return found


def round_relus_twice(graph: Graph, model: TfliteModel) -> int:
    """Give the RESCALE before the CLAMP of each converted requantizing ReLU LiteRT's multiplier
    and double rounding; the number of RESCALEs changed."""
    relus = requantizing_relus(model)
    if not relus:
        return 0
    changed = 0
    for block in graph.blocks():
        producer = {name: op for op in block.operators for name in op.outputs}
        added = _Added()
        for clamp in block.operators:
            if clamp.op is not Op.CLAMP or clamp.location not in relus:
                continue
            rescale = producer.get(clamp.inputs[0])
            if rescale is not None and rescale.op is Op.RESCALE and rescale.location == clamp.location \
                    and rescale.attribute.scale32 and not rescale.attribute.per_channel \
                    and rescale.attribute.rounding_mode == RoundingMode.SINGLE_ROUND:
                changed += _requantize_as_litert(block, rescale, relus[clamp.location], added)
        block.operators[0:0] = added.constants
    return changed


def _requantize_as_litert(block: Block, rescale: Operator, scale: float, added: _Added) -> int:
    """``rescale`` with LiteRT's 32-bit multiplier of ``scale``, rounded twice (1), or as it is (0)."""
    multiplier, exponent = quantize_multiplier(scale)
    if multiplier <= 0 or not 2 <= 31 - exponent <= 62:
        return 0
    base = rescale.outputs[0]
    rescale.inputs = [rescale.inputs[0],
                      _tensor(block, added, f"{base}_relu_multiplier", (1,), DType.INT32,
                              np.array([multiplier], np.int32)),
                      _tensor(block, added, f"{base}_relu_shift", (1,), DType.INT8, np.array([31 - exponent], np.int8)),
                      *rescale.inputs[3:]]
    _set(rescale, rounding_mode=RoundingMode.DOUBLE_ROUND)
    return 1
