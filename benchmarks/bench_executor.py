#!/usr/bin/env python3
"""Speed of npu-sim's reference executor against Arm's TOSA reference model.

Both run the same whole graphs from the same .tosa bytes: every example model
in examples/, and a single int8 layer, CONV2D 1x112x112x32 -> 64 channels with
a 3x3 kernel followed by its RESCALE back to int8 (built here with tosa-tools'
serializer). Times are wall-clock medians over repeats; both sides include
reading the flatbuffer (the reference model's Python API parses it on every
call). Outputs are also checked to agree (integers exactly), so a fast wrong
answer cannot look good.

Usage: python benchmarks/bench_executor.py [--repeats N] [--no-conv]
Needs tosa-tools (a test dependency); prints a table and the ratios.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

try:
    import tosa_reference_model as trm
    import tosa_serializer as ts
except ImportError as exc:  # pragma: no cover
    raise SystemExit(f"error: bench_executor needs tosa-tools (pip install -e '.[test]'): {exc}") from exc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import median_seconds, reference_outputs  # noqa: E402
from npu_sim.inputs import random_array
from npu_sim.reference.session import Session
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.flatbuffer_io import read_graph

ROOT = Path(__file__).resolve().parents[1]


def conv_layer_int8(h: int = 112, w: int = 112, cin: int = 32, cout: int = 64) -> bytes:
    """CONV2D int8 (3x3, pad 1, zero points) -> int32, then per-channel RESCALE to int8."""
    rng = np.random.default_rng(1)
    ser = ts.TosaSerializer("", ts.ConstMode.EMBED)
    block = ser.currRegion.currBasicBlock

    def tensor(name, shape, dtype):
        block.addTensor(name, list(shape), dtype)
        return name

    def const(name, values, dtype):
        values = np.asarray(values)
        ser.addConst(list(values.shape), dtype, values, name)
        return name

    def attr(method, *args):
        a = ts.TosaSerializerAttribute()
        getattr(a, method)(*args)
        return a

    x = tensor("input", (1, h, w, cin), ts.DType.INT8)
    block.addInput(x)
    weights = const("weights", rng.integers(-127, 128, size=(cout, 3, 3, cin)).astype(np.int8), ts.DType.INT8)
    bias = const("bias", rng.integers(-5000, 5000, size=cout).astype(np.int32), ts.DType.INT32)
    izp = const("input_zp", np.array([-3], np.int8), ts.DType.INT8)
    wzp = const("weight_zp", np.array([0], np.int8), ts.DType.INT8)
    acc = tensor("acc", (1, h, w, cout), ts.DType.INT32)
    ser.addOperator(ts.Op.CONV2D, [x, weights, bias, izp, wzp], [acc],
                    attr("Conv2dAttribute", [1, 1, 1, 1], [1, 1], [1, 1], False, ts.DType.INT32))
    mult = const("multiplier", rng.integers(1 << 30, (1 << 31) - 1, size=cout).astype(np.int32), ts.DType.INT32)
    shift = const("shift", np.full(cout, 40, np.int8), ts.DType.INT8)
    rizp = const("rescale_in_zp", np.array([0], np.int32), ts.DType.INT32)
    rozp = const("rescale_out_zp", np.array([4], np.int8), ts.DType.INT8)
    out = tensor("output", (1, h, w, cout), ts.DType.INT8)
    ser.addOperator(ts.Op.RESCALE, [acc, mult, shift, rizp, rozp], [out],
                    attr("RescaleAttribute", True, ts.RoundingMode.DOUBLE_ROUND, True, False, False))
    block.addOutput(out)
    return bytes(ser.serialize())


def _reference_outputs(binary: bytes, inputs: list[np.ndarray], types) -> list[np.ndarray]:
    results, status = trm.run(binary, inputs)
    if status != trm.GraphStatus.TOSA_VALID:
        raise RuntimeError(f"reference model status {status.name}")
    return reference_outputs(results, types)


def _inputs_for(graph, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for t in graph.input_types.values():
        if t.dtype is DType.INT32:  # loop counts and sums stay small
            arrays.append(rng.integers(-20, 21, size=t.shape).astype(np.int32))
        else:
            arrays.append(random_array(t, rng))
    return arrays


def bench_graph(name: str, binary: bytes, repeats: int) -> dict:
    graph = read_graph(binary)
    inputs = _inputs_for(graph, seed=7)
    types = list(graph.output_types.values())

    def ours():
        return Session(read_graph(binary)).invoke(inputs)

    session = Session(graph)

    def ours_invoke_only():  # steady state: graph read and plans made once
        return session.invoke(inputs)

    def reference():
        return _reference_outputs(binary, inputs, types)

    got, want = ours(), reference()  # warm-up, and the answers must agree
    agree = all(
        np.array_equal(g, w) if not t.dtype.is_float else np.allclose(
            g.astype(np.float64), w.astype(np.float64), rtol=1e-5, atol=1e-6)
        for g, w, t in zip(got.values(), want, types))
    ours_s = median_seconds(ours, repeats)
    ours_invoke_only()
    invoke_s = median_seconds(ours_invoke_only, repeats)
    ref_s = median_seconds(reference, repeats)
    ops = sum(len(b.operators) for b in graph.blocks())
    return {"graph": name, "operators": ops, "ours_ms": ours_s * 1e3, "invoke_ms": invoke_s * 1e3,
            "reference_ms": ref_s * 1e3, "ratio": ours_s / ref_s, "invoke_ratio": invoke_s / ref_s,
            "agree": agree}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-conv", action="store_true", help="skip the 112x112x32->64 conv layer")
    args = parser.parse_args(argv)

    cases = [(p.stem, p.read_bytes()) for p in sorted((ROOT / "examples").glob("*.tosa"))]
    if not args.no_conv:
        cases.append(("conv3x3_int8_1x112x112x32_to_64", conv_layer_int8()))
    rows = []
    for name, binary in cases:
        try:
            rows.append(bench_graph(name, binary, args.repeats if "112" not in name else max(1, args.repeats // 2)))
        except Exception as exc:  # report and go on: one broken graph must not hide the rest
            print(f"{name}: FAILED ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})")
    print("npu-sim ms: read .tosa + execute (as the reference model's run() does); "
          "invoke ms: a Session's steady-state invoke.")
    print(f"{'graph':<34} {'ops':>4} {'npu-sim ms':>10} {'invoke ms':>9} {'ref ms':>8} "
          f"{'ratio':>6} {'inv.ratio':>9}  agree")
    for r in rows:
        print(f"{r['graph']:<34} {r['operators']:>4} {r['ours_ms']:>10.2f} {r['invoke_ms']:>9.2f} "
              f"{r['reference_ms']:>8.2f} {r['ratio']:>6.2f} {r['invoke_ratio']:>9.2f}  "
              f"{'yes' if r['agree'] else 'NO'}")
    if rows:
        for key, label in (("ratio", "read+execute"), ("invoke_ratio", "invoke only")):
            geomean = float(np.exp(np.mean([np.log(r[key]) for r in rows])))
            print(f"geometric mean ratio npu-sim / reference model ({label}): {geomean:.2f}")
    return 0 if rows and all(r["agree"] for r in rows) and len(rows) == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
