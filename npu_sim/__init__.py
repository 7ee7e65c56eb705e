"""npu-sim: a timed, bit-exact simulation model of a TOSA NPU."""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: Public name -> module defining it. Loaded on first use, so that ``import npu_sim``
#: (and the CLI's start-up) stays light. Add new API entries here and to __all__.
_API: dict[str, str] = {
    "load_graph": "npu_sim.api",
    "execute": "npu_sim.api",
    "Session": "npu_sim.api",
    "load_hw_config": "npu_sim.api",
    "simulate": "npu_sim.api",
    "SimulationResult": "npu_sim.api",
}

__all__ = ["Session", "SimulationResult", "execute", "load_graph", "load_hw_config", "simulate",
           "__version__"]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'npu_sim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
