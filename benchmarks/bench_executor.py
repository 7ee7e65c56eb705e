#!/usr/bin/env python3
"""Speed of npu-sim's reference executor against Arm's TOSA reference model, per invocation.

Every model in examples/, tests/data/converted/ and benchmarks/models/ (the fp32 twin of
the LSTM example), and a single int8 layer, CONV2D 1x112x112x32 -> 64 channels with a 3x3
kernel followed by its RESCALE back to int8 (built here with tosa-tools' serializer).
Both sides run in this process on the same inputs; per call:

* ``execute``: ``npu_sim.execute(graph, inputs)`` on a graph loaded once (a fresh Session
  per call, as a user calling ``execute`` in a loop gets);
* ``invoke``: ``Session.invoke(inputs)`` of one Session (steady state; a stateful graph
  carries its state on, which does not change the work);
* ``cold``: ``Session(read_graph(bytes)).invoke(inputs)``, parsing and validating too;
* ``ref``: ``tosa_reference_model.run(bytes, inputs)`` (it parses the flatbuffer on every
  call).

Calls are timed in interleaved rounds (ours, then the reference model, again and again)
so a busy machine slows both alike; each column is the median over rounds of the time
per call. Outputs of ``execute`` are checked against the reference model (integers
exactly, floats to 1e-5), so a fast wrong answer cannot look good. Goal: ``execute / ref
<= 1`` on every real model (exit code 2 if missed). Results: ``results/executor.json``.

Usage: python benchmarks/bench_executor.py [--rounds N] [--no-conv] [--graphs NAME ...] [--out DIR]
Needs tosa-tools (a test dependency).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

try:
    import tosa_reference_model as trm
    import tosa_serializer as ts
except ImportError as exc:  # pragma: no cover
    raise SystemExit(f"error: bench_executor needs tosa-tools (pip install -e '.[test]'): {exc}") from None

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import npu_sim  # noqa: E402
from benchmarks.common import reference_outputs, table, write_result  # noqa: E402
from npu_sim.inputs import random_array  # noqa: E402
from npu_sim.reference.session import Session  # noqa: E402
from npu_sim.tosa.dtype import DType  # noqa: E402
from npu_sim.tosa.flatbuffer_io import read_graph  # noqa: E402
from npu_sim.tosa.loader import parse_graph  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIRS = (ROOT / "examples", ROOT / "tests" / "data" / "converted", ROOT / "benchmarks" / "models")
CONV_LAYER = "conv3x3_int8_1x112x112x32_to_64"
#: graphs built by hand to exercise the executor, not converted from a framework
NOT_REAL = ("add_mul_fp32", "cond_if_int32", "conv_rescale_int8", "variable_counter_int32",
            "while_loop_int32", CONV_LAYER)
GOAL = 1.0
#: each round times calls for at least this long per contender
ROUND_SECONDS = 0.02


def conv_layer_int8(h: int = 112, w: int = 112, cin: int = 32, cout: int = 64) -> bytes:
    """CONV2D int8 (3x3, pad 1, zero points) -> int32, then per-channel RESCALE to int8."""
    rng = np.random.default_rng(1)
    ser = ts.TosaSerializer("", ts.ConstMode.EMBED)
    block = ser.currRegion.currBasicBlock

    def tensor(name: str, shape: tuple[int, ...], dtype: Any) -> str:
        block.addTensor(name, list(shape), dtype)
        return name

    def const(name: str, values: np.ndarray, dtype: Any) -> str:
        values = np.asarray(values)
        ser.addConst(list(values.shape), dtype, values, name)
        return name

    def attr(method: str, *args: Any) -> Any:
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


def _inputs_for(graph: npu_sim.Graph, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for t in graph.input_types.values():
        if t.dtype is DType.INT32:  # loop counts and sums stay small
            arrays.append(rng.integers(-20, 21, size=t.shape).astype(np.int32))
        else:
            arrays.append(random_array(t, rng))
    return arrays


def _per_call_seconds(fn: Callable[[], object], seconds: float) -> float:
    """Time per call of ``fn`` over a batch of calls lasting at least ``seconds``."""
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / calls


def _agree(got: dict[str, np.ndarray], want: list[np.ndarray], types: list[Any]) -> bool:
    return all(
        np.array_equal(g, w) if not t.dtype.is_float else np.allclose(
            g.astype(np.float64), w.astype(np.float64), rtol=1e-5, atol=1e-6, equal_nan=True)
        for g, w, t in zip(got.values(), want, types))


def bench_graph(name: str, binary: bytes, rounds: int) -> dict[str, Any]:
    graph = parse_graph(binary)  # as load_graph reads a file: validated, level checked
    inputs = _inputs_for(graph, seed=7)
    named = dict(zip(graph.input_types, inputs))
    types = list(graph.output_types.values())

    def reference() -> list[np.ndarray]:
        results, status = trm.run(binary, inputs)
        if status != trm.GraphStatus.TOSA_VALID:
            raise RuntimeError(f"reference model status {status.name}")
        return reference_outputs(results, types)

    session = Session(graph)
    contenders: dict[str, Callable[[], object]] = {
        "execute": lambda: npu_sim.execute(graph, named),
        "invoke": lambda: session.invoke(named),
        "cold": lambda: Session(read_graph(binary)).invoke(inputs),
        "ref": reference,
    }
    agree = _agree(npu_sim.execute(graph, named), reference(), types)
    for fn in contenders.values():  # warm-up: the executor binds on the first calls
        for _ in range(3):
            fn()
    times: dict[str, list[float]] = {key: [] for key in contenders}
    for _ in range(rounds):
        for key, fn in contenders.items():
            times[key].append(_per_call_seconds(fn, ROUND_SECONDS))
    ms = {key: statistics.median(values) * 1e3 for key, values in times.items()}
    return {"graph": name, "real_model": name not in NOT_REAL,
            "operators": sum(len(b.operators) for b in graph.blocks()),
            **{f"{key}_ms": value for key, value in ms.items()},
            "execute_ratio": ms["execute"] / ms["ref"], "invoke_ratio": ms["invoke"] / ms["ref"],
            "cold_ratio": ms["cold"] / ms["ref"], "agree": agree}


def cases(names: list[str] | None, conv: bool) -> list[tuple[str, bytes]]:
    found = [(p.stem, p.read_bytes()) for directory in MODEL_DIRS for p in sorted(directory.glob("*.tosa"))]
    if conv:
        found.append((CONV_LAYER, conv_layer_int8()))
    return [(n, b) for n, b in found if not names or n in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds (median)")
    parser.add_argument("--no-conv", action="store_true", help="skip the 112x112x32->64 conv layer")
    parser.add_argument("--graphs", nargs="*", help="only these models (file stems)")
    parser.add_argument("--out", type=Path, help="directory of executor.json (default benchmarks/results)")
    args = parser.parse_args(argv)

    todo = cases(args.graphs, not args.no_conv)
    rows, failed = [], []
    for name, binary in todo:
        try:
            rows.append(bench_graph(name, binary, args.rounds if name != CONV_LAYER else max(3, args.rounds // 3)))
        except Exception as exc:  # report and go on: one broken graph must not hide the rest
            failed.append(name)
            print(f"{name}: FAILED ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})")
    print("ms per call, median of interleaved rounds. execute: npu_sim.execute on a loaded graph; "
          "invoke: one Session's invoke; cold: read + Session + invoke; ref: tosa_reference_model.run.")
    print(table(["graph", "ops", "execute", "invoke", "cold", "ref", "exec/ref", "inv/ref", "cold/ref", "agree"],
                [[r["graph"] + ("" if r["real_model"] else " *"), r["operators"], r["execute_ms"],
                  r["invoke_ms"], r["cold_ms"], r["ref_ms"], r["execute_ratio"], r["invoke_ratio"],
                  r["cold_ratio"], r["agree"]] for r in rows]))
    print("* built by hand to exercise the executor (not a converted model)")
    summary = {}
    for key in ("execute_ratio", "invoke_ratio", "cold_ratio"):
        summary[f"geomean_{key}"] = float(np.exp(np.mean([np.log(r[key]) for r in rows]))) if rows else None
        print(f"geometric mean {key.replace('_', ' ')}: {summary[f'geomean_{key}']:.2f}")
    real = [r for r in rows if r["real_model"]]
    worst = max((r["execute_ratio"] for r in real), default=None)
    met = worst is not None and worst <= GOAL
    print(f"goal: execute / ref <= {GOAL} on every real model: worst {worst:.2f} -> {'met' if met else 'MISSED'}"
          if worst is not None else "goal: no real model measured")
    path = write_result("executor", {"goals": {"execute_ratio_real_models": GOAL}, "rows": rows,
                                     "summary": {**summary, "worst_real_execute_ratio": worst, "goal_met": met},
                                     "failed": failed}, args.out)
    print(f"wrote {path}")
    if failed or not rows or not all(r["agree"] for r in rows):
        return 1
    return 0 if met else 2


if __name__ == "__main__":
    sys.exit(main())
