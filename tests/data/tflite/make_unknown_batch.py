"""Makes unknown_batch_int8.tflite: a small int8 CNN with softmax whose batch dimension stays unknown.

Run with the examples' tensorflow venv (see examples/README.md); not part of the test suite."""

import os

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

inputs = keras.Input((16, 16, 3))   # batch left unknown
x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
x = keras.layers.DepthwiseConv2D(3, padding="same")(x)
x = keras.layers.GlobalAveragePooling2D()(x)
x = keras.layers.Flatten()(keras.layers.Reshape((1, 1, 8))(x))
model = keras.Model(inputs, keras.layers.Dense(4, activation="softmax")(x))


def representative():
    for _ in range(8):
        yield [np.random.rand(1, 16, 16, 3).astype(np.float32)]


converter = tf.lite.TFLiteConverter.from_keras_model(model)
converter.optimizations = [tf.lite.Optimize.DEFAULT]
converter.representative_dataset = representative
converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
converter.inference_input_type = converter.inference_output_type = tf.int8
with open("unknown_batch_int8.tflite", "wb") as out:
    out.write(converter.convert())
