"""npu-sim sweep: spec checks before any work, one row per point, figures equal to npu-sim run,
invalid points reported in their row, cached reruns, the same results on a dask cluster."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from npu_sim.cli import main
from npu_sim.commands.run_cmd import run_simulation
from npu_sim.sweep.run import run_sweep
from npu_sim.sweep.spec import SweepSpecError, apply_axes, grid_points, load_sweep_spec, sample_points

GRAPH = Path(__file__).resolve().parents[2] / "examples" / "conv_rescale_int8.tosa"
AXES = {"tcm.size_bytes": [65536, 262144], "mac_array.rows": [0, 4, 16], "dma.engine_count": [1, 2]}


def write_spec(folder: Path, **changes: object) -> Path:
    spec = {"graph": str(GRAPH), "hw": "edge", "random_inputs": 0, "axes": AXES, **changes}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def read_rows(out: Path) -> list[dict[str, str]]:
    with (out / "results.csv").open() as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("sweep")
    spec = write_spec(folder)
    assert main(["sweep", str(spec), "-o", str(folder / "out"), "--workers", "2", "--no-progress"]) == 0
    return spec, folder / "out"


def test_one_row_per_point_with_the_issue_columns(swept: tuple[Path, Path]) -> None:
    _, out = swept
    rows = read_rows(out)
    assert list(rows[0]) == ["point", "tcm.size_bytes", "mac_array.rows", "dma.engine_count", "status", "error",
                             "total_cycles", "per_invocation_cycles", "seconds", "ddr_read_bytes",
                             "ddr_write_bytes", "peak_tcm_bytes", "mac_utilization", "energy_pj", "area_mm2",
                             "pareto"]
    assert [r["point"] for r in rows] == [str(i) for i in range(12)]
    for row in rows:
        if row["mac_array.rows"] == "0":
            assert (row["status"], row["error"]) == ("error", "config: mac_array.rows: Input should be greater than 0")
            assert row["pareto"] == "false"
        else:
            assert (row["status"], row["error"]) == ("ok", "")
    assert any(r["pareto"] == "true" for r in rows)
    assert (out / "pareto.png").read_bytes()[:4] == b"\x89PNG"
    page = (out / "report.html").read_text()
    assert "data:image/png;base64," in page and "<table>" in page


def test_area_grows_with_tcm_and_rows(swept: tuple[Path, Path]) -> None:
    ok = {(r["tcm.size_bytes"], r["mac_array.rows"], r["dma.engine_count"]): float(r["area_mm2"])
          for r in read_rows(swept[1]) if r["status"] == "ok"}
    assert ok[("65536", "4", "1")] < ok[("65536", "16", "1")] < ok[("262144", "16", "1")]


def test_a_point_equals_npu_sim_run(swept: tuple[Path, Path], tmp_path: Path) -> None:
    row = next(r for r in read_rows(swept[1]) if r["point"] == "3")   # tcm 65536, rows 4, 2 DMA engines
    config = tmp_path / "point.yaml"
    config.write_text(yaml.safe_dump({"extends": "edge", "tcm": {"size_bytes": 65536},
                                      "mac_array": {"rows": 4}, "dma": {"engine_count": 2}}))
    summary = run_simulation(str(GRAPH), str(config), [], tmp_path / "run", random_seed=0)
    for name in ("total_cycles", "peak_tcm_bytes", "ddr_read_bytes", "ddr_write_bytes"):
        assert int(row[name]) == summary[name]
    for name in ("energy_pj", "area_mm2", "mac_utilization", "seconds"):
        assert float(row[name]) == summary[name]


def test_rerun_uses_the_cache_and_gives_the_same_file(swept: tuple[Path, Path]) -> None:
    spec, out = swept
    before = (out / "results.csv").read_bytes()
    outcome = run_sweep(spec, out, workers=1, progress=False)
    assert outcome.computed == 0
    assert (out / "results.csv").read_bytes() == before
    assert len(list((out / "cache").glob("*.json"))) == 8   # the 4 invalid points are not cached


def test_more_axis_values_only_run_the_new_points(swept: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(swept[1], out)
    wider = write_spec(tmp_path, axes={**AXES, "dma.engine_count": [1, 2, 3]})
    assert run_sweep(wider, out, workers=1, progress=False).computed == 4


def test_same_results_on_a_dask_cluster(swept: tuple[Path, Path], tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    spec, out = swept
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster:
        run_sweep(spec, tmp_path / "dask", scheduler=cluster.scheduler_address, progress=False)
    assert (tmp_path / "dask" / "results.csv").read_bytes() == (out / "results.csv").read_bytes()


@pytest.mark.parametrize(("changes", "message"), [
    ({"axes": {"tcm.sizes": [1]}}, r"axes\.tcm\.sizes: unknown field 'sizes'"),
    ({"axes": {"tcm.size_bytes": []}}, r"axes\.tcm\.size_bytes: no values"),
    ({"axes": {"tcm": [1]}}, r"'tcm' is a section"),
    ({"axes": {}}, r"axes: at least one axis"),
    ({"graph": "missing.tosa"}, r"missing\.tosa: no such file"),
    ({"hw": "nosuch"}, r"unknown hardware config 'nosuch'"),
    ({"colour": 1}, r"colour: Extra inputs are not permitted"),
])
def test_a_bad_spec_is_exit_2_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              changes: dict[str, object], message: str) -> None:
    spec = write_spec(tmp_path, **changes)
    assert main(["sweep", str(spec), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert re.search(message, err), err
    assert not (tmp_path / "out").exists()


def test_axes_reach_per_dtype_tables_and_random_search_samples() -> None:
    assert apply_axes({"mac_array": {"rows": 16}}, {"mac_array.pe_cycles_per_mac.int16": 4}) == \
        {"mac_array": {"rows": 16, "pe_cycles_per_mac": {"int16": 4}}}
    axes = {"a": [1, 2, 3], "b": [10, 20]}
    assert grid_points(axes)[:3] == [{"a": 1, "b": 10}, {"a": 1, "b": 20}, {"a": 2, "b": 10}]
    sample = sample_points(axes, 3, seed=7)
    assert len(sample) == 3 and sample == sample_points(axes, 3, seed=7)
    assert all(p in grid_points(axes) for p in sample)


def test_random_search_needs_a_point_count(tmp_path: Path) -> None:
    with pytest.raises(SweepSpecError, match=r"search\.points: needed for method random"):
        load_sweep_spec(write_spec(tmp_path, search={"method": "random"}))
    spec = load_sweep_spec(write_spec(tmp_path, search={"method": "random", "points": 4, "seed": 1}))
    assert json.loads(spec.search.model_dump_json()) == {"method": "random", "points": 4, "seed": 1}


@pytest.mark.parametrize("method", ["random", "optuna"])
def test_searches_write_the_same_columns_and_points_of_the_grid(swept: tuple[Path, Path], tmp_path: Path,
                                                                method: str) -> None:
    if method == "optuna":
        pytest.importorskip("optuna")
    spec = write_spec(tmp_path, search={"method": method, "points": 5, "seed": 3})
    run_sweep(spec, tmp_path / "out", workers=1, progress=False)
    rows = read_rows(tmp_path / "out")
    grid = {tuple(r[a] for a in AXES): r for r in read_rows(swept[1])}
    assert len(rows) == 5 and list(rows[0]) == list(read_rows(swept[1])[0])
    for row in rows:
        same = grid[tuple(row[a] for a in AXES)]
        assert (row["status"], row["total_cycles"], row["energy_pj"]) == \
            (same["status"], same["total_cycles"], same["energy_pj"])
