"""load_graph / save_graph: format by content, clear errors, validation on load."""

from __future__ import annotations

import numpy as np
import pytest

import npu_sim
from npu_sim.errors import GraphValidationError, TosaFormatError
from npu_sim.tosa import DType, GraphBuilder, Op, load_graph, save_graph, write_graph, write_json


def _graph():
    b = GraphBuilder()
    x = b.input("x", (2, 2), DType.FP32)
    b.output(b.op(Op.MUL, [x, b.const("c", np.full((2, 2), 3, np.float32)),
                           b.const("shift", 0, DType.INT8)]))
    return b.build()


def test_loads_both_formats_by_content(tmp_path):
    g = _graph()
    (tmp_path / "g.tosa").write_bytes(write_graph(g))
    (tmp_path / "g.json").write_text(write_json(g))
    (tmp_path / "json_named.tosa").write_text(write_json(g))      # content wins over the name
    (tmp_path / "flat_named.json").write_bytes(write_graph(g))
    (tmp_path / "no_extension").write_bytes(write_graph(g))
    for name in ("g.tosa", "g.json", "json_named.tosa", "flat_named.json", "no_extension"):
        assert load_graph(tmp_path / name) == g, name
    assert npu_sim.load_graph(str(tmp_path / "g.tosa")) == g


def test_save_graph_picks_the_format_from_the_extension(tmp_path):
    g = _graph()
    save_graph(g, tmp_path / "out.json")
    save_graph(g, tmp_path / "out.tosa")
    assert (tmp_path / "out.json").read_text().startswith("{\n  \"version\"")
    assert (tmp_path / "out.tosa").read_bytes()[4:8] == b"TOSA"
    assert load_graph(tmp_path / "out.json") == load_graph(tmp_path / "out.tosa") == g


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(TosaFormatError, match="no such file"):
        load_graph(tmp_path / "absent.tosa")
    with pytest.raises(TosaFormatError, match="is a directory"):
        load_graph(tmp_path)


def test_empty_and_unrecognizable_files(tmp_path):
    (tmp_path / "empty.tosa").write_bytes(b"")
    with pytest.raises(TosaFormatError, match="empty"):
        load_graph(tmp_path / "empty.tosa")
    (tmp_path / "blank.json").write_text("\n\n")
    with pytest.raises(TosaFormatError, match="empty"):
        load_graph(tmp_path / "blank.json")
    (tmp_path / "tiny.bin").write_bytes(b"abc")
    with pytest.raises(TosaFormatError, match="not a TOSA flatbuffer or JSON graph"):
        load_graph(tmp_path / "tiny.bin")
    (tmp_path / "text.tosa").write_text("hello, this is not a graph")
    with pytest.raises(TosaFormatError, match="text.tosa: not a TOSA flatbuffer: file identifier"):
        load_graph(tmp_path / "text.tosa")


def test_validates_on_load(tmp_path):
    g = _graph()
    g.main.operators[-1].inputs[0] = "ghost"
    path = tmp_path / "bad.tosa"
    path.write_bytes(write_graph(g))
    with pytest.raises(GraphValidationError, match="bad.tosa: .*'ghost' does not exist"):
        load_graph(path)
    assert load_graph(path, validate=False).main.operators[-1].inputs[0] == "ghost"
    with pytest.raises(GraphValidationError):
        save_graph(g, tmp_path / "again.tosa")


def test_loading_time_grows_linearly_with_the_graph(tmp_path):
    """4000 operators load well within a second (validation once spent time quadratic in
    the operator count: every operator rescanned all the block's constants)."""
    import time

    b = GraphBuilder()
    value = b.input("x", (1, 8), DType.INT32)
    for i in range(2000):
        value = b.op(Op.ADD, [value, b.const(None, np.full((1, 8), i, np.int32))])
    b.output(value)
    path = tmp_path / "chain.tosa"
    path.write_bytes(write_graph(b.build(validate=False)))
    seconds = []
    for _ in range(2):
        start = time.perf_counter()
        graph = load_graph(path)
        seconds.append(time.perf_counter() - start)
    assert len(graph.main.operators) == 4000
    assert min(seconds) < 1.0, seconds
