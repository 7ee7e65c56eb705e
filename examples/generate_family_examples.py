"""Regenerate the example models of the families issue 25 calibrates against Vela
(tf-keras -> TFLite -> TOSA, untrained seeded weights, as generate_cnn_examples.py makes its):

* ``kws_transformer_int8.tosa``: a keyword transformer (KWT-style): 49 MFCC frames embedded to
  64, two encoder blocks (2-head self-attention with its int8 softmax, LayerNorm, a 128-wide
  FFN), mean-pooled into 12 classes: MATMUL, TRANSPOSE, REDUCE_SUM/REDUCE_MAX, TABLE.
* ``mobilenet_v3_small_int8.tosa``: MobileNetV3-Small (width 0.35) on a 96x96x3 image with a
  10-class head: hard-swish and hard-sigmoid as elementwise arithmetic, squeeze-and-excite.
* ``efficientnet_swish_se_int8.tosa``: EfficientNet-style MBConv blocks on 64x64x3: swish
  (x * sigmoid(x): a TABLE and a MUL), squeeze-and-excite (a global pool, two 1x1
  convolutions, a sigmoid gate multiplied in).
* ``ds_cnn_kws_int16.tosa``: the DS-CNN keyword spotter with int16 activations and int8
  weights (TFLite's 16x8 quantization).
* ``unet_int8.tosa``: a small U-Net on 64x64x1: two encoder stages, a TRANSPOSE_CONV2D and a
  nearest-neighbour RESIZE upsampling with skip concatenations.

Each is written as the ``.tflite`` too (what Vela compiles in ``benchmarks/fidelity_vs_vela.py``'s
.tflite rows, and what npu-sim reads with each operator's TFLite source: see
``npu_support.source_operators``).

Run with the TensorFlow venv: ``python examples/generate_family_examples.py --tosa-opt PATH``
(``--only NAME ...`` for some of them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate_examples as base  # noqa: E402


def _kws_transformer():
    import tf_keras
    layers = tf_keras.layers
    x = inp = layers.Input(batch_shape=(1, 49, 10), name="mfcc")
    x = layers.Dense(64)(x)
    for _ in range(2):
        attended = layers.MultiHeadAttention(num_heads=2, key_dim=32)(x, x)
        x = layers.LayerNormalization()(x + attended)
        hidden = layers.Dense(128, activation="relu")(x)
        x = layers.LayerNormalization()(x + layers.Dense(64)(hidden))
    x = layers.GlobalAveragePooling1D()(x)
    return tf_keras.Model(inp, layers.Dense(12)(x)), (1, 49, 10)


def _mobilenet_v3_small():
    import tf_keras
    image = tf_keras.Input(batch_shape=(1, 96, 96, 3), name="image")
    body = tf_keras.applications.MobileNetV3Small(input_tensor=image, alpha=0.35, weights=None, include_top=False,
                                                  include_preprocessing=False, pooling="avg")
    out = tf_keras.layers.Dense(10)(body.output)
    return tf_keras.Model(image, out), (1, 96, 96, 3)


def _mbconv(x, filters: int, expand: int, stride: int):
    import tf_keras
    layers = tf_keras.layers
    channels = x.shape[-1]
    y = layers.Conv2D(channels * expand, 1, use_bias=False)(x)
    y = layers.BatchNormalization()(y)
    y = layers.Activation("swish")(y)
    y = layers.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False)(y)
    y = layers.BatchNormalization()(y)
    y = layers.Activation("swish")(y)
    squeezed = layers.GlobalAveragePooling2D(keepdims=True)(y)
    squeezed = layers.Conv2D(max(4, channels // 4), 1, activation="swish")(squeezed)
    squeezed = layers.Conv2D(channels * expand, 1, activation="sigmoid")(squeezed)
    y = layers.Multiply()([y, squeezed])
    y = layers.Conv2D(filters, 1, use_bias=False)(y)
    y = layers.BatchNormalization()(y)
    return layers.Add()([x, y]) if stride == 1 and filters == channels else y


def _efficientnet_swish_se():
    import tf_keras
    layers = tf_keras.layers
    x = inp = layers.Input(batch_shape=(1, 64, 64, 3), name="image")
    x = layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("swish")(x)
    for filters, expand, stride in ((16, 1, 1), (24, 4, 2), (24, 4, 1), (40, 4, 2), (40, 4, 1)):
        x = _mbconv(x, filters, expand, stride)
    x = layers.Conv2D(128, 1, activation="swish")(x)
    x = layers.GlobalAveragePooling2D()(x)
    return tf_keras.Model(inp, layers.Dense(10)(x)), (1, 64, 64, 3)


def _ds_cnn():
    import tf_keras
    return base.build_ds_cnn(tf_keras), (1, *base.KWS_SHAPE)


def _unet():
    import tf_keras
    layers = tf_keras.layers

    def conv(x, filters):
        return layers.Conv2D(filters, 3, padding="same", activation="relu")(x)

    inp = layers.Input(batch_shape=(1, 64, 64, 1), name="image")
    e1 = conv(inp, 8)
    e2 = conv(layers.MaxPooling2D()(e1), 16)
    bottom = conv(layers.MaxPooling2D()(e2), 32)
    d2 = layers.Conv2DTranspose(16, 3, strides=2, padding="same", activation="relu")(bottom)
    d2 = conv(layers.Concatenate()([d2, e2]), 16)
    d1 = layers.UpSampling2D(interpolation="nearest")(d2)
    d1 = conv(layers.Concatenate()([d1, e1]), 8)
    return tf_keras.Model(inp, layers.Conv2D(1, 1)(d1)), (1, 64, 64, 1)


#: stem -> (builder, int16 activations)
MODELS = {"kws_transformer_int8": (_kws_transformer, False),
          "mobilenet_v3_small_int8": (_mobilenet_v3_small, False),
          "efficientnet_swish_se_int8": (_efficientnet_swish_se, False),
          "ds_cnn_kws_int16": (_ds_cnn, True),
          "unet_int8": (_unet, False)}


def _to_tflite(model, rep: list[np.ndarray], int16: bool) -> bytes:
    """Full-integer TFLite: int8, or int16 activations with int8 weights (16x8)."""
    if not int16:
        return base._to_int8_tflite(model, rep, resource_variables=False)
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([b] for b in rep)
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    converter.inference_input_type = tf.int16
    converter.inference_output_type = tf.int16
    return converter.convert()


def make(out_dir: Path, tools, stem: str) -> Path:
    build, int16 = MODELS[stem]
    base._seed_everything(base.SEED)
    model, shape = build()
    rng = np.random.default_rng(base.SEED + 500)
    rep = [rng.uniform(-1.0, 1.0, size=shape).astype(np.float32) for _ in range(8)]
    tflite = _to_tflite(model, rep, int16)
    (out_dir / f"{stem}.tflite").write_bytes(tflite)   # what Vela compiles for the .tflite comparison
    path, mlir = base._tflite_to_tosa(tflite, out_dir, stem, *tools)
    print(f"  {path.name}: {path.stat().st_size} bytes, tosa ops: {', '.join(base._tosa_ops_in_mlir(mlir))}")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    ap.add_argument("--only", nargs="+", choices=sorted(MODELS), help="make these only")
    base.add_tool_options(ap)
    args = ap.parse_args(argv)
    tools = base.tools_from(args)
    args.out.mkdir(parents=True, exist_ok=True)
    for stem in args.only or MODELS:
        make(args.out, tools, stem)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
