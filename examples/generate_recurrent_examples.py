"""Regenerate the recurrent .tflite examples: Keras LSTM and GRU layers exported the default way.

* ``lstm_kws_int8.tflite``: a keyword-spotting LSTM, 49 frames of 10 MFCC features, Keras'
  default ``LSTM(64)`` (no ``unroll``, no ``stateful``), then ``Dense(12)``; full-integer int8
  quantization: TFLite fuses the layer into ``UNIDIRECTIONAL_SEQUENCE_LSTM``, which npu-sim
  legalizes itself (49 cells on LiteRT's integer arithmetic);
* ``gru_kws_fp32.tflite``: the same task with Keras' default ``GRU(32)``, float32: TFLite
  writes it as a WHILE loop whose body reads the input sequence and the weights from outside.

Untrained (seeded initialisers); int8 quantized with a seeded random representative dataset.
Both files are kept as .tflite: npu-sim reads them directly (``npu-sim run M.tflite``).
Run with the TensorFlow venv (tensorflow 2.21, tf-keras 2.21)::

    python examples/generate_recurrent_examples.py
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate_examples as base  # noqa: E402

FRAMES, FEATURES, CLASSES = 49, 10, 12


def _model(tf_keras, layer: str):
    L = tf_keras.layers
    init = tf_keras.initializers
    inputs = L.Input(batch_shape=(1, FRAMES, FEATURES), name="mfcc")
    kernels = {"kernel_initializer": init.GlorotUniform(seed=base.SEED + 1),
               "recurrent_initializer": init.Orthogonal(seed=base.SEED + 2)}
    x = L.LSTM(64, **kernels, name="lstm")(inputs) if layer == "lstm" else L.GRU(32, **kernels, name="gru")(inputs)
    outputs = L.Dense(CLASSES, kernel_initializer=init.GlorotUniform(seed=base.SEED + 3), name="fc")(x)
    return tf_keras.Model(inputs, outputs, name=f"{layer}_kws")


def _convert(model, int8: bool) -> bytes:
    import tensorflow as tf
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if int8:
        rng = np.random.default_rng(base.SEED + 4)

        def representative():
            for _ in range(32):
                yield [rng.normal(0, 1, size=(1, FRAMES, FEATURES)).astype(np.float32)]

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    return converter.convert()


EXAMPLES = {"lstm_kws_int8": ("lstm", True), "gru_kws_fp32": ("gru", False)}


def make(stem: str, out_dir: Path) -> Path:
    import tf_keras
    layer, int8 = EXAMPLES[stem]
    base._seed_everything(base.SEED)
    path = out_dir / f"{stem}.tflite"
    path.write_bytes(_convert(_model(tf_keras, layer), int8))
    print(f"  {path.name}: {path.stat().st_size} bytes")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--only", choices=sorted(EXAMPLES), action="append")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for stem in args.only or sorted(EXAMPLES):
        make(stem, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
