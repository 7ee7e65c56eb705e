"""Makes the one-layer .tflite models of the front door's activation fixes.

* ``softmax_scaled_int16``: ``Rescaling(16)`` then ``Softmax`` on (16, 16), 16x8. The logits
  span about 32 real units, past the [-10, 0] of LiteRT's int16 exp table: LiteRT saturates the
  table index, which the converter's CAST would wrap (:mod:`npu_sim.tosa.tflite.softmax`).
* ``relu_threshold_fp32``: ``ReLU(max_value=6, negative_slope=0.1, threshold=0.2)`` on
  (8, 8, 4), float. The converter writes a CAST from bool to fp32, which no TOSA 1.0 profile
  has (:mod:`npu_sim.tosa.tflite.bool_cast`).
* ``softsign_int8``: ``Activation('softsign')`` on (8, 8, 4), int8. The converter cannot
  legalize it (its int8 ABS); npu-sim's refusal quotes the converter's error.
* ``gelu_fp32``: ``Dense(8, activation="gelu")`` (the exact GELU, Keras' default) on (4, 4, 4),
  then a ``Dense(8)`` with the tanh approximation, float. The converter lowers both to the tanh
  form with a POW by 3 (:mod:`npu_sim.tosa.tflite.gelu`). (Two GELUs side by side are not fused
  into TFLite's GELU: TF keeps an ``Erfc`` only the flex delegate runs.)
* ``attention_int16``: ``MultiHeadAttention(num_heads=2, key_dim=8)`` self-attention over (8, 16),
  16x8 (no LayerNormalization: LiteRT aborts on a 16x8 one). The converter reshapes its score
  products' int48 accumulators, which TOSA 1.0 does not allow (:mod:`npu_sim.tosa.tflite.wide_reshape`).
* ``relu_requantized_int8``: ``hard_sigmoid`` of (8, 8, 4) concatenated with a ``Rescaling(3)``
  of it, int8: the hard sigmoid's closing RELU requantizes, which LiteRT rounds twice
  (:mod:`npu_sim.tosa.tflite.rounding`).
* ``lstm_unrolled_int16``: ``LSTM(8, return_sequences=True, unroll=True)`` over 3 steps of 4
  features, 16x8: its steps' FULLY_CONNECTEDs share one weight tensor and requantize differently
  (:mod:`npu_sim.tosa.tflite.rounding` matches each by its location); a Dense(128) head adds
  int48 biases MLIR writes in hex, 6 bytes each.
* ``resize_nearest_legacy_int8``: ``tf.compat.v1.image.resize_nearest_neighbor`` of (5, 7, 3) to
  (9, 13) and of that to (18, 26) (an FPN's top-down upsampling), int8: TFLite's legacy nearest
  mode takes the floor where the converter's TOSA RESIZE rounds
  (:mod:`npu_sim.tosa.tflite.resize_nearest`).
* ``conv_uint8_io``: ``Conv2D(4, 3, padding="same")`` on (8, 8, 3), int8 inside with ``uint8``
  inputs and outputs (``inference_input_type = inference_output_type = tf.uint8``, a camera
  model's export): TOSA holds them as int8 (:mod:`npu_sim.tosa.unsigned_io`).
* ``hard_swish_int16``: a MobileNetV3 stem, ``Conv2D(16, 3, strides=2)`` + BatchNormalization,
  hard swish (``x * hard_sigmoid(x)``), ``Conv2D(16, 1)`` + BatchNormalization, on (16, 16, 3),
  16x8: the hard sigmoid's rank-0 constant chain (CAST, LOGICAL_LEFT_SHIFT, RESCALE) and its
  requantizing RELU, whose multiplier LiteRT divides in float32.
* ``sigmoid_int16``, ``tanh_int16``: ``Activation('sigmoid')`` and ``Activation('tanh')`` on
  (256, 256), 16x8, calibrated on U(-6, 6) and U(-3, 3): one invocation feeds every int16
  value. The converter writes an interpolated 513-entry TABLE of the real function, which is
  not LiteRT's int16 arithmetic (:mod:`npu_sim.tosa.tflite.int16_activations`).
* ``sigmoid_pot_int16``: the sigmoid calibrated on U(-8, 8), so that its input scale is 2^-12,
  the power of two where LiteRT's default interpreter takes its fixed-point kernel instead.
* ``conv_sigmoid_int16``: ``Conv2D(2, 1, activation="sigmoid")`` on (8, 8, 4), 16x8.
* ``residual_add_int16``: a ResNet block on (16, 16, 16), 16x8: ``Conv2D(16, 3)`` + ReLU, two more
  and a residual ``Add`` + ReLU. The converter widens one input of the 16x8 ADD with a CAST and a
  LOGICAL_LEFT_SHIFT by 15 before its RESCALE, which the Ethos-U presets fold into the Add
  (:mod:`scheduler.passes.rescale_folding`).
* ``concat_requantized_int16``: ``Conv2D(16, 3)`` + ReLU of (16, 16, 8) concatenated with a
  3x3 ``MaxPooling2D`` of it, 16x8: TFLite's int16 CONCATENATION takes one scale, so the export
  requantizes the pooled input with a QUANTIZE, a lone RESCALE in TOSA (Vela: an average-pool no-op).

Each is exported the default way, full-integer with a seeded representative dataset of
U(-1, 1) where quantized (wider where :data:`INPUT_RANGES` says). Run with the examples'
TensorFlow venv (tensorflow 2.21, tf-keras 2.21; see examples/README.md) from this folder:
``python make_activations.py [stem ...]``.
Not part of the test suite.
"""

