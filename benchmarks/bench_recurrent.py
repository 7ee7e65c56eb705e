#!/usr/bin/env python3
"""Recurrent Keras models as users export them (.tflite): our figures against Vela's and our
outputs against LiteRT's.

For every recurrent .tflite (examples/*.tflite, tests/data/tflite/lstm_* and gru_*):

* **vs Vela 5.2** on each Ethos-U preset, on the very same .tflite (Vela compiles the fused
  LSTM itself, unrolling it per time step): Vela's ``cycles_total`` against our
  ``total_cycles`` (goal 0.8-1.25x), and the operators each side leaves to the CPU;
* **fused vs op by op** on ``edge``: cycles per invocation of a stream (the first
  invocation loads the constants, later ones keep them) with the LSTM/GRU cells fused and
  with ``--no-composite-fusion`` (goal at most 0.6 for a stateful int8 LSTM);
* **vs LiteRT** (``ai-edge-litert``): the largest difference between our outputs and LiteRT's
  over ``--trials`` random inputs (invocations in a row, the state carried over as LiteRT
  carries it), against its builtin kernels and its default interpreter (XNNPACK): in LSBs
  for integer outputs (goal 0: bit-exact), absolute for float ones (goal 1e-5).

Needs vela (see bench_vela.py: ``--vela PATH``, ``$VELA`` or benchmarks/.venv-vela) for the
first table; without it that table is skipped. Writes benchmarks/results/recurrent.json.

Usage: python benchmarks/bench_recurrent.py [--vela PATH] [--trials N] [--models PATH ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import npu_sim  # noqa: E402
from benchmarks.bench_vela import MATCHES, find_vela, run_vela  # noqa: E402
from benchmarks.common import HERE, table, write_result  # noqa: E402

ROOT = HERE.parent
DEFAULT_MODELS = sorted((ROOT / "examples").glob("*.tflite")) + \
    sorted(p for p in (ROOT / "tests" / "data" / "tflite").glob("*.tflite") if p.stem.startswith(("lstm_", "gru_")))
RATIO_BAND = (0.8, 1.25)
FUSED_GOAL = 0.6
#: Invocations of the edge streams (the first loads the constants the later ones keep).
STREAM = 3


def random_sequence(graph: npu_sim.Graph, count: int, seed: int) -> list[np.ndarray]:
    (t,) = graph.input_types.values()
    rng = np.random.default_rng(seed)
    if t.dtype.is_integer:
        info = np.iinfo(t.dtype.numpy_dtype)
        return [rng.integers(info.min, info.max + 1, size=t.shape).astype(t.dtype.numpy_dtype) for _ in range(count)]
    return [rng.normal(0, 1, size=t.shape).astype(np.float32) for _ in range(count)]


def litert_difference(path: Path, graph: npu_sim.Graph, trials: int) -> dict[str, Any]:
    """The largest |ours - LiteRT| over ``trials`` invocations in a row (state carried over),
    against LiteRT's builtin kernels and against its default interpreter (which hands int8
    convolutions, FULLY_CONNECTED, ADD, MUL, ... to the XNNPACK delegate)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    result: dict[str, Any] = {"trials": trials}
    for label, resolver in (("builtin", OpResolverType.BUILTIN_REF), ("default", OpResolverType.AUTO)):
        interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=resolver)
        interpreter.allocate_tensors()
        feed, fetch = interpreter.get_input_details()[0]["index"], interpreter.get_output_details()[0]["index"]
        session = npu_sim.Session(graph)
        name = graph.main.inputs[0]
        largest = 0.0
        integer = False
        for x in random_sequence(graph, trials, seed=7):
            interpreter.set_tensor(feed, x)
            interpreter.invoke()
            theirs = interpreter.get_tensor(fetch)
            (ours,) = session.invoke({name: x}).values()
            integer = np.issubdtype(theirs.dtype, np.integer)
            largest = max(largest, float(np.abs(ours.reshape(theirs.shape).astype(np.float64) - theirs).max()))
        result[label] = largest
        result.update(unit="LSB" if integer else "absolute", goal=0 if integer else 1e-5)
    result["max_difference"] = result["builtin"]
    return result


