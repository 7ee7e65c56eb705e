#!/usr/bin/env python3
"""Throughput of ``npu-sim sweep``: points per minute on the keyword-spotting int8 CNN.

A 120-point grid (TCM size x MAC rows, one of them an invalid 0, x DDR bandwidth x DMA
engines) over examples/ds_cnn_kws_int8.tosa on the edge preset runs three times in this
process: cold into an empty folder with ``--workers`` processes (the figure the goal is
about, pool start included), then again over the same folder (every point cached), and
with one worker as the peer the parallel speedup is measured against.
Goal: at least 1,000 points per minute on 2 workers (the issue's check: 600); the cached
rerun under a quarter of the cold run's time; the results identical.

Usage: python benchmarks/bench_sweep.py [--workers N]. Writes benchmarks/results/sweep.json.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import environment, table, write_result  # noqa: E402
from npu_sim.sweep.run import run_sweep  # noqa: E402

AXES = {"tcm.size_bytes": [65536, 131072, 262144, 524288, 1048576],
        "mac_array.rows": [0, 8, 16, 32],
        "ddr.bandwidth_bytes_per_cycle": [4, 8, 16],
        "dma.engine_count": [1, 2]}


def timed(spec: Path, out: Path, workers: int) -> tuple[float, bytes, int]:
    start = time.perf_counter()
    outcome = run_sweep(spec, out, workers=workers, progress=False)
    return time.perf_counter() - start, (out / "results.csv").read_bytes(), len(outcome.rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    try:
        spec = work / "spec.yaml"
        spec.write_text(yaml.safe_dump({"graph": str(ROOT / "examples/ds_cnn_kws_int8.tosa"), "hw": "edge",
                                        "random_inputs": 0, "axes": AXES}))
        cold, csv_cold, points = timed(spec, work / "parallel", args.workers)
        rerun, csv_rerun, _ = timed(spec, work / "parallel", args.workers)
        serial, csv_serial, _ = timed(spec, work / "serial", 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert csv_cold == csv_rerun == csv_serial, "a sweep's results depend on caching or workers"
    rate = points / cold * 60
    rows = [["cold", args.workers, f"{cold:.2f}", f"{rate:,.0f}"],
            ["cached rerun", args.workers, f"{rerun:.2f}", f"{rerun / cold:.2f} of cold"],
            ["cold", 1, f"{serial:.2f}", f"{points / serial * 60:,.0f}"]]
    print(f"{points} points, examples/ds_cnn_kws_int8.tosa on edge")
    print(table(["run", "workers", "seconds", "points/min"], rows))
    print(f"goal >= 1,000 points/min on {args.workers} workers: {'met' if rate >= 1000 else 'NOT met'}; "
          f"parallel speedup {serial / cold:.2f}x")
    write_result("sweep", {"points": points, "workers": args.workers, "cold_seconds": cold,
                           "points_per_minute": rate, "rerun_seconds": rerun, "rerun_fraction": rerun / cold,
                           "serial_seconds": serial, "environment": environment()})


if __name__ == "__main__":
    main()
