#!/usr/bin/env python3
"""Whole-process wall time of ``npu-sim run`` against Vela 5.2 compiling the same .tosa or .tflite.

For every model (the real models of ``benchmarks/models/real/`` when they were built, see
``models/build_real_models.py``: their .tosa and the .tflite they were converted from; the
example CNN and LSTMs; the example .tflite files: a Keras LSTM as TFLite fuses it and a
transformer) and each of ethos-u55-256 and ethos-u85-256, the two processes run one after
the other, alternating, ``--repeats`` times each; the best wall time of each side counts
(the machine is shared: the least disturbed run is the fairest for both). A .tflite row
gives both the same .tflite (Vela reads it directly, npu-sim through Arm's converter and its
conversion cache: the first repeat may convert, the later ones read the cached text; rows
are named by file, ``NAME.tflite``). Ours: ``npu-sim run MODEL --hw PRESET
--random-inputs 0 -o DIR`` (outputs, summary.json, memory_timeline.png, trace.json, the
printed table: everything a user gets). Vela's: ``vela MODEL --accelerator-config ...`` with
the system config and memory mode bench_vela.py matches to the preset (its summary CSV
and the optimised model written). Where Vela rejects a model there is no ratio.

Ours runs two ways: **cold**, compiling the graph (``NPU_SIM_PROGRAM_CACHE=0``: the ratio the
goal is about), and **warm**, reading back the Program a first run kept in the cache
(:mod:`npu_sim.program_cache`: what re-running a model on the same config costs). Our runs use a
cache folder of their own, primed by one run that is not counted (it converts a .tflite and
stores the Program).

npu-sim's modules are byte-compiled first (``compileall``), as an installed package's are.
Goal: ``npu-sim / vela <= 2`` on every model and preset, cold. Needs vela (see bench_vela.py).
Usage: python benchmarks/bench_run_vs_vela.py [--vela PATH] [--models NAME ...]
[--accelerators ...] [--repeats N]. Writes benchmarks/results/run_vs_vela.json; exits 2
when a ratio misses the goal.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_vela import MATCHES, Match, find_vela  # noqa: E402
from benchmarks.common import HERE, ROOT, goal_mark, table, write_result  # noqa: E402

GOAL = 2.0
REAL = HERE / "models" / "real"
EXAMPLES = ("mobilenet_v2_035_96_int8", "ds_cnn_kws_int8", "lstm_unrolled8_int8", "lstm_stacked_int8")
#: Example models kept as TFLite writes them (examples/README.md)
EXAMPLE_TFLITE = ("lstm_kws_int8", "kws_transformer_int8")
ACCELERATORS = ("ethos-u55-256", "ethos-u85-256")


def models(names: list[str] | None) -> list[Path]:
    """The real models that were built (.tosa, then .tflite), then the example models (or
    those named, by stem for a .tosa, by file name for a .tflite)."""
    found = sorted(REAL.glob("*.tosa")) + sorted(REAL.glob("*.tflite")) + \
        [ROOT / "examples" / f"{name}.tosa" for name in EXAMPLES] + \
        [ROOT / "examples" / f"{name}.tflite" for name in EXAMPLE_TFLITE]
    if names:
        found = [p for p in found if model_name(p) in names]
    return found


def model_name(path: Path) -> str:
    """A row's name: the stem of a .tosa (as before), the file name of anything else."""
    return path.stem if path.suffix == ".tosa" else path.name


def found_vela(explicit: str | None) -> Path | None:
    """The vela executable (see bench_vela.find_vela), or None after printing the "skipped" line."""
    vela = find_vela(explicit)
    if vela is None:
        print("skipped: vela not found (give --vela PATH or $VELA, or run bench_vela.py --install-vela)")
    return vela


def byte_compile() -> None:
    """Compile npu-sim's modules to bytecode first, as installing a package does (Vela's were at
    its install): an editable checkout with ``PYTHONDONTWRITEBYTECODE`` would otherwise compile
    every module in every process."""
    packages = [str(ROOT / name) for name in ("npu_sim", "scheduler", "reports")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], check=True, capture_output=True)


