"""Makes lstm_fused_fp32.tflite: a Keras LSTM left fused (TFLite UNIDIRECTIONAL_SEQUENCE_LSTM).

Run with the examples' tensorflow venv (see examples/README.md); not part of the test suite."""

import os

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"

import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

inputs = keras.Input((4, 8), batch_size=1)
outputs = keras.layers.Dense(2)(keras.layers.LSTM(8)(inputs))
model = keras.Model(inputs, outputs)
with open("lstm_fused_fp32.tflite", "wb") as out:
    out.write(tf.lite.TFLiteConverter.from_keras_model(model).convert())
