"""The foreign operations a reader of converted TFLite models hands to npu-sim's legalization.

:mod:`npu_sim.tosa.mlir_reader` calls :meth:`Legalizer.legalize` for each ``tfl.``
operation the converter left in its TOSA MLIR, with the TOSA values of its operands; the
legalizer appends the TOSA operators that compute it and returns their results. The
quantization the MLIR lost comes from the ``.tflite`` itself: the k-th fused LSTM of the
MLIR is the k-th of the model's main subgraph (checked by the shapes of their weights).
Without the model (an MLIR file given directly), float LSTMs still legalize; integer ones
are refused, naming the .tflite to give instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from npu_sim.errors import TosaFormatError, UnsupportedFeatureError
from npu_sim.tosa.builder import BlockBuilder
from npu_sim.tosa.tflite import lstm
from npu_sim.tosa.tflite.flatbuffer import (
    UNIDIRECTIONAL_LSTM_OPTIONS,
    UNIDIRECTIONAL_SEQUENCE_LSTM,
    TfliteModel,
    TfliteOperator,
    option,
)

#: MLIR operation name -> TFLite builtin code, for the operations legalized here.
LEGALIZED = {"tfl.unidirectional_sequence_lstm": UNIDIRECTIONAL_SEQUENCE_LSTM}
_ACTIVATIONS = {name: code for code, name in lstm.ACTIVATION_NAMES.items()}


class Legalizer:
    """Legalizes the foreign operations of one model (``model``: its .tflite, if known)."""

    def __init__(self, model: TfliteModel | None, source: str):
        self.model, self.source = model, source
        self._operators: dict[int, list[TfliteOperator]] = {}

    def handles(self, name: str) -> bool:
        return name in LEGALIZED

    def legalize(self, name: str, occurrence: int, b: BlockBuilder, operands: list[str | None],
                 attrs: dict[str, Any]) -> list[str]:
        """The results of the ``occurrence``-th ``name`` operation, computed by TOSA operators
        appended to ``b``'s block."""
        handler: Callable[[int, BlockBuilder, list[str | None], dict[str, Any]], list[str]] = {
            "tfl.unidirectional_sequence_lstm": self._unidirectional_lstm}[name]
        return handler(occurrence, b, operands, attrs)

    def _tflite_operator(self, code: int, occurrence: int) -> TfliteOperator | None:
        if self.model is None:
            return None
        if code not in self._operators:
            self._operators[code] = [op for op in self.model.operators(0) if op.code == code]
        found = self._operators[code]
        if occurrence >= len(found):
            raise TosaFormatError(f"{self.source}: the converted model has more fused LSTMs than the .tflite "
                                  f"({len(found)})")
        return found[occurrence]

    def _unidirectional_lstm(self, occurrence: int, b: BlockBuilder, operands: list[str | None],
                             attrs: dict[str, Any]) -> list[str]:
        where = f"{self.source}: UNIDIRECTIONAL_SEQUENCE_LSTM {occurrence}"
        op = self._tflite_operator(UNIDIRECTIONAL_SEQUENCE_LSTM, occurrence)
        if op is not None:
            fused = self._from_tflite(op, b, operands, where)
        else:
            fused = lstm.FusedLstm(
                where, tuple(operands), _ACTIVATIONS.get(str(attrs.get("fused_activation_function", "TANH")), -1),
                _number(attrs.get("cell_clip")), _number(attrs.get("proj_clip")), bool(attrs.get("time_major", False)),
                bool(attrs.get("diagonal_recurrent_tensors", False)))
        return [lstm.legalize(b, fused)]

    def _from_tflite(self, op: TfliteOperator, b: BlockBuilder, operands: list[str | None],
                     where: str) -> lstm.FusedLstm:
        assert self.model is not None
        tensors = [self.model.tensor(i) if i >= 0 else None for i in op.inputs]
        for k, (tensor, name) in enumerate(zip(tensors, operands)):
            if (tensor is None) != (name is None) or \
                    tensor is not None and name is not None and tuple(b.type_of(name).shape) != tensor.shape:
                raise TosaFormatError(f"{where}: operand {k} differs between the .tflite and its conversion")
        options = op.options if op.options_type == UNIDIRECTIONAL_LSTM_OPTIONS else None
        x = tensors[lstm.INPUT]
        quantization = None
        if x is not None and x.type_name != "float32":
            quantization = _quantization(self.model, op, tensors, where)
        states = tuple(t.name if t is not None and t.name else f"lstm{op.index}_{k}"
                       for k, t in zip("hc", (tensors[lstm.OUTPUT_STATE], tensors[lstm.CELL_STATE])))
        return lstm.FusedLstm(where, tuple(operands), int(option(options, 0, "int8", lstm.TANH)),
                              float(option(options, 1, "float")), float(option(options, 2, "float")),
                              bool(option(options, 3, "bool")), bool(option(options, 5, "bool")),
                              quantization, (states[0], states[1]))


def _quantization(model: TfliteModel, op: TfliteOperator, tensors: list[Any], where: str) -> lstm.LstmQuantization:
    """The scales and zero points of an integer LSTM's operands and hidden intermediate."""
    def affine(tensor: Any, what: str) -> lstm.Affine:
        if tensor is None or tensor.quantization is None:
            raise UnsupportedFeatureError(f"{where}: the {what} has no quantization")
        scale, zero_point = tensor.quantization.per_tensor
        return lstm.Affine(scale, zero_point)

    weights = tuple(affine(tensors[i], f"weights {i}").scale
                    for i in (*lstm.INPUT_WEIGHTS, *lstm.RECURRENT_WEIGHTS) if tensors[i] is not None)
    output_state = affine(tensors[lstm.OUTPUT_STATE], "output state")
    hidden = affine(model.tensor(op.intermediates[4]), "hidden intermediate") if len(op.intermediates) == 5 \
        else output_state
    return lstm.LstmQuantization(affine(tensors[lstm.INPUT], "input"), weights, output_state,
                                 affine(tensors[lstm.CELL_STATE], "cell state"), hidden)


def _number(value: Any) -> float:
    try:
        return float(getattr(value, "value", value) or 0.0)
    except (TypeError, ValueError):
        return 0.0
