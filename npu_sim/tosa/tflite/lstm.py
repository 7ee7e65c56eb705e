"""TFLite's fused ``UNIDIRECTIONAL_SEQUENCE_LSTM`` as TOSA operators, one cell per time step.

The cell is written gate by gate, as TFLite stores it (four input and four recurrent weight
tensors), as LiteRT and TFLite Micro compute it (``CalculateLstmGate*`` once per gate) and
as Vela lowers it (two FullyConnected operations a gate and step): each gate i, f, g, o is a
matrix product of H output channels for the step input plus one for the previous output,
then its activation, then ``c' = f * c + i * g`` and ``h' = o * act(c')``. The matcher of
fused LSTM cells (:mod:`scheduler.passes.lstm_cell`) reads this form as well as a converted
Keras LSTM's split of one 4H-channel product. The state (h and c) lives in two TOSA
VARIABLEs, read before the first step and written after the last one: TFLite keeps it in
variable tensors that persist from one invocation to the next, and so does the legalized
graph (``-n N`` streams a sequence chunk by chunk).

float32: CONV2D, ADD, SIGMOID, TANH (or the fused activation), MUL, CLAMP for the cell
clip; LiteRT's float kernel within rounding of the sums' order.

int8 with an int16 cell state (TFLite's "8x8_16" kernel), LiteRT's integer arithmetic bit
for bit (``lstm_eval.cc``):

* each gate is ``clamp16(MBQM(Wx (x - zp_x) + b) + MBQM(Wh (h - zp_h)))`` at 2^-12: two
  CONV2Ds with their zero points, DOUBLE_ROUND RESCALEs (per channel, as an NPU's weight
  stream carries a scale for every output channel) (TOSA's double rounding
  is TFLite's ``MultiplyByQuantizedMultiplier``), an int32 ADD and a saturating RESCALE;
* sigmoid and tanh are gemmlowp's 16-bit fixed-point functions, whose results are a
  staircase: the exact values of all 65,536 inputs (:mod:`.fixed_point`) are looked up with
  a GATHER (index = input + 32768);
* ``c' = sat16(rdiv(f * c, 2^15) + rdiv(i * g, 2^(30 + cell_scale)))``, clipped: MULs to
  int32 and RESCALEs that divide by a power of two rounding half away from zero (multiplier
  2^31 - 1 with DOUBLE_ROUND does that exactly for products of int16 values);
* ``h' = MBQM(o * tanh(c')) + zp_hidden``, saturated to int8 by the RESCALE.

Refused, in one line naming the variant (as Vela refuses them): CIFG (no input gate),
peephole connections, projection, layer normalisation, diagonal recurrent weights,
hybrid (float activations with int8 weights) and 16-bit activations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from npu_sim.errors import UnsupportedFeatureError
from npu_sim.tosa.builder import BlockBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from npu_sim.tosa.schema_generated import NanPropagationMode, RoundingMode
from npu_sim.tosa.tflite.fixed_point import quantize_multiplier, sigmoid_table, tanh_table

#: Operand positions of UNIDIRECTIONAL_SEQUENCE_LSTM (TFLite's kernel indices).
INPUT = 0
INPUT_WEIGHTS = (1, 2, 3, 4)          # input to input, forget, cell, output gate
RECURRENT_WEIGHTS = (5, 6, 7, 8)
PEEPHOLE_WEIGHTS = (9, 10, 11)
GATE_BIASES = (12, 13, 14, 15)
PROJECTION = (16, 17)
OUTPUT_STATE, CELL_STATE = 18, 19
LAYER_NORM = (20, 21, 22, 23)
OPERAND_COUNT = 24

#: ActivationFunctionType codes (schema.fbs).
NONE, RELU, RELU_N1_TO_1, RELU6, TANH, SIGN_BIT = range(6)
ACTIVATION_NAMES = {NONE: "NONE", RELU: "RELU", RELU_N1_TO_1: "RELU_N1_TO_1", RELU6: "RELU6", TANH: "TANH",
                    SIGN_BIT: "SIGN_BIT"}
#: The scale of the gate pre-activations in the integer kernel (Q3.12).
GATE_SCALE = 2.0 ** -12
#: Concatenations take at most this many inputs (TOSA level 8K's MAX_TENSOR_LIST_SIZE).
MAX_CONCAT_INPUTS = 64


@dataclass(frozen=True)
class Affine:
    """A per-tensor quantization: real = scale * (q - zero_point)."""

    scale: float
    zero_point: int = 0


@dataclass(frozen=True)
class LstmQuantization:
    """What the integer kernel needs beyond the operand values: the quantization of the
    input, of the eight weight tensors (input-to-gate, then recurrent, i f g o), of the
    output state h and the cell state, and of the hidden intermediate."""

    input: Affine
    weights: tuple[float, ...]
    output_state: Affine
    cell_state: Affine
    hidden: Affine


@dataclass(frozen=True)
class FusedLstm:
    """One UNIDIRECTIONAL_SEQUENCE_LSTM: its operands as tensors of the block being built
    (None where TFLite omits an optional one), its options and, for integer models, its
    quantization. ``state_names`` name the two variables (h, c)."""

    name: str
    operands: tuple[str | None, ...]
    activation: int = TANH
    cell_clip: float = 0.0
    proj_clip: float = 0.0
    time_major: bool = False
    diagonal_recurrent: bool = False
    quantization: LstmQuantization | None = None
    state_names: tuple[str, str] = ("output_state", "cell_state")


def legalize(b: BlockBuilder, lstm: FusedLstm) -> str:
    """Append the TOSA operators computing ``lstm`` to ``b``'s block; the name of the
    sequence output ([B, T, H], or [T, B, H] time-major)."""
    cell = _Cell.prepare(b, lstm)
    x_type = b.type_of(_operand(lstm, INPUT))
    steps = x_type.shape[0] if lstm.time_major else x_type.shape[1]
    h, c = cell.read_state()
    outputs = []
    for t in range(steps):
        h, c = cell.step(t, h, c)
        outputs.append(h)
    cell.write_state(h, c)
    return cell.sequence(outputs)


def _operand(lstm: FusedLstm, index: int) -> str:
    name = lstm.operands[index] if index < len(lstm.operands) else None
    if name is None:
        raise UnsupportedFeatureError(f"{lstm.name}: operand {index} of the LSTM is missing")
    return name


def _refuse_variants(b: BlockBuilder, lstm: FusedLstm) -> None:
    """One line naming the first variant npu-sim (like Vela) does not legalize."""
    variant = _variant(lstm)
    if variant is not None:
        raise UnsupportedFeatureError(f"{lstm.name}: an LSTM with {variant} is not supported "
                                      "(Vela refuses it too): export a plain Keras LSTM")
    if len(lstm.operands) != OPERAND_COUNT:
        raise UnsupportedFeatureError(f"{lstm.name}: {len(lstm.operands)} operands, a fused LSTM has "
                                      f"{OPERAND_COUNT}")
    _refuse_types(lstm, b.type_of(_operand(lstm, INPUT)).dtype, b.type_of(_operand(lstm, INPUT_WEIGHTS[0])).dtype)


def _variant(lstm: FusedLstm) -> str | None:
    present = [i < len(lstm.operands) and lstm.operands[i] is not None for i in range(OPERAND_COUNT)]
    if not present[INPUT_WEIGHTS[0]]:
        return "CIFG (coupled input and forget gates, no input gate)"
    for indices, name in ((PEEPHOLE_WEIGHTS, "peephole connections"), (PROJECTION, "projection"),
                          (LAYER_NORM, "layer normalisation")):
        if any(present[i] for i in indices):
            return name
    return "diagonal recurrent weights" if lstm.diagonal_recurrent else None


def _refuse_types(lstm: FusedLstm, x_dtype: DType, w_dtype: DType) -> None:
    if x_dtype is DType.FP32 and w_dtype is not DType.FP32:
        raise UnsupportedFeatureError(f"{lstm.name}: a hybrid LSTM (float activations, {w_dtype.name} weights; "
                                      "dynamic-range quantization) is not supported: quantize the whole model "
                                      "to int8 or keep it float")
    if x_dtype is DType.INT16:
        raise UnsupportedFeatureError(f"{lstm.name}: an LSTM with 16-bit activations (16x8) is not supported")
    if x_dtype not in (DType.FP32, DType.INT8) or (x_dtype is DType.INT8 and w_dtype is not DType.INT8):
        raise UnsupportedFeatureError(f"{lstm.name}: an LSTM of {x_dtype.name} activations and {w_dtype.name} "
                                      "weights is not supported (float32, or int8 with an int16 cell state)")


class _Cell:
    """Builds the steps of one LSTM: the shared constants once, then one cell per step."""

    def __init__(self, b: BlockBuilder, lstm: FusedLstm):
        self.b, self.lstm = b, lstm
        self.constants_made: dict[tuple[DType, tuple[int, ...], object], str] = {}
        x_type = b.type_of(_operand(lstm, INPUT))
        self.x = _operand(lstm, INPUT)
        self.batch = x_type.shape[1] if lstm.time_major else x_type.shape[0]
        self.features = x_type.shape[2]
        recurrent = self.weight_data(RECURRENT_WEIGHTS[0])
        self.hidden = recurrent.shape[0]
        if recurrent.shape[1] != self.hidden:
            raise UnsupportedFeatureError(f"{lstm.name}: recurrent weights of shape {recurrent.shape} "
                                          "(an output size unlike the cell size needs a projection)")
        self.quantized = x_type.dtype is DType.INT8
        self.step_shape = (self.batch, 1, 1, self.hidden)

    @classmethod
    def prepare(cls, b: BlockBuilder, lstm: FusedLstm) -> _Cell:
        _refuse_variants(b, lstm)
        if len(b.type_of(_operand(lstm, INPUT)).shape) != 3:
            raise UnsupportedFeatureError(f"{lstm.name}: the LSTM input must have rank 3 (batch, time, features)")
        cell: _Cell = _IntegerCell(b, lstm) if b.type_of(lstm.operands[INPUT] or "").dtype is DType.INT8 \
            else _FloatCell(b, lstm)
        cell.constants()
        return cell

    # -- helpers
    def weight_data(self, index: int) -> np.ndarray:
        name = _operand(self.lstm, index)
        data = self.b.block.tensors[name].data
        if data is None:
            raise UnsupportedFeatureError(f"{self.lstm.name}: operand {index} (weights or bias) is not a constant")
        return np.asarray(data)

    def gate_weights(self, indices: Sequence[int], columns: int, dtype: DType) -> list[str]:
        """The four gates' weights (i, f, g, o), each a [H, 1, 1, columns] constant."""
        return [self.const(self.weight_data(i).reshape(self.hidden, 1, 1, columns), dtype,
                           (self.hidden, 1, 1, columns)) for i in indices]

    def gate_biases(self, dtype: DType) -> list[str]:
        """The four gates' biases (zeros where TFLite omits one), each of H values."""
        h = self.hidden
        return [self.const(self.weight_data(i).reshape(h) if self.lstm.operands[i] is not None
                           else np.zeros(h, dtype.numpy_dtype), dtype, (h,)) for i in GATE_BIASES]

    def const(self, value: np.ndarray | float | int, dtype: DType, shape: Sequence[int] = (1,)) -> str:
        """A constant, one tensor per distinct value (every step shares it)."""
        data = np.asarray(value).reshape(tuple(shape))
        key = (dtype, tuple(shape), data.tobytes())
        if key not in self.constants_made:
            self.constants_made[key] = self.b.const(None, data, dtype, shape)
        return self.constants_made[key]

    def shape(self, values: Sequence[int]) -> str:
        key = (DType.SHAPE, (len(values),), tuple(values))
        if key not in self.constants_made:
            self.constants_made[key] = self.b.const_shape(None, list(values))
        return self.constants_made[key]

    def op(self, op: Op, inputs: Sequence[str], shape: Sequence[int] | None = None, dtype: DType | None = None,
           **fields: Any) -> str:
        return self.b.op(op, list(inputs), shape, dtype, **fields)

    def reshape(self, value: str, shape: Sequence[int]) -> str:
        return self.op(Op.RESHAPE, [value, self.shape(shape)])

    def slice(self, value: str, start: Sequence[int], size: Sequence[int]) -> str:
        return self.op(Op.SLICE, [value, self.shape(start), self.shape(size)])

    def conv(self, data: str, weights: str, bias: str, data_zp: str, weight_zp: str, acc: DType) -> str:
        return self.op(Op.CONV2D, [data, weights, bias, data_zp, weight_zp], pad=(0, 0, 0, 0), stride=(1, 1),
                       dilation=(1, 1), acc_type=acc)

    # -- state
    def read_state(self) -> tuple[str, str]:
        lstm, g = self.lstm, self.b.graph_builder
        h_type, c_type = (self.b.type_of(_operand(lstm, i)) for i in (OUTPUT_STATE, CELL_STATE))
        h_var = g.variable(g.fresh_name(f"{lstm.name}_h"), h_type.shape, h_type.dtype, self.initial(OUTPUT_STATE),
                           variable_name=lstm.state_names[0])
        c_var = g.variable(g.fresh_name(f"{lstm.name}_c"), c_type.shape, c_type.dtype, self.initial(CELL_STATE),
                           variable_name=lstm.state_names[1])
        self.variables = (h_var, c_var)
        return (self.reshape(self.b.variable_read(h_var), self.step_shape),
                self.reshape(self.b.variable_read(c_var), self.step_shape))

    def initial(self, index: int) -> np.ndarray:
        """What TFLite resets a state tensor to: the zero point of an int8 one, else 0."""
        t = self.b.type_of(_operand(self.lstm, index))
        q = self.lstm.quantization
        value = q.output_state.zero_point if q is not None and index == OUTPUT_STATE else 0
        return np.full(t.shape, value, dtype=t.dtype.numpy_dtype)

    def write_state(self, h: str, c: str) -> None:
        for var, value in zip(self.variables, (h, c)):
            self.b.variable_write(var, self.reshape(value, self.b.type_of(var).shape))

    def sequence(self, outputs: list[str]) -> str:
        """The steps' outputs as one [B, T, H] (or [T, B, H]) tensor."""
        step = (1, self.batch, self.hidden) if self.lstm.time_major else (self.batch, 1, self.hidden)
        axis = 0 if self.lstm.time_major else 1
        parts = [self.reshape(h, step) for h in outputs]
        while len(parts) > 1:
            groups = [parts[k:k + MAX_CONCAT_INPUTS] for k in range(0, len(parts), MAX_CONCAT_INPUTS)]
            parts = [self.op(Op.CONCAT, group, axis=axis) if len(group) > 1 else group[0] for group in groups]
        return parts[0]

    def step_input(self, t: int) -> str:
        b_, f = self.batch, self.features
        if self.lstm.time_major:
            x_t = self.slice(self.x, (t, 0, 0), (1, b_, f))
        else:
            x_t = self.slice(self.x, (0, t, 0), (b_, 1, f))
        return self.reshape(x_t, (b_, 1, 1, f))

    # -- implemented by the float and integer cells
    def constants(self) -> None:
        raise NotImplementedError

    def step(self, t: int, h: str, c: str) -> tuple[str, str]:
        raise NotImplementedError


