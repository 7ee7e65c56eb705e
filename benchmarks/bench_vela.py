#!/usr/bin/env python3
"""npu-sim's cycles beside Arm's Ethos-U compiler (ethos-u-vela 5.2) on matched configs.

Vela reads .tosa files directly and prints a performance estimate; it also writes
``<network>_summary_<system config>.csv`` into its output folder, which this script
parses (``cycles_total``, ``cycles_npu``, the off-chip bytes, ``nn_macs``) along with
the "CPU operators" line it prints. Each accelerator is compared with the npu-sim
preset made to match it (see the preset files for their sources):

| accelerator    | vela --system-config / --memory-mode               | npu-sim preset |
|----------------|----------------------------------------------------|----------------|
| ethos-u55-128  | Ethos_U55_High_End_Embedded / Shared_Sram          | ethos-u55-128  |
| ethos-u55-256  | Ethos_U55_High_End_Embedded / Shared_Sram          | ethos-u55-256  |
| ethos-u65-256  | Ethos_U65_Client_Server / Dedicated_Sram_384KB     | ethos-u65-256  |
| ethos-u65-512  | Ethos_U65_Client_Server / Dedicated_Sram_384KB     | ethos-u65-512  |
| ethos-u85-256  | Ethos_U85_SYS_DRAM_Mid / Dedicated_Sram_384KB      | ethos-u85-256  |

(all with ``--config Arm/vela.ini``, the file shipped in the vela wheel). Off-chip
bytes are vela's DRAM bytes, or its off-chip flash bytes in Shared_Sram mode (where
vela keeps the feature maps, the graph's input and output included, in the SRAM, as the
U55 presets' memory roles do: their DDR is the read-only flash holding the constants).

Where vela rejects a graph (an exit code other than 0) the table says so with its
reason, the error lines of its output.

Vela is not a dependency of npu-sim and is never imported: it runs as a program.
Found, in this order: ``--vela PATH``, ``$VELA``, ``benchmarks/.venv-vela/bin/vela``,
``vela`` on the PATH. ``--install-vela`` creates ``benchmarks/.venv-vela`` and installs
ethos-u-vela==5.2.0 into it (with pip, from the package index). Without vela the
benchmark prints "skipped" and exits 0.

Usage: python benchmarks/bench_vela.py [--vela PATH | --install-vela] [--graphs NAME ...]
       [--accelerators NAME ...]. Writes benchmarks/results/vela.json.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import npu_sim  # noqa: E402
from benchmarks.common import HERE, table, write_result  # noqa: E402
from benchmarks.graphs import benchmark_graphs, random_inputs, tosa_file  # noqa: E402

VELA_VERSION = "5.2.0"
VELA_VENV = HERE / ".venv-vela"
TIMEOUT_SECONDS = 900


@dataclass(frozen=True)
class Match:
    """A vela accelerator/system/memory-mode triple and the npu-sim preset matched to it."""

    accelerator: str
    system_config: str
    memory_mode: str
    preset: str


MATCHES = (
    Match("ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram", "ethos-u55-128"),
    Match("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram", "ethos-u55-256"),
    Match("ethos-u65-256", "Ethos_U65_Client_Server", "Dedicated_Sram_384KB", "ethos-u65-256"),
    Match("ethos-u65-512", "Ethos_U65_Client_Server", "Dedicated_Sram_384KB", "ethos-u65-512"),
    Match("ethos-u85-256", "Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram_384KB", "ethos-u85-256"),
)


# --- finding vela -------------------------------------------------------------------------

def find_vela(explicit: str | None) -> Path | None:
    """The vela executable by ``--vela``, ``$VELA``, benchmarks/.venv-vela, then the PATH."""
    for candidate in (explicit, os.environ.get("VELA"), str(VELA_VENV / "bin" / "vela"), shutil.which("vela")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    if explicit:
        raise SystemExit(f"error: --vela {explicit}: not an executable file")
    return None


def install_vela() -> Path:
    """Create benchmarks/.venv-vela with ethos-u-vela==5.2.0 (pip, from the package index)."""
    print(f"installing ethos-u-vela=={VELA_VERSION} into {VELA_VENV} ...", flush=True)
    venv.EnvBuilder(with_pip=True, clear=False).create(VELA_VENV)
    subprocess.run([str(VELA_VENV / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
                    "-q", f"ethos-u-vela=={VELA_VERSION}"], check=True)
    return VELA_VENV / "bin" / "vela"


def vela_version(vela: Path) -> str:
    done = subprocess.run([str(vela), "--version"], capture_output=True, text=True, timeout=120)
    return done.stdout.strip() or done.stderr.strip()


# --- running vela -------------------------------------------------------------------------

def rejection_reason(output: str) -> str:
    """The error of a failed vela run in one line: from its last ``...Error:`` line on."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and not line.startswith("Warning")]
    start = max((i for i, line in enumerate(lines) if re.match(r"^[\w.]*(Error|Exception)\b", line)),
                default=max(len(lines) - 1, 0))
    reason = " ".join(lines[start:]) or "no output"
    return reason if len(reason) <= 240 else reason[:237] + "..."


