"""The sweep spec (a YAML file) and the points it names.

::

    graph: models/kws.tosa          # relative to the spec file, or absolute
    hw: edge                        # base config: preset name or YAML file (relative to the spec)
    random_inputs: 0                # or inputs: {NAME: file.npy}
    invocations: 1
    axes:                           # dotted HwConfig field -> values; the product is swept
      tcm.size_bytes: [65536, 131072]
      mac_array.rows: [8, 16]
    search: {method: random, points: 50, seed: 0}   # optional: sample instead of the product
    timing_only: true               # optional: the figures without computing a tensor (faster)

Points whose configs differ only in fields that do not change the schedule
(:mod:`npu_sim.hw.field_effects`) share one compiled Program; only in energy or area
tables, one simulation too.

Everything that can be wrong with the spec (unknown key or field, empty axis, unreadable
graph, config or input file) is a :class:`SweepSpecError` raised before any point runs.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from npu_sim.errors import ConfigError, NpuSimError, PathError
from npu_sim.hw.config import HwConfig, load_yaml_strictly

Value = int | float | str | bool


class SweepSpecError(NpuSimError):
    """The sweep spec is unreadable or names something that does not exist."""


class SearchSpec(BaseModel):
    """How points are chosen: the full product (grid), a seeded random sample, or an optuna study."""

    model_config = ConfigDict(extra="forbid")
    method: Literal["grid", "random", "optuna"] = "grid"
    points: int | None = Field(default=None, gt=0)  # random/optuna: how many points
    seed: int = 0


class SweepSpec(BaseModel):
    """A validated spec; paths are resolved against the spec file's folder."""

    model_config = ConfigDict(extra="forbid")
    graph: str
    hw: str
    random_inputs: int | None = None
    inputs: dict[str, str] = Field(default_factory=dict)
    invocations: int = Field(default=1, ge=1)
    axes: dict[str, list[Value]]
    search: SearchSpec = Field(default_factory=SearchSpec)
    tosa_level: str = "8K"
    allow_unpredictable: bool = False   # finish points whose data break a TOSA REQUIRE
    timing_only: bool = False   # the same figures without computing the tensors


def load_sweep_spec(path: str | Path) -> SweepSpec:
    """Read and check a spec file; relative ``graph``, ``hw`` and ``inputs`` paths become absolute."""
    spec_path = Path(path)
    try:
        data = load_yaml_strictly(spec_path, str(path))   # UTF-8, no repeated key, never a FIFO
    except (ConfigError, PathError) as exc:
        raise SweepSpecError(str(exc)) from None
    if not isinstance(data, dict):
        raise SweepSpecError(f"{path}: a sweep spec must be a mapping")
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise SweepSpecError(f"{path}: {where}: {first['msg']}") from None
    base = spec_path.parent
    spec.graph = str(_relative(spec.graph, base))
    if spec.hw.endswith((".yaml", ".yml")) or "/" in spec.hw:
        spec.hw = str(_relative(spec.hw, base))
    spec.inputs = {name: str(_relative(file, base)) for name, file in spec.inputs.items()}
    if not spec.axes:
        raise SweepSpecError(f"{path}: axes: at least one axis is needed")
    for axis, values in spec.axes.items():
        if not values:
            raise SweepSpecError(f"{path}: axes.{axis}: no values")
        check_axis(axis, f"{path}: axes.{axis}")
    if spec.search.method != "grid" and spec.search.points is None:
        raise SweepSpecError(f"{path}: search.points: needed for method {spec.search.method}")
    return spec


def _relative(text: str, base: Path) -> Path:
    p = Path(text)
    return p if p.is_absolute() else base / p


def check_axis(axis: str, where: str) -> None:
    """An axis must name a HwConfig field (nested by dots; a key of a per-dtype table at the end)."""
    model: type[BaseModel] = HwConfig
    parts = axis.split(".")
    for i, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            raise SweepSpecError(f"{where}: unknown field {part!r} (known: {', '.join(model.model_fields)})")
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if i == len(parts) - 1:
                raise SweepSpecError(f"{where}: {part!r} is a section; name one of its fields")
            model = annotation
            continue
        rest = len(parts) - i - 1
        is_table = getattr(annotation, "__origin__", None) is dict
        if rest > (1 if is_table else 0):
            raise SweepSpecError(f"{where}: {part!r} has no fields")
        return


def grid_points(axes: dict[str, list[Value]]) -> list[dict[str, Value]]:
    """Every combination of the axes' values, the last axis varying fastest."""
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*axes.values())]


def sample_points(axes: dict[str, list[Value]], count: int, seed: int) -> list[dict[str, Value]]:
    """``count`` distinct points drawn with ``seed`` (all of them if the space is smaller)."""
    everything = grid_points(axes)
    if count >= len(everything):
        return everything
    chosen = sorted(random.Random(seed).sample(range(len(everything)), count))
    return [everything[i] for i in chosen]


def apply_axes(base: dict[str, Any], values: dict[str, Value]) -> dict[str, Any]:
    """A copy of the raw config data with each dotted field set to its value."""
    data = _copy(base)
    for axis, value in values.items():
        node = data
        *parents, leaf = axis.split(".")
        for part in parents:
            child = node.get(part)
            node[part] = child = dict(child) if isinstance(child, dict) else {}
            node = child
        node[leaf] = value
    return data


def _copy(data: dict[str, Any]) -> dict[str, Any]:
    return {k: _copy(v) if isinstance(v, dict) else v for k, v in data.items()}
