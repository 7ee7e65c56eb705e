"""The graph of a command: loaded, its unknown dimensions resolved from the inputs the user
gives (their ``.npy`` files, ``--input-shape NAME=1x96x96x3``, else batch 1), validated (unless it is
a cache entry's graph that passed validation at that level before: :mod:`npu_sim.tosa.graph_cache`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from npu_sim.errors import GraphValidationError, TosaFormatError, UnsupportedFeatureError
from npu_sim.inputs import bind_input_files
from npu_sim.tosa import graph_cache
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.levels import check_level
from npu_sim.tosa.loader import detect_format, load_graph
from npu_sim.tosa.shape_resolution import has_unknown_dims, parse_input_shape, resolve_unknown_dims
from npu_sim.tosa.validation import validate


def load_job_graph(graph_path: str | Path, tosa_level: str = "8K", input_specs: list[str] | None = None,
                   invocations: int | None = None, input_shape_specs: list[str] | None = None, *,
                   use_cache: bool = True) -> Graph:
    """The graph of ``graph_path`` (``use_cache``: reuse a cached conversion of a ``.tflite``)."""
    graph = load_graph(graph_path, level=tosa_level, resolve_dims=False, use_cache=use_cache)
    try:
        resolve = _may_leave_dims_unknown(graph_path) and (has_unknown_dims(graph) or bool(input_shape_specs))
        if resolve:
            shapes = _shapes_of_files(graph, input_specs or [], invocations)
            shapes.update(dict(parse_input_shape(text) for text in input_shape_specs or []))
            resolve_unknown_dims(graph, shapes)
        if resolve or not graph_cache.validated_before(graph, tosa_level):
            validate(graph)
            check_level(graph, tosa_level)
            if not resolve:   # (a graph whose dimensions the inputs chose is validated every time)
                graph_cache.mark_validated(graph, tosa_level)
    except (TosaFormatError, GraphValidationError, UnsupportedFeatureError) as exc:
        if not str(exc).startswith(str(graph_path)):
            exc.args = (f"{graph_path}: {exc}",)
        raise
    return graph


def _may_leave_dims_unknown(graph_path: str | Path) -> bool:
    """MLIR text and .tflite models may leave dimensions unknown; TOSA flatbuffers may not."""
    with open(graph_path, "rb") as handle:
        head = handle.read(8192)
    return detect_format(head, graph_path) in ("mlir", "tflite")


def _shapes_of_files(graph: Graph, input_specs: list[str], invocations: int | None) -> dict[str, tuple[int, ...]]:
    """Input name -> the shape its ``.npy`` file holds (without the ``-n`` axis); files that
    cannot be read are left to the input loader to refuse."""
    shapes = {}
    for name, path in bind_input_files(graph, input_specs).items():
        try:
            shape = tuple(np.load(path, mmap_mode="r", allow_pickle=False).shape)
        except (OSError, ValueError, EOFError, AttributeError):
            continue
        shapes[name] = shape[1:] if invocations is not None else shape
    return shapes
