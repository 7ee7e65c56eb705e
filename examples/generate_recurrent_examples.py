"""Regenerate the .tflite examples Keras exports the default way: LSTM and GRU layers, a dense autoencoder.

* ``lstm_kws_int8.tflite``: a keyword-spotting LSTM, 49 frames of 10 MFCC features, Keras'
  default ``LSTM(64)`` (no ``unroll``, no ``stateful``), then ``Dense(12)``; full-integer int8
  quantization: TFLite fuses the layer into ``UNIDIRECTIONAL_SEQUENCE_LSTM``, which npu-sim
  legalizes itself (49 cells on LiteRT's integer arithmetic);
* ``gru_kws_fp32.tflite``: the same task with Keras' default ``GRU(32)``, float32: TFLite
  writes it as a WHILE loop whose body reads the input sequence and the weights from outside.
* ``lstm_sequence_int8.tflite``: ``LSTM(24, return_sequences=True)`` over 20 frames of 13
  features, flattened into ``Dense(5)``; int8: the fused LSTM's whole output sequence is read.
* ``autoencoder_int8.tflite``: an MLPerf Tiny anomaly-detection autoencoder (640 inputs, four
  Dense(128) + BatchNorm + ReLU, an 8-wide bottleneck, four more, Dense(640)); int8.

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
    if layer == "sequence":
        return _sequence_model(tf_keras)
    if layer == "autoencoder":
        return _autoencoder(tf_keras)
    L = tf_keras.layers
    init = tf_keras.initializers
    inputs = L.Input(batch_shape=(1, FRAMES, FEATURES), name="mfcc")
    kernels = {"kernel_initializer": init.GlorotUniform(seed=base.SEED + 1),
               "recurrent_initializer": init.Orthogonal(seed=base.SEED + 2)}
    x = L.LSTM(64, **kernels, name="lstm")(inputs) if layer == "lstm" else L.GRU(32, **kernels, name="gru")(inputs)
    outputs = L.Dense(CLASSES, kernel_initializer=init.GlorotUniform(seed=base.SEED + 3), name="fc")(x)
    return tf_keras.Model(inputs, outputs, name=f"{layer}_kws")


def _sequence_model(tf_keras):
    L = tf_keras.layers
    init = tf_keras.initializers
    inputs = L.Input(batch_shape=(1, 20, 13), name="frames")
    x = L.LSTM(24, return_sequences=True, kernel_initializer=init.GlorotUniform(seed=base.SEED + 1),
               recurrent_initializer=init.Orthogonal(seed=base.SEED + 2), name="lstm")(inputs)
    outputs = L.Dense(5, kernel_initializer=init.GlorotUniform(seed=base.SEED + 3), name="fc")(L.Flatten()(x))
    return tf_keras.Model(inputs, outputs, name="lstm_sequence")


def _autoencoder(tf_keras):
    L = tf_keras.layers
    init = tf_keras.initializers
    x = inputs = L.Input(batch_shape=(1, 640), name="spectrogram")
    for k, width in enumerate((128, 128, 128, 128, 8, 128, 128, 128, 128)):
        x = L.Dense(width, kernel_initializer=init.GlorotUniform(seed=base.SEED + 10 + k))(x)
        x = L.ReLU()(L.BatchNormalization()(x))
    outputs = L.Dense(640, kernel_initializer=init.GlorotUniform(seed=base.SEED + 30))(x)
    return tf_keras.Model(inputs, outputs, name="autoencoder")


def _convert(model, int8: bool) -> bytes:
    import tensorflow as tf
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if int8:
        rng = np.random.default_rng(base.SEED + 4)
        shape = tuple(model.inputs[0].shape)

        def representative():
            for _ in range(32):
                yield [rng.normal(0, 1, size=shape).astype(np.float32)]

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    return converter.convert()


EXAMPLES = {"lstm_kws_int8": ("lstm", True), "gru_kws_fp32": ("gru", False),
            "lstm_sequence_int8": ("sequence", True), "autoencoder_int8": ("autoencoder", True)}


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