import os
import sys

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402


def _softmax_scaled() -> keras.Model:
    inputs = keras.Input((16, 16), batch_size=1)
    return keras.Model(inputs, keras.layers.Softmax()(keras.layers.Rescaling(16.0)(inputs)))


def _relu_threshold() -> keras.Model:
    inputs = keras.Input((8, 8, 4), batch_size=1)
    return keras.Model(inputs, keras.layers.ReLU(max_value=6.0, negative_slope=0.1, threshold=0.2)(inputs))


def _softsign() -> keras.Model:
    inputs = keras.Input((8, 8, 4), batch_size=1)
    return keras.Model(inputs, keras.layers.Activation("softsign")(inputs))


def _gelus() -> keras.Model:
    inputs = keras.Input((4, 4, 4), batch_size=1)
    exact = keras.layers.Dense(8, activation="gelu")(inputs)
    tanh_form = keras.layers.Dense(8, activation=lambda t: keras.activations.gelu(t, approximate=True))(exact)
    return keras.Model(inputs, tanh_form)


def _attention() -> keras.Model:
    inputs = keras.Input((8, 16), batch_size=1)
    return keras.Model(inputs, keras.layers.MultiHeadAttention(num_heads=2, key_dim=8)(inputs, inputs))


def _relu_requantized() -> keras.Model:
    inputs = keras.Input((8, 8, 4), batch_size=1)
    gate = keras.layers.Activation("hard_sigmoid")(inputs)
    return keras.Model(inputs, keras.layers.Concatenate()([gate, keras.layers.Rescaling(3.0)(inputs)]))


def _lstm_unrolled() -> keras.Model:
    inputs = keras.Input((3, 4), batch_size=1)
    steps = keras.layers.LSTM(8, return_sequences=True, unroll=True)(inputs)
    head = keras.layers.Dense(128, bias_initializer=keras.initializers.RandomUniform(-1.0, 1.0))
    return keras.Model(inputs, head(steps))


def _resize_nearest_legacy() -> keras.Model:
    inputs = keras.Input((5, 7, 3), batch_size=1)
    first = keras.layers.Lambda(lambda t: tf.compat.v1.image.resize_nearest_neighbor(t, (9, 13)))(inputs)
    second = keras.layers.Lambda(lambda t: tf.compat.v1.image.resize_nearest_neighbor(t, (18, 26)))(first)
    return keras.Model(inputs, second)


def _grouped_conv() -> keras.Model:
    inputs = keras.Input((6, 6, 8), batch_size=1)
    first = keras.layers.Conv2D(12, 3, padding="same", groups=4)(inputs)
    return keras.Model(inputs, keras.layers.Conv2D(8, 1, groups=2)(first))


def _argmin() -> keras.Model:
    inputs = keras.Input((10, 6, 4), batch_size=1)
    shifted = keras.layers.Rescaling(1.0, offset=0.25)(inputs)   # (a zero point of 0 the converter refuses)
    return keras.Model(inputs, keras.layers.Lambda(lambda t: tf.argmin(t, axis=-1, output_type=tf.int32))(shifted))


def _argmax_int64() -> keras.Model:
    inputs = keras.Input((12, 12, 3), batch_size=1)
    logits = keras.layers.Conv2D(5, 3, padding="same")(inputs)
    return keras.Model(inputs, keras.layers.Lambda(lambda t: tf.argmax(t, axis=-1))(logits))


def _conv() -> keras.Model:
    inputs = keras.Input((8, 8, 3), batch_size=1)
    return keras.Model(inputs, keras.layers.Conv2D(4, 3, padding="same")(inputs))


