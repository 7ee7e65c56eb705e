"""npu_sim.sweep.points: points that differ only in timing or cost fields share their Program (and
their simulation), with figures byte for byte those of each point run alone; timing-only sweeps
give the same figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_sim.hw.config import raw_config_dict
from npu_sim.inputs import load_inputs
from npu_sim.sweep import points
from npu_sim.sweep.points import Keys, SweepContext, plan_point, run_batch, run_point
from npu_sim.sweep.spec import grid_points
from npu_sim.tosa.loader import load_graph

GRAPH = Path(__file__).resolve().parents[2] / "examples" / "ds_cnn_kws_int8.tosa"
#: a schedule axis, two timing axes and a cost axis
AXES = {"tcm.size_bytes": [262144, 524288], "clock_hz": [500_000_000, 1_000_000_000],
        "variable_sram.bytes_per_cycle": [8, 16], "energy.ddr_byte_pj": [80.0, 160.0]}


def context(timing_only: bool = False) -> SweepContext:
    graph = load_graph(GRAPH)
    loaded = load_inputs(graph, [], random_seed=0)
    return SweepContext(GRAPH.read_bytes(), str(GRAPH), loaded.invocations, False, raw_config_dict("edge"),
                        timing_only=timing_only)


@pytest.fixture
def fresh_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(points, "_PROGRAMS", {})
    monkeypatch.setattr(points, "_RUNS", {})


def test_points_share_programs_and_simulations_and_give_the_figures_of_each_alone(fresh_worker, monkeypatch):
    ctx = context()
    planned = [plan_point(ctx, i, values) for i, values in enumerate(grid_points(AXES))]
    assert len({p.keys.schedule for p in planned}) == 2 and len({p.keys.timing for p in planned}) == 8
    alone = {p.index: run_point(ctx, p.hw_data) for p in planned}   # no keys: nothing shared
    compiled, recounted = [], []   # per simulation: whether it compiled; per energy-only point: 1
    real_simulate, real_summary = points.simulate_invocations, points.build_summary

    def counting_simulate(*args, **kwargs):
        compiled.append(kwargs.get("program") is None)
        return real_simulate(*args, **kwargs)

    def counting_summary(*args, **kwargs):
        recounted.append(1)
        return real_summary(*args, **kwargs)

    monkeypatch.setattr(points, "simulate_invocations", counting_simulate)
    monkeypatch.setattr(points, "build_summary", counting_summary)
    batch = sorted(((p.index, p.hw_data, p.keys) for p in planned),
                   key=lambda item: (item[2].schedule, item[2].timing))
    shared = dict(run_batch(ctx, batch))
    assert shared == alone and all(row["status"] == "ok" for row in shared.values())
    assert sum(compiled) == 2                               # one Program per TCM size
    assert len(compiled) == 8 and len(recounted) == 8       # one simulation per timing; energy recounted
    # (this graph keeps nothing in the variable SRAM: its port moves no figure, the energy table does)
    assert len({row["energy_pj"] for row in shared.values()}) == 8
    assert len({row["seconds"] for row in shared.values()}) == 2   # (the clock's two values)


def test_a_timing_only_sweep_gives_the_same_figures(fresh_worker):
    full, timed = context(), context(timing_only=True)
    for index, values in enumerate(grid_points({"tcm.size_bytes": [262144], "clock_hz": [400_000_000, 10**9]})):
        point = plan_point(full, index, values)
        assert run_point(timed, point.hw_data, point.keys) == run_point(full, point.hw_data, Keys("", ""))
