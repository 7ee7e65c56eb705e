"""The .tflite reader: the parts of a model the recurrent legalization needs, and damaged
files refused with TosaFormatError (never another exception)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_sim.errors import TosaFormatError
from npu_sim.tosa.tflite.flatbuffer import (
    UNIDIRECTIONAL_LSTM_OPTIONS,
    UNIDIRECTIONAL_SEQUENCE_LSTM,
    TfliteModel,
    option,
)

MODEL = Path(__file__).resolve().parents[2] / "data" / "tflite" / "lstm_int8.tflite"


def test_the_fused_lstm_its_operands_and_options():
    model = TfliteModel(MODEL.read_bytes())
    (lstm,) = [op for op in model.operators() if op.code == UNIDIRECTIONAL_SEQUENCE_LSTM]
    assert len(lstm.inputs) == 24 and len(lstm.intermediates) == 5
    assert lstm.options_type == UNIDIRECTIONAL_LSTM_OPTIONS
    assert option(lstm.options, 0, "int8") == 4 and option(lstm.options, 1, "float") == 10.0   # TANH, cell clip
    assert option(lstm.options, 3, "bool") is False   # batch-major
    x, weights, cell = (model.tensor(lstm.inputs[i]) for i in (0, 1, 19))
    assert (x.shape, x.type_name, x.data) == ((1, 8, 10), "int8", None)
    assert weights.shape == (16, 10) and weights.data is not None and weights.data.dtype == np.int8
    assert cell.is_variable and cell.type_name == "int16" and cell.quantization is not None
    assert np.log2(cell.quantization.per_tensor[0]) == -15
    assert [i for i in lstm.inputs if i < 0] == [-1] * 9   # peephole, projection, layer norm absent


FUZZ = settings(max_examples=200, deadline=2000, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(st.lists(st.tuples(st.integers(0, MODEL.stat().st_size - 1), st.integers(0, 255)), min_size=1, max_size=8),
       st.integers(8, MODEL.stat().st_size))
def test_damaged_models_raise_tosa_format_errors(changes, keep):
    data = bytearray(MODEL.read_bytes()[:keep])
    for position, value in changes:
        if position < len(data):
            data[position] = value
    try:
        model = TfliteModel(bytes(data))
        for op in model.operators():
            for index in (*op.inputs, *op.outputs, *op.intermediates):
                if index >= 0:
                    model.tensor(index)
    except TosaFormatError as exc:
        assert "\n" not in str(exc)