def _hard_swish() -> keras.Model:
    inputs = keras.Input((16, 16, 3), batch_size=1)
    stem = keras.layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(inputs)
    stem = keras.layers.BatchNormalization()(stem)
    swish = keras.layers.Multiply()([stem, keras.layers.Activation("hard_sigmoid")(stem)])
    return keras.Model(inputs, keras.layers.BatchNormalization()(keras.layers.Conv2D(16, 1, use_bias=False)(swish)))


def _residual_block() -> keras.Model:
    inputs = keras.Input((16, 16, 16), batch_size=1)
    stem = keras.layers.ReLU()(keras.layers.Conv2D(16, 3, padding="same")(inputs))
    hidden = keras.layers.ReLU()(keras.layers.Conv2D(16, 3, padding="same")(stem))
    branch = keras.layers.Conv2D(16, 3, padding="same")(hidden)
    return keras.Model(inputs, keras.layers.ReLU()(keras.layers.Add()([stem, branch])))


def _concat_requantized() -> keras.Model:
    inputs = keras.Input((16, 16, 8), batch_size=1)
    wide = keras.layers.Conv2D(16, 3, padding="same", activation="relu")(inputs)
    pooled = keras.layers.MaxPooling2D(3, strides=1, padding="same")(inputs)
    return keras.Model(inputs, keras.layers.Concatenate()([wide, pooled]))


def _activation(name: str, shape: tuple[int, ...] = (256, 256)) -> keras.Model:
    inputs = keras.Input(shape, batch_size=1)
    return keras.Model(inputs, keras.layers.Activation(name)(inputs))


def _conv_sigmoid() -> keras.Model:
    inputs = keras.Input((8, 8, 4), batch_size=1)
    return keras.Model(inputs, keras.layers.Conv2D(2, 1, activation="sigmoid")(inputs))


#: stem: (the Keras model, its activations: "int8", "int16" (16x8), "uint8" (int8 with uint8
#: inputs and outputs) or "fp32")
MODELS = {"softmax_scaled_int16": (_softmax_scaled, "int16"),
          "relu_threshold_fp32": (_relu_threshold, "fp32"),
          "softsign_int8": (_softsign, "int8"),
          "gelu_fp32": (_gelus, "fp32"),
          "attention_int16": (_attention, "int16"),
          "relu_requantized_int8": (_relu_requantized, "int8"),
          "hard_swish_int16": (_hard_swish, "int16"),
          "conv_uint8_io": (_conv, "uint8"),
          "sigmoid_int16": (lambda: _activation("sigmoid"), "int16"),
          "tanh_int16": (lambda: _activation("tanh"), "int16"),
          "sigmoid_pot_int16": (lambda: _activation("sigmoid"), "int16"),
          "conv_sigmoid_int16": (_conv_sigmoid, "int16"),
          "lstm_unrolled_int16": (_lstm_unrolled, "int16"),
          "resize_nearest_legacy_int8": (_resize_nearest_legacy, "int8"),
          "grouped_conv_int16": (_grouped_conv, "int16"),
          "argmin_int8": (_argmin, "int8"),
          "argmax_int64_int8": (_argmax_int64, "int8"),
          "argmax_int64_fp32": (_argmax_int64, "fp32"),
          "residual_add_int16": (_residual_block, "int16"),
          "concat_requantized_int16": (_concat_requantized, "int16")}
#: stem: the representative dataset's U(-r, r), where not 1
INPUT_RANGES = {"sigmoid_int16": 6.0, "tanh_int16": 3.0, "sigmoid_pot_int16": 8.0}


def convert(stem: str) -> bytes:
    build, kind = MODELS[stem]
    keras.utils.set_random_seed(1)
    model = build()
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if kind == "fp32":
        return converter.convert()
    shape = tuple(model.inputs[0].shape)
    rng = np.random.default_rng(0)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    r = INPUT_RANGES.get(stem, 1.0)
    converter.representative_dataset = lambda: ([rng.uniform(-r, r, size=shape).astype(np.float32)]
                                                for _ in range(8))
    if kind == "int16":
        sixteen_by_eight = tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
        converter.target_spec.supported_ops = [sixteen_by_eight]
        converter.inference_input_type = converter.inference_output_type = tf.int16
    else:
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        edge_type = tf.uint8 if kind == "uint8" else tf.int8
        converter.inference_input_type = converter.inference_output_type = edge_type
    return converter.convert()


if __name__ == "__main__":
    for name in sys.argv[1:] or MODELS:
        with open(f"{name}.tflite", "wb") as handle:
            handle.write(convert(name))
