"""npu-sim cache info|clear: the cache of converted models shown and emptied."""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_sim import conversion_cache as cache
from npu_sim.cli import main


def test_the_cache_commands(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                            tmp_path: Path) -> None:
    private_cache = tmp_path / "cache"
    monkeypatch.setenv(cache.MAX_BYTES_ENV, "10M")
    monkeypatch.setenv("NPU_SIM_CACHE", str(private_cache))
    cache.store("tflite", "0" * 64, "mlir", "x" * 1536)
    assert main(["cache", "info"]) == 0
    assert capsys.readouterr().out == (f"cache: {private_cache}\n"
                                       "entries: 1, 1.5 KiB (1536 bytes) of 10 MiB (NPU_SIM_CACHE_MAX_BYTES; "
                                       "least recently used evicted)\n")
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out == f"cache: {private_cache}: removed 1 file(s), 1.5 KiB freed\n"
    assert cache.info().entries == 0


def test_a_bad_limit_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    monkeypatch.setenv("NPU_SIM_CACHE", str(tmp_path))
    monkeypatch.setenv(cache.MAX_BYTES_ENV, "lots")
    assert main(["cache", "info"]) == 2
    assert capsys.readouterr().err == ("error: NPU_SIM_CACHE_MAX_BYTES='lots': not a size (examples: 1073741824, "
                                       "500M, 2G; 0 keeps nothing)\n")