class _FloatCell(_Cell):
    """float32: the kernel's arithmetic in float, the fused activation for g and for c'."""

    def constants(self) -> None:
        lstm, h = self.lstm, self.hidden
        self.wx = self.gate_weights(INPUT_WEIGHTS, self.features, DType.FP32)
        self.wh = self.gate_weights(RECURRENT_WEIGHTS, h, DType.FP32)
        self.bias = self.gate_biases(DType.FP32)
        self.zero = self.const(0.0, DType.FP32)
        self.shift = self.const(0, DType.INT8)
        if lstm.activation not in (NONE, RELU, RELU_N1_TO_1, RELU6, TANH):
            raise UnsupportedFeatureError(f"{lstm.name}: an LSTM with the {ACTIVATION_NAMES.get(lstm.activation)} "
                                          "activation is not supported")

    def step(self, t: int, h: str, c: str) -> tuple[str, str]:
        lstm = self.lstm
        x = self.step_input(t)
        z_i, z_f, z_g, z_o = (
            self.op(Op.ADD, [self.conv(x, self.wx[k], self.bias[k], self.zero, self.zero, DType.FP32),
                             self.conv(h, self.wh[k], self.zero, self.zero, self.zero, DType.FP32)])
            for k in range(4))
        i, f = self.op(Op.SIGMOID, [z_i]), self.op(Op.SIGMOID, [z_f])
        g = self.activation(z_g)
        o = self.op(Op.SIGMOID, [z_o])
        c_next = self.op(Op.ADD, [self.op(Op.MUL, [f, c, self.shift]), self.op(Op.MUL, [i, g, self.shift])])
        if lstm.cell_clip > 0:
            c_next = self.clamp(c_next, -lstm.cell_clip, lstm.cell_clip)
        return self.op(Op.MUL, [o, self.activation(c_next), self.shift]), c_next

    def activation(self, value: str) -> str:
        kind = self.lstm.activation
        if kind == TANH:
            return self.op(Op.TANH, [value])
        if kind == NONE:
            return value
        low, high = {RELU: (0.0, np.inf), RELU6: (0.0, 6.0), RELU_N1_TO_1: (-1.0, 1.0)}[kind]
        return self.clamp(value, low, high)

    def clamp(self, value: str, low: float, high: float) -> str:
        return self.op(Op.CLAMP, [value], min_val=np.float32(low).tobytes(), max_val=np.float32(high).tobytes(),
                       nan_mode=NanPropagationMode.PROPAGATE)


