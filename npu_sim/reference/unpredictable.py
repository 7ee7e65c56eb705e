"""Runs that go on past a violated REQUIRE (``--allow-unpredictable``).

TOSA distinguishes ERROR_IF (the graph is wrong: an error) from REQUIRE (these data make
the result unpredictable). Arm's reference model finishes such a run and reports the status
UNPREDICTABLE; so do we, when asked: inside :func:`allowing_unpredictable`, a failed REQUIRE
is recorded (the first one, and how many) and the kernel goes on; a kernel that cannot go
on gives zeros. Timing stays valid (the work done is the same); the values do not matter.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class UnpredictableLog:
    """The REQUIREs a run broke: the first (operator, condition) and the count."""

    operator: str = ""
    condition: str = ""
    count: int = 0

    def record(self, operator: str, condition: str) -> None:
        if not self.count:
            self.operator, self.condition = operator, condition
        self.count += 1

    @property
    def status(self) -> str:
        return "unpredictable" if self.count else "valid"


_ACTIVE: contextvars.ContextVar[UnpredictableLog | None] = contextvars.ContextVar("npu_sim_unpredictable",
                                                                                   default=None)


def active_log() -> UnpredictableLog | None:
    """The log of the run going on past REQUIREs, or None (a REQUIRE is an error)."""
    return _ACTIVE.get()


def is_require(condition: str) -> bool:
    """True for a REQUIRE condition (data-dependent: unpredictable), False for an ERROR_IF."""
    return "REQUIRE(" in condition


@contextmanager
def allowing_unpredictable(allow: bool = True) -> Iterator[UnpredictableLog]:
    """Run the ``with`` body going on past REQUIREs (when ``allow``); yields the log."""
    log = UnpredictableLog()
    token = _ACTIVE.set(log if allow else None)
    try:
        yield log
    finally:
        _ACTIVE.reset(token)
