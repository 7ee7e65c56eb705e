"""CPU fallback: operations outside the preset's NPU support run on the host CPU, whole, with the
reason; generic presets keep everything on the NPU; strict support refuses them by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import npu_sim
from npu_sim.errors import UnsupportedFeatureError
from npu_sim.program import ComputeCommand
from npu_sim.simulation import compile_graph
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.passes.cpu_fallback import assign_cpu_fallbacks
from scheduler.schedule import lower_graph
from tests.scheduler.graphs import machine
from tests.scheduler.passes.test_table_lookup import lookup_graph
from tests.scheduler.test_converted_models import _check_bit_exact

CONVERTED = Path(__file__).resolve().parents[2] / "data" / "converted"


def _select_graph():
    """An int8 ADD (an NPU operator everywhere) then a SELECT (not on a U55/U65)."""
    b = GraphBuilder()
    x = b.input("x", (1, 4, 16), DType.INT8)
    c = b.input("c", (1, 4, 16), DType.BOOL)
    total = b.op(Op.ADD, [b.op(Op.CAST, [x], (1, 4, 16), DType.INT32),
                          b.const(None, np.full((1, 1, 1), 3, np.int32))])
    b.output(b.op(Op.SELECT, [c, total, b.const(None, np.zeros((1, 1, 1), np.int32))], name="y"))
    return b.build()


def test_the_u55_moves_what_it_cannot_run_and_says_why():
    lowered = lower_graph(_select_graph(), machine("ethos-u55-256"))
    units = {op.op_label: op.unit for op in lowered.main.ops}
    assert units == {"CAST+ADD": "vector", "SELECT": "cpu"}   # (the chain stops before the SELECT)
    (fallback,) = lowered.cpu_fallbacks
    assert (fallback.op, fallback.operator, fallback.dtype, fallback.npu_unit) == \
        ("SELECT", "SELECT(y)", "int32", "vector")
    assert fallback.reason == ("SELECT is not an Ethos-U55/U65 operator "
                               "(Vela 5.2 SUPPORTED_OPS.md, Ethos-U55/U65 TOSA)")


@pytest.mark.parametrize("preset", ["edge", "tiny", "server", "ethos-u85-256"])
def test_generic_presets_and_the_u85_keep_it_on_the_npu(preset):
    lowered = lower_graph(_select_graph(), machine(preset))
    assert lowered.cpu_fallbacks == [] and all(op.unit != "cpu" for op in lowered.main.ops)
    assert assign_cpu_fallbacks(lowered, machine(preset)) == []


def test_strict_support_refuses_the_operator_by_name():
    hw = machine("ethos-u55-256")
    strict = hw.model_copy(update={"npu_support": hw.npu_support.model_copy(update={"strict": True})})
    with pytest.raises(UnsupportedFeatureError, match=r"^SELECT\(y\): SELECT is not an Ethos-U55/U65 operator .*; "
                                                       r"ethos-u55-256 runs it on no NPU unit \(strict"):
        lower_graph(_select_graph(), strict)


def test_a_table_lookup_stays_on_the_lut_of_a_u55():
    """Its GATHER indexes the LUT (scheduler.passes.table_lookup): no gather of the NPU's."""
    graph, _ = lookup_graph()
    program = compile_graph(graph, npu_sim.load_hw_config("ethos-u55-256"))
    assert [c.unit for c in program.commands if isinstance(c, ComputeCommand)] == ["lut"]
    assert program.stats is not None and program.stats.cpu_fallbacks == ()


@pytest.mark.parametrize("preset", ["ethos-u55-256", "ethos-u85-256"])
def test_a_float_model_runs_its_fp32_operators_on_the_cpu_with_the_same_results(preset):
    graph = npu_sim.load_graph(CONVERTED / "misc_fp32.tosa")
    rng = np.random.default_rng(5)
    inputs = {n: rng.standard_normal(t.shape).astype(np.float32) for n, t in graph.input_types.items()}
    result = npu_sim.simulate(graph, preset, inputs)
    cpu_ops = result.summary["cpu_ops"]
    assert cpu_ops and all(op["dtype"] == "fp32" and op["cycles"] > 0 for op in cpu_ops)
    assert {op["name"] for op in cpu_ops} == {op["name"] for op in result.summary["ops"] if op["unit"] == "cpu"}
    assert result.summary["busy_cycles"]["cpu"] == sum(op["cycles"] for op in cpu_ops)
    expected = npu_sim.execute(graph, inputs)
    for name, want in expected.items():
        np.testing.assert_array_equal(result.outputs[name], want)


def test_an_int8_model_with_cpu_operators_keeps_the_reference_models_bits():
    """The softmax head's int32 REDUCE_MAX and int16 TABLEs run on the U55's CPU."""
    _check_bit_exact(Path(__file__).resolve().parents[3] / "examples" / "mobilenet_v1_025_96_softmax_int8.tosa",
                     "ethos-u55-256", seed=3)
