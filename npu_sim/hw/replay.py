"""Invocations replayed from an earlier one's record, without events (a long stream's fast path).

A command's timing never depends on the values it computes; only control flow does (a
condition is a computed value). An invocation that starts on a quiet machine (every unit
idle, its queue empty, no transfer moving, no event due later) therefore runs exactly as an
earlier one that started on a quiet machine and took the same decisions, moved in time, with
one exception: a DMA's transfer time is a float sum at absolute times (:mod:`npu_sim.hw.ddr`),
whose rounding to a whole cycle could differ elsewhere in time. So an :class:`InvocationScript`
keeps what one invocation did, in the order it happened: each command's functional half (its
kernels or its copy, :meth:`~npu_sim.hw.queues.QueuedCommand.act`), each condition read and
what it gave, the trace records with times relative to the start, and each transfer with
its closed-form timing (a script is kept only if every transfer moved alone on its channel:
the closed form). A later invocation replays it when every transfer's closed form, worked
out again at the new times, lands on the same cycles: the functional halves run in the same
order (so every value, and every error, is as the event-driven run gives), each condition is
read again, and the records are appended, moved in time. A condition that reads otherwise
stops the replay (:class:`Diverged`): the caller puts the memories back as they were at the
invocation's start (:class:`MemorySnapshot`) and runs the invocation event by event.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from npu_sim.hw.ddr import BandwidthChannel, ceil_cycles
from npu_sim.hw.memory import Memory
from npu_sim.hw.queues import Clock, QueuedCommand, Unit

#: A trace record as the simulator appends it: (command, invocation, start, end, busy end).
RawRecord = tuple[Any, int, int, int, int]
#: A transfer's closed form, relative to the invocation's start: (channel, arrival cycle,
#: bytes, rate, the cycle its last byte moves, rounded up).
Transfer = tuple[BandwidthChannel, int, int, float, int]
#: Most bytes of memory a script with conditions snapshots per invocation (above: no replay).
MAX_SNAPSHOT_BYTES = 1 << 20


class Diverged(Exception):
    """A condition read otherwise than in the invocation the script recorded."""


def quiet(env: Clock, units: Sequence[Unit], channels: Sequence[BandwidthChannel]) -> bool:
    """Whether nothing is running or due: every unit idle with an empty queue, every transfer
    moved, no event later than now."""
    now = env.now
    return (all(not unit.busy and not unit.queue for unit in units)
            and all(channel.idle_at <= now for channel in channels)
            and all(item[0] <= now for item in env._queue))   # (simpy's heap: (time, ...))


class InvocationScript:
    """What one invocation did, relative to its start (see the module doc)."""

    __slots__ = ("acts", "records", "transfers", "duration", "conditions", "invocation", "start")

    def __init__(self, acts: list[Callable[[], None]], records: list[tuple[Any, int, int, int]],
                 transfers: list[Transfer], duration: int, conditions: int, invocation: int = 0, start: int = 0):
        self.acts = acts
        self.records = records
        self.transfers = transfers
        self.duration = duration
        self.conditions = conditions
        self.invocation, self.start = invocation, start   # the invocation recorded, its start cycle

    @staticmethod
    def of(invocation: int, raw: Sequence[RawRecord], start: int, end: int,
           checks: Sequence[tuple[int, Callable[[], None]]],
           transfer_of: Callable[[Any, int, int], Transfer | None]) -> InvocationScript:
        """The script of ``invocation``, which ran ``[start, end)`` and appended ``raw``; ``checks``:
        per condition read, the number of records appended before it and what re-checks it;
        ``transfer_of(command, start, busy_end)``: a DMA's closed form from its record's times
        relative to the start (None: no transfer, or not a DMA)."""
        acts: list[Callable[[], None]] = []
        records: list[tuple[Any, int, int, int]] = []
        transfers: list[Transfer] = []
        pending = list(checks)
        pending.reverse()
        for position, (node, _, s, e, b) in enumerate(raw):
            while pending and pending[-1][0] <= position:
                acts.append(pending.pop()[1])
            if isinstance(node, QueuedCommand):
                acts.append(node.act)
                transfer = transfer_of(node, s - start, b - start)
                if transfer is not None:
                    transfers.append(transfer)
            records.append((node, s - start, e - start, b - start))
        acts += [check for _, check in reversed(pending)]
        transfers.sort(key=lambda t: t[1])
        return InvocationScript(acts, records, transfers, end - start, len(checks), invocation, start)

    def fits(self, start: int) -> dict[BandwidthChannel, float] | None:
        """Whether its transfers, arriving ``start`` cycles later, still move alone and land on
        the same cycles moved in time: each channel's time its last byte moves, None if not."""
        idle: dict[BandwidthChannel, float] = {}
        for channel, arrive, size, rate, moved in self.transfers:
            at = start + arrive
            if at < idle.get(channel, channel.idle_at):
                return None
            done = at + size / rate
            if ceil_cycles(done) != start + moved:
                return None
            idle[channel] = done
        return idle

    def replay(self, invocation: int, start: int, raw: list[RawRecord]) -> None:
        """Run its functional halves and condition checks in order (raises :class:`Diverged`,
        or what a command raises), then append its records at ``start``."""
        for act in self.acts:
            act()
        raw.extend([(node, invocation, s + start, e + start, b + start) for node, s, e, b in self.records])


