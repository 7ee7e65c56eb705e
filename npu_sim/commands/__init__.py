"""What each ``npu-sim`` command does, one module per command group; :mod:`npu_sim.cli` declares
the commands and their options and imports this package when one runs.

Each command module is imported when first named (``npu_sim.commands.run_cmd``): a command
loads what it needs, not what every other command does (``run`` has no use for the
converter, the sweep runner or the report pages). The import runs with the cycle collector
paused and its objects frozen after (:func:`_import_frozen`)."""

from __future__ import annotations

import gc
import importlib
from types import ModuleType

from npu_sim.gc_pause import gc_paused

__all__ = ["cache_cmd", "convert_cmd", "exec_cmd", "hw_cmd", "inspect_cmd", "report_cmd", "run_cmd", "sweep_cmd"]


def __getattr__(name: str) -> ModuleType:
    if name not in __all__:
        raise AttributeError(f"module 'npu_sim.commands' has no attribute {name!r}")
    module = _import_frozen(f"npu_sim.commands.{name}")
    globals()[name] = module
    return module


def _import_frozen(name: str) -> ModuleType:
    """Import ``name`` without the cycle collector, then freeze what exists: a command's imports
    make some 90,000 objects that live as long as the process (modules, classes, functions),
    which collections during the import (a tenth of its time) and after it would scan to
    find nothing."""
    with gc_paused():
        module = importlib.import_module(name)
        gc.freeze()   # before the collector resumes: else its first collection scans them all
    return module


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
