"""Makes the float GELU .tflite model the GELU tests check against LiteRT.

``Dense(8, activation="gelu")`` (the exact GELU, Keras' default, ``approximate=False``) on a
4x4x4 map, then a ``Dense(8)`` with the tanh approximation (``approximate=True``):
``gelu_fp32``. (Two GELUs side by side are not fused into TFLite's ``GELU``: TF keeps an
``Erfc`` only the flex delegate runs.) Arm's converter lowers both to the tanh form with a POW by 3 (see
:mod:`npu_sim.tosa.tflite.gelu`).

Run with the examples' TensorFlow venv (tensorflow 2.21, tf-keras 2.21; see
examples/README.md) from this folder: ``python make_gelu.py``. Not part of the test suite.
"""

import os

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"

import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402


def convert() -> bytes:
    keras.utils.set_random_seed(1)
    inputs = keras.Input(batch_shape=(1, 4, 4, 4))
    exact = keras.layers.Dense(8, activation="gelu")(inputs)
    tanh_form = keras.layers.Dense(8, activation=lambda t: keras.activations.gelu(t, approximate=True))(exact)
    model = keras.Model(inputs, tanh_form)
    return tf.lite.TFLiteConverter.from_keras_model(model).convert()


if __name__ == "__main__":
    with open("gelu_fp32.tflite", "wb") as handle:
        handle.write(convert())
