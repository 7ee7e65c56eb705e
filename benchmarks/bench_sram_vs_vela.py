#!/usr/bin/env python3
"""npu-sim's peak TCM beside Vela 5.2's ``sram_memory_used`` on every example model and Ethos-U preset.

For every ``.tosa`` and ``.tflite`` in ``examples/``, every ``.tosa`` in ``benchmarks/models/``
(and ``benchmarks/models/real/`` when built) and each Ethos-U accelerator of
:data:`benchmarks.bench_vela.MATCHES`, runs vela with that accelerator's system config and
memory mode (its summary CSV's ``sram_memory_used``, KiB, and ``cycles_total``) and npu-sim on
the matched preset, one invocation, inputs ``random_inputs(seed=0)``. Per pair:

* ``peak_tcm_bytes`` (the plan's TCM footprint) over Vela's SRAM bytes, goal <= 1.0 (issue 27,
  "Below Vela's SRAM"), with ``tcm_lower_bound_bytes`` (the most bytes live at once);
* the constants' share of the TCM at its peak (``tcm_peak.by_kind``) and
  ``tcm_resident_constant_bytes`` (0 where the preset streams its constants,
  ``tcm.constant_stream_slack_fraction``);
* ``resident_pool_peak_tcm_bytes``: npu-sim's peak on the same preset with the resident constant
  pool and whole weights (``tcm.constant_stream_slack_fraction: null``), what streaming saves;
* ``unstriped_peak_tcm_bytes`` and ``unstriped_cycles``: the same preset without striped chains
  (``stripes.slack_fraction: null``: every operation on whole activation maps), what the stripes
  save and cost; ``size_peak_tcm_bytes`` and ``size_cycles``: with ``stripes.optimise: size``
  (``--optimise size``: the stripes that need the fewest bytes, whatever they cost);
  ``striped_chains`` and ``tcm_lower_bound_unstriped_bytes`` (the plan's bound with its rolling
  buffers whole);
* our cycles over Vela's ``cycles_total`` beside it, goal 0.8-1.25 (streaming costs DMA time);
* the three largest tensors in the TCM at its peak (what to shrink, split or stream).

Vela is found as bench_vela.py finds it (``--vela PATH``, ``$VELA``, ``benchmarks/.venv-vela``,
the PATH); without it the benchmark prints "skipped" and exits 0. Where either side refuses a
model the row says who and why.

Usage: python benchmarks/bench_sram_vs_vela.py [--vela PATH] [--accelerators NAME ...]
[--models PATH ...] [--out DIR]. Writes benchmarks/results/sram_vs_vela.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import npu_sim  # noqa: E402
from benchmarks.bench_vela import MATCHES, Match, find_vela, run_vela, vela_version  # noqa: E402
from benchmarks.common import HERE, goal_mark, table, write_result  # noqa: E402
from benchmarks.graphs import random_inputs  # noqa: E402
from npu_sim.hw.config import HwConfig, deep_merge, hw_config_from_dict, load_hw_config  # noqa: E402

ROOT = HERE.parent
#: peak TCM over Vela's SRAM: at most this
SRAM_GOAL = 1.0
#: our cycles over Vela's: within this range
CYCLE_GOAL = (0.8, 1.25)
#: tensors listed per row (the largest at the peak)
TOP_TENSORS = 3


def default_models() -> list[Path]:
    """The example models (a .tflite goes to Vela as it is, to npu-sim through its converter), the
    benchmark models and the real ones when built."""
    examples = ROOT / "examples"
    return sorted(examples.glob("*.tosa")) + sorted(examples.glob("*.tflite")) + \
        sorted((HERE / "models").glob("*.tosa")) + sorted((HERE / "models" / "real").glob("*.tosa"))


def resident_pool_preset(preset: str) -> HwConfig:
    """``preset`` with the resident constant pool and whole weights (constants not streamed)."""
    data = deep_merge(load_hw_config(preset).model_dump(mode="json"),
                      {"tcm": {"constant_stream_slack_fraction": None}})
    return hw_config_from_dict(data, f"{preset} (resident pool)")


def stripes_preset(preset: str, optimise: str, slack: float | None) -> HwConfig:
    """``preset`` with its ``stripes`` section set (slack None, performance: no stripes)."""
    data = deep_merge(load_hw_config(preset).model_dump(mode="json"),
                      {"stripes": {"optimise": optimise, "slack_fraction": slack}})
    return hw_config_from_dict(data, f"{preset} (stripes: {optimise}, {slack})")


def run_ours(path: Path, preset: str) -> dict[str, Any]:
    """Our peak TCM and its parts, cycles, and the peak with the resident pool, without stripes
    and with the fewest-bytes stripes, on ``preset``."""
    try:
        graph = npu_sim.load_graph(path)
        inputs = random_inputs(graph, seed=0)
        summary = npu_sim.simulate(graph, preset, inputs).summary
        pooled = npu_sim.simulate(graph, resident_pool_preset(preset), inputs).summary
        unstriped = npu_sim.simulate(graph, stripes_preset(preset, "performance", None), inputs).summary
        size = npu_sim.simulate(graph, stripes_preset(preset, "size", None), inputs).summary
    except Exception as exc:  # our own rejection, reported like vela's
        return {"accepted": False, "reason": f"{type(exc).__name__}: {exc}"}
    peak = summary["tcm_peak"]
    return {"accepted": True, "cycles": int(summary["total_cycles"]),
            "peak_tcm_bytes": int(summary["peak_tcm_bytes"]),
            "tcm_lower_bound_bytes": int(summary["tcm_lower_bound_bytes"]),
            "tcm_resident_constant_bytes": int(summary["tcm_resident_constant_bytes"]),
            "peak_live_tcm_bytes": int(peak["bytes"]), "by_kind": dict(peak["by_kind"]),
            "top_tensors": [{"name": t["name"], "kind": t["kind"], "size_bytes": t["size_bytes"]}
                            for t in peak["tensors"][:TOP_TENSORS]],
            "resident_pool_peak_tcm_bytes": int(pooled["peak_tcm_bytes"]),
            "resident_pool_cycles": int(pooled["total_cycles"]),
            "striped_chains": int(summary["stripes"]["count"]),
            "tcm_lower_bound_unstriped_bytes": int(summary["tcm_lower_bound_unstriped_bytes"]),
            "unstriped_peak_tcm_bytes": int(unstriped["peak_tcm_bytes"]),
            "unstriped_cycles": int(unstriped["total_cycles"]),
            "size_peak_tcm_bytes": int(size["peak_tcm_bytes"]), "size_cycles": int(size["total_cycles"])}


def compare(path: Path, match: Match, vela: Path, work: Path) -> dict[str, Any]:
    """One model on one accelerator: Vela's SRAM and cycles, ours, and their ratios."""
    v = run_vela(vela, path, match, work / f"{path.stem}-{match.accelerator}")
    o = run_ours(path, match.preset)
    row: dict[str, Any] = {"model": path.stem, "accelerator": match.accelerator, "preset": match.preset,
                           "vela": v, "ours": o}
    if v["accepted"] and o["accepted"]:
        sram = float(v["csv"].get("sram_memory_used") or 0) * 1024
        v["sram_memory_used_bytes"] = int(round(sram))
        row["sram_ratio"] = o["peak_tcm_bytes"] / sram if sram else None
        row["cycle_ratio"] = o["cycles"] / v["cycles_total"] if v["cycles_total"] else None
        row["unstriped_sram_ratio"] = o["unstriped_peak_tcm_bytes"] / sram if sram else None
        row["size_sram_ratio"] = o["size_peak_tcm_bytes"] / sram if sram else None
        row["size_cycle_ratio"] = o["size_cycles"] / v["cycles_total"] if v["cycles_total"] else None
    return row


