"""Makes the Dense .tflite models the rounding tests check against LiteRT.

Keras' ``Dense(64, relu)`` then ``Dense(32)`` on 40 features, int8 with full-integer
post-training quantization on a seeded random representative dataset, exported the
default way (``dense_int8``: per-channel weights, TFLite's default), with per-tensor
weights (``dense_per_tensor_int8``) and with 16-bit activations (``dense_int16``, TFLite's
16x8 mode). LiteRT requantizes a FULLY_CONNECTED with one rounding and a 32-bit
multiplier (see :mod:`npu_sim.tosa.tflite.rounding`).

Run with the examples' TensorFlow venv (tensorflow 2.21, tf-keras 2.21; see
examples/README.md) from this folder: ``python make_dense.py``. Not part of the test suite.
"""

import os

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402


def convert(per_tensor: bool, int16: bool = False) -> bytes:
    keras.utils.set_random_seed(1)
    inputs = keras.Input((40,), batch_size=1)
    hidden = keras.layers.Dense(64, activation="relu")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(32)(hidden))
    rng = np.random.default_rng(0)
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([rng.normal(size=(1, 40)).astype(np.float32)] for _ in range(50))
    if int16:
        sixteen_by_eight = tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
        converter.target_spec.supported_ops = [sixteen_by_eight]
        converter.inference_input_type = converter.inference_output_type = tf.int16
    else:
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = converter.inference_output_type = tf.int8
    if per_tensor:
        converter._experimental_disable_per_channel_quantization_for_dense_layers = True
    return converter.convert()


if __name__ == "__main__":
    for name, per_tensor, int16 in (("dense_int8", False, False), ("dense_per_tensor_int8", True, False),
                                    ("dense_int16", False, True)):
        with open(f"{name}.tflite", "wb") as handle:
            handle.write(convert(per_tensor, int16))
