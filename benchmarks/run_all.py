#!/usr/bin/env python3
"""Run every ``benchmarks/bench_*.py`` (what ``make bench`` does) and summarise.

Each benchmark runs in its own process with this interpreter (cwd: the repository),
its output passed through as it comes, under a time limit. A benchmark's exit code
means: 0 ran (it prints its own goals, met or missed), 2 ran and missed its goal,
anything else failed; a benchmark that prints a line starting with "skipped" (e.g.
bench_vela without vela) is shown as skipped. The summary at the end lists each one
with its status and time. The exit code is 1 if any benchmark failed or timed out,
else 0: goals are measured here and asserted by tests, not by ``make bench``.

Usage: python benchmarks/run_all.py [NAME ...] [--timeout SECONDS]
(NAME: e.g. ``vela`` or ``bench_vela.py`` to run only some.)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def select(names: list[str]) -> list[Path]:
    scripts = sorted(HERE.glob("bench_*.py"))
    if not names:
        return scripts
    wanted = {n.removeprefix("bench_").removesuffix(".py") for n in names}
    chosen = [s for s in scripts if s.stem.removeprefix("bench_") in wanted]
    unknown = wanted - {s.stem.removeprefix("bench_") for s in chosen}
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(sorted(unknown))} "
                         f"(known: {', '.join(s.stem for s in scripts)})")
    return chosen


def run_one(script: Path, timeout_s: float) -> tuple[str, int | None, float]:
    """Run ``script``, echoing its output; ``(status, exit code or None, seconds)``."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
    start = time.perf_counter()
    skipped = threading.Event()
    with subprocess.Popen([sys.executable, str(script)], cwd=HERE.parent, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as process:

        def pump() -> None:   # echo the output while the main thread keeps the time
            for line in process.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                if line.lower().startswith("skipped"):
                    skipped.set()

        echo = threading.Thread(target=pump, daemon=True)
        echo.start()
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            echo.join(timeout=5)
            return f"TIMEOUT after {timeout_s:.0f} s", None, time.perf_counter() - start
        echo.join()
    seconds = time.perf_counter() - start
    if code == 0:
        status = "skipped" if skipped.is_set() else "ok"
    elif code == 2:
        status = "goal missed (exit 2)"
    else:
        status = f"FAILED (exit {code})"
    return status, code, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only these benchmarks")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per benchmark (default 1800)")
    options = parser.parse_args(argv)
    scripts = select(options.names)
    if not scripts:
        print("no benchmarks found")
        return 0
    results = []
    for script in scripts:
        print(f"== {script.name}", flush=True)
        status, code, seconds = run_one(script, options.timeout)
        print(f"== {script.name}: {status} in {seconds:.1f} s\n", flush=True)
        results.append((script.name, status, code, seconds))
    width = max(len(name) for name, *_ in results)
    print("== summary")
    for name, status, _, seconds in results:
        print(f"  {name.ljust(width)}  {seconds:7.1f} s  {status}")
    failed = [name for name, status, code, _ in results if code not in (0, 2)]
    if failed:
        print(f"failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
