"""Budgets that turn runaway jobs into errors: wall-clock time and the work of one loop.

A WHILE_LOOP whose trip count comes from its input can run for ever even under an
iteration cap (2^30 iterations of a megabyte each). Both executors (the reference
executor and the simulator) step a :class:`LoopGuard` per iteration; it counts the bytes
the loop writes and checks the deadline, and raises :class:`ResourceLimitError` naming
the loop, the iterations run and the option that raises the limit.

The limits of the current job are set once by whoever starts it (the CLI, or a caller of
the Python API) with :func:`using_limits`; code deep in the executors reads them with
:func:`current_limits` instead of having them passed through every layer.
"""

from __future__ import annotations

import contextvars
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from npu_sim.errors import ResourceLimitError

#: Bytes one loop may write over all its iterations (cond and body outputs), by default.
DEFAULT_LOOP_WORK_BYTES = 1 << 32
#: Wall-clock limit of a command-line job, by default (generous: 6 hours).
DEFAULT_TIMEOUT_SECONDS = 6 * 3600.0
#: The backstop timer fires this much later than the deadline the loops check.
ALARM_GRACE = 1.05


@dataclass(frozen=True)
class RunLimits:
    """The budgets of one job. ``deadline`` is a :func:`time.monotonic` time or None."""

    loop_work_bytes: int = DEFAULT_LOOP_WORK_BYTES
    deadline: float | None = None
    timeout_seconds: float | None = None

    @classmethod
    def with_timeout(cls, timeout_seconds: float | None,
                     loop_work_bytes: int = DEFAULT_LOOP_WORK_BYTES) -> RunLimits:
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        return cls(loop_work_bytes=loop_work_bytes, deadline=deadline, timeout_seconds=timeout_seconds)

    def check_deadline(self, doing: str) -> None:
        """Raise if the job's time is up; ``doing`` says where it was."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise ResourceLimitError(f"timed out after {self.timeout_seconds:g} s while {doing} "
                                     "(raise it with --timeout SECONDS)")


_NO_LIMITS_SET = RunLimits()
_CURRENT: contextvars.ContextVar[RunLimits | None] = contextvars.ContextVar("npu_sim_run_limits", default=None)


def current_limits() -> RunLimits:
    """The limits of the job running now (no deadline and the default loop budget if none was set)."""
    return _CURRENT.get() or _NO_LIMITS_SET


@contextmanager
def using_limits(limits: RunLimits) -> Iterator[RunLimits]:
    """Run the ``with`` body under ``limits``."""
    token = _CURRENT.set(limits)
    try:
        yield limits
    finally:
        _CURRENT.reset(token)


class LoopGuard:
    """One execution of one loop: :meth:`step` after each iteration."""

    __slots__ = ("label", "work_per_iteration_bytes", "iterations", "_limits")

    def __init__(self, label: str, work_per_iteration_bytes: int):
        self.label = label
        self.work_per_iteration_bytes = max(1, work_per_iteration_bytes)
        self.iterations = 0
        self._limits = current_limits()

    def step(self) -> None:
        """Count one more iteration; raise when the loop's work or the job's time is spent."""
        self.iterations += 1
        limits = self._limits
        if self.iterations * self.work_per_iteration_bytes > limits.loop_work_bytes:
            raise ResourceLimitError(
                f"{self.label}: loop stopped after {self.iterations} iterations: it would write more "
                f"than {limits.loop_work_bytes} bytes ({self.work_per_iteration_bytes} per iteration; "
                "raise the budget with --max-loop-work BYTES)")
        limits.check_deadline(f"running {self.label} (iteration {self.iterations})")


@contextmanager
def job_limits(timeout_seconds: float | None, loop_work_bytes: int = DEFAULT_LOOP_WORK_BYTES) -> Iterator[RunLimits]:
    """Run a whole job under a wall-clock limit and a loop-work budget.

    Loops and invocations check the deadline themselves (their message says where the job
    was); where the platform has interval timers, a timer a little after the deadline also
    stops a job stuck elsewhere (a long schedule)."""
    if timeout_seconds is not None and not timeout_seconds > 0:
        raise ResourceLimitError(f"--timeout: must be more than 0 seconds, got {timeout_seconds:g}")
    if loop_work_bytes < 1:
        raise ResourceLimitError(f"--max-loop-work: must be at least 1 byte, got {loop_work_bytes}")
    limits = RunLimits.with_timeout(timeout_seconds, loop_work_bytes)
    with using_limits(limits), _alarm(timeout_seconds):
        yield limits


@contextmanager
def _alarm(timeout_seconds: float | None) -> Iterator[None]:
    timer = getattr(signal, "ITIMER_REAL", None)
    if timeout_seconds is None or timer is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum: int, frame: object) -> None:
        raise ResourceLimitError(f"timed out after {timeout_seconds:g} s (raise it with --timeout SECONDS)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(timer, timeout_seconds * ALARM_GRACE + 1.0)
    try:
        yield
    finally:
        signal.setitimer(timer, 0)
        signal.signal(signal.SIGALRM, previous)
