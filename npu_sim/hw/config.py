"""The hardware configuration: a validated description of one NPU and its memories.

A config is YAML data checked by the pydantic model :class:`HwConfig`. Every
field carries its unit in its name (``size_bytes``, ``bytes_per_cycle``,
``latency_cycles``). Unknown keys, non-positive sizes or rates, and impossible
combinations are rejected with a :class:`~npu_sim.errors.ConfigError` whose one
line names the field path (``ddr.burst_size_bytes: ...``).

Presets live in ``npu_sim/hw/presets/*.yaml`` (package data; the top-level
``hw_configs`` folder of the repository is a symlink to it). A config may start
with ``extends: <preset name or path>``: it is deep-merged over that base.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from npu_sim.errors import ConfigError
from npu_sim.tosa.dtype import DType

PRESET_DIR = Path(__file__).with_name("presets")

#: dtype names accepted as keys of per-dtype rate tables (lower-case ``DType`` names)
RATE_DTYPES = frozenset(d.name.lower() for d in DType if d.is_tosa_1_0)

PositiveInt = Field(gt=0)
NonNegativeInt = Field(ge=0)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class DdrConfig(_Strict):
    """External memory shared by all DMA engines."""

    size_bytes: int = PositiveInt
    bandwidth_bytes_per_cycle: int = PositiveInt
    read_latency_cycles: int = NonNegativeInt
    write_latency_cycles: int = NonNegativeInt
    burst_size_bytes: int = PositiveInt

    @model_validator(mode="after")
    def _check(self) -> DdrConfig:
        if self.burst_size_bytes > self.size_bytes:
            raise ValueError(f"burst_size_bytes: a burst of {self.burst_size_bytes} bytes is larger "
                             f"than the DDR ({self.size_bytes} bytes)")
        return self


class DmaConfig(_Strict):
    """DMA engines: in-order queues of 1D/2D/3D strided descriptors."""

    engine_count: int = PositiveInt
    setup_cycles: int = NonNegativeInt  # per descriptor (= per DMA command)
    max_outstanding_bursts: int = PositiveInt  # per engine


class TcmConfig(_Strict):
    """Tightly coupled scratchpad: the scheduler places every tile in it."""

    size_bytes: int = PositiveInt
    bank_count: int = PositiveInt
    port_count: int = PositiveInt
    port_bytes_per_cycle: int = PositiveInt

    @model_validator(mode="after")
    def _check(self) -> TcmConfig:
        if self.size_bytes % self.bank_count:
            raise ValueError(f"bank_count: {self.bank_count} banks do not divide size_bytes "
                             f"{self.size_bytes}")
        if (self.size_bytes // self.bank_count) % self.port_bytes_per_cycle:
            raise ValueError(f"port_bytes_per_cycle: a bank of {self.size_bytes // self.bank_count} "
                             f"bytes is not a whole number of {self.port_bytes_per_cycle}-byte words")
        return self

    @property
    def bandwidth_bytes_per_cycle(self) -> int:
        """Peak bandwidth: each port serves one bank word per cycle (fewer banks than ports conflict)."""
        return min(self.port_count, self.bank_count) * self.port_bytes_per_cycle


class VariableSramConfig(_Strict):
    """Persistent SRAM bank holding TOSA variables across invocations."""

    size_bytes: int = PositiveInt
    bytes_per_cycle: int = PositiveInt


def _check_rate_table(table: dict[str, int], field: str) -> None:
    for key, value in table.items():
        if key not in RATE_DTYPES:
            raise ValueError(f"{field}.{key}: unknown dtype (known: {', '.join(sorted(RATE_DTYPES))})")
        if value <= 0:
            raise ValueError(f"{field}.{key}: must be > 0, got {value}")


class MacArrayConfig(_Strict):
    """Output-stationary systolic array of ``rows`` x ``cols`` processing elements.

    Each PE does one int8 MAC per cycle, so ``macs_per_cycle['int8'] == rows*cols``
    (implied when omitted). Slower dtypes state their MACs/cycle, which must divide
    ``rows*cols``: a K step then takes ``rows*cols // macs_per_cycle[dtype]`` cycles.
    A dtype that is not listed cannot run on the array.

    ``accumulator_buffers`` is how many result registers each PE has. With 1 the array
    finishes one ``rows x cols`` output block, fill, reduction and skew, before the next
    starts. With 2 (double-buffered accumulators, as in Gemmini's output-stationary mesh)
    a finished block moves to the shadow registers and drains while the next one
    accumulates, so consecutive blocks of one command overlap their fill and drain.
    """

    rows: int = PositiveInt
    cols: int = PositiveInt
    macs_per_cycle: dict[str, int] = Field(default_factory=dict)
    setup_cycles: int = NonNegativeInt  # per command
    accumulator_buffers: int = Field(default=2, ge=1, le=2)
    depthwise_macs_per_cycle: int = Field(
        0, ge=0, description="MACs/cycle a depthwise convolution reaches (0 = the array mapping alone)")

    @model_validator(mode="after")
    def _check(self) -> MacArrayConfig:
        _check_rate_table(self.macs_per_cycle, "macs_per_cycle")
        pes = self.rows * self.cols
        stated = self.macs_per_cycle.get("int8")
        if stated is not None and stated != pes:
            raise ValueError(f"macs_per_cycle.int8: {stated} is inconsistent with rows*cols = {pes}")
        for key, value in self.macs_per_cycle.items():
            if value > pes or pes % value:
                raise ValueError(f"macs_per_cycle.{key}: {value} must divide rows*cols = {pes}")
        if stated is None:
            object.__setattr__(self, "macs_per_cycle", {"int8": pes, **self.macs_per_cycle})
        return self

    @property
    def int8_macs_per_cycle(self) -> int:
        return self.rows * self.cols


class VectorConfig(_Strict):
    """SIMD unit for elementwise, reduction, pooling and data-layout work."""

    elements_per_cycle: dict[str, int]  # lanes per dtype
    setup_cycles: int = NonNegativeInt

    @model_validator(mode="after")
    def _check(self) -> VectorConfig:
        _check_rate_table(self.elements_per_cycle, "elements_per_cycle")
        if "int8" not in self.elements_per_cycle:
            raise ValueError("elements_per_cycle.int8: required (the rate other dtypes fall back on)")
        return self


class LutConfig(_Strict):
    """Table-lookup / activation unit (TABLE, SIGMOID, TANH, ...)."""

    elements_per_cycle: int = PositiveInt
    setup_cycles: int = NonNegativeInt
    # LUT reload per table operation (0: tables stay resident, no reload cost).
    table_load_bytes_per_cycle: float = Field(
        0.0, ge=0, description="rate a table operation reloads its LUT memory (0 = preloaded)")
    table_int8_bytes: int = Field(256, ge=0, description="LUT bytes loaded for an int8-input table")
    table_int16_bytes: int = Field(2048, ge=0, description="LUT bytes loaded for an int16-input table")


class HwConfig(_Strict):
    """One NPU: clock, memories, DMA and compute units (a section per unit of
    :mod:`npu_sim.hw.compute_units`, named as the unit)."""

    name: str = ""
    description: str = ""
    clock_hz: int = PositiveInt
    ddr: DdrConfig
    dma: DmaConfig
    tcm: TcmConfig
    variable_sram: VariableSramConfig
    mac_array: MacArrayConfig
    vector: VectorConfig
    lut: LutConfig


# --- loading ------------------------------------------------------------------------------

def preset_names() -> list[str]:
    """Names of the bundled presets (file stems in the presets folder)."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_hw_config(name_or_path: str | Path) -> HwConfig:
    """A validated :class:`HwConfig` from a preset name or a YAML file path."""
    data, source = _load_raw(str(name_or_path), chain=())
    return hw_config_from_dict(data, source)


def hw_config_from_dict(data: dict[str, Any], source: str = "config") -> HwConfig:
    """Validate already-merged config data (no ``extends``); errors name ``source`` and the field."""
    try:
        return HwConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc)}") from None