class MemorySnapshot:
    """The first bytes (and written flags) of memories, to put back after a replay that diverged."""

    __slots__ = ("saved",)

    def __init__(self, extents: Sequence[tuple[Memory, int]]):
        self.saved = [(memory, memory.data[:end].copy(), memory.written[:end].copy()) for memory, end in extents]

    def restore(self) -> None:
        for memory, data, written in self.saved:
            np.copyto(memory.data[:data.size], data)
            np.copyto(memory.written[:written.size], written)


#: Divergences after which a stream stops trying to replay (its decisions keep changing).
MAX_DIVERGED = 8


class Replays:
    """A stream's replays: the script of the last invocation recorded, when to record one and
    when to replay it (see the module doc)."""

    def __init__(self, env: Clock, units: Sequence[Unit], channels: Sequence[BandwidthChannel],
                 extents: Sequence[tuple[Memory, int]] | None):
        """``extents``: per memory, the end of the bytes the commands may touch (what a snapshot
        keeps); None: the bytes cannot be snapshot (scripts with conditions are not kept)."""
        self.env, self.units, self.channels, self.extents = env, units, channels, extents
        self.script: InvocationScript | None = None
        self.diverged = 0
        self._shared = -1   # the channels' shared starts when the invocation recorded began (-1: none)
        self._snapshots = extents is not None and sum(end for _, end in extents) <= MAX_SNAPSHOT_BYTES

    def _shared_starts(self) -> int:
        return sum(channel.shared_starts for channel in self.channels)

    def begin(self) -> bool:
        """Whether to record the invocation starting now (the machine is quiet, and replays go on)."""
        recording = self.diverged < MAX_DIVERGED and quiet(self.env, self.units, self.channels)
        self._shared = self._shared_starts() if recording else -1
        return recording

    def keep(self, invocation: int, raw: Sequence[RawRecord], start: int,
             checks: Sequence[tuple[int, Callable[[], None]]],
             transfer_of: Callable[[Any, int, int], Transfer | None]) -> None:
        """The invocation recorded since :meth:`begin` has ended: its script, if every transfer
        moved alone (and one with conditions may be undone)."""
        if self._shared < 0 or self._shared_starts() != self._shared or (checks and not self._snapshots):
            return
        self.script = InvocationScript.of(invocation, raw, start, self.env.now, checks, transfer_of)

    def replay(self, invocation: int, raw: list[RawRecord]) -> InvocationScript | None:
        """Replay the script as invocation ``invocation``, starting now, if it can: the script
        (the caller lets its cycles pass), None if the invocation must run event by event."""
        script = self.script
        if script is None or self.diverged >= MAX_DIVERGED or not quiet(self.env, self.units, self.channels):
            return None
        start = self.env.now
        idle = script.fits(start)
        if idle is None:
            return None
        snapshot = MemorySnapshot(self.extents or ()) if script.conditions else None
        try:
            script.replay(invocation, start, raw)
        except Diverged:
            assert snapshot is not None
            snapshot.restore()
            self.diverged += 1
            return None
        for channel, idle_at in idle.items():
            channel.replayed(idle_at)
        return script
