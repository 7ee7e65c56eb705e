"""Pausing Python's cycle collector around the heavy passes (scheduling, simulating)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector: compiling and simulating a big Program create
    millions of long-lived objects (tiles, views, byte sets, access records, events), and
    generational collections scanning them (and every object the process already holds) cost
    more than the work itself, to find next to nothing. Reference counting frees memory as
    usual; any cycle left is collected after. The previous setting is restored, also on
    errors; nested pauses are fine."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
