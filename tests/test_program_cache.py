"""npu_sim.program_cache: a Program compiled once and read back by later runs of the same graph
on the same config, with the same figures, outputs and trace; any change to the graph, the
config, the options or the compiler's source compiles anew; a damaged entry is a miss."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

import npu_sim.simulation
from npu_sim import conversion_cache, program_cache
from npu_sim.api import load_graph, simulate
from npu_sim.cli import main
from npu_sim.hw.config import load_hw_config

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
KWS = EXAMPLES / "ds_cnn_kws_int8.tosa"


@pytest.fixture(autouse=True)
def cache_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The program cache on, in a folder of this test."""
    monkeypatch.setenv("NPU_SIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(program_cache.ENABLED_ENV, raising=False)
    monkeypatch.delenv(conversion_cache.MAX_BYTES_ENV, raising=False)
    return tmp_path / "cache"


def _inputs(graph) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {name: rng.integers(-128, 128, size=t.shape).astype(np.int8) for name, t in graph.input_types.items()}


def _same_run(a, b) -> None:
    """Two results agree on every figure, output and trace record."""
    for key in ("total_cycles", "ddr_read_bytes", "ddr_write_bytes", "peak_tcm_bytes", "ops", "energy_pj"):
        assert a.summary[key] == b.summary[key], key
    for name in a.outputs:
        assert a.outputs[name].tobytes() == b.outputs[name].tobytes()
    assert list(a.trace.commands) == list(b.trace.commands)


def test_a_second_run_reads_the_program_back_and_runs_the_same() -> None:
    graph = load_graph(KWS)
    inputs = _inputs(graph)
    plain = simulate(graph, "ethos-u85-256", inputs)
    first = simulate(graph, "ethos-u85-256", inputs, use_cache=True)
    second = simulate(graph, "ethos-u85-256", inputs, use_cache=True)
    assert (plain.summary["program_cache"], first.summary["program_cache"],
            second.summary["program_cache"]) == ("off", "stored", "hit")
    assert second.summary["total_cycles"] == 68629   # its softmax table loads behind the operation before it
    _same_run(plain, first)
    _same_run(plain, second)
    assert conversion_cache.info().entries == 1


def test_a_hit_does_not_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = load_graph(KWS)
    simulate(graph, "ethos-u55-256", _inputs(graph), use_cache=True)

    def no_compiling(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(npu_sim.simulation, "compile_graph", no_compiling)
    assert simulate(graph, "ethos-u55-256", _inputs(graph), use_cache=True).summary["program_cache"] == "hit"


def test_what_changes_the_program_changes_the_key() -> None:
    graph = load_graph(KWS)
    hw = load_hw_config("ethos-u85-256")
    options = (("spread_tcm", False),)
    key = program_cache.program_key(graph, hw, options)
    assert key == program_cache.program_key(load_graph(KWS), load_hw_config("ethos-u85-256"), options)
    other_hw = hw.model_copy(update={"tcm": hw.tcm.model_copy(update={"size_bytes": hw.tcm.size_bytes // 2})})
    changed = load_graph(KWS)
    weights = next(t for t in changed.main.tensors.values() if t.data is not None and t.data.size > 16)
    weights.data = weights.data.copy()
    weights.data.flat[0] ^= 1
    assert len({key, program_cache.program_key(graph, other_hw, options),
                program_cache.program_key(graph, hw, (("spread_tcm", True),)),
                program_cache.program_key(changed, hw, options)}) == 4


def test_a_changed_compiler_source_changes_the_fingerprint() -> None:
    module = Path(program_cache.__file__)
    before = module.stat()
    program_cache.compiler_fingerprint.cache_clear()
    old = program_cache.compiler_fingerprint()
    try:
        os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        program_cache.compiler_fingerprint.cache_clear()
        assert program_cache.compiler_fingerprint() != old
    finally:
        os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
        program_cache.compiler_fingerprint.cache_clear()
    assert program_cache.compiler_fingerprint() == old


@pytest.mark.parametrize("damage", [b"", b"not a pickle", pickle.dumps({"a": "dict"})])
def test_a_damaged_entry_is_a_miss(damage: bytes) -> None:
    graph = load_graph(KWS)
    first = simulate(graph, "ethos-u85-256", _inputs(graph), use_cache=True)
    [entry] = [e.path for e in conversion_cache.entries()]
    entry.write_bytes(damage)
    again = simulate(graph, "ethos-u85-256", _inputs(graph), use_cache=True)
    assert again.summary["program_cache"] == "stored"
    _same_run(first, again)


def test_a_graph_that_does_not_pickle_is_compiled_uncached() -> None:
    graph = load_graph(KWS)
    graph.unpicklable = lambda: None   # (a graph built in Python may carry anything)
    result = simulate(graph, "ethos-u85-256", _inputs(graph), use_cache=True)
    assert result.summary["program_cache"] == "uncached"
    assert conversion_cache.info().entries == 0


def test_the_cli_uses_the_cache_unless_told_not_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    def run(name: str, *extra: str) -> dict:
        assert main(["run", str(KWS), "--hw", "ethos-u55-256", "--random-inputs", "3", "-o",
                     str(tmp_path / name), *extra]) == 0
        return json.loads((tmp_path / name / "summary.json").read_text())

    first, second, fresh = run("a"), run("b"), run("c", "--no-cache")
    assert [s["program_cache"] for s in (first, second, fresh)] == ["stored", "hit", "off"]
    assert first["total_cycles"] == second["total_cycles"] == fresh["total_cycles"]
    for name in ("a", "b", "c"):
        assert (tmp_path / name / "trace.json").read_bytes() == (tmp_path / "a" / "trace.json").read_bytes()
    monkeypatch.setenv(program_cache.ENABLED_ENV, "0")
    assert run("d")["program_cache"] == "off"
    capsys.readouterr()
    assert main(["plan", str(KWS), "--hw", "ethos-u55-256", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["peak_tcm_bytes"] == first["peak_tcm_bytes"]
    assert main(["cache", "clear"]) == 0
    assert "removed 1 file(s)" in capsys.readouterr().out
