"""A progress line for long work on a terminal: the stage and how much of it is done.

The work names its stage (:func:`stage`) with, where it knows them, a total and a function
that tells how much is done (the scheduler: operations compiled; the simulator: commands
run), so nothing is counted on the hot paths. :func:`showing` draws the line from a
background thread, once the work has taken longer than :data:`DELAY_SECONDS` and only on a
terminal, as ``npu-sim sweep``'s bar; the line is erased when the work ends.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TextIO

#: Work shorter than this shows nothing.
DELAY_SECONDS = 2.0
#: How often the line is redrawn.
REFRESH_SECONDS = 0.25


@dataclass
class _Stage:
    name: str
    total: int
    done: Callable[[], int] | None


_current: _Stage | None = None
_shown = False   # a line is being shown: stages are kept (else nothing is, not even a reference)


def stage(name: str, total: int = 0, done: Callable[[], int] | None = None) -> None:
    """The work is now at ``name`` (``done()`` of ``total`` items, if given). Free when nothing shows."""
    global _current
    if _shown:
        _current = _Stage(name, total, done)


def line() -> str:
    """The progress line of the current stage ("" before any)."""
    current = _current
    if current is None:
        return ""
    if current.done is None or not current.total:
        return f"{current.name} ..."
    done = min(current.done(), current.total)
    return f"{current.name}: {done:,}/{current.total:,} ({100 * done // current.total}%)"


@contextmanager
def showing(stream: TextIO | None = None, delay_seconds: float = DELAY_SECONDS) -> Iterator[None]:
    """Draw the progress line on ``stream`` (stdout) while the body runs, if it is a terminal."""
    global _current, _shown
    stream = stream or sys.stdout
    _current = None
    if not stream.isatty():
        yield
        return
    _shown = True
    stop = threading.Event()
    drawn = [0]

    def draw() -> None:
        if stop.wait(delay_seconds):
            return
        while not stop.is_set():
            text = line()
            stream.write("\r" + text.ljust(drawn[0]))
            stream.flush()
            drawn[0] = max(drawn[0], len(text))
            stop.wait(REFRESH_SECONDS)

    thread = threading.Thread(target=draw, name="npu-sim progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if drawn[0]:
            stream.write("\r" + " " * drawn[0] + "\r")
            stream.flush()
        _current, _shown = None, False
