"""Typed exceptions: every way npu-sim can refuse an input.

All derive from :class:`NpuSimError`. The CLI prints ``str(error)`` on one line
and exits with :attr:`NpuSimError.exit_code` (2: the input is at fault).
Anything else escaping is a bug (exit 1).
"""

from __future__ import annotations


class NpuSimError(Exception):
    """Base of every error npu-sim raises on purpose."""

    exit_code = 2


# --- reading graphs -------------------------------------------------------
class TosaFormatError(NpuSimError):
    """The file is not a readable TOSA flatbuffer or JSON graph."""


class TosaVersionError(TosaFormatError):
    """The file declares a TOSA major version we do not read."""


class UnknownOperatorError(TosaFormatError):
    """An operator code or name that TOSA does not define."""


class GraphValidationError(NpuSimError):
    """The graph is structurally wrong: dangling tensor, wrong arity, cycle, ..."""


class UnsupportedFeatureError(NpuSimError):
    """Valid TOSA that npu-sim does not implement (e.g. TOSA 1.1-draft operators)."""


# --- executing ------------------------------------------------------------
class TosaRuntimeError(NpuSimError):
    """A TOSA ERROR_IF or REQUIRE condition was violated while executing."""

    def __init__(self, operator: str, condition: str):
        self.operator = operator
        self.condition = condition
        hint = REQUIRE_HINT if "REQUIRE(" in condition else ""
        super().__init__(f"{operator}: {condition}{hint}")


#: What a broken REQUIRE's message adds: these data, not the graph, are at fault.
REQUIRE_HINT = (" (a REQUIRE these data break: TOSA calls the result unpredictable; "
                "--allow-unpredictable finishes the run and reports it)")


class InputError(NpuSimError):
    """Graph inputs missing, or of the wrong shape or dtype."""


class VariableError(TosaRuntimeError):
    """Misuse of a TOSA variable (double declaration, read before write, mismatch)."""


# --- files and budgets -----------------------------------------------------
class PathError(NpuSimError):
    """A file or directory given on the command line cannot be used (missing, not a regular
    file, not writable, name too long, no space left)."""


class ResourceLimitError(NpuSimError):
    """The job would exceed a budget: host memory, a memory of the NPU, the work a loop may
    do, or the wall-clock time (``--timeout``)."""


# --- hardware, scheduling, simulation ---------------------------------------
class ConfigError(NpuSimError):
    """An invalid or unknown hardware configuration."""


class ScheduleError(NpuSimError):
    """The scheduler cannot map the graph onto the hardware (e.g. TCM too small)."""


class ProgramError(NpuSimError):
    """A Program is malformed (bad view, unknown memory, missing dependency)."""


class SimulationError(NpuSimError):
    """The simulated machine hit an illegal condition (bad access, uninitialised read)."""


class MemoryAccessError(SimulationError):
    """Out-of-bounds access, or a read of bytes never written."""


class SimulationDeadlock(SimulationError):
    """No event left to process while commands still wait."""


class SchedulerBugError(RuntimeError):
    """The scheduler produced a Program that the hardware model rejects (a bad access, a
    missing dependency): a bug in npu-sim, not in the input. Not an :class:`NpuSimError`,
    so the CLI reports it as an internal error (exit code 1)."""
