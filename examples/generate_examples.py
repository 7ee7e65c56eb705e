#!/usr/bin/env python3
"""Regenerate the bundled *real* TOSA example models from TensorFlow Lite.

Usage::

    python examples/generate_examples.py --out examples/

Produces (deterministically, fixed seeds):

* ``ds_cnn_kws_int8.tosa`` (+ ``.mlir``): int8 keyword-spotting DS-CNN in the
  style of the ARM ML-zoo "DS-CNN small" (MFCC input 1x49x10x1, conv 10x4/2
  with 64 channels, 4 depthwise-separable blocks, global average pool, dense
  to 12 classes, softmax).
* ``lstm_stateful_int8.tosa`` (+ ``.mlir``): tf-keras stateful, unrolled LSTM
  (batch 1, 4 timesteps x 8 features, 16 units) followed by a Dense layer.  Its
  recurrent state (h, c) becomes TOSA variables.

Pipeline for each model::

    tf_keras model --(TFLiteConverter, full-integer PTQ)--> M.tflite
    tosa-converter-for-tflite M.tflite --text -o M.mlir
    tosa-opt '--tosa-serialize=tosa-flatbuffer-filename=M.tosa' M.mlir -o /dev/null

Heavy dependencies -- these belong to the optional extra ``examples`` of
npu-sim's pyproject and are NEVER needed by the test suite (the generated
files are committed)::

    tensorflow==2.21.0          (tf-keras requires the full ``tensorflow``
                                 package anyway; tensorflow-cpu adds nothing)
    tf-keras==2.21.0            (Keras 2 API, needed for stateful LSTM export)
    tosa-converter-for-tflite==2026.2.0

Plus ``tosa-opt`` from ``tosa-tools==2026.8.0``, which must live in a
*different* virtualenv: tosa-tools pins ``flatbuffers==25.2.10`` while
tensorflow 2.21 requires ``flatbuffers>=25.9.23`` (so tosa-tools must not be
in the same extra as the packages above).  Point ``--tosa-opt`` (or
``$TOSA_OPT``) at that venv's ``bin/tosa-opt``.  ``tosa-converter-for-tflite``
is searched for on ``$PATH`` and next to the running interpreter (override
with ``--converter`` or ``$TOSA_CONVERTER``).

Determinism: fixed seeds + TF op determinism give byte-identical .tflite,
.mlir and .tosa on repeated runs on the same machine; float training on a
different CPU/TF build may produce slightly different weights.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Quiet TensorFlow and keep it deterministic / single-device before import.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_DETERMINISTIC_OPS", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402

SEED = 1234
MLIR_KEEP_LIMIT = 2 * 1024 * 1024  # keep the .mlir text only below ~2 MB

# --------------------------------------------------------------------------
# tool discovery
# --------------------------------------------------------------------------


def _find_tool(name: str, explicit: str | None, env_var: str) -> str:
    candidates = []
    if explicit:
        candidates.append(explicit)
    if os.environ.get(env_var):
        candidates.append(os.environ[env_var])
    found = shutil.which(name)
    if found:
        candidates.append(found)
    candidates.append(str(Path(sys.executable).parent / name))
    for cand in candidates:
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    raise SystemExit(
        f"error: cannot find '{name}'; pass its path explicitly or set ${env_var}"
    )


def add_tool_options(parser: argparse.ArgumentParser) -> None:
    """The ``--tosa-opt`` and ``--converter`` options every generator takes."""
    parser.add_argument("--tosa-opt", help="path to tosa-opt (else $TOSA_OPT, $PATH)")
    parser.add_argument("--converter", help="path to tosa-converter-for-tflite (else $TOSA_CONVERTER, $PATH)")


def tools_from(args: argparse.Namespace) -> tuple[str, str]:
    """``(converter, tosa-opt)`` as :func:`add_tool_options` named them, found on the machine."""
    return (_find_tool("tosa-converter-for-tflite", args.converter, "TOSA_CONVERTER"),
            _find_tool("tosa-opt", args.tosa_opt, "TOSA_OPT"))


def _run(cmd: list[str], cwd: str | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"error: command failed ({proc.returncode}): {' '.join(cmd)}")


# --------------------------------------------------------------------------
# determinism
# --------------------------------------------------------------------------


def _seed_everything(seed: int) -> None:
    import tensorflow as tf
    import tf_keras

    random.seed(seed)
    np.random.seed(seed)
    tf.random.set_seed(seed)
    tf_keras.utils.set_random_seed(seed)
    try:
        tf.config.experimental.enable_op_determinism()
    except Exception:  # pragma: no cover - older TF
        pass


# --------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------

KWS_CLASSES = 12
KWS_SHAPE = (49, 10, 1)  # MFCC frames x coefficients x 1


def _synthetic_kws_data(rng: np.random.Generator, n: int):
    """Class-dependent MFCC-like blobs: each class owns a fixed random template
    (smoothed along time) plus noise, so a few training steps learn something
    and intermediate activations are far from degenerate."""
    templ_rng = np.random.default_rng(SEED + 7)
    templates = templ_rng.normal(0.0, 1.0, size=(KWS_CLASSES,) + KWS_SHAPE)
    kernel = np.ones(5) / 5.0
    templates = np.apply_along_axis(
        lambda v: np.convolve(v, kernel, mode="same"), 1, templates
    )
    labels = rng.integers(0, KWS_CLASSES, size=n)
    x = templates[labels] * 2.0 + rng.normal(0.0, 0.7, size=(n,) + KWS_SHAPE)
    return x.astype(np.float32), labels.astype(np.int32)


def build_ds_cnn(tf_keras):
    L = tf_keras.layers
    init = tf_keras.initializers
    seed = iter(range(SEED, SEED + 1000))

    def kinit():
        return init.GlorotUniform(seed=next(seed))

    inp = L.Input(shape=KWS_SHAPE, batch_size=1, name="mfcc")
    x = L.Conv2D(64, (10, 4), strides=(2, 2), padding="same", use_bias=False,
                 kernel_initializer=kinit(), name="conv_1")(inp)
    x = L.BatchNormalization(name="conv_1_bn")(x)
    x = L.ReLU(name="conv_1_relu")(x)
    for i in range(1, 5):
        x = L.DepthwiseConv2D((3, 3), padding="same", use_bias=False,
                              depthwise_initializer=kinit(), name=f"dw_{i}")(x)
        x = L.BatchNormalization(name=f"dw_{i}_bn")(x)
        x = L.ReLU(name=f"dw_{i}_relu")(x)
        x = L.Conv2D(64, (1, 1), padding="same", use_bias=False,
                     kernel_initializer=kinit(), name=f"pw_{i}")(x)
        x = L.BatchNormalization(name=f"pw_{i}_bn")(x)
        x = L.ReLU(name=f"pw_{i}_relu")(x)
    x = L.GlobalAveragePooling2D(name="avg_pool")(x)
    x = L.Dense(KWS_CLASSES, kernel_initializer=kinit(), name="fc")(x)
    out = L.Softmax(name="softmax")(x)
    return tf_keras.Model(inp, out, name="ds_cnn_kws")


LSTM_T, LSTM_F, LSTM_UNITS, LSTM_OUT = 4, 8, 16, 4


def build_stateful_lstm(tf_keras):
    L = tf_keras.layers
    init = tf_keras.initializers
    inp = L.Input(batch_shape=(1, LSTM_T, LSTM_F), name="seq")
    x = L.LSTM(
        LSTM_UNITS,
        stateful=True,
        unroll=True,
        return_sequences=False,
        kernel_initializer=init.GlorotUniform(seed=SEED + 1),
        recurrent_initializer=init.Orthogonal(seed=SEED + 2),
        bias_initializer="zeros",
        name="lstm",
    )(inp)
    out = L.Dense(LSTM_OUT, kernel_initializer=init.GlorotUniform(seed=SEED + 3),
                  name="fc")(x)
    return tf_keras.Model(inp, out, name="lstm_stateful")


# --------------------------------------------------------------------------
# conversion
# --------------------------------------------------------------------------


def _to_int8_tflite(model, rep_batches, resource_variables: bool) -> bytes:
    import tensorflow as tf

    def representative_dataset():
        for b in rep_batches:
            yield [b]

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative_dataset
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    if resource_variables:
        # Keep the LSTM state as TFLite resource variables (VAR_HANDLE /
        # READ_VARIABLE / ASSIGN_VARIABLE); they legalize to tosa.variable*.
        converter.experimental_enable_resource_variables = True
        # ...and quantize the variables themselves (int8 state) instead of
        # keeping float32 state wrapped in QUANTIZE/DEQUANTIZE.
        converter._experimental_variable_quantization = True
    return converter.convert()


_IDENTITY_CAST = re.compile(
    r"^\s*(%[\w.$-]+) = builtin\.unrealized_conversion_cast (%[\w.$-]+) : "
    r"(\S+) to (\S+)\s*$"
)


def _drop_identity_casts(mlir_text: str) -> tuple[str, int]:
    """Remove ``builtin.unrealized_conversion_cast`` ops whose source and result
    types are identical, forwarding the operand to all uses.

    tosa-converter-for-tflite 2026.2.0 leaves such casts around quantized
    resource variables (residue of stripping the quant types);
    ``tosa-serialize`` refuses them and tosa-opt ships no canonicalizer, so we
    do this one trivially-safe rewrite on the text.
    """
    renames: dict[str, str] = {}
    kept = []
    for line in mlir_text.splitlines(keepends=True):
        m = _IDENTITY_CAST.match(line)
        if m and m.group(3) == m.group(4):
            src = m.group(2)
            renames[m.group(1)] = renames.get(src, src)
            continue
        kept.append(line)
    text = "".join(kept)
    if renames:
        pat = re.compile(r"(%[\w.$-]+)")
        text = pat.sub(lambda m: renames.get(m.group(1), m.group(1)), text)
    if "unrealized_conversion_cast" in text:
        raise SystemExit("error: non-identity unrealized_conversion_cast left in MLIR")
    return text, len(renames)


def _tflite_to_tosa(tflite_bytes: bytes, out_dir: Path, stem: str,
                    converter_bin: str, tosa_opt: str) -> tuple[Path, str]:
    tosa_path = out_dir / f"{stem}.tosa"
    mlir_path = out_dir / f"{stem}.mlir"
    with tempfile.TemporaryDirectory() as td:
        tfl = Path(td) / f"{stem}.tflite"
        tfl.write_bytes(tflite_bytes)
        tmp_mlir = Path(td) / f"{stem}.mlir"
        _run([converter_bin, str(tfl), "--text", "-o", str(tmp_mlir)])
        mlir_text, n_casts = _drop_identity_casts(tmp_mlir.read_text())
        if n_casts:
            print(f"  ({stem}: dropped {n_casts} identity unrealized_conversion_cast)")
            tmp_mlir.write_text(mlir_text)
        tmp_tosa = Path(td) / f"{stem}.tosa"
        # Run with relative paths from inside the temp dir: tosa-serialize
        # records each op's MLIR location (file:line:col) in the flatbuffer, so
        # an absolute temp path would make the output non-reproducible.  This
        # way the locations point at lines of the kept ``{stem}.mlir``.
        _run([tosa_opt, f"--tosa-serialize=tosa-flatbuffer-filename={tmp_tosa.name}",
              tmp_mlir.name, "-o", os.devnull], cwd=td)
        shutil.copyfile(tmp_tosa, tosa_path)
    if len(mlir_text.encode()) <= MLIR_KEEP_LIMIT:
        mlir_path.write_text(mlir_text)
    elif mlir_path.exists():
        mlir_path.unlink()
    return tosa_path, mlir_text


def _tosa_ops_in_mlir(mlir_text: str) -> list[str]:
    return sorted(set(re.findall(r"(?<![!\w.])\"?tosa\.([a-z_0-9]+)", mlir_text)))


# --------------------------------------------------------------------------
# the two examples
# --------------------------------------------------------------------------


def make_ds_cnn(out_dir: Path, tools, train_steps: int, keep_tflite: bool) -> Path:
    import tf_keras

    _seed_everything(SEED)
    model = build_ds_cnn(tf_keras)
    rng = np.random.default_rng(SEED)
    if train_steps > 0:
        x, y = _synthetic_kws_data(rng, 32 * train_steps)
        model.compile(optimizer=tf_keras.optimizers.Adam(1e-3),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        model.fit(x, y, batch_size=1, epochs=1, shuffle=False, verbose=0)
    # Representative dataset: seeded random data (half model-distribution-like,
    # half plain gaussian noise so ranges are not too tight).
    rep_rng = np.random.default_rng(SEED + 100)
    xr, _ = _synthetic_kws_data(rep_rng, 32)
    rep = [xr[i:i + 1] for i in range(32)]
    rep += [rep_rng.normal(0, 2.0, size=(1,) + KWS_SHAPE).astype(np.float32)
            for _ in range(32)]
    tfl = _to_int8_tflite(model, rep, resource_variables=False)
    if keep_tflite:
        (out_dir / "ds_cnn_kws_int8.tflite").write_bytes(tfl)
    path, mlir = _tflite_to_tosa(tfl, out_dir, "ds_cnn_kws_int8", *tools)
    print(f"  {path.name}: {path.stat().st_size} bytes, tosa ops: "
          f"{', '.join(_tosa_ops_in_mlir(mlir))}")
    return path


def make_lstm(out_dir: Path, tools, train_steps: int, keep_tflite: bool) -> Path:
    import tf_keras

    _seed_everything(SEED)
    model = build_stateful_lstm(tf_keras)
    rng = np.random.default_rng(SEED + 1)
    if train_steps > 0:
        # Toy task: predict per-feature-group running means of the sequence.
        x = rng.normal(0, 1.0, size=(train_steps, LSTM_T, LSTM_F)).astype(np.float32)
        y = x.reshape(train_steps, LSTM_T, LSTM_OUT, -1).mean(axis=(1, 3))
        model.compile(optimizer=tf_keras.optimizers.Adam(1e-2), loss="mse")
        model.fit(x, y.astype(np.float32), batch_size=1, epochs=1, shuffle=False,
                  verbose=0)
    # Leave the recurrent state at zero for export.
    model.reset_states()
    rep_rng = np.random.default_rng(SEED + 200)
    rep = [rep_rng.normal(0, 1.0, size=(1, LSTM_T, LSTM_F)).astype(np.float32)
           for _ in range(64)]
    tfl = _to_int8_tflite(model, rep, resource_variables=True)
    if keep_tflite:
        (out_dir / "lstm_stateful_int8.tflite").write_bytes(tfl)
    path, mlir = _tflite_to_tosa(tfl, out_dir, "lstm_stateful_int8", *tools)
    ops = _tosa_ops_in_mlir(mlir)
    print(f"  {path.name}: {path.stat().st_size} bytes, tosa ops: {', '.join(ops)}")
    missing = {"variable", "variable_read", "variable_write"} - set(ops)
    if missing:
        raise SystemExit(
            f"error: LSTM state did not become TOSA variables (missing {missing})"
        )
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent,
                    help="output directory (default: this script's folder)")
    ap.add_argument("--only", choices=["ds_cnn", "lstm"], action="append",
                    help="build only this model (repeatable)")
    add_tool_options(ap)
    ap.add_argument("--train-steps", type=int, default=64,
                    help="amount of training on synthetic data, one epoch at batch "
                         "1: DS-CNN sees 32*N samples, the LSTM N sequences "
                         "(0 = keep the seeded random init)")
    ap.add_argument("--keep-tflite", action="store_true",
                    help="also write the intermediate .tflite files")
    args = ap.parse_args(argv)

    conv, tosa_opt = tools_from(args)
    args.out.mkdir(parents=True, exist_ok=True)
    which = args.only or ["ds_cnn", "lstm"]
    t0 = time.time()
    if "ds_cnn" in which:
        make_ds_cnn(args.out, (conv, tosa_opt), args.train_steps, args.keep_tflite)
    if "lstm" in which:
        make_lstm(args.out, (conv, tosa_opt), args.train_steps, args.keep_tflite)
    print(f"done in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