class _IntegerCell(_Cell):
    """int8 activations and weights, an int16 cell state: LiteRT's 8x8_16 kernel."""

    def constants(self) -> None:
        lstm, h = self.lstm, self.hidden
        q = lstm.quantization
        if q is None:
            raise UnsupportedFeatureError(f"{lstm.name}: an int8 LSTM needs the quantization of its operands, which "
                                          "TOSA MLIR does not keep: give npu-sim the .tflite model")
        if lstm.activation not in (TANH,):
            raise UnsupportedFeatureError(f"{lstm.name}: an int8 LSTM with the {ACTIVATION_NAMES.get(lstm.activation)} "
                                          "activation is not supported (LiteRT's integer kernel uses tanh)")
        self.cell_exponent = _power_of_two(q.cell_state.scale, lstm.name)
        if self.cell_exponent > -9 or self.cell_exponent < -30:
            raise UnsupportedFeatureError(f"{lstm.name}: a cell state scale of 2^{self.cell_exponent} is not supported "
                                          "(LiteRT's integer kernel takes at most 2^-9)")
        self.wx = self.gate_weights(INPUT_WEIGHTS, self.features, DType.INT8)
        self.wh = self.gate_weights(RECURRENT_WEIGHTS, h, DType.INT8)
        self.bias = self.gate_biases(DType.INT32)
        self.zero_bias = self.const(0, DType.INT32)
        self.x_zp = self.const(q.input.zero_point, DType.INT8)
        self.h_zp = self.const(q.output_state.zero_point, DType.INT8)
        self.zero8 = self.const(0, DType.INT8)
        self.zero16 = self.const(0, DType.INT16)
        self.zero32 = self.const(0, DType.INT32)
        self.x_scale = self.gate_rescale(q.input.scale, q.weights[:4])
        self.h_scale = self.gate_rescale(q.output_state.scale, q.weights[4:])
        self.identity = self.scale_operands(1 << 30, 30)
        self.by_2_15 = self.scale_operands((1 << 31) - 1, 31 + 15)
        self.by_cell = self.scale_operands((1 << 31) - 1, 31 + 30 + self.cell_exponent)
        hidden_scale = float(np.float32(2.0 ** -30 / float(np.float32(q.hidden.scale))))
        self.hidden_scale = self.scale_operands(*_tosa_scale(hidden_scale, lstm.name))
        self.hidden_zp = self.const(q.hidden.zero_point, DType.INT8)
        self.index_offset = self.const(32768, DType.INT32, (1, 1, 1, 1))
        self.sigmoid = self.table(sigmoid_table(3))
        self.tanh_gate = self.table(tanh_table(3))
        # Below 2^-15 LiteRT's tanh of the cell state (15 + cell_scale integer bits) does nothing
        # and leaves its output buffer, which holds the input gate: h' = o * i then, as there.
        self.tanh_cell = self.table(tanh_table(15 + self.cell_exponent)) if self.cell_exponent >= -15 else None
        self.shift = self.zero8
        clip = lstm.cell_clip
        quantized_clip = int(np.clip(np.float32(clip) / np.float32(q.cell_state.scale), -32768, 32767)) if clip > 0 \
            else 0
        self.cell_clip = quantized_clip

    def gate_rescale(self, data_scale: float, weight_scales: Sequence[float]) -> list[tuple[str, str]]:
        """The multipliers and shifts of each gate's product, one per output channel (H)."""
        h = self.hidden
        pairs = [_tosa_scale(float(np.float32(np.float32(w) * np.float32(data_scale)) / np.float32(GATE_SCALE)),
                             self.lstm.name) for w in weight_scales]
        return [(self.const(np.full(h, m, np.int32), DType.INT32, (h,)),
                 self.const(np.full(h, s, np.int8), DType.INT8, (h,))) for m, s in pairs]

    def scale_operands(self, multiplier: int, shift: int) -> tuple[str, str]:
        return self.const(multiplier, DType.INT32), self.const(shift, DType.INT8)

    def table(self, values: np.ndarray) -> str:
        return self.const(values, DType.INT16, (1, values.size, 1))

    def rescale(self, value: str, scale: tuple[str, str], dtype: DType, in_zp: str, out_zp: str,
                per_channel: bool = False) -> str:
        shape = self.b.type_of(value).shape
        return self.op(Op.RESCALE, [value, scale[0], scale[1], in_zp, out_zp], shape, dtype, scale32=True,
                       rounding_mode=RoundingMode.DOUBLE_ROUND, per_channel=per_channel)

    def lookup(self, value: str, table: str) -> str:
        """``table[value + 32768]`` for an int16 ``value`` of the step's shape."""
        count = self.batch * self.hidden
        index = self.op(Op.ADD, [self.op(Op.CAST, [value], self.step_shape, DType.INT32), self.index_offset])
        found = self.op(Op.GATHER, [table, self.reshape(index, (1, count))], (1, count, 1), DType.INT16)
        return self.reshape(found, self.step_shape)

    def gate(self, k: int, x: str, h: str) -> str:
        """Gate k's pre-activation at 2^-12: its input product (with the bias) to int16, plus
        its recurrent product, saturated to int16."""
        from_x = self.rescale(self.conv(x, self.wx[k], self.bias[k], self.x_zp, self.zero8, DType.INT32),
                              self.x_scale[k], DType.INT16, self.zero32, self.zero16, per_channel=True)
        from_h = self.rescale(self.conv(h, self.wh[k], self.zero_bias, self.h_zp, self.zero8, DType.INT32),
                              self.h_scale[k], DType.INT32, self.zero32, self.zero32, per_channel=True)
        total = self.op(Op.ADD, [from_h, self.op(Op.CAST, [from_x], self.b.type_of(from_x).shape, DType.INT32)])
        return self.rescale(total, self.identity, DType.INT16, self.zero32, self.zero16)

    def step(self, t: int, h: str, c: str) -> tuple[str, str]:
        x = self.step_input(t)
        z_i, z_f, z_g, z_o = (self.gate(k, x, h) for k in range(4))
        i, f = self.lookup(z_i, self.sigmoid), self.lookup(z_f, self.sigmoid)
        g = self.lookup(z_g, self.tanh_gate)
        o = self.lookup(z_o, self.sigmoid)
        forget = self.rescale(self.op(Op.MUL, [f, c, self.shift], self.step_shape, DType.INT32), self.by_2_15,
                              DType.INT32, self.zero32, self.zero32)
        update = self.rescale(self.op(Op.MUL, [i, g, self.shift], self.step_shape, DType.INT32), self.by_cell,
                              DType.INT32, self.zero32, self.zero32)
        if 30 + self.cell_exponent < 15:   # LiteRT stores i * g to int16 (wrapping) before the add
            update = self.op(Op.CAST, [self.op(Op.CAST, [update], self.step_shape, DType.INT16)], self.step_shape,
                             DType.INT32)
        c_next = self.rescale(self.op(Op.ADD, [forget, update]), self.identity, DType.INT16, self.zero32, self.zero16)
        if self.cell_clip > 0:
            c_next = self.op(Op.CLAMP, [c_next], min_val=np.int16(-self.cell_clip).tobytes(),
                             max_val=np.int16(self.cell_clip).tobytes(), nan_mode=NanPropagationMode.PROPAGATE)
        squashed = self.lookup(c_next, self.tanh_cell) if self.tanh_cell is not None else i
        product = self.op(Op.MUL, [o, squashed, self.shift], self.step_shape, DType.INT32)
        h_next = self.rescale(product, self.hidden_scale, DType.INT8, self.zero32, self.hidden_zp)
        return h_next, c_next


def _tosa_scale(scale: float, where: str) -> tuple[int, int]:
    """TFLite's (multiplier, exponent) of ``scale`` as a TOSA RESCALE's (multiplier, shift)."""
    multiplier, exponent = quantize_multiplier(scale)
    shift = 31 - exponent
    if shift < 2:
        raise UnsupportedFeatureError(f"{where}: an effective scale of {scale:g} is beyond what a RESCALE takes")
    return multiplier, shift


def _power_of_two(scale: float, where: str) -> int:
    exponent = round(float(np.log2(scale))) if scale > 0 else 0
    if scale <= 0 or 2.0 ** exponent != scale:
        raise UnsupportedFeatureError(f"{where}: the cell state scale {scale:g} is not a power of two "
                                      "(LiteRT's integer kernel needs one)")
    return exponent
