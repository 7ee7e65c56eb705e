"""Regenerate the extra LSTM examples (tf-keras -> TFLite -> TOSA), the way
:mod:`generate_examples` makes ``lstm_stateful_int8.tosa``:

* ``lstm_step64_int8.tosa``: one stateful LSTM of 64 units, one time step of 16 features
  per invocation, int8 (the streaming model the fused-LSTM benchmarks time);
* ``lstm_stacked_int8.tosa``: two stacked stateful LSTM layers of 128 units, one time
  step per invocation (a streaming keyword/sensor model), int8, state in TOSA variables;
* ``lstm_unrolled8_int8.tosa``: one stateful LSTM of 32 units unrolled over 8 time steps
  per invocation (the same weights used 8 times), int8;
* ``lstm_stateful_fp32.tosa``: one stateful LSTM of 32 units, one step, fp32.

Untrained (seeded initialisers): the examples exist for their structure and sizes.
Run with the TensorFlow venv (tensorflow, tf-keras, tosa-converter-for-tflite)::

    python examples/generate_lstm_examples.py --tosa-opt .venv/bin/tosa-opt
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate_examples as base  # noqa: E402


def _model(tf_keras, steps: int, features: int, layers: list[int], outputs: int, name: str):
    L = tf_keras.layers
    init = tf_keras.initializers
    x = inp = L.Input(batch_shape=(1, steps, features), name="seq")
    for i, units in enumerate(layers):
        x = L.LSTM(units, stateful=True, unroll=True, return_sequences=i + 1 < len(layers),
                   kernel_initializer=init.GlorotUniform(seed=base.SEED + 10 * i + 1),
                   recurrent_initializer=init.Orthogonal(seed=base.SEED + 10 * i + 2),
                   bias_initializer="zeros", name=f"lstm{i}")(x)
    out = L.Dense(outputs, kernel_initializer=init.GlorotUniform(seed=base.SEED + 99), name="fc")(x)
    return tf_keras.Model(inp, out, name=name)


def _fp32_tflite(model) -> bytes:
    import tensorflow as tf
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.experimental_enable_resource_variables = True
    return converter.convert()


EXAMPLES = {   # stem: (steps, features, layer units, outputs, int8)
    "lstm_step64_int8": (1, 16, [64], 4, True),
    "lstm_stacked_int8": (1, 16, [128, 128], 8, True),
    "lstm_unrolled8_int8": (8, 8, [32], 4, True),
    "lstm_stateful_fp32": (1, 8, [32], 4, False),
}


def make(stem: str, out_dir: Path, tools) -> Path:
    import tf_keras
    steps, features, layers, outputs, int8 = EXAMPLES[stem]
    base._seed_everything(base.SEED)
    model = _model(tf_keras, steps, features, layers, outputs, stem)
    model.reset_states()
    if int8:
        rng = np.random.default_rng(base.SEED + 200)
        rep = [rng.normal(0, 1.0, size=(1, steps, features)).astype(np.float32) for _ in range(32)]
        tfl = base._to_int8_tflite(model, rep, resource_variables=True)
    else:
        tfl = _fp32_tflite(model)
    path, mlir = base._tflite_to_tosa(tfl, out_dir, stem, *tools)
    ops = base._tosa_ops_in_mlir(mlir)
    print(f"  {path.name}: {path.stat().st_size} bytes, tosa ops: {', '.join(ops)}")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    base.add_tool_options(ap)
    ap.add_argument("--only", choices=sorted(EXAMPLES), action="append")
    args = ap.parse_args(argv)
    tools = base.tools_from(args)
    for stem in args.only or sorted(EXAMPLES):
        make(stem, args.out, tools)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