def wall(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """Seconds, exit code and the last line of stderr of one process (``env``: its environment)."""
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    return seconds, done.returncode, (done.stderr.strip().splitlines() or [""])[-1]


def ours_cmd(model: Path, match: Match, out: Path) -> list[str]:
    return [str(Path(sys.executable).with_name("npu-sim")), "run", str(model), "--hw", match.preset,
            "--random-inputs", "0", "-o", str(out)]


def vela_cmd(vela: Path, model: Path, match: Match, out: Path) -> list[str]:
    return [str(vela), str(model), "--accelerator-config", match.accelerator, "--config", "Arm/vela.ini",
            "--system-config", match.system_config, "--memory-mode", match.memory_mode, "--output-dir", str(out)]


def our_environments(cache: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The environments of our cold and warm runs: a cache folder of their own, the program cache
    off (cold) or on (warm)."""
    base = {**os.environ, "NPU_SIM_CACHE": str(cache)}
    base.pop("NPU_SIM_PROGRAM_CACHE", None)
    return {**base, "NPU_SIM_PROGRAM_CACHE": "0"}, base


def measure(vela: Path, model: Path, match: Match, repeats: int, work: Path) -> dict[str, Any]:
    """Prime our cache, then alternate our cold run, Vela and our warm run ``repeats`` times; the
    best of each."""
    cold_env, warm_env = our_environments(work / "cache")
    ours: list[float] = []
    warm: list[float] = []
    theirs: list[float] = []
    row: dict[str, Any] = {"model": model_name(model), "accelerator": match.accelerator}
    _, code, error = wall(ours_cmd(model, match, work / f"{model.name}-{match.accelerator}-prime"), warm_env)
    for k in range(repeats if code == 0 else 0):
        out = work / f"{model.name}-{match.accelerator}-{k}"
        seconds, code, error = wall(ours_cmd(model, match, out), cold_env)
        if code != 0:
            break
        ours.append(seconds)
        seconds, vela_code, vela_error = wall(vela_cmd(vela, model, match, work / f"vela-{model.name}-{k}"))
        if vela_code != 0:
            row["vela_error"] = vela_error
        else:
            theirs.append(seconds)
        seconds, code, error = wall(ours_cmd(model, match, work / f"{model.name}-{match.accelerator}-warm{k}"),
                                    warm_env)
        if code != 0:
            break
        warm.append(seconds)
        if k == 0:
            summary = json.loads((out / "summary.json").read_text())
            row["stages_s"] = summary.get("wall_seconds", {})
            row["operations"] = len(summary.get("ops", []))
    if code != 0:
        row["ours_error"] = error
    row["ours_s"] = min(ours) if ours else None
    row["ours_warm_s"] = min(warm) if warm else None
    row["vela_s"] = min(theirs) if theirs else None
    row["ratio"] = row["ours_s"] / row["vela_s"] if ours and theirs else None
    row["warm_ratio"] = row["ours_warm_s"] / row["vela_s"] if warm and theirs else None
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--vela", metavar="PATH", help="the vela executable (see bench_vela.py)")
    parser.add_argument("--models", nargs="+", metavar="NAME",
                        help="models by .tosa stem or .tflite file name (default: all)")
    parser.add_argument("--accelerators", nargs="+", default=list(ACCELERATORS),
                        choices=[m.accelerator for m in MATCHES])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    options = parser.parse_args(argv)
    vela = found_vela(options.vela)
    if vela is None:
        return 0
    byte_compile()
    rows = []
    with tempfile.TemporaryDirectory(prefix="npu-sim-vs-vela-") as tmp:
        for model in models(options.models):
            for match in (m for m in MATCHES if m.accelerator in options.accelerators):
                print(f"  {model_name(model)} on {match.accelerator} ...", flush=True)
                rows.append(measure(vela, model, match, options.repeats, Path(tmp)))
    print()
    print(f"npu-sim run / vela, whole process, best of {options.repeats}; goal <= {GOAL} (cold)")
    print(table(["model", "accelerator", "ops", "npu-sim s", "vela s", "ratio", "goal", "warm s", "warm ratio",
                 "schedule", "simulate", "reports", "note"],
                [[r["model"], r["accelerator"], r.get("operations"), r["ours_s"], r["vela_s"], r["ratio"],
                  goal_mark(r["ratio"], GOAL), r["ours_warm_s"], r["warm_ratio"], r.get("stages_s", {}).get("schedule"),
                  r.get("stages_s", {}).get("simulate"), r.get("stages_s", {}).get("reports"),
                  r.get("ours_error") or r.get("vela_error") or ""] for r in rows]))
    worst = max((r["ratio"] for r in rows if r["ratio"] is not None), default=None)
    worst_warm = max((r["warm_ratio"] for r in rows if r["warm_ratio"] is not None), default=None)
    print(f"worst ratio {worst:.2f} cold, {worst_warm:.2f} warm" if worst is not None and worst_warm is not None
          else "no ratio")
    path = write_result("run_vs_vela", {"goal": {"ratio": GOAL}, "definitions": __doc__, "rows": rows,
                                        "worst_ratio": worst, "worst_warm_ratio": worst_warm}, options.out)
    print(f"results: {path}")
    if any(r.get("ours_error") for r in rows):
        return 1
    return 2 if worst is not None and worst > GOAL else 0


if __name__ == "__main__":
    sys.exit(main())
