"""Graphs kept in the conversion cache: their keys, reading one back, keeping one.

Two kinds of file are kept as the graph read from them, pickled:

* a ``.tflite`` model, converted (:mod:`npu_sim.tosa.converted_graph` converts and stores; its
  module doc says what the key holds). The loader reads a cached graph through this module
  alone, so that a run of a model converted before loads neither the converter's modules nor
  the MLIR reader and the legalizer;
* a TOSA flatbuffer of at least :data:`FLATBUFFER_CACHE_MIN_BYTES`, keyed by its bytes and the
  code under ``npu_sim/tosa`` (:func:`flatbuffer_key`): reading the tables of an unrolled
  49-step GRU's 1.1 MB takes 85 ms, unpickling its graph 14 ms.

A graph read back or kept here that then passed validation at a TOSA level is marked so
(:func:`mark_validated`: an empty entry of kind :data:`VALIDATED_KIND`, keyed by the graph's key,
which covers the code under ``npu_sim/tosa``, and the level): the next run reading that graph back
skips validating it (:func:`validated_before`; 15 to 30 ms of a small model's run).
"""

from __future__ import annotations

import hashlib
import pickle
from functools import lru_cache
from pathlib import Path

from npu_sim import conversion_cache
from npu_sim.tosa.ir import Graph

#: What the key also hashes: the form of the entry (a pickled :class:`Graph`).
GRAPH_FORMAT = b"\0graph-pickle-1"
#: The cache's kind and suffix for these entries.
KIND, SUFFIX = "graph", "pickle"
#: What the key of a TOSA flatbuffer's graph also hashes (the form of its entry).
FLATBUFFER_FORMAT = b"\0tosa-flatbuffer-graph-pickle-1"
#: A smaller TOSA flatbuffer is read anew every time (it reads in milliseconds; its entry would
#: cost more than it saves).
FLATBUFFER_CACHE_MIN_BYTES = 256 * 1024
#: The cache's kind and suffix of the marks of graphs that passed validation at a level.
VALIDATED_KIND, VALIDATED_SUFFIX = "graph-validated", "ok"
#: The file identifier of a TFLite flatbuffer (bytes 4 to 8).
TFLITE_IDENTIFIER = b"TFL3"


def is_tflite(data: bytes) -> bool:
    return len(data) >= 8 and data[4:8] == TFLITE_IDENTIFIER


@lru_cache(maxsize=1)
def code_fingerprint() -> bytes:
    """SHA-256 of the sources that turn a model into a graph (every module under npu_sim/tosa:
    the readers, the legalizer and the IR the entry is made of)."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.digest()


def graph_key(data: bytes, source: str) -> str:
    digest = hashlib.sha256(data)   # (fed in parts: a model's bytes are not copied)
    for part in (b"\0", source.encode("utf-8", "surrogatepass"), GRAPH_FORMAT, code_fingerprint()):
        digest.update(part)
    return digest.hexdigest()


def flatbuffer_key(data: bytes) -> str:
    """The key of the graph of the TOSA flatbuffer ``data`` (its path plays no part)."""
    digest = hashlib.sha256(data)
    for part in (FLATBUFFER_FORMAT, code_fingerprint()):
        digest.update(part)
    return digest.hexdigest()


def cached_graph(key: str) -> Graph | None:
    """The graph kept under ``key``, or None (none kept, or one that does not read back)."""
    graph = conversion_cache.lookup_pickled(KIND, key, SUFFIX, Graph)
    if graph is not None:
        _keys_of[id(graph)] = (graph, key)
    return graph


def store_graph(key: str, graph: Graph) -> Graph:
    """Keep ``graph`` under ``key``; returns it as read back. A graph just read or converted
    pickles a little otherwise than one read back, and the program cache keys a Program by the
    graph's pickle: the run that reads the file and the later ones then share one Program, not
    two (the second run compiled again)."""
    data = pickle.dumps(graph, protocol=pickle.HIGHEST_PROTOCOL)
    conversion_cache.store_bytes(KIND, key, SUFFIX, data)
    read_back: Graph = pickle.loads(data)
    _keys_of[id(read_back)] = (read_back, key)
    return read_back


#: The graphs this process read back from the cache or kept there, by id: their entry's key.
_keys_of: dict[int, tuple[Graph, str]] = {}


def _validated_key(graph: Graph, level: str) -> str | None:
    """The key of the mark that ``graph`` (as read back or kept, not changed since) passed
    validation at ``level``; None for a graph that is not a cache entry's."""
    known = _keys_of.get(id(graph))
    if known is None or known[0] is not graph:
        return None
    digest = hashlib.sha256(known[1].encode())
    digest.update(b"\0validated\0" + level.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def validated_before(graph: Graph, level: str) -> bool:
    """Whether ``graph``, read back from the cache unchanged, passed validation at ``level`` in
    an earlier run (:func:`mark_validated`)."""
    key = _validated_key(graph, level)
    return key is not None and conversion_cache.lookup_bytes(VALIDATED_KIND, key, VALIDATED_SUFFIX) is not None


def mark_validated(graph: Graph, level: str) -> None:
    """Note that ``graph``, read back from the cache or kept there and not changed since, passed
    validation at ``level`` (nothing for another graph)."""
    key = _validated_key(graph, level)
    if key is not None:
        conversion_cache.store_bytes(VALIDATED_KIND, key, VALIDATED_SUFFIX, b"")
