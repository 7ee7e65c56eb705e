"""Graph files other than the TOSA flatbuffer: its JSON form, TOSA MLIR text and ``.tflite``
models. :mod:`npu_sim.tosa.loader` imports this module only for such a file, so that reading a
``.tosa`` file does not load the MLIR reader and the ``.tflite`` legalizer."""

from __future__ import annotations

import os
from pathlib import Path

from npu_sim.errors import TosaFormatError
from npu_sim.tosa.converted_graph import tflite_graph
from npu_sim.tosa.graph_cache import is_tflite
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.json_io import read_json, write_json
from npu_sim.tosa.mlir_reader import looks_like_mlir, read_mlir
from npu_sim.tosa.tflite.legalize import Legalizer

__all__ = ["detect_format", "read", "write_json"]


def detect_format(data: bytes, path: str | os.PathLike = "") -> str:
    """``"tflite"``, ``"json"``, ``"mlir"`` or ``"flatbuffer"`` for the bytes of a graph file
    without the TOSA flatbuffer identifier (:func:`npu_sim.tosa.loader.detect_format`)."""
    if is_tflite(data):
        return "tflite"
    if data.lstrip()[:1] == b"{" or data.startswith(b"\xef\xbb\xbf{"):
        return "json"
    if looks_like_mlir(data.removeprefix(b"\xef\xbb\xbf")):
        return "mlir"
    if Path(path).suffix.lower() == ".tflite":
        raise TosaFormatError(f"{path}: not a TFLite model (no 'TFL3' identifier; truncated or damaged?)")
    suffix = Path(path).suffix.lower()
    if not data.strip():
        raise TosaFormatError(f"{path}: empty file, not a TOSA graph")
    if suffix == ".json":
        return "json"
    if suffix == ".tosa" or len(data) >= 8:
        return "flatbuffer"  # the reader names what is wrong with it
    raise TosaFormatError(f"{path}: not a TOSA flatbuffer or JSON graph "
                          f"({len(data)} bytes, no 'TOSA' identifier, not JSON)")


def read(kind: str, data: bytes, path: str | os.PathLike, use_cache: bool) -> Graph:
    """The graph of a ``"json"``, ``"tflite"`` or ``"mlir"`` file's bytes (not yet validated)."""
    if kind == "json":
        return read_json(data.removeprefix(b"\xef\xbb\xbf"))
    if kind == "tflite":
        return tflite_graph(data, str(path), use_cache)
    return read_mlir(data.removeprefix(b"\xef\xbb\xbf"), str(path), Legalizer(None, str(path)))
