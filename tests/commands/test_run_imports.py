"""What a plain ``npu-sim run`` of a ``.tosa`` file imports: not the readers of other formats (the
cache itself it does use, for compiled Programs: :mod:`npu_sim.program_cache`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "ds_cnn_kws_int8.tosa"

SCRIPT = """
import json, sys
from npu_sim.cli import main
status = main(["run", sys.argv[1], "--hw", "ethos-u55-256", "--random-inputs", "0", "-o", sys.argv[2]])
print(json.dumps({"status": status, "modules": sorted(sys.modules)}))
"""


def test_a_tosa_run_loads_neither_the_tflite_nor_the_mlir_reader(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(MODEL), str(tmp_path / "out")],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == 0
    assert (tmp_path / "out" / "summary.json").is_file()
    modules = set(result["modules"])
    assert "npu_sim.tosa.loader" in modules
    unwanted = sorted(m for m in modules if m.startswith(("npu_sim.tosa.tflite", "npu_sim.tosa.mlir_",
                                                           "npu_sim.tosa.converted_graph",
                                                           "npu_sim.tosa.other_formats")))
    assert unwanted == []


COLLECTOR_SCRIPT = """
import atexit, gc, json, sys
import npu_sim.cli as cli
collections = []
gc.callbacks.append(lambda phase, info: collections.append(info["generation"]) if phase == "stop" else None)
atexit.register(lambda: print(json.dumps({"collections": collections, "enabled": gc.isenabled()})))
sys.argv = ["npu-sim", "run", sys.argv[1], "--hw", "ethos-u55-256", "--random-inputs", "0", "-o", sys.argv[2]]
cli.run()
"""


def test_the_console_script_starts_a_command_without_collecting_and_resumes_the_collector(tmp_path: Path) -> None:
    """typer's dispatch and the command's imports make the objects of the process's lifetime:
    no collection scans them (some 35 did); the collector runs again for the command."""
    done = subprocess.run([sys.executable, "-c", COLLECTOR_SCRIPT, str(MODEL), str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["enabled"] is True
    assert len(result["collections"]) <= 3


def _modules_of_a_run(model: Path, out: Path, cache: Path) -> set[str]:
    script = SCRIPT.replace("ethos-u55-256", "ethos-u85-256")
    env = {**os.environ, "NPU_SIM_CACHE": str(cache), "NPU_SIM_PROGRAM_CACHE": "1"}
    done = subprocess.run([sys.executable, "-c", script, str(model), str(out)], capture_output=True, text=True,
                          check=True, cwd=ROOT, env=env)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == 0
    return set(result["modules"])


def test_a_run_of_a_cached_program_and_converted_model_loads_neither_the_scheduler_nor_the_converter(
        tmp_path: Path) -> None:
    """The second run of a .tflite reads its graph and its Program back from the cache: it imports
    no scheduler module (:func:`npu_sim.simulation._scheduler`) and none of the converter's
    (:mod:`npu_sim.tosa.graph_cache`)."""
    model = ROOT / "examples" / "lstm_kws_int8.tflite"
    first = _modules_of_a_run(model, tmp_path / "first", tmp_path / "cache")
    assert "scheduler.schedule" in first and "npu_sim.tosa.converted_graph" in first
    again = _modules_of_a_run(model, tmp_path / "again", tmp_path / "cache")
    assert json.loads((tmp_path / "again" / "summary.json").read_text())["program_cache"] == "hit"
    assert sorted(m for m in again if m.split(".")[0] == "scheduler") == []
    assert sorted(m for m in again if m.startswith(("npu_sim.tosa.tflite", "npu_sim.tosa.mlir_",
                                                    "npu_sim.tosa.converted_graph"))) == []
