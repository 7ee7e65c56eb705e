"""npu_sim.conversion_cache: converted models kept within a size limit, least recently used
evicted; ``npu-sim cache info|clear``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from npu_sim import conversion_cache as cache
from npu_sim.cli import main
from npu_sim.errors import ConfigError
from npu_sim.tosa import tflite_import

KWS = Path(__file__).resolve().parent / "data" / "tflite" / "ds_cnn_kws_int8.tflite"


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NPU_SIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(cache.MAX_BYTES_ENV, raising=False)
    return tmp_path / "cache"


def _key(i: int) -> str:
    return f"{i:064x}"


def _store_aged(i: int, size: int, used_time: float) -> Path:
    cache.store("tflite", _key(i), "mlir", "x" * size)
    path = cache.entry_path("tflite", _key(i), "mlir")
    os.utime(path, (used_time, used_time))
    return path


def _kept() -> list[str]:
    return [e.path.name[-6:-5] for e in cache.entries()]


def test_the_limit_evicts_the_least_recently_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.MAX_BYTES_ENV, "250")
    for i in range(3):
        _store_aged(i, 100, 1000.0 + i)                 # 0 oldest; storing 2 (300 B) evicts 0
    assert (_kept(), cache.info().size_bytes) == (["1", "2"], 200)
    assert cache.lookup("tflite", _key(1), "mlir") == "x" * 100   # a hit makes 1 the most recent
    cache.store("tflite", _key(3), "mlir", "y" * 100)  # evicts 2, now the least recently used
    assert _kept() == ["1", "3"]
    assert cache.lookup("tflite", _key(2), "mlir") is None


def test_an_entry_above_the_limit_is_not_kept_and_zero_keeps_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.MAX_BYTES_ENV, "1K")
    _store_aged(0, 1000, 1000.0)
    cache.store("tflite", _key(1), "mlir", "x" * 1025)
    assert _kept() == ["0"]
    monkeypatch.setenv(cache.MAX_BYTES_ENV, "0")
    cache.store("tflite", _key(2), "mlir", "x")
    assert cache.entries() == []


@pytest.mark.parametrize("text, size", [("", 1 << 30), ("123", 123), ("10M", 10 << 20), ("1.5 KiB", 1536),
                                        ("2g", 2 << 30), ("0", 0), ("1e7", 10**7), ("10MB", 10 << 20)])
def test_the_limit_is_a_size(monkeypatch: pytest.MonkeyPatch, text: str, size: int) -> None:
    monkeypatch.setenv(cache.MAX_BYTES_ENV, text)
    assert cache.max_bytes() == size


def test_a_bad_limit_is_refused_before_a_conversion(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.setenv(cache.MAX_BYTES_ENV, "-5")
    with pytest.raises(ConfigError, match="NPU_SIM_CACHE_MAX_BYTES='-5': not a size"):
        cache.lookup("tflite", _key(0), "mlir")
    assert main(["convert", str(KWS), "-o", str(tmp_path / "kws.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "NPU_SIM_CACHE_MAX_BYTES" in err
    assert not (tmp_path / "kws.json").exists()


def test_only_the_caches_own_files_count_and_go(private_cache: Path) -> None:
    _store_aged(0, 10, 1000.0)
    (private_cache / "notes.txt").write_text("mine")
    (private_cache / "tflite" / "model.mlir").write_text("mine too")
    stale = private_cache / "tflite" / ".tmp-abc.mlir"
    stale.write_text("left by a killed process")
    os.utime(stale, (1.0, 1.0))
    assert cache.info().entries == 1
    assert cache.clear() == (2, 10 + len("left by a killed process"))
    assert sorted(p.name for p in private_cache.rglob("*")) == ["model.mlir", "notes.txt", "tflite"]


def test_stale_temporary_files_are_swept_by_a_store(private_cache: Path) -> None:
    (private_cache / "tflite").mkdir(parents=True)
    stale, fresh = private_cache / "tflite" / ".tmp-1.mlir", private_cache / "tflite" / ".tmp-2.mlir"
    stale.write_text("old")
    fresh.write_text("being written")
    os.utime(stale, (1.0, 1.0))
    cache.store("tflite", _key(0), "mlir", "x")
    assert not stale.exists() and fresh.exists()


def test_entries_follow_the_umask() -> None:
    old = os.umask(0o022)
    try:
        path = _store_aged(0, 10, 1000.0)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644


def test_a_tflite_is_converted_once_and_the_cache_stays_under_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    data = KWS.read_bytes()
    text = tflite_import.tflite_to_mlir(data, "kws")
    size = len(text.encode())
    assert [e.size_bytes for e in cache.entries()] == [size]

    def no_converter(data: bytes, source: str) -> str:
        raise AssertionError("converted again")

    with monkeypatch.context() as patched:
        patched.setattr(tflite_import, "_convert", no_converter)
        assert tflite_import.tflite_to_mlir(data, "kws") == text     # from the cache
    cache.clear()
    monkeypatch.setenv(cache.MAX_BYTES_ENV, str(size - 1))        # smaller than the conversion
    for _ in range(2):
        assert tflite_import.tflite_to_mlir(data, "kws") == text
        assert cache.info().size_bytes <= size - 1 and cache.entries() == []

