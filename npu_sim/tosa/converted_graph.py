"""The TOSA graph of a ``.tflite`` model: converted by Arm's converter, read and legalized by
npu-sim, and kept in the conversion cache so that a second run reads it back at once.

A ``.tflite`` passes through three stages before it is a graph: the converter's MLIR text
(:mod:`npu_sim.tosa.tflite_import`, cached as text), that text read and legalized
(:mod:`npu_sim.tosa.mlir_reader` with :mod:`npu_sim.tosa.tflite.legalize`: ResNet-50's 52 MB
of text take a third of a second), then LiteRT's rounding and saturation. The graph those
stages give is a function of the model's bytes, its path (legalized names quote it) and
npu-sim's own TOSA code, so it is cached under a key of all three
(:func:`npu_sim.tosa.graph_cache.graph_key`, by which the loader reads a cached graph back
without importing this module): any change to the code under ``npu_sim/tosa`` reads the text again.

The entry is the graph pickled. It lives in the user's own cache folder, which only npu-sim
writes (:mod:`npu_sim.conversion_cache`); as with Python's bytecode cache, whoever can write
there can already run code as that user. An entry that cannot be read back is a miss.
"""

from __future__ import annotations

from npu_sim.tosa.graph_cache import cached_graph, graph_key, store_graph
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


def tflite_graph(data: bytes, source: str, use_cache: bool = True) -> Graph:
    """The legalized TOSA graph of the ``.tflite`` model ``data`` read from ``source`` (not yet
    validated or resolved to known dimensions: :func:`npu_sim.tosa.loader.parse_graph` does)."""
    key = graph_key(data, source) if use_cache else ""
    if use_cache:
        cached = cached_graph(key)
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
        return store_graph(key, graph)
    return graph
