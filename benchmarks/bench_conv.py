#!/usr/bin/env python3
"""Speed of our CONV2D kernel against Arm's TOSA reference model, on one int8 layer.

The layer: CONV2D int8 1x112x112x32 -> 64 channels, 3x3 kernel, pad 1, stride 1,
non-zero input and weight zero points, int32 bias and output. Both sides run in
this process: our kernel through ``run_kernel`` on whole tensors, the reference
model through ``tosa_reference_model.run`` on a one-operator graph serialized
once beforehand (its time includes parsing that flatbuffer, which it does on
every call). Times are wall-clock medians over the repeats. The outputs must be
equal bit for bit, so a fast wrong answer cannot look good. Goal: ratio >= 3.

Usage: python benchmarks/bench_conv.py [--repeats N]   (needs tosa-tools)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

try:
    import tosa_reference_model as trm
    import tosa_serializer as ts
except ImportError as exc:  # pragma: no cover
    raise SystemExit(f"error: bench_conv needs tosa-tools (pip install -e '.[test]'): {exc}") from exc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import median_seconds  # noqa: E402
from npu_sim.reference import KernelArgs, run_kernel
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute

SHAPE = (1, 112, 112, 32)
OUT_CHANNELS = 64
INPUT_ZP, WEIGHT_ZP = -3, 5


def layer(seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "input": rng.integers(-128, 128, size=SHAPE, dtype=np.int8),
        "weight": rng.integers(-128, 128, size=(OUT_CHANNELS, 3, 3, SHAPE[3]), dtype=np.int8),
        "bias": rng.integers(-5000, 5000, size=OUT_CHANNELS).astype(np.int32),
        "input_zp": np.array([INPUT_ZP], np.int8),
        "weight_zp": np.array([WEIGHT_ZP], np.int8),
    }


def reference_graph(values: dict[str, np.ndarray]) -> bytes:
    """The layer as a TOSA flatbuffer (input a graph input, the rest constants)."""
    ser = ts.TosaSerializer("", ts.ConstMode.EMBED)
    block = ser.currRegion.currBasicBlock
    block.addTensor("input", list(SHAPE), ts.DType.INT8)
    block.addInput("input")
    for name, dtype in (("weight", ts.DType.INT8), ("bias", ts.DType.INT32),
                        ("input_zp", ts.DType.INT8), ("weight_zp", ts.DType.INT8)):
        ser.addConst(list(values[name].shape), dtype, values[name], name)
    block.addTensor("output", [1, SHAPE[1], SHAPE[2], OUT_CHANNELS], ts.DType.INT32)
    attribute = ts.TosaSerializerAttribute()
    attribute.Conv2dAttribute([1, 1, 1, 1], [1, 1], [1, 1], False, ts.DType.INT32)
    ser.addOperator(ts.Op.CONV2D, ["input", "weight", "bias", "input_zp", "weight_zp"], ["output"], attribute)
    block.addOutput("output")
    return bytes(ser.serialize())


def our_args(values: dict[str, np.ndarray]) -> KernelArgs:
    names = ("input", "weight", "bias", "input_zp", "weight_zp")
    dtypes = (DType.INT8, DType.INT8, DType.INT32, DType.INT8, DType.INT8)
    attribute = make_attribute(Op.CONV2D, pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1),
                               acc_type=DType.INT32)
    return KernelArgs(Op.CONV2D, attribute, [values[n] for n in names],
                      [TensorType(values[n].shape, d) for n, d in zip(names, dtypes)],
                      [TensorType((1, SHAPE[1], SHAPE[2], OUT_CHANNELS), DType.INT32)], name="conv")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args(argv)
    values = layer()
    binary = reference_graph(values)
    args = our_args(values)

    def ours() -> np.ndarray:
        return run_kernel(args)[0]

    def reference() -> np.ndarray:
        results, status = trm.run(binary, [values["input"]])
        if status != trm.GraphStatus.TOSA_VALID:
            raise RuntimeError(f"reference model status {status.name}")
        return np.asarray(results[0]).view(np.int32).reshape(1, SHAPE[1], SHAPE[2], OUT_CHANNELS)

    if not np.array_equal(ours(), reference()):
        print("error: our CONV2D output differs from the reference model's", file=sys.stderr)
        return 1
    ours_s = median_seconds(ours, options.repeats)
    reference_s = median_seconds(reference, options.repeats)
    ratio = reference_s / ours_s
    print(f"CONV2D int8 {SHAPE} -> {OUT_CHANNELS}, 3x3, pad 1 (median of {options.repeats})")
    print(f"  npu-sim kernel       {ours_s * 1e3:9.1f} ms")
    print(f"  tosa_reference_model {reference_s * 1e3:9.1f} ms")
    print(f"  speed-up             {ratio:9.1f} x   (goal >= 3)")
    print(json.dumps({"benchmark": "conv2d_int8", "ours_s": ours_s, "reference_s": reference_s,
                      "speedup": ratio}))
    return 0 if ratio >= 3 else 2


if __name__ == "__main__":
    sys.exit(main())
