#!/usr/bin/env python3
"""Sweep throughput against running Vela once per configuration, on the same workers.

The model: MobileNetV2 1.0/224 (``models/real/mobilenet_v2_100_224_int8.tosa`` when
``models/build_real_models.py`` built it, else the example MobileNetV2 0.35/96) on
ethos-u85-256. The sweep mixes axes that change the schedule (TCM size) with axes that only
change the timing (clock, the DMA's outstanding bursts) or only the energy (DDR energy per
byte): 24 points, ``timing_only: true``. Points sharing a schedule share one compiled
Program (:mod:`npu_sim.hw.field_effects`). The peer: Vela 5.2 compiling the same .tosa once
per point (the configuration it would be given makes no difference to its run time), the
processes run ``--workers`` at a time. Both sides cold, wall time, points per minute.

Goal: npu-sim's points per minute at least twice Vela's. Needs vela (see bench_vela.py).
Usage: python benchmarks/bench_sweep_vs_vela.py [--vela PATH] [--workers N] [--model PATH].
Writes benchmarks/results/sweep_vs_vela.json; exits 2 when the goal is missed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_run_vs_vela import found_vela, vela_cmd  # noqa: E402
from benchmarks.bench_vela import MATCHES  # noqa: E402
from benchmarks.common import HERE, ROOT, table, write_result  # noqa: E402
from npu_sim.sweep.run import run_sweep  # noqa: E402

GOAL = 2.0
MODEL = HERE / "models" / "real" / "mobilenet_v2_100_224_int8.tosa"
FALLBACK = ROOT / "examples" / "mobilenet_v2_035_96_int8.tosa"
PRESET = "ethos-u85-256"
AXES = {"tcm.size_bytes": [393216, 786432], "clock_hz": [500_000_000, 1_000_000_000, 1_500_000_000],
        "variable_sram.bytes_per_cycle": [8, 16], "energy.ddr_byte_pj": [80.0, 160.0]}


def sweep_seconds(model: Path, workers: int, work: Path) -> tuple[float, int, int]:
    """Wall seconds of the whole sweep (cold), its points and how many ran ok."""
    spec = work / "spec.yaml"
    spec.write_text(yaml.safe_dump({"graph": str(model), "hw": PRESET, "random_inputs": 0, "axes": AXES,
                                    "timing_only": True}))
    start = time.perf_counter()
    outcome = run_sweep(spec, work / "sweep", workers=workers, progress=False)
    return time.perf_counter() - start, len(outcome.rows), sum(r["status"] == "ok" for r in outcome.rows)


def vela_seconds(vela: Path, model: Path, points: int, workers: int, work: Path) -> float:
    """Wall seconds of ``points`` Vela processes, ``workers`` at a time."""
    match = next(m for m in MATCHES if m.accelerator == PRESET)

    def one(k: int) -> int:
        return subprocess.run(vela_cmd(vela, model, match, work / f"vela{k}"), capture_output=True).returncode

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        codes = list(pool.map(one, range(points)))
    if any(codes):
        raise SystemExit(f"vela failed on {model.name} (exit {max(codes)})")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--vela", metavar="PATH", help="the vela executable (see bench_vela.py)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--model", type=Path, default=None, help=f"the .tosa (default {MODEL.name} if built)")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    options = parser.parse_args(argv)
    vela = found_vela(options.vela)
    if vela is None:
        return 0
    model = options.model or (MODEL if MODEL.is_file() else FALLBACK)
    with tempfile.TemporaryDirectory(prefix="npu-sim-sweep-vs-vela-") as tmp:
        ours, points, ok = sweep_seconds(model, options.workers, Path(tmp))
        theirs = vela_seconds(vela, model, points, options.workers, Path(tmp))
    ours_rate, vela_rate = points / ours * 60, points / theirs * 60
    ratio = ours_rate / vela_rate
    print(f"{model.name} on {PRESET}: {points} points ({ok} ok), {options.workers} workers")
    print(table(["side", "seconds", "points/min"], [["npu-sim sweep (timing only)", ours, ours_rate],
                                                     ["vela once per point", theirs, vela_rate]]))
    print(f"ratio {ratio:.2f} (goal >= {GOAL}: {'met' if ratio >= GOAL else 'MISS'})")
    path = write_result("sweep_vs_vela", {"model": model.name, "preset": PRESET, "axes": AXES, "points": points,
                                          "ok": ok, "workers": options.workers, "npu_sim_seconds": ours,
                                          "vela_seconds": theirs, "ratio": ratio, "goal": GOAL}, options.out)
    print(f"results: {path}")
    return 0 if ratio >= GOAL and ok == points else 2


if __name__ == "__main__":
    sys.exit(main())
