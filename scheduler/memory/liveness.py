"""Liveness: each buffer's live interval in command ids, and the most bytes live at once.

A buffer is live from the first command touching it to the last (inclusive);
buffers that must survive the whole program (constants, inputs, outputs,
variables, the constant pool) span every command. The maximum over time of
the bytes live is the lower bound no placement can beat
(``tcm_lower_bound_bytes`` for TCM).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LiveRange:
    """A buffer to place: ``size_bytes`` live over commands ``start``..``end`` (inclusive)."""

    key: int
    size_bytes: int
    start: int
    end: int

    def overlaps(self, other: LiveRange) -> bool:
        return self.start <= other.end and other.start <= self.end


def max_live_bytes(ranges: list[LiveRange]) -> int:
    """The most bytes live at any one command."""
    events: list[tuple[int, int]] = []
    for r in ranges:
        events.append((r.start, r.size_bytes))
        events.append((r.end + 1, -r.size_bytes))
    events.sort(key=lambda e: (e[0], e[1]))
    live = best = 0
    for _, delta in events:
        live += delta
        best = max(best, live)
    return best


def live_at(ranges: list[LiveRange], time: int) -> list[LiveRange]:
    return [r for r in ranges if r.start <= time <= r.end]
