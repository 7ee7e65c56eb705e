"""The user's cache of converted models and compiled Programs: bounded in size, least recently
used entries evicted.

A ``.tflite`` model is converted to TOSA MLIR once and kept by the SHA-256 of its bytes
(:mod:`npu_sim.tosa.tflite_import`), so that a sweep or a second run over it skips the
converter; the graph read from that text is kept beside it (:mod:`npu_sim.tosa.converted_graph`),
so that a second run skips reading the text too, and so is the graph of a large ``.tosa``
(:mod:`npu_sim.tosa.graph_cache`); the Program a graph compiles to on a config is
kept as well (:mod:`npu_sim.program_cache`), so that a second run skips scheduling. MLIR text of a large model is large
(ResNet-50: 52 MB), so the cache has a limit:
``$NPU_SIM_CACHE_MAX_BYTES`` (a byte count or a size such as ``500M``, ``2G``; default
1 GiB; 0 keeps nothing). Each store evicts the entries used longest ago until the cache
fits; an entry larger than the limit is never stored. Using an entry (a hit) marks it
recent (its modification time). ``npu-sim cache info|clear`` show and empty it.

Where: ``$NPU_SIM_CACHE``, else ``$XDG_CACHE_HOME/npu-sim``, else ``~/.cache/npu-sim``. Only
the files the cache writes (``<kind>/<sha256>.<suffix>`` and its temporary files) are
counted, evicted or cleared; whatever else is in that folder is left alone. Writes are
atomic and concurrent processes may share the cache: an entry evicted under a reader is a
miss, never an error.
"""

from __future__ import annotations

import os
import pickle
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from npu_sim.errors import ConfigError
from npu_sim.paths import follow_umask

#: Environment variable of the size limit.
MAX_BYTES_ENV = "NPU_SIM_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 1 << 30
#: The kinds of entry (one subfolder each): the converter's MLIR text of a ``.tflite``, the
#: graph read from it (:mod:`npu_sim.tosa.converted_graph`) and compiled Programs
#: (:mod:`npu_sim.program_cache`).
KINDS = ("tflite", "graph", "program")
#: A temporary file older than this is left over from a killed process, and removed.
STALE_TEMPORARY_SECONDS = 3600
_ENTRY = re.compile(r"^[0-9a-f]{64}\.[a-z]+$")
_TEMPORARY = re.compile(r"^\.tmp-.*")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}


def cache_dir() -> Path:
    """Where converted models are kept."""
    explicit = os.environ.get("NPU_SIM_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "npu-sim"


def max_bytes() -> int:
    """The size limit: ``$NPU_SIM_CACHE_MAX_BYTES`` or 1 GiB; :class:`ConfigError` if unreadable."""
    text = os.environ.get(MAX_BYTES_ENV, "")
    if not text.strip():
        return DEFAULT_MAX_BYTES
    match = _SIZE.match(text)
    if match is None:
        raise ConfigError(f"{MAX_BYTES_ENV}={text!r}: not a size (examples: 1073741824, 500M, 2G; 0 keeps nothing)")
    return int(float(match.group(1)) * (1 << _SHIFT[match.group(2).lower()]))


@dataclass(frozen=True)
class Entry:
    """One cached file: where, how big, when last used (seconds since the epoch)."""

    path: Path
    size_bytes: int
    used_time: float


@dataclass(frozen=True)
class CacheInfo:
    """What ``npu-sim cache info`` shows."""

    directory: Path
    entries: int
    size_bytes: int
    max_bytes: int


def entry_path(kind: str, key: str, suffix: str) -> Path:
    return cache_dir() / kind / f"{key}.{suffix}"


def lookup(kind: str, key: str, suffix: str) -> str | None:
    """The text kept under ``key``, marked as just used; None when absent or unreadable.
    A bad ``$NPU_SIM_CACHE_MAX_BYTES`` is refused here, before any conversion."""
    data = lookup_bytes(kind, key, suffix)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def lookup_bytes(kind: str, key: str, suffix: str) -> bytes | None:
    """The bytes kept under ``key``, marked as just used; None when absent or unreadable."""
    max_bytes()
    path = entry_path(kind, key, suffix)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        os.utime(path)
    except OSError:
        pass   # a read-only cache still serves
    return data


PickledT = TypeVar("PickledT")


def lookup_pickled(kind: str, key: str, suffix: str, expected: type[PickledT]) -> PickledT | None:
    """The object of class ``expected`` pickled under ``key``, marked as just used; None when
    absent or when the entry does not read back as one (cut short by a full disk, written by
    another npu-sim under the same key). Only npu-sim writes the cache folder: as with Python's
    bytecode cache, whoever can write there can already run code as this user."""
    entry = lookup_bytes(kind, key, suffix)
    if entry is None:
        return None
    try:
        value = pickle.loads(entry)
    except Exception:   # a damaged entry may fail in any way unpickling can: it is a miss
        return None
    return value if isinstance(value, expected) else None


def store(kind: str, key: str, suffix: str, text: str) -> None:
    """Keep ``text`` under ``key`` (see :func:`store_bytes`)."""
    store_bytes(kind, key, suffix, text.encode("utf-8"))


def store_bytes(kind: str, key: str, suffix: str, data: bytes) -> None:
    """Keep ``data`` under ``key`` (atomically), then evict down to the limit. An entry larger
    than the limit is not kept; a cache that cannot be written only costs a conversion later."""
    limit = max_bytes()
    if len(data) > limit:
        evict(limit)
        return
    path = entry_path(kind, key, suffix)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=f".{suffix}")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            follow_umask(temporary)
            os.replace(temporary, path)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    except OSError:
        return
    evict(limit, keep=path)


def entries() -> list[Entry]:
    """The cache's files (entries and temporary files), least recently used first."""
    found = []
    for kind in KINDS:
        folder = cache_dir() / kind
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if not (_ENTRY.match(name) or _TEMPORARY.match(name)):
                continue
            try:
                info = os.stat(folder / name)
            except OSError:
                continue   # evicted by another process meanwhile
            found.append(Entry(folder / name, info.st_size, info.st_mtime))
    found.sort(key=lambda e: (e.used_time, e.path.name))
    return found


def evict(limit: int, keep: Path | None = None) -> int:
    """Remove the least recently used entries (never ``keep``) until the cache holds at most
    ``limit`` bytes, and temporary files left by killed processes; returns the bytes freed."""
    found = entries()
    excess = sum(e.size_bytes for e in found) - limit
    now = time.time()
    freed = 0
    for entry in found:
        if _TEMPORARY.match(entry.path.name):
            doomed = now - entry.used_time > STALE_TEMPORARY_SECONDS   # another process may be writing it
        else:
            doomed = freed < excess and entry.path != keep
        if doomed and _remove(entry.path):
            freed += entry.size_bytes
    return freed


def clear() -> tuple[int, int]:
    """Remove every entry; returns ``(files removed, bytes freed)``."""
    removed = [e for e in entries() if _remove(e.path)]
    return len(removed), sum(e.size_bytes for e in removed)


def info() -> CacheInfo:
    found = [e for e in entries() if _ENTRY.match(e.path.name)]
    return CacheInfo(cache_dir(), len(found), sum(e.size_bytes for e in found), max_bytes())


def _remove(path: Path) -> bool:
    """Remove a file; False if it was gone already (another process) or cannot be removed."""
    try:
        os.unlink(path)
    except OSError:
        return False
    return True
