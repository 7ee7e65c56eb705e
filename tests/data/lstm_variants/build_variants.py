"""Regenerate the LSTM variants the fused-LSTM tests check the matcher on (tf-keras -> TFLite
-> TOSA, as examples/generate_lstm_examples.py makes the examples).

* ``nobias_int8``: LSTM(24, use_bias=False), one step of 12 features;
* ``seq_fp32``: LSTM(20, return_sequences=True) over 3 steps, flattened into a Dense;
* ``batch2_int8``: a batch of 2 sequences, LSTM(16);
* ``relu_fp32``: LSTM(16, activation="relu"): the cell's tanh is a RELU (must not fuse);
* ``gru_int8``: a GRU(16) (no LSTM cell at all);
* ``stateless_int8``: a stateless LSTM(16) over 2 steps (the state starts at zero).

All stateful ones keep their state in TOSA variables; each ends with Dense(4). Run with the
TensorFlow venv: ``python tests/data/lstm_variants/build_variants.py --tosa-opt PATH``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "examples"))
import generate_examples as base  # noqa: E402
import generate_lstm_examples as lstm_examples  # noqa: E402

VARIANTS = ("nobias_int8", "seq_fp32", "batch2_int8", "relu_fp32", "gru_int8", "stateless_int8")


def _model(tf_keras, kind: str):
    layers = tf_keras.layers
    shapes = {"nobias": (1, 1, 12), "seq": (1, 3, 6), "batch2": (2, 1, 8), "relu": (1, 1, 8),
              "gru": (1, 1, 8), "stateless": (1, 2, 8)}
    x = inp = layers.Input(batch_shape=shapes[kind])
    if kind == "nobias":
        x = layers.LSTM(24, stateful=True, unroll=True, use_bias=False)(x)
    elif kind == "seq":
        x = layers.Flatten()(layers.LSTM(20, stateful=True, unroll=True, return_sequences=True)(x))
    elif kind == "relu":
        x = layers.LSTM(16, stateful=True, unroll=True, activation="relu")(x)
    elif kind == "gru":
        x = layers.GRU(16, stateful=True, unroll=True)(x)
    else:
        x = layers.LSTM(16, stateful=kind != "stateless", unroll=True)(x)
    return tf_keras.Model(inp, layers.Dense(4)(x)), shapes[kind]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    base.add_tool_options(parser)
    args = parser.parse_args(argv)
    tools = base.tools_from(args)
    import tf_keras
    for stem in VARIANTS:
        kind, precision = stem.rsplit("_", 1)
        base._seed_everything(base.SEED)
        model, shape = _model(tf_keras, kind)
        if precision == "int8":
            rng = np.random.default_rng(1)
            rep = [rng.normal(0, 1.0, size=shape).astype(np.float32) for _ in range(16)]
            tflite = base._to_int8_tflite(model, rep, resource_variables=True)
        else:
            tflite = lstm_examples._fp32_tflite(model)
        path, _ = base._tflite_to_tosa(tflite, HERE, stem, *tools)
        print(f"{path.name}: {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
