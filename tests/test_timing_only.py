"""Timing-only simulation (npu_sim.simulator, npu_sim.simulation ``timing_only``): the same Program
gives the same event schedule, cycles, bytes and every summary figure as the full simulation,
on every example and converted model and every preset; outputs are absent and the summary says
so; control flow, whose conditions are computed values, runs in full."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import npu_sim
from npu_sim.hw.config import load_hw_config
from npu_sim.inputs import index_limits, random_array
from npu_sim.simulation import compile_graph
from npu_sim.simulator import simulate_program
from reports.summary import build_summary
from tests.hw.hw_programs import make_hw, pipeline_program

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted([*(ROOT / "examples").glob("*.tosa"), *(ROOT / "tests" / "data" / "converted").glob("*.tosa")])
PRESETS = ("tiny", "edge", "server", "ethos-u55-256", "ethos-u65-256", "ethos-u85-256")
#: graphs whose variables carry state: also run for three invocations (the resident-constant preamble)
STATEFUL = ("lstm_stateful_int8", "variable_counter_int32", "lstm_step64_int8")


def _inputs(graph, invocations: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    limits = index_limits(graph)
    return [{name: random_array(t, rng, index_limit=limits.get(name)) for name, t in graph.input_types.items()}
            for _ in range(invocations)]


def test_a_pipeline_runs_the_same_events_without_moving_a_byte():
    hw = make_hw()
    program, x = pipeline_program(8, 64)
    full = simulate_program(program, hw, [{"x": x}])
    timed = simulate_program(program, hw, [{"x": x}], timing_only=True)
    assert timed.timing_only and not full.timing_only
    assert timed.outputs == [{}] and full.outputs[0]
    assert timed.trace.commands == full.trace.commands
    assert timed.trace.allocations == full.trace.allocations
    assert timed.trace.counters == full.trace.counters
    assert (timed.total_cycles, timed.per_invocation_cycles) == (full.total_cycles, full.per_invocation_cycles)


def test_control_flow_is_computed_in_full():
    graph = npu_sim.load_graph(ROOT / "examples" / "while_loop_int32.tosa")
    result = npu_sim.simulate(graph, "edge", _inputs(graph, 1)[0], timing_only=True)
    assert result.summary["timing_only"] is False and "control flow" in result.summary["timing_only_note"]
    for name, value in npu_sim.execute(graph, _inputs(graph, 1)[0]).items():
        np.testing.assert_array_equal(result.outputs[name], value)


def test_the_api_leaves_the_outputs_out_and_says_so():
    graph = npu_sim.load_graph(ROOT / "examples" / "lstm_stateful_int8.tosa")
    inputs = {name: np.stack([p[name] for p in _inputs(graph, 2)]) for name in graph.input_types}
    result = npu_sim.simulate(graph, "edge", inputs, invocations=2, timing_only=True)
    assert result.outputs == {} and result.variables == {}
    assert result.summary["timing_only"] is True
    assert npu_sim.simulate(graph, "edge", inputs, invocations=2).summary["timing_only"] is False


def _figures(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in ("wall_seconds", "timing_only")}


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
def test_every_figure_equals_the_full_simulation_on_every_preset(model):
    graph = npu_sim.load_graph(model)
    for preset in PRESETS:
        hw = load_hw_config(preset)
        for invocations in (1, 3) if model.stem in STATEFUL else (1,):
            program = compile_graph(graph, hw, resident_constants=invocations > 1)
            inputs = _inputs(graph, invocations)
            full = simulate_program(program, hw, inputs)
            timed = simulate_program(program, hw, inputs, timing_only=True)
            assert timed.timing_only is not any(c.kind in ("cond", "loop") for c in full.trace.commands)
            assert timed.trace.commands == full.trace.commands, (preset, invocations)
            assert _figures(build_summary(timed.trace, hw, program, graph=model.stem)) == \
                _figures(build_summary(full.trace, hw, program, graph=model.stem)), (preset, invocations)
