"""The TOSA graph of a ``.tflite`` model: converted by Arm's converter, read and legalized by
npu-sim, and kept in the conversion cache so that a second run reads it back at once.

A ``.tflite`` passes through three stages before it is a graph: the converter's MLIR text
(:mod:`npu_sim.tosa.tflite_import`, cached as text), that text read and legalized
(:mod:`npu_sim.tosa.mlir_reader` with :mod:`npu_sim.tosa.tflite.legalize`: ResNet-50's 52 MB
of text take a third of a second), then LiteRT's rounding and saturation. The graph those
stages give is a function of the model's bytes, its path (legalized names quote it) and
npu-sim's own TOSA code, so it is cached under a key of all three (:data:`GRAPH_FORMAT`,
:func:`code_fingerprint`): any change to the code under ``npu_sim/tosa`` reads the text again.

The entry is the graph pickled. It lives in the user's own cache folder, which only npu-sim
writes (:mod:`npu_sim.conversion_cache`); as with Python's bytecode cache, whoever can write
there can already run code as that user. An entry that cannot be read back is a miss.
"""

from __future__ import annotations

import hashlib
import pickle
from functools import lru_cache
from pathlib import Path

from npu_sim import conversion_cache
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.mlir_reader import read_mlir
from npu_sim.tosa.tflite.argmax_int64 import narrow_int64_argmaxes
from npu_sim.tosa.tflite.argmin_int8 import negate_int8_argmins
from npu_sim.tosa.tflite.bool_cast import select_bool_casts
from npu_sim.tosa.tflite.flatbuffer import TfliteModel
from npu_sim.tosa.tflite.gelu import restore_gelus
from npu_sim.tosa.tflite.int16_activations import exact_int16_activations
from npu_sim.tosa.tflite.legalize import Legalizer
from npu_sim.tosa.tflite.resize_nearest import floor_nearest_resizes
from npu_sim.tosa.tflite.rounding import round_fully_connected_once, round_relus_twice
from npu_sim.tosa.tflite.saturation import saturate_quantizations
from npu_sim.tosa.tflite.softmax import saturate_softmax_lookups
from npu_sim.tosa.tflite.wide_identity import narrow_wide_identity_rescales
from npu_sim.tosa.tflite.wide_reshape import rescale_before_wide_reshapes
from npu_sim.tosa.tflite_import import tflite_to_mlir

#: What the key also hashes: the form of the entry (a pickled :class:`Graph`).
GRAPH_FORMAT = b"\0graph-pickle-1"
#: The cache's kind and suffix for these entries.
KIND, SUFFIX = "graph", "pickle"


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


def tflite_graph(data: bytes, source: str, use_cache: bool = True) -> Graph:
    """The legalized TOSA graph of the ``.tflite`` model ``data`` read from ``source`` (not yet
    validated or resolved to known dimensions: :func:`npu_sim.tosa.loader.parse_graph` does)."""
    key = graph_key(data, source) if use_cache else ""
    if use_cache:
        cached = conversion_cache.lookup_pickled(KIND, key, SUFFIX, Graph)
        if cached is not None:
            return cached
    text = tflite_to_mlir(data, source, use_cache)   # (refuses a damaged model in the converter's words)
    model = TfliteModel(data, source)
    graph = read_mlir(text, source, Legalizer(model, source))
    round_fully_connected_once(graph, model)   # LiteRT's rounding (npu_sim/tosa/tflite/rounding.py)
    round_relus_twice(graph, model)   # (its requantizing ReLUs round twice: same module)
    saturate_quantizations(graph)   # and its saturating QUANTIZE (npu_sim/tosa/tflite/saturation.py)
    saturate_softmax_lookups(graph)   # and 16-bit SOFTMAX's table indices (npu_sim/tosa/tflite/softmax.py)
    select_bool_casts(graph)   # a bool cast to float as TOSA 1.0 has it (npu_sim/tosa/tflite/bool_cast.py)
    restore_gelus(graph, model)   # and its float GELU (npu_sim/tosa/tflite/gelu.py)
    exact_int16_activations(graph, model)   # its int16 sigmoid and tanh (npu_sim/tosa/tflite/int16_activations.py)
    rescale_before_wide_reshapes(graph)   # no int48 RESHAPE (npu_sim/tosa/tflite/wide_reshape.py)
    floor_nearest_resizes(graph, model)   # a legacy nearest resize takes the floor (resize_nearest.py)
    narrow_wide_identity_rescales(graph)   # no scale32 RESCALE of int48 (npu_sim/tosa/tflite/wide_identity.py)
    negate_int8_argmins(graph, model)   # an int8 ARG_MIN's -1 - x as a NEGATE (npu_sim/tosa/tflite/argmin_int8.py)
    narrow_int64_argmaxes(graph)   # int64 indices in INT32, widened for the user (tflite/argmax_int64.py)
    if use_cache:
        conversion_cache.store_bytes(KIND, key, SUFFIX, pickle.dumps(graph, protocol=pickle.HIGHEST_PROTOCOL))
    return graph
