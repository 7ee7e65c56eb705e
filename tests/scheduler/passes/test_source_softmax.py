"""Source softmax: the forty-odd TOSA operators of a .tflite's SOFTMAX are one operation on the
Ethos-U presets, timed per element as Vela's TFLite reader's own softmax (on the NPU even where
the TOSA form's int32 steps would fall back to the CPU); presets without the rate, and operators
of other locations, keep them apart."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import npu_sim
from npu_sim.hw.config import load_hw_config
from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.ops import Op
from scheduler.passes.fusion import DEFAULT_RULES, fuse, rules_for

TRANSFORMER = Path(__file__).resolve().parents[3] / "examples" / "kws_transformer_int8.tflite"
SOFTMAX = "model/multi_head_attention/softmax/Softmax"


def _softmax_groups(graph, preset):
    block = graph.main
    groups = fuse(block, rules=rules_for(DEFAULT_RULES, load_hw_config(preset)))
    return [g for g in groups if any(block.operators[i].op is Op.REDUCE_MAX for i in g)]


def test_the_u85_makes_one_operation_of_each_softmax():
    graph = load_graph(TRANSFORMER)
    block = graph.main
    work = [i for i, op in enumerate(block.operators)
            if op.location == SOFTMAX and op.op not in (Op.CONST, Op.CONST_SHAPE)]
    assert len(work) == 41
    groups = _softmax_groups(graph, "ethos-u85-256")
    assert len(groups) == 2 and work in groups
    assert work in _softmax_groups(graph, "ethos-u55-256")
    assert work in _softmax_groups(graph, "ethos-u65-512")
    # a generic preset compiles no source operators (its softmax is its operators', as on TOSA)
    assert all(len(g) == 1 for g in _softmax_groups(graph, "edge"))


def _softmax_rows(preset: str, seed: int) -> tuple[dict, list[dict]]:
    """The transformer run on ``preset`` (its outputs checked against the reference model's):
    the summary and its softmax operations' rows."""
    graph = load_graph(TRANSFORMER)
    (t,) = graph.input_types.values()
    x = np.random.default_rng(seed).integers(-128, 128, size=t.shape, dtype=np.int8)
    name = graph.main.inputs[0]
    (want,) = npu_sim.execute(graph, {name: x}).values()
    run = npu_sim.simulate(graph, preset, {name: x})
    (got,) = run.outputs.values()
    assert np.array_equal(got, want)
    return run.summary, [op for op in run.summary["ops"] if any(g.startswith("REDUCE_MAX") for g in op["graph_ops"])]


def test_the_softmax_costs_its_rate_per_element_with_the_reference_bits():
    _, softmax = _softmax_rows("ethos-u85-256", 7)
    # [1, 2, 49, 49]: 4,802 elements at 2.94 cycles (vector.cycles_per_element.source_softmax),
    # the command's setup and the TCM latencies of a pass starting with a RESCALE
    assert [op["compute_cycles"] for op in softmax] == [14118 + 8 + 64] * 2


def test_the_u55_runs_the_softmax_on_its_npu_as_vela_compiles_the_tflite():
    """Vela's TFLite reader runs an int8 SOFTMAX on the U55's NPU (2 x 64,804 cycles for the keyword
    transformer's [1, 2, 49, 49]); the converter's TOSA form would put its int32 REDUCE_MAX and
    TABLEs on the host CPU. As one source softmax it stays on the NPU, at 14.6 cycles an element,
    with the reference bits."""
    summary, softmax = _softmax_rows("ethos-u55-256", 3)
    assert summary["cpu_ops"] == []
    assert [op["unit"] for op in softmax] == ["vector"] * 2
    # 4,802 elements at 14.6 cycles (70,110) and the command's setup
    assert [op["compute_cycles"] for op in softmax] == [70110 + 8] * 2
