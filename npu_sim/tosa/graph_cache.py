"""The graphs of ``.tflite`` models kept in the conversion cache: their key, and reading one back.

The loader reads a cached graph through this module alone, so that a run of a model converted
before loads neither the converter's modules nor the MLIR reader and the legalizer
(:mod:`npu_sim.tosa.converted_graph` converts and stores; its module doc says what the key holds).
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


def cached_graph(key: str) -> Graph | None:
    """The graph kept under ``key``, or None (none kept, or one that does not read back)."""
    return conversion_cache.lookup_pickled(KIND, key, SUFFIX, Graph)


def store_graph(key: str, graph: Graph) -> Graph:
    """Keep ``graph`` under ``key``; returns it as read back. A converted graph pickles a little
    otherwise than one read back, and the program cache keys a Program by the graph's pickle:
    the run that converts and the later ones then share one Program, not two (the second run
    compiled again)."""
    data = pickle.dumps(graph, protocol=pickle.HIGHEST_PROTOCOL)
    conversion_cache.store_bytes(KIND, key, SUFFIX, data)
    read_back: Graph = pickle.loads(data)
    return read_back
