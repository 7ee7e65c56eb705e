"""One sweep point: its config, its cache key, and its row of figures.

A :class:`SweepContext` carries what every point shares (graph bytes, input arrays, base
config data); it is pickled once to each worker process or dask worker, which parses the
graph once (:func:`_prepared`) and then runs points. The figures of a point are those
``npu-sim run`` writes to summary.json for the same config (the same
:func:`~npu_sim.simulation.simulate_invocations`), without the per-run files.

What does not change between points is not done again (:mod:`npu_sim.hw.field_effects`): a
worker keeps the Programs it compiled by *schedule key* and the simulations it ran by
*timing key*, so a point that differs from an earlier one only in timing fields is only
simulated, and one that differs only in energy or area tables only has its summary counted
again. A Program and a simulation are deterministic functions of what their keys hash, so
the figures are byte for byte those of the point run alone.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from npu_sim.errors import ConfigError, NpuSimError
from npu_sim.hw.config import HwConfig, hw_config_from_dict
from npu_sim.hw.field_effects import schedule_key, timing_key
from npu_sim.hw.trace import Trace
from npu_sim.program import Program
from npu_sim.reference.unpredictable import allowing_unpredictable
from npu_sim.simulation import simulate_invocations
from npu_sim.sweep.spec import Value, apply_axes
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.loader import parse_graph
from reports.summary import build_summary

#: results.csv columns after ``point`` and the axes
FIGURES = ("total_cycles", "per_invocation_cycles", "seconds", "ddr_read_bytes", "ddr_write_bytes",
           "peak_tcm_bytes", "mac_utilization", "energy_pj", "area_mm2")
#: bump when a change of the simulator or the models changes the figures of a cached point
CACHE_VERSION = 1


@dataclass
class SweepContext:
    """What every point of one sweep shares; ``digest`` hashes graph bytes and inputs."""

    graph_bytes: bytes
    graph_name: str
    per_invocation: list[dict[str, np.ndarray]]
    stack: bool
    base_config: dict[str, Any]
    tosa_level: str = "8K"
    allow_unpredictable: bool = False
    timing_only: bool = False   # simulate without computing tensors (the same figures)
    digest: str = field(default="", init=False)

    def __post_init__(self) -> None:
        h = hashlib.sha256(self.graph_bytes)
        for inputs in self.per_invocation:
            for name in sorted(inputs):
                array = np.ascontiguousarray(inputs[name])
                h.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
                h.update(array.tobytes())
        h.update(f"stack={self.stack}".encode())
        self.digest = h.hexdigest()


@dataclass(frozen=True)
class Keys:
    """What a point's work depends on: its schedule (the Program) and its timing (the simulation)."""

    schedule: str
    timing: str


@dataclass(frozen=True)
class PlannedPoint:
    """A point checked in the main process: its config (None if invalid), its cache key and
    the keys of the work it shares with other points."""

    index: int
    values: dict[str, Value]
    hw_data: dict[str, Any] | None
    key: str
    error: str = ""
    keys: Keys = Keys("", "")


def plan_point(ctx: SweepContext, index: int, values: dict[str, Value]) -> PlannedPoint:
    """Apply the axes to the base config and validate it; the key hashes the resolved config."""
    data = apply_axes(ctx.base_config, values)
    try:
        hw = hw_config_from_dict(data, "config")
    except ConfigError as exc:
        return PlannedPoint(index, values, None, "", str(exc))
    resolved = hw.model_dump(mode="json")
    resolved.pop("name", None)          # a name or description does not change the figures
    resolved.pop("description", None)
    text = json.dumps(resolved, sort_keys=True)
    key = hashlib.sha256(f"v{CACHE_VERSION}:{ctx.digest}:{ctx.allow_unpredictable}:{text}".encode()).hexdigest()
    config = hw.model_dump(mode="json")
    return PlannedPoint(index, values, config, key, keys=Keys(schedule_key(config), timing_key(config)))


_PREPARED: dict[str, Graph] = {}


def _prepared(ctx: SweepContext) -> Graph:
    """The graph of ``ctx``, parsed once per process (the spec check validated it)."""
    graph = _PREPARED.get(ctx.digest)
    if graph is None:
        _PREPARED.clear()
        graph = _PREPARED[ctx.digest] = parse_graph(ctx.graph_bytes, ctx.graph_name, validate=False)
    return graph


def figures_of(summary: dict[str, Any]) -> dict[str, Any]:
    """The results.csv figures of a run summary."""
    row = {name: summary[name] for name in FIGURES}
    row["per_invocation_cycles"] = " ".join(str(c) for c in summary["per_invocation_cycles"])
    return row


#: Programs and simulations a worker keeps for the points after (each a few MB at most).
KEEP = 2
_PROGRAMS: dict[str, Program] = {}
_RUNS: dict[str, tuple[Program, Trace]] = {}


def _keep(memo: dict[str, Any], key: str, value: Any) -> None:
    """Remember ``value`` under ``key``, forgetting the oldest beyond :data:`KEEP`."""
    memo.pop(key, None)
    memo[key] = value
    while len(memo) > KEEP:
        del memo[next(iter(memo))]


def _summary(ctx: SweepContext, hw: HwConfig, keys: Keys) -> dict[str, Any]:
    """The run summary of one config, reusing this worker's Program and simulation where the
    keys say they are the same."""
    known = _RUNS.get(keys.timing) if keys.timing else None
    if known is not None:   # only energy or area differ: count them again
        program, trace = known
        return build_summary(trace, hw, program, graph=ctx.graph_name)
    with allowing_unpredictable(ctx.allow_unpredictable):
        result = simulate_invocations(_prepared(ctx), hw, ctx.per_invocation, stack=ctx.stack,
                                      graph_label=ctx.graph_name, validate=False, timing_only=ctx.timing_only,
                                      program=_PROGRAMS.get(keys.schedule) if keys.schedule else None)
    if keys.schedule:
        _keep(_PROGRAMS, keys.schedule, result.program)
        _keep(_RUNS, keys.timing, (result.program, result.trace))
    return result.summary


def run_point(ctx: SweepContext, hw_data: dict[str, Any], keys: Keys = Keys("", "")) -> dict[str, Any]:
    """Simulate one valid config: ``{"status": "ok", figures...}`` or ``{"status": "error", "error": ...}``.
    Never raises for a point: a bad point must not stop the sweep. ``keys``: see :class:`Keys`
    (empty: nothing shared)."""
    try:
        summary = _summary(ctx, HwConfig.model_validate(hw_data), keys)
    except NpuSimError as exc:
        return {"status": "error", "error": " ".join(str(exc).split())}
    except Exception as exc:  # noqa: BLE001  # a simulator bug on one point: reported in its row
        return {"status": "error", "error": f"internal error ({type(exc).__name__}): {' '.join(str(exc).split())}"}
    return {"status": "ok", "error": "", **figures_of(summary)}


#: One point of a batch: its index, resolved config data and keys.
BatchItem = tuple[int, dict[str, Any], Keys]


def run_batch(ctx: SweepContext, batch: list[BatchItem]) -> list[tuple[int, dict[str, Any]]]:
    """Run several points in one task: fewer round trips, and the points of a batch share
    their schedule (see :func:`npu_sim.sweep.runner.batches_of`)."""
    return [(index, run_point(ctx, hw_data, keys)) for index, hw_data, keys in batch]