def cycles(graph: npu_sim.Graph, preset: str, invocations: int = 1, **options: Any) -> dict[str, Any]:
    """The cycles of the first invocation (``cycles``) and of the last of a stream of
    ``invocations`` (``steady_cycles``), the constants loaded before the first, and the fused
    cells (each time step's, or a loop body's one)."""
    inputs = [np.stack(random_sequence(graph, invocations, seed=0))] if invocations > 1 \
        else random_sequence(graph, 1, seed=0)
    try:
        result = npu_sim.simulate(graph, preset, inputs, invocations=invocations, **options)
    except npu_sim.NpuSimError as exc:
        return {"accepted": False, "reason": str(exc)}
    summary = result.summary
    per_invocation = summary["per_invocation_cycles"]
    return {"accepted": True, "cycles": int(per_invocation[0]), "steady_cycles": int(per_invocation[-1]),
            "cpu_ops": len(summary.get("cpu_ops", [])),
            "fused_composites": len(summary.get("fused_composites", []))}


def measure(path: Path, vela: Path | None, trials: int, work: Path) -> dict[str, Any]:
    graph = npu_sim.load_graph(path)
    row: dict[str, Any] = {"model": path.name, "litert": litert_difference(path, graph, trials)}
    fused = cycles(graph, "edge", STREAM)
    op_by_op = cycles(graph, "edge", STREAM, composite_fusion=False)
    row["edge"] = {"fused": fused, "op_by_op": op_by_op}
    row["ethos"] = []
    for match in MATCHES:
        ours = cycles(graph, match.preset)
        theirs = run_vela(vela, path, match, work / f"{path.stem}-{match.accelerator}") if vela else None
        row["ethos"].append({"accelerator": match.accelerator, "ours": ours, "vela": theirs})
    return row


def ratio(a: int | None, b: int | None) -> float | None:
    return a / b if a is not None and b else None


def print_tables(rows: list[dict[str, Any]]) -> None:
    print("outputs against LiteRT (largest difference over invocations in a row)")
    print(table(["model", "trials", "builtin kernels", "default interpreter", "unit", "goal"],
                [[r["model"], r["litert"]["trials"], r["litert"]["builtin"], r["litert"]["default"],
                  r["litert"]["unit"], r["litert"]["goal"]] for r in rows]))
    print(f"\nedge: fused cells against op by op, per invocation of a stream of {STREAM} (goal <= {FUSED_GOAL})")
    print(table(["model", "fused cycles", "op-by-op cycles", "ratio", "fused cells"],
                [[r["model"], r["edge"]["fused"].get("steady_cycles"), r["edge"]["op_by_op"].get("steady_cycles"),
                  ratio(r["edge"]["fused"].get("steady_cycles"), r["edge"]["op_by_op"].get("steady_cycles")),
                  r["edge"]["fused"].get("fused_composites")] for r in rows]))
    lines = []
    for r in rows:
        for e in r["ethos"]:
            vela = e["vela"] or {}
            theirs = vela.get("cycles_total") if vela.get("accepted") else None
            lines.append([r["model"], e["accelerator"], theirs, e["ours"].get("cycles"),
                          ratio(e["ours"].get("cycles"), theirs), e["ours"].get("cpu_ops"),
                          vela.get("cpu_operators") if vela else None,
                          vela.get("reason", "") if vela and not vela.get("accepted")
                          else "Vela's cycles leave out its CPU operators" if vela.get("cpu_operators") else ""])
    print(f"\nEthos-U presets against Vela 5.2 on the same .tflite (goal {RATIO_BAND[0]}-{RATIO_BAND[1]}x)")
    print(table(["model", "accelerator", "vela cycles", "npu-sim", "ratio", "our cpu ops", "vela cpu ops", "note"],
                lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vela", default=None, help="the vela executable")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--models", nargs="+", type=Path, default=DEFAULT_MODELS)
    parser.add_argument("--out", type=Path, default=None)
    options = parser.parse_args(argv)
    vela = find_vela(options.vela)
    if vela is None:
        print("vela not found: the Ethos-U table shows npu-sim only (give --vela PATH or $VELA)")
    with tempfile.TemporaryDirectory(prefix="npu-sim-recurrent-") as tmp:
        rows = [measure(path, vela, options.trials, Path(tmp)) for path in options.models]
    print_tables(rows)
    print(f"\nwrote {write_result('recurrent', {'rows': rows}, options.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