def run_vela(vela: Path, tosa: Path, match: Match, out_dir: Path,
             extra: list[str] | None = None) -> dict[str, Any]:
    """Compile ``tosa`` with vela for ``match``; its estimate (or why it failed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [str(vela), str(tosa), "--accelerator-config", match.accelerator, "--config", "Arm/vela.ini",
           "--system-config", match.system_config, "--memory-mode", match.memory_mode,
           "--output-dir", str(out_dir), *(extra or [])]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return {"accepted": False, "reason": f"timed out after {TIMEOUT_SECONDS} s"}
    output = done.stdout + "\n" + done.stderr
    csv_files = sorted(out_dir.glob(f"{tosa.stem}_summary_*.csv"))
    if done.returncode != 0 or not csv_files:
        return {"accepted": False, "reason": rejection_reason(output) if done.returncode else
                "no summary CSV written"}
    with open(csv_files[0], newline="") as handle:
        row = next(csv.DictReader(handle))
    cpu = re.search(r"CPU operators = (\d+)", output)
    npu = re.search(r"NPU operators = (\d+)", output)
    offchip = "off_chip_flash" if match.memory_mode == "Shared_Sram" else "dram"
    return {
        "accepted": True,
        "cycles_total": int(float(row["cycles_total"])), "cycles_npu": int(float(row["cycles_npu"])),
        "offchip_memory": offchip,
        "offchip_bytes": int(float(row[f"{offchip}_total_bytes"])),
        "sram_bytes": int(float(row["sram_total_bytes"])),
        "nn_macs": int(float(row["nn_macs"])),
        "inference_time_s": float(row["inference_time"]),
        "cpu_operators": int(cpu.group(1)) if cpu else None,
        "npu_operators": int(npu.group(1)) if npu else None,
        "csv": {k: row[k] for k in row if k.startswith("cycles_") or k.endswith("_total_bytes")
                or k in ("system_config", "memory_mode", "arena_cache_size", "sram_memory_used")},
    }


def run_ours(graph, preset: str) -> dict[str, Any]:
    try:
        result = npu_sim.simulate(graph, preset, random_inputs(graph, seed=0))
    except Exception as exc:  # our own rejection, reported like vela's
        return {"accepted": False, "reason": f"{type(exc).__name__}: {exc}"}
    summary = result.summary
    return {"accepted": True, "cycles": int(summary["total_cycles"]),
            "ddr_bytes": int(summary["ddr_read_bytes"]) + int(summary["ddr_write_bytes"]),
            "macs": int(summary["macs"]), "peak_tcm_bytes": int(summary["peak_tcm_bytes"])}


# --- report -------------------------------------------------------------------------------

def print_tables(rows: list[dict[str, Any]]) -> None:
    accepted = [r for r in rows if r["vela"]["accepted"] and r["ours"]["accepted"]]
    print("cycles and off-chip bytes: npu-sim (matched preset) vs vela's estimate")
    print(table(["graph", "accelerator", "vela cycles", "npu-sim", "ratio", "vela offchip B", "npu-sim DDR B",
                 "ratio", "vela MACs", "npu-sim MACs", "cpu ops"],
                [[r["graph"], r["accelerator"], r["vela"]["cycles_total"], r["ours"]["cycles"],
                  r["ours"]["cycles"] / r["vela"]["cycles_total"] if r["vela"]["cycles_total"] else None,
                  r["vela"]["offchip_bytes"], r["ours"]["ddr_bytes"],
                  r["ours"]["ddr_bytes"] / r["vela"]["offchip_bytes"] if r["vela"]["offchip_bytes"] else None,
                  r["vela"]["nn_macs"], r["ours"]["macs"], r["vela"]["cpu_operators"]] for r in accepted]))
    rejected = [r for r in rows if not (r["vela"]["accepted"] and r["ours"]["accepted"])]
    if rejected:
        print()
        print("not compared")
        print(table(["graph", "accelerator", "who", "reason"],
                    [[r["graph"], r["accelerator"], "vela" if not r["vela"]["accepted"] else "npu-sim",
                      (r["vela"] if not r["vela"]["accepted"] else r["ours"])["reason"]] for r in rejected]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vela", metavar="PATH", help="the vela executable (default: $VELA, "
                        "benchmarks/.venv-vela/bin/vela, or vela on the PATH)")
    parser.add_argument("--install-vela", action="store_true",
                        help=f"install ethos-u-vela=={VELA_VERSION} into benchmarks/.venv-vela if not found")
    parser.add_argument("--graphs", nargs="+", metavar="NAME", help="benchmark graphs (default: all)")
    parser.add_argument("--accelerators", nargs="+", default=[m.accelerator for m in MATCHES],
                        choices=[m.accelerator for m in MATCHES])
    parser.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    options = parser.parse_args(argv)
    vela = find_vela(options.vela)
    if vela is None and options.install_vela:
        vela = install_vela()
    if vela is None:
        print("skipped: vela not found (give --vela PATH or $VELA, or run with --install-vela)")
        return 0
    version = vela_version(vela)
    print(f"vela {version} ({vela})")
    if version != VELA_VERSION:
        print(f"warning: the presets were matched to vela {VELA_VERSION}")
    matches = [m for m in MATCHES if m.accelerator in options.accelerators]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="npu-sim-vela-") as tmp:
        work = Path(tmp)
        for bench in benchmark_graphs(options.graphs):
            graph = bench.load()
            path = tosa_file(bench, work, graph)
            for match in matches:
                print(f"  {bench.name} on {match.accelerator} ...", flush=True)
                rows.append({"graph": bench.name, "accelerator": match.accelerator,
                             "vela_system_config": match.system_config, "vela_memory_mode": match.memory_mode,
                             "preset": match.preset,
                             "vela": run_vela(vela, path, match, work / f"{bench.name}-{match.accelerator}"),
                             "ours": run_ours(graph, match.preset)})
    print()
    print_tables(rows)
    out = write_result("vela", {"vela_version": version, "matches": [m.__dict__ for m in matches],
                                "definitions": __doc__, "rows": rows}, options.out)
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
