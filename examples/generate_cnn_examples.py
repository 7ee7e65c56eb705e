"""Regenerate the larger CNN example (tf-keras -> TFLite int8 -> TOSA), for the cost model's
calibration against Vela (benchmarks/fidelity_vs_vela.py):

* ``mobilenet_v2_035_96_int8.tosa``: MobileNetV2 with width multiplier 0.35 on a 96x96x3
  image (tf-keras applications, untrained seeded weights) with a 10-class head and no
  softmax (the 1000-class head alone would be 1.3 MB of weights): inverted residual blocks
  of 1x1 expansions, 3x3 depthwise convolutions (stride 1 and 2), 1x1 projections and
  residual ADDs, as in the "MobileNetV2 0.35 at 96x96" row of issue 15's table.
* ``mobilenet_v1_025_96_softmax_int8.tosa``: a visual-wake-words network, MobileNetV1 with
  width multiplier 0.25 on a 96x96x3 image (as MLPerf Tiny's VWW model), 2 classes and its
  int8 softmax head (REDUCE_MAX, the exp TABLEs, CLZ and the shift arithmetic of the TFLite
  int8 softmax as TOSA writes it): depthwise-separable blocks and a global average pool.

Run with the TensorFlow venv: ``python examples/generate_cnn_examples.py --tosa-opt PATH``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate_examples as base  # noqa: E402

SHAPE = (96, 96, 3)


def _mobilenet_v2(image):
    import tf_keras
    return tf_keras.applications.MobileNetV2(input_tensor=image, alpha=0.35, weights=None, classes=10,
                                             classifier_activation=None)


def _mobilenet_v1_softmax(image):
    import tf_keras
    return tf_keras.applications.MobileNet(input_tensor=image, alpha=0.25, weights=None, classes=2,
                                           classifier_activation="softmax")


#: stem -> (builder, representative samples for the int8 calibration)
MODELS = {"mobilenet_v2_035_96_int8": (_mobilenet_v2, 16),
          "mobilenet_v1_025_96_softmax_int8": (_mobilenet_v1_softmax, 8)}


def make(out_dir: Path, tools, stem: str = "mobilenet_v2_035_96_int8") -> Path:
    import tf_keras
    build, samples = MODELS[stem]
    base._seed_everything(base.SEED)
    image = tf_keras.Input(batch_shape=(1, *SHAPE), name="image")   # batch 1, as Vela needs
    model = build(image)
    rng = np.random.default_rng(base.SEED + 300)
    rep = [rng.uniform(-1.0, 1.0, size=(1, *SHAPE)).astype(np.float32) for _ in range(samples)]
    tflite = base._to_int8_tflite(model, rep, resource_variables=False)
    path, mlir = base._tflite_to_tosa(tflite, out_dir, stem, *tools)
    print(f"  {path.name}: {path.stat().st_size} bytes, tosa ops: {', '.join(base._tosa_ops_in_mlir(mlir))}")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    base.add_tool_options(ap)
    args = ap.parse_args(argv)
    tools = base.tools_from(args)
    args.out.mkdir(parents=True, exist_ok=True)
    for stem in MODELS:
        make(args.out, tools, stem)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
