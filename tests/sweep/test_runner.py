"""npu_sim.sweep.runner: batches keep a schedule's points together; a sweep whose worker is killed
(a local worker process, a dask worker of a real LocalCluster) still finishes with every point
once and the figures of a clean run; the cache holds only whole points."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from npu_sim.hw.config import raw_config_dict
from npu_sim.inputs import load_inputs
from npu_sim.sweep import runner
from npu_sim.sweep.points import PlannedPoint, SweepContext, plan_point, run_point
from npu_sim.sweep.spec import grid_points
from npu_sim.tosa.loader import load_graph

GRAPH = Path(__file__).resolve().parents[2] / "examples" / "ds_cnn_kws_int8.tosa"
AXES = {"tcm.size_bytes": [131072, 262144, 524288], "mac_array.rows": [8, 16], "clock_hz": [5 * 10**8, 10**9],
        "dma.engine_count": [1, 2]}


def _sweep() -> tuple[SweepContext, list[PlannedPoint]]:
    graph = load_graph(GRAPH)
    ctx = SweepContext(GRAPH.read_bytes(), str(GRAPH), load_inputs(graph, [], random_seed=0).invocations, False,
                       raw_config_dict("edge"))
    return ctx, [plan_point(ctx, i, values) for i, values in enumerate(grid_points(AXES))]


def test_batches_hold_points_of_one_schedule_next_to_those_of_one_timing():
    _, planned = _sweep()
    batches = runner.batches_of(planned, workers=1)
    assert sorted(index for batch in batches for index, _, _ in batch) == list(range(24))
    assert all(len({keys.schedule for _, _, keys in batch}) == 1 for batch in batches)
    timings = [keys.timing for batch in batches for _, _, keys in batch]
    assert all(timings.index(t) + timings.count(t) - 1 == len(timings) - 1 - timings[::-1].index(t) for t in timings)


def _killing(source: Iterator, kill) -> Iterator:
    """``source``'s batches, ``kill()`` called once the first one is in."""
    for k, batch in enumerate(source):
        yield batch
        if k == 0:
            kill()


def _check(rows: dict[int, dict], out: Path, clean: dict[int, dict]) -> None:
    assert sorted(rows) == list(range(24)) and rows == clean
    cached = sorted(out.glob("cache/*"))
    assert all(path.suffix == ".json" for path in cached) and len(cached) == 24
    assert all(json.loads(path.read_text())["status"] == "ok" for path in cached)


@pytest.fixture(scope="module")
def clean() -> dict[int, dict]:
    ctx, planned = _sweep()
    return {p.index: run_point(ctx, p.hw_data) for p in planned}


@pytest.mark.slow
def test_a_killed_local_worker_loses_nothing(tmp_path, monkeypatch, clean):
    ctx, planned = _sweep()
    pools: list = []
    real_pool, real_local = runner.worker_pool, runner._local

    def counting_pool(*args):
        pools.append(real_pool(*args))
        return pools[-1]

    def kill_one() -> None:
        os.kill(next(iter(pools[0]._processes)), signal.SIGKILL)

    monkeypatch.setattr(runner, "worker_pool", counting_pool)
    monkeypatch.setattr(runner, "batches_of", lambda points, workers: [[(p.index, p.hw_data, p.keys)] for p in points])
    monkeypatch.setattr(runner, "_local", lambda *args: _killing(real_local(*args), kill_one))
    rows, ran = runner.run_points(ctx, planned, tmp_path, workers=2, progress=False)
    assert ran == 24 and len(pools) == 2     # the broken pool was replaced
    _check(rows, tmp_path, clean)


@pytest.mark.slow
def test_a_killed_dask_worker_loses_nothing(tmp_path, monkeypatch, clean):
    distributed = pytest.importorskip("distributed")
    ctx, planned = _sweep()
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    with cluster, distributed.Client(cluster) as client:
        pids = client.run(os.getpid)

        def kill_one() -> None:
            os.kill(next(iter(pids.values())), signal.SIGKILL)

        real_dask = runner._dask
        monkeypatch.setattr(runner, "batches_of",
                            lambda points, workers: [[(p.index, p.hw_data, p.keys)] for p in points])
        monkeypatch.setattr(runner, "_dask", lambda *args: _killing(real_dask(*args), kill_one))
        rows, ran = runner.run_points(ctx, planned, tmp_path, workers=2, scheduler=cluster.scheduler_address,
                                      progress=False)
        assert client.run(os.getpid) != pids     # the worker was killed (its nanny started another)
    assert ran == 24
    _check(rows, tmp_path, clean)
