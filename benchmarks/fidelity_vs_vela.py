#!/usr/bin/env python3
"""Layer-by-layer fidelity of npu-sim's cycles against Vela 5.2's performance estimate.

For every ``.tosa`` and ``.tflite`` in ``examples/`` (and ``.tosa`` in ``benchmarks/models/``)
and each Ethos-U accelerator (Vela compiles each file as it is: a ``.tflite`` through its TFLite
reader, which npu-sim follows with ``npu_support.source_operators``),
runs vela with that accelerator's default system config and memory mode and
``--verbose-performance`` (its ``<net>_per-layer.csv``), and npu-sim on the matched preset.
Prints Vela's per-layer cycles with the bound it implies (memory when an access-cycle column
exceeds the NPU cycles), both sides summed per operator class (conv, depthwise, elementwise,
table, pooling, reduction, data movement) with the ratio, and the totals (cycles and off-chip
bytes); then one table per accelerator: cycles, off-chip bytes and SRAM use against Vela's, and
the operators each side leaves to the host CPU. Layers are compared by class rather than one to
one because the two compilers lower and fuse differently (vela folds clamps into convolutions,
we fuse rescales).

Needs vela (``pip install .[calibrate]``, or ``--vela PATH``); see bench_vela.py for how it is
found. Usage: python benchmarks/fidelity_vs_vela.py [--vela PATH] [--accelerators ...]
[--models PATH ...]. Writes benchmarks/results/fidelity_vs_vela.json.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import npu_sim  # noqa: E402
from benchmarks.bench_vela import MATCHES, Match, find_vela, run_vela  # noqa: E402
from benchmarks.common import HERE, table, write_result  # noqa: E402
from benchmarks.graphs import random_inputs  # noqa: E402

ROOT = HERE.parent

# Operator class of a vela "Original Operator" or an npu-sim op name (upper-cased, no "_").
CLASSES = {
    "conv": ("CONV2D", "CONV3D", "FULLYCONNECTED", "MATMUL", "TRANSPOSECONV2D"),
    "depthwise": ("DEPTHWISECONV2D",),
    "table": ("TABLE", "LUT", "SIGMOID", "TANH", "EXP"),
    "pooling": ("MAXPOOL2D", "AVGPOOL2D", "AVGPOOL"),
    "reduction": ("REDUCESUM", "REDUCEMAX", "REDUCEMIN", "ARGMAX", "REDUCEANY", "REDUCEALL"),
    "data movement": ("COPY", "TRANSPOSE", "RESHAPE", "CONCAT", "SLICE", "PAD", "TILE", "GATHER",
                      "SCATTER", "MEMORYCOPY", "RESIZE", "IDENTITY", "LOAD"),
}


def op_class(name: str) -> str:
    """The operator class of ``name``, a fused chain by its first op that is not elementwise
    (a RESCALE folded into a REDUCE_SUM is a reduction; unlisted: elementwise)."""
    for part in name.split("+"):
        key = part.upper().replace("_", "").replace(" ", "")
        for cls, names in CLASSES.items():
            if key in names:
                return cls
    return "elementwise"


def vela_layers(out_dir: Path, stem: str) -> list[dict[str, Any]]:
    """Vela's per-layer rows: operator, class, cycles and the bound they imply."""
    files = sorted(out_dir.glob(f"{stem}_per-layer.csv"))
    if not files:
        return []
    rows = []
    with open(files[0], newline="") as handle:
        for row in csv.DictReader(handle):
            cycles = int(float(row["Op Cycles"]))
            npu = int(float(row["NPU"]))
            access = max(int(float(row[k])) for k in ("SRAM AC", "DRAM AC", "OnFlash AC", "OffFlash AC"))
            rows.append({"name": row["Name"], "op": row["Original Operator"],
                         "class": op_class(row["Original Operator"]), "cycles": cycles,
                         "bound": "memory" if access > npu else "compute"})
    return rows


