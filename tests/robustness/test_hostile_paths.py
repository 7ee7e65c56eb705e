"""Output directories and input files that cannot be used: exit 2 with one line naming the
path, before any work and without leftovers; -o replaced as a whole, never mixed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tests.robustness.hostile import ROOT, add_graph, counting_loop_graph, leftovers, npu_sim, save

EXAMPLE = ROOT / "examples" / "add_mul_fp32.tosa"


@pytest.fixture
def graph(tmp_path):
    return save(add_graph((4, 4)), tmp_path / "add.tosa")


@pytest.mark.parametrize("out, message", [
    ("", "-o: empty path"),
    ("afile", "exists and is not a directory"),
    ("/proc/npu-sim-out", "cannot"),
    ("/dev/full", "exists and is not a directory"),
    ("a" * 300, "longer than"),
    ("dangling", "dangling symbolic link"),
    (".", "working directory"),
    ("mine", "a non-empty directory npu-sim did not write"),
])
@pytest.mark.parametrize("command", [["exec"], ["run", "--hw", "tiny"]])
def test_an_unusable_output_directory_is_refused_before_any_work(tmp_path, graph, command, out, message):
    (tmp_path / "afile").write_text("keep me")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    os.symlink(tmp_path / "nowhere" / "x", tmp_path / "dangling")
    before = sorted(p.name for p in tmp_path.iterdir())
    npu_sim([*command, graph, "--random-inputs", "0", "-o", out], tmp_path).refused(message)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "afile").read_text() == (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_an_unwritable_parent_is_refused(tmp_path, graph):
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    npu_sim(["exec", graph, "--random-inputs", "0", "-o", locked / "out"], tmp_path).refused("permission denied")


@pytest.mark.parametrize("make, message", [
    (lambda d: os.mkfifo(d / "g.tosa"), "not a regular file"),
    (lambda d: os.symlink("/dev/zero", d / "g.tosa"), "not a regular file"),
    (lambda d: (d / "g.tosa").mkdir(), "is a directory"),
    (lambda d: (d / "g.tosa").write_bytes(b""), "empty file"),
    (lambda d: (d / "g.tosa").write_bytes(EXAMPLE.read_bytes()[:100]), "g.tosa"),
    (lambda d: os.symlink(d / "missing", d / "g.tosa"), "dangling symbolic link"),
])
def test_a_graph_that_is_not_a_regular_readable_file_is_refused(tmp_path, make, message):
    make(tmp_path)
    for command in (["inspect"], ["exec", "--random-inputs", "0", "-o", "out"],
                    ["run", "--hw", "edge", "--random-inputs", "0", "-o", "out"]):
        npu_sim([command[0], "g.tosa", *command[1:]], tmp_path, timeout=30).refused(message)


@pytest.mark.parametrize("make, message", [
    (lambda d: os.mkfifo(d / "x.npy"), "not a regular file"),
    (lambda d: (d / "x.npy").write_bytes(b""), "not a readable .npy"),
    (lambda d: np.save(d / "x.npy", np.zeros((0,), np.int32)), "shape [0]"),
    (lambda d: np.save(d / "x.npy", np.zeros((4, 4), np.float32)), "holds float32"),
    (lambda d: np.save(d / "x.npy", np.zeros((4, 5), np.int32)), "shape [4, 5]"),
    (lambda d: (d / "x.npy").write_bytes(b"\x93NUMPY garbage"), "not a readable .npy"),
])
def test_a_bad_input_file_is_refused(tmp_path, graph, make, message):
    make(tmp_path)
    for command in (["exec"], ["run", "--hw", "edge"]):
        npu_sim([*command, graph, "-i", "x=x.npy", "--random-inputs", "0", "-o", "out"], tmp_path,
                timeout=30).refused("input 'x'", message)


def _outputs(directory):
    return sorted(p.name for p in (directory / "outputs").iterdir())


def test_a_reused_output_directory_holds_only_the_latest_run(tmp_path):
    first = save(add_graph((4, 4)), tmp_path / "first.tosa")
    assert npu_sim(["run", first, "--hw", "tiny", "--random-inputs", "0", "-o", "out"], tmp_path).code == 0
    assert _outputs(tmp_path / "out") == ["z.npy"]
    (tmp_path / "out" / "outputs" / "stale.npy").write_bytes(b"from an earlier run")
    assert npu_sim(["exec", EXAMPLE, "--random-inputs", "1", "-o", "out"], tmp_path).code == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["command"] == "exec"
    assert _outputs(tmp_path / "out") == sorted(os.path.basename(f) for f in summary["outputs"].values())
    assert "z.npy" not in _outputs(tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".npu-sim-output", "outputs", "summary.json"]
    assert leftovers(tmp_path) == []


def test_concurrent_runs_into_one_directory_each_leave_a_whole_run(tmp_path):
    graphs = [save(add_graph((4, 4 + k)), tmp_path / f"g{k}.tosa") for k in range(4)]
    for _ in range(2):
        with ThreadPoolExecutor(4) as pool:
            outcomes = list(pool.map(lambda g: npu_sim(["exec", g, "--random-inputs", "0", "-o", "out"], tmp_path),
                                     graphs))
        assert [o.code for o in outcomes] == [0] * 4
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        winner = summary["graph"]
        shape = summary["output_types"]["z"]["shape"]
        assert np.load(tmp_path / "out" / "outputs" / "z.npy").shape == tuple(shape)
        assert shape == [4, 4 + graphs.index(tmp_path / winner) if os.path.isabs(winner) else
                         4 + [g.name for g in graphs].index(os.path.basename(winner))]
        assert _outputs(tmp_path / "out") == ["z.npy"]
        assert leftovers(tmp_path) == []


def _default_interrupts() -> None:
    """In the child, before it runs Python: SIGINT raises as a shell's Ctrl-C does (a disposition the
    test process inherited, ignoring it, would otherwise pass to the child)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_until_working(child: subprocess.Popen, seconds: float = 2.0, limit: float = 20.0) -> None:
    """Until ``child`` has spent ``seconds`` of CPU time (it is past its imports, into the loop's
    work), or ``limit`` seconds have passed; Linux's /proc, else a fixed wait."""
    stat = Path(f"/proc/{child.pid}/stat")
    start = time.monotonic()
    while time.monotonic() - start < limit and child.poll() is None:
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            time.sleep(2.5)
            return
        if (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") >= seconds:
            return
        time.sleep(0.1)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_an_interrupted_run_exits_130_and_keeps_the_previous_results(tmp_path):
    graph = save(counting_loop_graph(1 << 16), tmp_path / "loop.tosa")   # ten seconds or more of work
    np.save(tmp_path / "x.npy", np.zeros(1 << 16, np.int32))
    np.save(tmp_path / "few.npy", np.array([2], np.int32))
    np.save(tmp_path / "many.npy", np.array([90_000], np.int32))
    assert npu_sim(["exec", graph, "-i", "x=x.npy", "-i", "n=few.npy", "-o", "out"], tmp_path).code == 0
    before = (tmp_path / "out" / "summary.json").read_text()
    child = subprocess.Popen([sys.executable, "-m", "npu_sim.cli", "run", str(graph), "--hw", "edge",
                              "-i", "x=x.npy", "-i", "n=many.npy", "-o", "out", "--max-loop-work", str(1 << 40)],
                             cwd=tmp_path, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=_default_interrupts)
    _wait_until_working(child)   # (a checkout without bytecode imports for a second or more)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=30)
    assert child.returncode == 130
    assert err.strip().splitlines() == ["error: interrupted"]
    assert (tmp_path / "out" / "summary.json").read_text() == before
    assert leftovers(tmp_path) == []
