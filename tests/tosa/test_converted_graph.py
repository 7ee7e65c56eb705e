"""npu_sim.tosa.converted_graph: the graph of a .tflite read back from the cache on a second
load, equal to the one converted, keyed by the model, its path and npu-sim's TOSA code."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from npu_sim import conversion_cache as cache
from npu_sim.tosa import converted_graph, graph_cache, loader, tflite_import
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.loader import load_graph

KWS = Path(__file__).resolve().parents[1] / "data" / "tflite" / "ds_cnn_kws_int8.tflite"
LSTM = Path(__file__).resolve().parents[2] / "examples" / "lstm_kws_int8.tflite"


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NPU_SIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(cache.MAX_BYTES_ENV, raising=False)
    return tmp_path / "cache"


def _entries(kind: str) -> list[Path]:
    return sorted((cache.cache_dir() / kind).glob("*.pickle")) if kind == "graph" else \
        sorted((cache.cache_dir() / kind).glob("*.mlir"))


def _same(a: Graph, b: Graph) -> bool:
    """Every block, operator (with its location) and tensor (with its data) alike."""
    for block_a, block_b in zip(a.blocks(), b.blocks(), strict=True):
        if (block_a.name, block_a.inputs, block_a.outputs) != (block_b.name, block_b.inputs, block_b.outputs):
            return False
        if block_a.tensors != block_b.tensors:
            return False
        for op_a, op_b in zip(block_a.operators, block_b.operators, strict=True):
            if (op_a.op, op_a.inputs, op_a.outputs, op_a.attribute, op_a.location) != \
                    (op_b.op, op_b.inputs, op_b.outputs, op_b.attribute, op_b.location):
                return False
    return True


def _no_conversion(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("converted or read again")

    monkeypatch.setattr(tflite_import, "_convert", refuse)
    monkeypatch.setattr(converted_graph, "read_mlir", refuse)


@pytest.mark.parametrize("model", [KWS, LSTM], ids=["cnn", "fused-lstm"])
def test_a_second_load_reads_the_graph_back_equal_to_the_converted_one(model: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    first = load_graph(model)
    assert len(_entries("graph")) == 1 and len(_entries("tflite")) == 1
    with monkeypatch.context() as patched:
        _no_conversion(patched)
        second = load_graph(model)
    assert _same(first, second) and second is not first
    # validated and frozen like the converted graph
    constants = [t.data for t in next(second.blocks()).tensors.values() if isinstance(t.data, np.ndarray)]
    assert constants and not any(c.flags.writeable for c in constants)


def test_the_key_names_the_model_its_path_and_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    data = KWS.read_bytes()
    key = graph_cache.graph_key(data, "a.tflite")
    assert key == graph_cache.graph_key(data, "a.tflite")
    assert key != graph_cache.graph_key(data, "b.tflite")
    assert key != graph_cache.graph_key(data[:-1] + bytes([data[-1] ^ 1]), "a.tflite")
    monkeypatch.setattr(graph_cache, "code_fingerprint", lambda: b"other code")
    assert key != graph_cache.graph_key(data, "a.tflite")


def test_a_model_at_another_path_is_read_from_the_cached_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    load_graph(KWS)
    copy = tmp_path / "copy.tflite"
    copy.write_bytes(KWS.read_bytes())
    monkeypatch.setattr(tflite_import, "_convert", lambda *a: pytest.fail("converted again"))
    assert _same(load_graph(copy), load_graph(KWS))
    assert len(_entries("graph")) == 2 and len(_entries("tflite")) == 1


@pytest.mark.parametrize("damage", [b"", b"not a pickle", pickle.dumps({"a": 1})[:-3], pickle.dumps([1, 2])],
                         ids=["empty", "garbage", "cut-short", "not-a-graph"])
def test_an_entry_that_does_not_read_back_is_a_miss(damage: bytes) -> None:
    expected = load_graph(KWS)
    [entry] = _entries("graph")
    entry.write_bytes(damage)
    again = load_graph(KWS)
    assert _same(again, expected)
    assert pickle.loads(entry.read_bytes()).__class__ is Graph   # rewritten


def test_without_the_cache_nothing_is_stored() -> None:
    loader.load_graph(KWS, use_cache=False)
    assert _entries("graph") == [] and _entries("tflite") == []


def test_a_size_limit_below_the_entry_keeps_no_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.MAX_BYTES_ENV, "1000")
    graph = load_graph(KWS)
    assert _entries("graph") == [] and _same(load_graph(KWS), graph)