def our_layers(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """npu-sim's ops of the first invocation: op, class, cycles and the bound summary.json gives.

    An op's cycles are those of its busier side, its compute commands or its DMAs (as Vela's
    Op Cycles are the larger of the NPU's and the memory accesses'), not its span from first
    load to last store: prefetched loads start long before the op and would count twice."""
    rows = []
    for op in summary["ops"]:
        if op.get("invocation", 0) != 0:
            continue
        compute, dma = op.get("compute_cycles", 0), op.get("dma_cycles", 0)
        rows.append({"name": op["name"], "op": op["op"], "class": op_class(op["op"]),
                     "cycles": int(max(compute, dma)),
                     "bound": op.get("bound") or ("memory" if dma > compute else "compute")})
    return rows


def run_ours(path: Path, preset: str) -> dict[str, Any]:
    try:
        graph = npu_sim.load_graph(path)
        summary = npu_sim.simulate(graph, preset, random_inputs(graph, seed=0)).summary
    except Exception as exc:  # our own rejection, reported like vela's
        return {"accepted": False, "reason": f"{type(exc).__name__}: {exc}"}
    per_invocation = summary["per_invocation_cycles"]
    first = per_invocation[0] if isinstance(per_invocation, list) else per_invocation
    invocations = max(1, int(summary["invocations"]))
    return {"accepted": True, "cycles": int(first),
            # off-chip traffic: what the DDR moves (whole bursts, short accesses as whole bursts),
            # as Vela counts its transfers; the payload beside it
            "ddr_bytes": (int(summary["ddr_read_burst_bytes"]) + int(summary["ddr_write_burst_bytes"])) // invocations,
            "ddr_payload_bytes": (int(summary["ddr_read_bytes"]) + int(summary["ddr_write_bytes"])) // invocations,
            "peak_tcm_bytes": int(summary["peak_tcm_bytes"]),
            "cpu_ops": [f"{c['op']} ({c['dtype']})" for c in summary.get("cpu_ops", [])],
            "layers": our_layers(summary)}


def class_table(vela: list[dict[str, Any]], ours: list[dict[str, Any]]) -> list[list[Any]]:
    """Per operator class: vela's cycles, ours, ratio, and the bound each side mostly reports."""
    out = []
    for cls in sorted({r["class"] for r in vela} | {r["class"] for r in ours}):
        v = [r for r in vela if r["class"] == cls]
        o = [r for r in ours if r["class"] == cls]
        vc, oc = sum(r["cycles"] for r in v), sum(r["cycles"] for r in o)

        def mostly(rows: list[dict[str, Any]]) -> str:
            return statistics.mode([r["bound"] for r in rows]) if rows else "-"

        out.append([cls, len(v), vc, mostly(v), len(o), oc, mostly(o), oc / vc if vc else None])
    return out


def compare(path: Path, match: Match, vela: Path, work: Path) -> dict[str, Any]:
    out_dir = work / f"{path.stem}-{match.accelerator}"
    v = run_vela(vela, path, match, out_dir, extra=["--verbose-performance"])
    row: dict[str, Any] = {"model": path.stem, "accelerator": match.accelerator,
                           "vela": v, "ours": run_ours(path, match.preset)}
    if v["accepted"]:
        v["layers"] = vela_layers(out_dir, path.stem)
    return row


def print_row(row: dict[str, Any]) -> None:
    v, o = row["vela"], row["ours"]
    print(f"\n== {row['model']} on {row['accelerator']}")
    if not (v["accepted"] and o["accepted"]):
        who = "vela" if not v["accepted"] else "npu-sim"
        print(f"not compared: {who}: {(v if not v['accepted'] else o)['reason']}")
        return
    print(table(["vela layer", "op", "class", "vela cycles", "bound"],
                [[r["name"], r["op"], r["class"], r["cycles"], r["bound"]] for r in v["layers"] if r["cycles"]]))
    print(table(["class", "vela n", "vela cycles", "vela bound", "our n", "our cycles", "our bound", "ratio"],
                class_table(v["layers"], o["layers"])))
    # Vela's network estimate is cycles_total, the sum of its layers' Op Cycles (each the larger
    # of the NPU's cycles and the memory access cycles); cycles_npu leaves out the memories.
    ratio = o["cycles"] / v["cycles_total"] if v["cycles_total"] else None
    ddr = o["ddr_bytes"] / v["offchip_bytes"] if v["offchip_bytes"] else None
    print(f"total: vela {v['cycles_total']} (NPU alone {v['cycles_npu']}) ours {o['cycles']} ratio {ratio:.2f}"
          if ratio else "total: -")
    print(f"off-chip bytes: vela {v['offchip_bytes']} ours {o['ddr_bytes']}" + (f" ratio {ddr:.2f}" if ddr else ""))
    row["cycle_ratio"], row["ddr_ratio"] = ratio, ddr


#: Where npu-sim knowingly differs from Vela (printed under the tables and kept in the JSON).
NOTES = (
    "On the Ethos-U presets weights stream from their home at every use, as Vela's schedules read "
    "them (tcm.keep_reused_constants: false); an unrolled LSTM reads its gate weights every step. "
    "They pass through TCM buffers that live only around their operation (tcm.constant_stream_slack_"
    "fraction: the small constants in per-operation chunks, the weights in output-channel stripes where "
    "whole ones would raise the peak), where Vela's weight decoder may read them in place: our TCM peak "
    "against Vela's SRAM is benchmarks/bench_sram_vs_vela.py.",
    "The U55 presets are Vela's Shared_Sram: graph inputs, outputs and feature maps in the SRAM (our "
    "TCM), constants in the read-only flash (our DDR), which nothing writes. Vela's Shared_Sram arena "
    "is unbounded (ResNet-50: 7,056 KiB), the presets' SRAM 8 MiB.",
    "Vela 5.2 refuses a TOSA graph with an operator its NPU cannot run (no CPU fallback for TOSA "
    "input: a softmax's int32 REDUCE_MAX on a U55, any float); npu-sim runs those on the host CPU "
    "(cpu_ops) and reports them in the npu-sim CPU ops column.",
    "U-Net on the U55: Vela reads 131 KB from the flash for the RESCALE after its TRANSPOSE_CONV2D "
    "(131,072 cycles); no memory of ours holds that tensor off-chip, hence 0.12x its off-chip bytes.",
    "Operation counts differ per class: Vela splits RESCALEs and folds CLAMPs where we fuse "
    "chains into one NPU operation, and lowers a sum over H or W to Transpose + ReduceSum (+ Sub), "
    "which we time as one operation with the same mechanisms (vector.transpose_reductions).",
    "Our per-operation cycles are the busier of its compute commands and its DMAs; its loads "
    "are prefetched behind earlier operations, so the total is less than their sum. Vela sums "
    "its operations' cycles.",
    "Off-chip bytes here are what our DDR moves (whole bursts; the payload is in the JSON as "
    "ddr_payload_bytes). Vela's also count re-reads we do not make (scales per OFM block, weights "
    "per use) and compressed weights. conv_rescale_int8 (hand-built, not a real model) stores raw "
    "TOSA constants, 4x Vela's compressed encoding in burst bytes on the U55.",
)


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    return ours / theirs if ours is not None and theirs else None


def preset_rows(rows: list[dict[str, Any]], accelerator: str) -> list[list[Any]]:
    """One accelerator's models: cycles, off-chip bytes and SRAM use, Vela's beside ours with the
    ratio, and the operators each side leaves to the host CPU (Vela refuses a TOSA graph it
    cannot run whole: its reason stands in its columns)."""
    out = []
    for r in (r for r in rows if r["accelerator"] == accelerator):
        v, o = r["vela"], r["ours"]
        ours_cpu = ", ".join(dict.fromkeys(o.get("cpu_ops", []))) or "-" if o["accepted"] else "-"
        if not v["accepted"] or not o["accepted"]:
            why = v["reason"] if not v["accepted"] else o["reason"]
            out.append([r["model"], "refused" if not v["accepted"] else v["cycles_total"], o.get("cycles"), None,
                        None, o.get("ddr_bytes"), None, None, _kib(o.get("peak_tcm_bytes")), why[:60], ours_cpu])
            continue
        sram_kib = float(v["csv"].get("sram_memory_used", 0) or 0)
        out.append([r["model"], v["cycles_total"], o["cycles"], _ratio(o["cycles"], v["cycles_total"]),
                    v["offchip_bytes"], o["ddr_bytes"], _ratio(o["ddr_bytes"], v["offchip_bytes"]),
                    round(sram_kib, 1), _kib(o["peak_tcm_bytes"]), v.get("cpu_operators") or 0, ours_cpu])
    return out


def _kib(count: int | None) -> float | None:
    return None if count is None else round(count / 1024, 1)


PRESET_COLUMNS = ["model", "vela cycles", "npu-sim cycles", "ratio", "vela off-chip B", "npu-sim DDR burst B",
                  "ratio", "vela SRAM KiB", "npu-sim TCM peak KiB", "vela CPU ops", "npu-sim CPU ops"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vela", metavar="PATH")
    parser.add_argument("--accelerators", nargs="+", default=[m.accelerator for m in MATCHES],
                        choices=[m.accelerator for m in MATCHES])
    parser.add_argument("--models", nargs="+", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    options = parser.parse_args(argv)
    vela = find_vela(options.vela)
    if vela is None:
        print("skipped: vela not found (pip install .[calibrate], or give --vela PATH)")
        return 0
    models = options.models or sorted((ROOT / "examples").glob("*.tosa")) + sorted(
        (ROOT / "examples").glob("*.tflite")) + sorted((HERE / "models").glob("*.tosa"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="npu-sim-fidelity-") as tmp:
        for path in models:
            for match in (m for m in MATCHES if m.accelerator in options.accelerators):
                row = compare(path, match, vela, Path(tmp))
                print_row(row)
                rows.append(row)
    for accelerator in dict.fromkeys(r["accelerator"] for r in rows):
        print(f"\n{accelerator}: npu-sim (preset {accelerator}) against Vela 5.2")
        print(table(PRESET_COLUMNS, preset_rows(rows, accelerator)))
    print("\nnotes (where npu-sim knowingly differs from Vela)")
    for note in NOTES:
        print(f"- {note}")
    out = write_result("fidelity_vs_vela", {"rows": rows, "notes": list(NOTES)}, options.out)
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
