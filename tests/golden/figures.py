"""Golden cycle figures: what ``npu-sim run`` reports for every example model, pinned.

Every example graph in ``examples/``, and every converted model in ``tests/data/converted/``
(they keep the vector and LUT units busy, with int16, int32 and fp32 work), runs on the
``edge`` and ``tiny`` presets (seeded random inputs, as ``--random-inputs 0``; the stateful
graphs also for three invocations), and its
timing figures are kept in ``tests/golden/cycles.json``: ``total_cycles``,
``per_invocation_cycles``, DDR read/write bytes, ``peak_tcm_bytes`` and the busy cycles of
every unit (a setup cycle more on a unit shows there even where that unit is off the
critical path).

``tests/golden/test_golden.py`` compares a fresh measurement with the file. A change that
moves timing regenerates it with ``make golden`` (this module run as a script), which prints
what moved; the commit then shows the new figures in its diff and says why they moved.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

import npu_sim
from npu_sim.inputs import index_limits, random_array

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: where the pinned models are (their names are distinct)
MODEL_DIRS = (EXAMPLES, ROOT / "tests" / "data" / "converted")
GOLDEN_FILE = Path(__file__).with_name("cycles.json")
PRESETS = ("edge", "tiny")
#: graphs whose TOSA variables carry state between invocations: also pinned over 3 invocations
STATEFUL = {"lstm_stateful_int8": 3, "variable_counter_int32": 3}
FIGURES = ("total_cycles", "per_invocation_cycles", "ddr_read_bytes", "ddr_write_bytes", "peak_tcm_bytes",
           "busy_cycles")


def cases() -> list[tuple[str, str, int]]:
    """``(model, preset, invocations)`` of every golden case, in file order."""
    models = sorted(p.stem for folder in MODEL_DIRS for p in folder.glob("*.tosa"))
    out = []
    for model in models:
        for preset in PRESETS:
            out.append((model, preset, 1))
            if model in STATEFUL:
                out.append((model, preset, STATEFUL[model]))
    return out


def case_key(model: str, preset: str, invocations: int) -> str:
    return f"{model} on {preset}" + (f" -n {invocations}" if invocations > 1 else "")


def measure(model: str, preset: str, invocations: int) -> dict[str, Any]:
    """The golden figures of one case, from a fresh simulation."""
    graph = npu_sim.load_graph(next(folder / f"{model}.tosa" for folder in MODEL_DIRS
                                    if (folder / f"{model}.tosa").is_file()))
    rng = np.random.default_rng(0)
    limits = index_limits(graph)
    per = [{name: random_array(t, rng, index_limit=limits.get(name)) for name, t in graph.input_types.items()}
           for _ in range(invocations)]
    inputs = {name: np.stack([p[name] for p in per]) for name in graph.input_types}
    if invocations == 1:
        inputs = per[0]
    summary = npu_sim.simulate(graph, preset, inputs, invocations=invocations).summary
    figures = {key: summary[key] for key in FIGURES}
    figures["busy_cycles"] = dict(sorted(figures["busy_cycles"].items()))
    return figures


def measure_all() -> dict[str, dict[str, Any]]:
    return {case_key(*case): measure(*case) for case in cases()}


def read_golden() -> dict[str, dict[str, Any]]:
    return json.loads(GOLDEN_FILE.read_text())


def differences(golden: dict[str, Any], measured: dict[str, Any]) -> list[str]:
    """One readable line per figure that differs (``model on preset: figure golden -> measured``)."""
    lines = []
    for key in sorted(set(golden) | set(measured)):
        if key not in golden:
            lines.append(f"{key}: new case")
            continue
        if key not in measured:
            lines.append(f"{key}: case removed")
            continue
        for figure in FIGURES:
            old, new = golden[key].get(figure), measured[key].get(figure)
            if old != new:
                lines.append(f"{key}: {figure} {_show(old)} -> {_show(new)}")
    return lines


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return str(value)


def write_golden(measured: dict[str, dict[str, Any]]) -> None:
    """One case per line group, keys sorted: a timing change is a small, readable diff."""
    GOLDEN_FILE.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate tests/golden/cycles.json and print what moved.")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if a figure moved")
    args = parser.parse_args(argv)
    measured = measure_all()
    golden = read_golden() if GOLDEN_FILE.exists() else {}
    diff = differences(golden, measured)
    print("\n".join(diff) if diff else "golden figures unchanged")
    if args.check:
        return 1 if diff else 0
    if diff:
        write_golden(measured)
        print(f"wrote {GOLDEN_FILE.relative_to(ROOT)}: say in the commit why these figures moved")
    return 0


if __name__ == "__main__":
    sys.exit(main())
