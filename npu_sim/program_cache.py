"""Compiled Programs kept across runs: a second ``npu-sim run`` of the same graph on the same
config reads its Program back instead of scheduling again.

Scheduling is most of a run's work on a large graph (an unrolled 49-step GRU on ethos-u85-256:
0.45 s to compile, 0.02 s to read back). A Program is a pure function of the graph, the
HwConfig, the compile options and npu-sim's own compiler, so it is kept under the SHA-256 of
all four: the graph pickled (every tensor, constant and attribute), the config as JSON (every
field), the options, and :func:`compiler_fingerprint` (every module under ``npu_sim/`` and
``scheduler/``, by size and modification time: any change to the code compiles anew), with the
Python and numpy versions the entry is pickled by. Two runs that would compile differently never share a
key; a key that misses only costs the compile it would have cost anyway.

The entry is the Program pickled, in the user's conversion cache (:mod:`npu_sim.conversion_cache`:
bounded, least recently used evicted, ``npu-sim cache info|clear``); an entry that does not read
back as a Program is a miss. ``npu-sim run`` and ``plan`` use it (``--no-cache``, or
``$NPU_SIM_PROGRAM_CACHE=0``: compile anew and keep nothing); :func:`npu_sim.simulate` does not
unless asked (``use_cache=True``). The cycles, bytes, outputs and traces of a run are the same,
bit for bit, whichever way its Program came; summary.json's ``program_cache`` says which
(``hit``, ``stored``, ``uncached`` or ``off``).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np

from npu_sim import conversion_cache
from npu_sim.hw.config import HwConfig
from npu_sim.program import Program
from npu_sim.tosa.ir import Graph

#: The cache's kind and suffix for these entries.
KIND, SUFFIX = "program", "pickle"
#: The form of the entry (a pickled :class:`Program`); bump it to orphan older entries.
ENTRY_FORMAT = b"\0program-pickle-1"
#: The packages whose source decides what a graph compiles to.
COMPILER_PACKAGES = ("npu_sim", "scheduler")
#: Environment variable that turns the cache off ("0").
ENABLED_ENV = "NPU_SIM_PROGRAM_CACHE"


def enabled() -> bool:
    """False when ``$NPU_SIM_PROGRAM_CACHE`` is "0" (or "false", "no", "off")."""
    return os.environ.get(ENABLED_ENV, "").strip().lower() not in ("0", "false", "no", "off")


@lru_cache(maxsize=1)
def compiler_fingerprint() -> bytes:
    """SHA-256 of every module under :data:`COMPILER_PACKAGES` (its name, size and modification
    time, as Python's bytecode cache checks a source) and of the Python and numpy versions that
    pickle the entries."""
    digest = hashlib.sha256(f"{sys.version_info[:3]} numpy {np.__version__}".encode())
    top = Path(__file__).resolve().parent.parent
    for package in COMPILER_PACKAGES:
        for path in sorted((top / package).rglob("*.py")):
            info = path.stat()
            digest.update(f"{path.relative_to(top).as_posix()}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return digest.digest()


def program_key(graph: Graph, hw: HwConfig, options: tuple[tuple[str, object], ...]) -> str | None:
    """The key of ``graph`` compiled for ``hw`` with ``options`` (name, value pairs); None for a
    graph that does not pickle (nothing is then cached)."""
    try:
        graph_bytes = pickle.dumps(graph, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:   # a graph built in Python may hold what pickle refuses: not cached
        return None
    digest = hashlib.sha256(graph_bytes)
    for part in (b"\0", hw.model_dump_json().encode(), b"\0", repr(options).encode(), ENTRY_FORMAT,
                 compiler_fingerprint()):
        digest.update(part)
    return digest.hexdigest()


def cached_program(graph: Graph, hw: HwConfig, options: tuple[tuple[str, object], ...],
                   compile_program: Callable[[], Program]) -> tuple[Program, str]:
    """The Program of ``graph`` on ``hw`` with ``options``: read back if kept, else
    ``compile_program()`` and kept. Also says which: ``"hit"``, ``"stored"`` or ``"uncached"``
    (a graph that does not pickle)."""
    key = program_key(graph, hw, options)
    if key is None:
        return compile_program(), "uncached"
    program = conversion_cache.lookup_pickled(KIND, key, SUFFIX, Program)
    if program is not None:
        return program, "hit"
    program = compile_program()
    try:
        data = pickle.dumps(program, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:   # (a Program of an unpicklable graph's objects): not kept
        return program, "uncached"
    conversion_cache.store_bytes(KIND, key, SUFFIX, data)
    return program, "stored"
