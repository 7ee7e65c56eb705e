#!/usr/bin/env python3
"""Scheduling time against graph size: does compiling stay linear as graphs grow?

Three families of growing graphs (benchmarks/scaling_graphs.py): an fp32 LSTM unrolled over
1 to 64 steps, an int8 MobileNetV2 (width 0.35) at resolutions 32 to 224, and int8 ResNets of
bottleneck blocks from (1, 1, 1, 1) through ResNet-50's (3, 4, 6, 3) to ResNet-101's
(3, 4, 23, 3), at 112x112. Each graph is compiled (``npu_sim.simulation.compile_graph``: the
whole scheduler, spill-and-recompile included) on every preset, best of ``--repeats``. The time
is this process's CPU time (``time.process_time``, numpy's BLAS on one thread): the machine may be
shared, and wall time would count the other processes' work, which swamps the fit's small graphs.

The size of a graph is what the scheduler works through: for the LSTMs and ResNets, their TOSA
operators plus the commands they become (a fused LSTM cell is 23 operators but two commands);
for MobileNetV2, the same operators at every resolution, the image's pixels (the data its
tiles cover). Per family and preset the exponent ``b`` of ``seconds = a * size^b`` is fitted
(least squares in log-log) over the largest four sizes, where the fixed costs no longer hide
the growth. Goal: ``b <= 1.1``.

Usage: python benchmarks/bench_schedule_scaling.py [--hw NAME ...] [--families NAME ...]
[--repeats N] [--quick]. Writes benchmarks/results/schedule_scaling.json; exits 2 when an
exponent misses the goal.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # (as npu-sim's CLI; before numpy is imported)

from benchmarks.common import goal_mark, table, write_result  # noqa: E402
from benchmarks.scaling_graphs import mobilenet_v2, resnet, unrolled_lstm  # noqa: E402
from npu_sim.hw.config import load_hw_config  # noqa: E402
from npu_sim.simulation import compile_graph  # noqa: E402
from npu_sim.tosa.ir import Graph  # noqa: E402

GOAL = 1.1
PRESETS = ("tiny", "edge", "server", "ethos-u55-256", "ethos-u65-256", "ethos-u85-256")
def _work(operators: int, commands: int, _value: Any) -> int:
    return operators + commands


def _pixels(_operators: int, _commands: int, resolution: Any) -> int:
    return int(resolution) ** 2


#: family -> (size label, sizes, builder, the size a fit counts); ``--quick``: the first four sizes
FAMILIES: dict[str, tuple[str, list[Any], Callable[[Any], Graph], Callable[[int, int, Any], int]]] = {
    "lstm": ("steps", [1, 2, 4, 8, 16, 32, 64], unrolled_lstm, _work),
    "mobilenet_v2": ("resolution", [32, 64, 96, 128, 160, 224], mobilenet_v2, _pixels),
    "resnet": ("blocks", [(1, 1, 1, 1), (2, 2, 2, 2), (3, 4, 6, 3), (3, 4, 23, 3)], resnet, _work),
}
FIT_POINTS = 4


def fitted_exponent(sizes: list[int], seconds: list[float]) -> float | None:
    """The slope of log(seconds) against log(sizes), least squares (None below two sizes)."""
    xs = [math.log(s) for s in sizes]
    ys = [math.log(t) for t in seconds]
    if len(set(xs)) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def measure(graph: Graph, preset: str, repeats: int) -> tuple[float, int]:
    """Best compile CPU time of ``graph`` on ``preset`` and the Program's command count."""
    hw = load_hw_config(preset)
    best, commands = math.inf, 0
    for _ in range(repeats):
        start = time.process_time()
        program = compile_graph(graph, hw)
        best = min(best, time.process_time() - start)
        commands = sum(1 for _ in program.walk())
    return best, commands


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--hw", nargs="+", default=list(PRESETS), metavar="NAME")
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="the four smallest sizes of each family")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    options = parser.parse_args(argv)
    rows, fits = [], []
    for family in options.families:
        label, sizes, build, counted_size = FAMILIES[family]
        graphs = [(size, build(size)) for size in (sizes[:4] if options.quick else sizes)]
        for preset in options.hw:
            points = []
            for size, graph in graphs:
                seconds, commands = measure(graph, preset, options.repeats)
                operators = sum(len(block.operators) for block in graph.blocks())
                counted = counted_size(operators, commands, size)
                rows.append({"family": family, "hw": preset, label: size, "operators": operators,
                             "commands": commands, "size": counted, "seconds": seconds})
                points.append((counted, seconds))
                print(f"  {family} {label}={size} on {preset}: {commands} commands, {seconds:.3f} s", flush=True)
            tail = points[-FIT_POINTS:]
            exponent = fitted_exponent([c for c, _ in tail], [s for _, s in tail])
            fits.append({"family": family, "hw": preset, "exponent": exponent,
                         "sizes": [c for c, _ in points], "seconds": [s for _, s in points]})
    print()
    print(f"schedule seconds ~ size^b (operators + commands; MobileNetV2: pixels), fitted over the largest "
          f"{FIT_POINTS} sizes; goal b <= {GOAL}")
    print(table(["family", "hw", "size", "seconds", "b", "goal"],
                [[f["family"], f["hw"], f"{f['sizes'][0]}..{f['sizes'][-1]}",
                  f"{f['seconds'][0]:.3f}..{f['seconds'][-1]:.3f}", f["exponent"],
                  goal_mark(f["exponent"], GOAL)] for f in fits]))
    worst = max((f["exponent"] for f in fits if f["exponent"] is not None), default=None)
    path = write_result("schedule_scaling", {"goal": {"exponent": GOAL}, "definitions": __doc__, "rows": rows,
                                             "fits": fits, "worst_exponent": worst}, options.out)
    print(f"worst exponent {worst:.2f}" if worst is not None else "no fit")
    print(f"results: {path}")
    return 2 if worst is not None and worst > GOAL else 0


if __name__ == "__main__":
    sys.exit(main())
