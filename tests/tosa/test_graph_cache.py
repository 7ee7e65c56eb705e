"""npu_sim.tosa.graph_cache: a large TOSA flatbuffer's graph read back from the cache on a second
load, equal to the one parsed, keyed by the file's bytes and npu-sim's TOSA code; a small one
read anew."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from npu_sim import conversion_cache as cache
from npu_sim.commands import job_graph
from npu_sim.errors import GraphValidationError
from npu_sim.tosa import graph_cache, loader
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.loader import load_graph

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LARGE = EXAMPLES / "mobilenet_v2_035_96_int8.tosa"
SMALL = EXAMPLES / "conv_rescale_int8.tosa"


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NPU_SIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(cache.MAX_BYTES_ENV, raising=False)
    return tmp_path / "cache"


def _entries() -> list[Path]:
    return sorted((cache.cache_dir() / graph_cache.KIND).glob("*.pickle"))


def _same(a: Graph, b: Graph) -> bool:
    for block_a, block_b in zip(a.blocks(), b.blocks(), strict=True):
        if (block_a.name, block_a.inputs, block_a.outputs, block_a.tensors) != \
                (block_b.name, block_b.inputs, block_b.outputs, block_b.tensors):
            return False
        for op_a, op_b in zip(block_a.operators, block_b.operators, strict=True):
            if (op_a.op, op_a.inputs, op_a.outputs, op_a.attribute) != \
                    (op_b.op, op_b.inputs, op_b.outputs, op_b.attribute):
                return False
    return True


def test_a_large_flatbuffer_is_read_back_equal_to_the_parsed_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    assert LARGE.stat().st_size >= graph_cache.FLATBUFFER_CACHE_MIN_BYTES
    first = load_graph(LARGE)
    assert len(_entries()) == 1
    with monkeypatch.context() as patched:
        patched.setattr(loader, "read_graph", lambda data: pytest.fail("parsed again"))
        second = load_graph(LARGE)
    assert _same(first, second) and second is not first
    constants = [t.data for t in next(second.blocks()).tensors.values() if isinstance(t.data, np.ndarray)]
    assert constants and not any(c.flags.writeable for c in constants)


def test_a_small_flatbuffer_and_a_load_without_the_cache_keep_nothing() -> None:
    assert SMALL.stat().st_size < graph_cache.FLATBUFFER_CACHE_MIN_BYTES
    load_graph(SMALL)
    load_graph(LARGE, use_cache=False)
    assert _entries() == []


def test_the_key_names_the_bytes_and_the_code_not_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    data = LARGE.read_bytes()
    key = graph_cache.flatbuffer_key(data)
    assert key == graph_cache.flatbuffer_key(bytes(data))
    assert key != graph_cache.flatbuffer_key(data[:-1] + bytes([data[-1] ^ 1]))
    monkeypatch.setattr(graph_cache, "code_fingerprint", lambda: b"other code")
    assert key != graph_cache.flatbuffer_key(data)


def test_a_graph_read_back_skips_the_validation_it_passed_at_its_level(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[str] = []
    monkeypatch.setattr(job_graph, "validate", lambda graph: checked.append("validate"))
    monkeypatch.setattr(job_graph, "check_level", lambda graph, level: checked.append(level))
    job_graph.load_job_graph(LARGE)   # parsed, kept, validated: marked
    assert checked == ["validate", "8K"]
    job_graph.load_job_graph(LARGE)   # read back, marked at 8K
    assert checked == ["validate", "8K"]
    job_graph.load_job_graph(LARGE, "none")   # another level: validated again
    assert checked == ["validate", "8K", "validate", "none"]
    job_graph.load_job_graph(LARGE, use_cache=False)   # not a cache entry's graph
    job_graph.load_job_graph(SMALL)   # not kept in the cache: validated every time
    job_graph.load_job_graph(SMALL)
    assert checked[4:] == ["validate", "8K"] * 3
    monkeypatch.setattr(graph_cache, "code_fingerprint", lambda: b"other code")   # another key
    job_graph.load_job_graph(LARGE)
    assert checked[10:] == ["validate", "8K"]


def test_a_graph_that_fails_validation_is_not_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(graph: Graph) -> None:
        raise GraphValidationError("refused")

    monkeypatch.setattr(job_graph, "validate", refuse)
    for _ in range(2):
        with pytest.raises(GraphValidationError, match="refused"):
            job_graph.load_job_graph(LARGE)
    assert not list((cache.cache_dir() / graph_cache.VALIDATED_KIND).glob("*"))