def _kib(value: float) -> float:
    return round(value / 1024, 1)


def _constant_percent(o: dict[str, Any]) -> float | None:
    """The constants' share of the TCM at its peak, in percent."""
    live = o["peak_live_tcm_bytes"]
    return round(100 * o["by_kind"].get("constant", 0) / live, 1) if live else None


def _cycle_mark(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    return "ok" if CYCLE_GOAL[0] <= ratio <= CYCLE_GOAL[1] else "MISS"


def compared_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    """The table's rows of the pairs both sides compiled."""
    out = []
    for r in rows:
        if "sram_ratio" not in r:
            continue
        v, o = r["vela"], r["ours"]
        top = ", ".join(f"{t['name'][:32]} {_kib(t['size_bytes'])}" for t in o["top_tensors"])
        out.append([r["model"], r["accelerator"], _kib(v["sram_memory_used_bytes"]), _kib(o["peak_tcm_bytes"]),
                    r["sram_ratio"], goal_mark(r["sram_ratio"], SRAM_GOAL), _kib(o["tcm_lower_bound_bytes"]),
                    _constant_percent(o), _kib(o["resident_pool_peak_tcm_bytes"]),
                    _kib(o["unstriped_peak_tcm_bytes"]), o["striped_chains"], r["cycle_ratio"],
                    _cycle_mark(r["cycle_ratio"]), r["size_sram_ratio"], r["size_cycle_ratio"], top])
    return out


HEADERS = ["model", "accelerator", "vela SRAM KiB", "npu-sim peak KiB", "ratio", "goal", "lower bound KiB",
           "constants at peak %", "resident pool KiB", "unstriped KiB", "chains", "cycles ratio", "goal",
           "size: ratio", "size: cycles ratio", "largest at the peak (KiB)"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vela", metavar="PATH", help="the vela executable (default: $VELA, "
                        "benchmarks/.venv-vela/bin/vela, or vela on the PATH)")
    parser.add_argument("--accelerators", nargs="+", default=[m.accelerator for m in MATCHES],
                        choices=[m.accelerator for m in MATCHES])
    parser.add_argument("--models", nargs="+", type=Path, default=None, help="models (default: every example)")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    options = parser.parse_args(argv)
    vela = find_vela(options.vela)
    if vela is None:
        print("skipped: vela not found (give --vela PATH or $VELA, or run bench_vela.py --install-vela)")
        return 0
    version = vela_version(vela)
    print(f"vela {version} ({vela})")
    rows = []
    with tempfile.TemporaryDirectory(prefix="npu-sim-sram-") as tmp:
        for path in options.models or default_models():
            for match in (m for m in MATCHES if m.accelerator in options.accelerators):
                print(f"  {path.stem} on {match.accelerator} ...", flush=True)
                rows.append(compare(path, match, vela, Path(tmp)))
    print()
    print("peak TCM (npu-sim) against Vela's sram_memory_used, cycles beside")
    print(table(HEADERS, compared_rows(rows)))
    refused = [r for r in rows if "sram_ratio" not in r]
    if refused:
        print("\nnot compared")
        print(table(["model", "accelerator", "who", "reason"],
                    [[r["model"], r["accelerator"], "vela" if not r["vela"]["accepted"] else "npu-sim",
                      ((r["vela"] if not r["vela"]["accepted"] else r["ours"])["reason"])[:100]]
                     for r in refused]))
    out = write_result("sram_vs_vela", {"vela_version": version, "definitions": __doc__,
                                        "goals": {"sram_ratio_max": SRAM_GOAL, "cycle_ratio": list(CYCLE_GOAL)},
                                        "rows": rows}, options.out)
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