def resolved_config_dict(name_or_path: str | Path) -> dict[str, Any]:
    """The config as plain data after ``extends`` is resolved and defaults filled in."""
    return load_hw_config(name_or_path).model_dump(mode="json")


def _resolve_path(name_or_path: str, relative_to: Path | None) -> Path:
    candidates = []
    as_path = Path(name_or_path)
    if relative_to is not None and not as_path.is_absolute():
        candidates.append(relative_to / as_path)
    candidates.append(as_path)
    looks_like_path = as_path.suffix in (".yaml", ".yml") or "/" in name_or_path
    for candidate in candidates:
        if looks_like_path and candidate.is_file():
            return candidate
    if not looks_like_path:
        preset = PRESET_DIR / f"{name_or_path}.yaml"
        if preset.is_file():
            return preset
        raise ConfigError(f"unknown hardware config {name_or_path!r} "
                          f"(presets: {', '.join(preset_names())}; or give a .yaml path)")
    raise ConfigError(f"hardware config file {name_or_path!r} not found")


#: libyaml's safe loader when PyYAML was built with it (5x faster), else the pure-Python one.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load_raw(name_or_path: str, chain: tuple[Path, ...],
              relative_to: Path | None = None) -> tuple[dict[str, Any], str]:
    path = _resolve_path(name_or_path, relative_to).resolve()
    source = path.stem if path.parent == PRESET_DIR.resolve() else str(path)
    if path in chain:
        raise ConfigError(f"{source}: extends cycle ({' -> '.join(p.stem for p in chain + (path,))})")
    try:
        data = yaml.load(path.read_text(), Loader=_YAML_LOADER)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML ({' '.join(str(exc).split())})") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read ({exc.strerror})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a hardware config must be a mapping, got {type(data).__name__}")
    own_name, own_description = data.get("name"), data.get("description")
    base_name = data.pop("extends", None)
    if base_name is not None:
        if not isinstance(base_name, str):
            raise ConfigError(f"{source}: extends: expected a preset name or path, got {base_name!r}")
        base, _ = _load_raw(base_name, chain + (path,), relative_to=path.parent)
        data = deep_merge(base, data)
        if own_description is None:  # the base's description no longer describes it
            data["description"] = f"{base['name']} with overrides"
    data["name"] = own_name if own_name is not None else path.stem
    return data, source


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` merged into a copy of ``base``: mappings merge key by key, other values replace."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _describe(exc: ValidationError) -> str:
    errors = exc.errors()
    first = errors[0]
    loc = ".".join(str(part) for part in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "value_error" and ":" in msg.split(" ")[0]:
        # our cross-field checks name the sub-field first: "bank_count: ..."
        field, _, rest = msg.partition(": ")
        loc = f"{loc}.{field}" if loc else field
        msg = rest
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc or 'config'}: {msg}{more}"
