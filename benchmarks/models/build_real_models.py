#!/usr/bin/env python3
"""Build the real models the speed benchmarks compare against Vela (not committed: tens of MB).

tf-keras -> TFLite int8 -> tosa-converter-for-tflite -> tosa-opt, untrained seeded weights,
as examples/generate_examples.py makes the examples. Writes ``benchmarks/models/real/``
(gitignored; ``bench_vs_vela_wall.py``, ``bench_run_vs_vela.py`` and ``bench_sweep.py`` use
what is there), each as ``NAME.tosa`` and as the int8 ``NAME.tflite`` it was converted from:

* ``mobilenet_v2_100_224_int8``: MobileNetV2 1.0 on 224x224x3, 1000 classes;
* ``resnet50_int8``: ResNet-50 on 224x224x3, 1000 classes;
* ``efficientnet_b0_int8``: EfficientNet-B0 on 224x224x3, 1000 classes;
* ``transformer_int8``: four encoder blocks (4-head self-attention, d=128, FFN 256) over
  64 tokens, mean-pooled into 10 classes;
* ``lstm_unrolled49_int8`` / ``gru_unrolled49_int8``: a stateful, unrolled LSTM(64) / GRU(64)
  over 49 frames of 10 features (a keyword-spotting front end), then Dense(12); some 3,000
  to 3,700 TOSA operators each.

The image models have no softmax head (Vela cannot put its REDUCE_MAX on a U55); the
transformer's attention needs one, so Vela runs it on the U85 only.

Usage (the TensorFlow venv): python benchmarks/models/build_real_models.py [--only NAME ...]
[--converter PATH] [--tosa-opt PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "real"
sys.path.insert(0, str(HERE.parents[1] / "examples"))

import generate_examples as gen  # noqa: E402


def _image_model(name: str):
    import tf_keras

    image = tf_keras.Input(batch_shape=(1, 224, 224, 3))
    apps = tf_keras.applications
    head = {"weights": None, "classifier_activation": None}   # no softmax: Vela runs them on a U55 too
    build = {"mobilenet_v2_100_224_int8": lambda: apps.MobileNetV2(input_tensor=image, **head),
             "resnet50_int8": lambda: apps.ResNet50(input_tensor=image, **head),
             "efficientnet_b0_int8": lambda: apps.EfficientNetB0(input_tensor=image, **head)}[name]
    return build(), (1, 224, 224, 3)


def _transformer():
    import tf_keras

    layers = tf_keras.layers
    x = inp = layers.Input(batch_shape=(1, 64, 128))
    for _ in range(4):
        attended = layers.MultiHeadAttention(num_heads=4, key_dim=32)(x, x)
        x = layers.LayerNormalization()(x + attended)
        hidden = layers.Dense(256, activation="relu")(x)
        x = layers.LayerNormalization()(x + layers.Dense(128)(hidden))
    x = layers.GlobalAveragePooling1D()(x)
    return tf_keras.Model(inp, layers.Dense(10)(x)), (1, 64, 128)


def _recurrent(cell: str):
    import tf_keras

    layers = tf_keras.layers
    x = inp = layers.Input(batch_shape=(1, 49, 10))
    x = (layers.LSTM if cell == "lstm" else layers.GRU)(64, unroll=True, stateful=True)(x)
    return tf_keras.Model(inp, layers.Dense(12)(x)), (1, 49, 10)


#: the recurrent ones keep their state in TOSA variables (as a streaming model does)
STATEFUL = ("lstm_unrolled49_int8", "gru_unrolled49_int8")

MODELS = {
    "mobilenet_v2_100_224_int8": lambda: _image_model("mobilenet_v2_100_224_int8"),
    "resnet50_int8": lambda: _image_model("resnet50_int8"),
    "efficientnet_b0_int8": lambda: _image_model("efficientnet_b0_int8"),
    "transformer_int8": _transformer,
    "lstm_unrolled49_int8": lambda: _recurrent("lstm"),
    "gru_unrolled49_int8": lambda: _recurrent("gru"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(MODELS), help="build these only")
    gen.add_tool_options(parser)
    args = parser.parse_args(argv)
    tools = gen.tools_from(args)
    OUT.mkdir(exist_ok=True)
    for stem in args.only or MODELS:
        gen._seed_everything(gen.SEED)
        model, shape = MODELS[stem]()
        rng = np.random.default_rng(gen.SEED + 400)
        rep = [rng.uniform(-1.0, 1.0, size=shape).astype(np.float32) for _ in range(4)]
        tflite = gen._to_int8_tflite(model, rep, resource_variables=stem in STATEFUL)
        (OUT / f"{stem}.tflite").write_bytes(tflite)   # (bench_run_vs_vela.py runs both forms)
        path, _ = gen._tflite_to_tosa(tflite, OUT, stem, *tools)
        print(f"{path.name}: {path.stat().st_size} bytes", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
