"""Load and save TOSA graphs from files: ``load_graph(path)``, ``save_graph(graph, path)``.

The format is chosen by content: a flatbuffer carries the identifier ``TOSA`` at
byte 4, a TFLite model ``TFL3`` (converted through :mod:`npu_sim.tosa.tflite_import`),
the JSON form starts with ``{``, TOSA MLIR text with ``module`` or ``func.func``
(:mod:`npu_sim.tosa.mlir_reader`). The extension (``.tosa``, ``.json``)
decides only when the content is ambiguous (an empty file) and for saving.
Loaded graphs are validated (:func:`npu_sim.tosa.validation.validate`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np

from npu_sim.errors import GraphValidationError, PathError, TosaFormatError, UnsupportedFeatureError
from npu_sim.paths import GRAPH_MAX_BYTES, read_regular_file
from npu_sim.tosa.fb_schema import FILE_IDENTIFIER
from npu_sim.tosa.flatbuffer_io import read_graph, write_graph
from npu_sim.tosa.graph_cache import (
    FLATBUFFER_CACHE_MIN_BYTES,
    cached_graph,
    flatbuffer_key,
    graph_key,
    is_tflite,
    store_graph,
)
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.levels import DEFAULT_LEVEL, check_level
from npu_sim.tosa.shape_resolution import has_unknown_dims, resolve_unknown_dims
from npu_sim.tosa.validation import validate as validate_graph

PathLike = str | os.PathLike


def detect_format(data: bytes, path: PathLike = "") -> str:
    """``"flatbuffer"``, ``"json"``, ``"tflite"`` or ``"mlir"`` for the bytes of a graph file."""
    if len(data) >= 8 and data[4:8] == FILE_IDENTIFIER:
        return "flatbuffer"
    if is_tflite(data):
        return "tflite"
    kind: str = _other_formats().detect_format(data, path)
    return kind


def _other_formats() -> ModuleType:
    """:mod:`npu_sim.tosa.other_formats`, imported when a file is not a TOSA flatbuffer (a
    ``.tosa`` run then loads neither the MLIR reader nor the ``.tflite`` legalizer)."""
    from npu_sim.tosa import other_formats

    return other_formats


def parse_graph(data: bytes, path: PathLike = "", validate: bool = True,
                level: str = DEFAULT_LEVEL, use_cache: bool = True,
                input_shapes: Mapping[str, Sequence[int]] | None = None, resolve_dims: bool = True) -> Graph:
    """Parse the bytes of a ``.tosa``, ``.json``, ``.tflite`` or TOSA MLIR graph; validate it,
    and check that its operator arguments lie within the TOSA ``level`` ("8K" or "none",
    :mod:`npu_sim.tosa.levels`). ``use_cache``: reuse an earlier conversion of a ``.tflite``
    and the graph of a large ``.tosa`` read before (:mod:`npu_sim.tosa.graph_cache`).
    Unknown dimensions are resolved from ``input_shapes`` (batch 1 for inputs not named there;
    :mod:`npu_sim.tosa.shape_resolution`) unless ``resolve_dims`` is False (then no validation
    either: the caller resolves and validates)."""
    validate = validate and resolve_dims
    kind = detect_format(data, path)
    cached = cached_graph(graph_key(data, str(path))) if kind == "tflite" and use_cache else None
    if kind == "flatbuffer":
        graph = _flatbuffer_graph(data, use_cache)
    elif cached is not None:   # (a converted model read back: the converter's modules not imported)
        graph = cached
    else:
        graph = _other_formats().read(kind, data, path, use_cache)
    if resolve_dims and kind in ("mlir", "tflite") and has_unknown_dims(graph):   # MLIR's "?" dimensions
        resolve_unknown_dims(graph, input_shapes)
    if validate:
        validate_graph(graph)
        check_level(graph, level)
    freeze_constants(graph)
    return graph


def _flatbuffer_graph(data: bytes, use_cache: bool) -> Graph:
    """The graph of a TOSA flatbuffer; with ``use_cache``, a large one is read back from the
    cache if read before, else read and kept (:mod:`npu_sim.tosa.graph_cache`)."""
    if not use_cache or len(data) < FLATBUFFER_CACHE_MIN_BYTES:
        return read_graph(data)
    key = flatbuffer_key(data)
    cached = cached_graph(key)
    return cached if cached is not None else store_graph(key, read_graph(data))


def freeze_constants(graph: Graph) -> None:
    """Make the constant data of a loaded graph read-only: it is the file's, and the executor
    then knows it unchanged without reading it again (:mod:`npu_sim.reference.prepared`).
    A caller who wants other values assigns a new array."""
    for block in graph.blocks():
        for tensor in block.tensors.values():
            if isinstance(tensor.data, np.ndarray):
                tensor.data.flags.writeable = False


def load_graph(path: PathLike, validate: bool = True, level: str = DEFAULT_LEVEL,
               use_cache: bool = True, input_shapes: Mapping[str, Sequence[int]] | None = None,
               resolve_dims: bool = True) -> Graph:
    """Read a graph file (TOSA flatbuffer, its JSON form, TOSA MLIR text or a ``.tflite``) and
    validate it (at TOSA ``level``)."""
    p = Path(path)
    try:
        data = read_regular_file(p, "", GRAPH_MAX_BYTES)
    except PathError as exc:
        raise TosaFormatError(str(exc)) from None
    try:
        return parse_graph(data, p, validate, level, use_cache, input_shapes, resolve_dims)
    except (TosaFormatError, GraphValidationError, UnsupportedFeatureError) as exc:
        message = str(exc)
        if not message.startswith(str(path)):  # name the file in the one-line CLI error
            exc.args = (f"{path}: {message}",)
        raise


def save_graph(graph: Graph, path: PathLike, validate: bool = True) -> None:
    """Write ``graph`` as JSON if ``path`` ends in ``.json``, else as a flatbuffer."""
    if validate:
        validate_graph(graph)
    p = Path(path)
    if p.suffix.lower() == ".json":
        p.write_text(_other_formats().write_json(graph), encoding="utf-8")
    else:
        p.write_bytes(write_graph(graph))
