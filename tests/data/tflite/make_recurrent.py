"""Makes the recurrent .tflite models the legalization tests check against LiteRT.

Keras models exported the default way (``TFLiteConverter.from_keras_model``; int8 ones with
full-integer post-training quantization on a seeded random representative dataset):

* ``lstm_int8``: ``LSTM(16)`` over 8 steps of 10 features, ``Dense(4)``: TFLite fuses it
  into ``UNIDIRECTIONAL_SEQUENCE_LSTM`` (8x8_16 kernel);
* ``lstm_sequence_int8``: ``LSTM(16, return_sequences=True)``, flattened, ``Dense(4)``;
* ``lstm_batch2_int8``: ``lstm_int8`` with batch 2;
* ``lstm_stacked_int8``: ``LSTM(16, return_sequences=True)`` then ``LSTM(12)``;
* ``lstm_small_cell_int8``: the stacked model with its second layer's weights scaled down
  by 20, so that its cell state is calibrated below 2^-15, where LiteRT skips the tanh of
  the cell state (see :mod:`npu_sim.tosa.tflite.lstm`);
* ``lstm_bidirectional_int8``: ``Bidirectional(LSTM(8))`` (two fused LSTMs and a REVERSE_V2);
* ``gru_fp32``: ``GRU(12)`` (a WHILE loop whose body reads the input sequence from outside);
* ``gru_reset_before_fp32``: ``GRU(12, reset_after=False)``;
* ``lstm_stateful_fp32``: ``LSTM(16, stateful=True)`` (CALL_ONCE, resource variables, WHILE);
* ``lstm_hard_sigmoid_fp32``: ``LSTM(16, recurrent_activation="hard_sigmoid")`` (not fused).

Run with the examples' TensorFlow venv (tensorflow 2.21, tf-keras 2.21; see
examples/README.md) from this folder: ``python make_recurrent.py``. Not part of the test
suite. (TensorFlow 2.21's calibrator crashes on WHILE loops here, so the WHILE models are
float32.)
"""

import os

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

L = keras.layers
STEPS, FEATURES = 8, 10


def build(kind: str, batch: int = 1) -> keras.Model:
    inputs = keras.Input((STEPS, FEATURES), batch_size=batch)
    layers = {
        "lstm": lambda: L.LSTM(16)(inputs),
        "lstm_sequence": lambda: L.Flatten()(L.LSTM(16, return_sequences=True)(inputs)),
        "lstm_stacked": lambda: L.LSTM(12)(L.LSTM(16, return_sequences=True)(inputs)),
        "lstm_bidirectional": lambda: L.Bidirectional(L.LSTM(8))(inputs),
        "gru": lambda: L.GRU(12)(inputs),
        "gru_reset_before": lambda: L.GRU(12, reset_after=False)(inputs),
        "lstm_stateful": lambda: L.LSTM(16, stateful=True)(inputs),
        "lstm_hard_sigmoid": lambda: L.LSTM(16, recurrent_activation="hard_sigmoid")(inputs),
    }
    return keras.Model(inputs, L.Dense(4)(layers[kind]()))


def small_cell(model: keras.Model) -> keras.Model:
    """Scale the last LSTM's weights down: a cell state that stays tiny."""
    layer = [layer for layer in model.layers if isinstance(layer, L.LSTM)][-1]
    layer.set_weights([w / 20 for w in layer.get_weights()])
    return model


def convert(model: keras.Model, int8: bool, batch: int, stateful: bool) -> bytes:
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if stateful:
        converter.experimental_enable_resource_variables = True
    if int8:
        rng = np.random.default_rng(0)

        def representative():
            for _ in range(32):
                yield [rng.normal(0, 1, size=(batch, STEPS, FEATURES)).astype(np.float32)]

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    return converter.convert()


MODELS = {   # file stem: (kind, int8, batch)
    "lstm_int8": ("lstm", True, 1),
    "lstm_sequence_int8": ("lstm_sequence", True, 1),
    "lstm_batch2_int8": ("lstm", True, 2),
    "lstm_stacked_int8": ("lstm_stacked", True, 1),
    "lstm_small_cell_int8": ("lstm_stacked", True, 1),
    "lstm_bidirectional_int8": ("lstm_bidirectional", True, 1),
    "gru_fp32": ("gru", False, 1),
    "gru_reset_before_fp32": ("gru_reset_before", False, 1),
    "lstm_stateful_fp32": ("lstm_stateful", False, 1),
    "lstm_hard_sigmoid_fp32": ("lstm_hard_sigmoid", False, 1),
}

if __name__ == "__main__":
    for stem, (kind, int8, batch) in MODELS.items():
        tf.random.set_seed(1)
        np.random.seed(1)
        keras.utils.set_random_seed(1)
        model = build(kind, batch)
        if stem == "lstm_small_cell_int8":
            model = small_cell(model)
        data = convert(model, int8, batch, kind == "lstm_stateful")
        with open(f"{stem}.tflite", "wb") as out:
            out.write(data)
        print(stem, len(data), "bytes")
