"""``npu-sim convert IN -o OUT [--no-cache]``: any graph npu-sim reads (``.tflite``, TOSA MLIR,
``.tosa``, JSON), written as a TOSA flatbuffer (``OUT.tosa``) or its JSON form (``OUT.json``)."""

from __future__ import annotations

from pathlib import Path

import typer

from npu_sim.errors import PathError
from npu_sim.paths import write_atomically
from npu_sim.tosa.loader import load_graph, save_graph


def convert(graph_path: str, out_path: str, *, use_cache: bool = True, tosa_level: str = "8K") -> None:
    """Read ``graph_path`` (validated), write it to ``out_path`` (format by extension), atomically."""
    if not out_path.strip():
        raise PathError("-o: empty path; name the output file (.tosa or .json)")
    target = Path(out_path)
    if target.suffix.lower() not in (".tosa", ".json"):
        raise PathError(f"-o {out_path!r}: name a .tosa (flatbuffer) or .json file")
    if target.is_dir():
        raise PathError(f"-o {out_path!r}: is a directory")
    graph = load_graph(graph_path, level=tosa_level, use_cache=use_cache)
    write_atomically(target, lambda temporary: save_graph(graph, temporary), "-o")
    typer.echo(f"{graph_path} -> {out_path} ({sum(len(b.operators) for b in graph.blocks())} operators)")
