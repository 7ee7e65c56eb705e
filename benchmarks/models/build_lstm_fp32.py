#!/usr/bin/env python3
"""Build ``lstm_stateful_fp32.tosa``: the example LSTM of examples/generate_examples.py, in fp32.

The same tf-keras stateful, unrolled LSTM (4 steps, 8 features, 16 units, Dense 4) and
the same toolchain (TFLiteConverter with resource variables -> tosa-converter-for-tflite
-> tosa-opt), without quantization: the float counterpart of examples/lstm_stateful_int8.tosa,
for the executor benchmark (benchmarks/bench_executor.py). Needs TensorFlow (see
examples/README.md for the separate venv); the benchmark does not.

Usage: python benchmarks/models/build_lstm_fp32.py [--converter PATH] [--tosa-opt PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "examples"))

import generate_examples as gen  # noqa: E402


def _to_fp32_tflite(model) -> bytes:
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    # LSTM state as TFLite resource variables: they legalize to tosa.variable*.
    converter.experimental_enable_resource_variables = True
    return converter.convert()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--converter", help="path of tosa-converter-for-tflite")
    ap.add_argument("--tosa-opt", help="path of tosa-opt (tosa-tools)")
    args = ap.parse_args(argv)
    tools = (gen._find_tool("tosa-converter-for-tflite", args.converter, "TOSA_CONVERTER"),
             gen._find_tool("tosa-opt", args.tosa_opt, "TOSA_OPT"))
    import tf_keras

    gen._seed_everything(gen.SEED)
    model = gen.build_stateful_lstm(tf_keras)
    model.reset_states()
    path, mlir = gen._tflite_to_tosa(_to_fp32_tflite(model), HERE, "lstm_stateful_fp32", *tools)
    (HERE / "lstm_stateful_fp32.mlir").unlink(missing_ok=True)  # the .tosa is what we keep
    ops = gen._tosa_ops_in_mlir(mlir)
    print(f"{path.name}: {path.stat().st_size} bytes, tosa ops: {', '.join(ops)}")
    missing = {"variable", "variable_read", "variable_write"} - set(ops)
    if missing:
        raise SystemExit(f"error: LSTM state did not become TOSA variables (missing {missing})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
