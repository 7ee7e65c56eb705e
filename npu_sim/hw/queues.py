"""In-order hardware queues and the dependency bookkeeping of queued commands.

Every DMA engine and compute unit is a :class:`Unit`: a FIFO of issued commands
that runs one at a time, in issue order. A :class:`QueuedCommand` starts when it
is at the head of its unit's queue, the unit is idle, and every command it depends
on is done (``pending == 0``). When it finishes, the :class:`Machine` marks it
done, wakes the commands waiting for it and lets its unit take the next one. A
DMA frees its engine before it is done (its last bursts are still in flight,
see :mod:`npu_sim.hw.dma`): it releases the unit itself and is completed later.

These classes are the simulator's hot path: plain attributes and ``__slots__``,
no per-command simpy processes (callbacks on simpy events instead).
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

import simpy


class Clock(simpy.Environment):
    """The simulation's environment. Every delay is a whole number of cycles, so the time is
    an int (simpy types it as a float)."""

    @property
    def now(self) -> int:
        return self._now  # type: ignore[return-value]  # ints in, ints out


class Waiter(Protocol):
    """Anything that waits for commands: ``dep_done()`` is called once per finished dependency."""

    def dep_done(self) -> None: ...


class Machine(Protocol):
    """What a queued command needs from the simulator running it."""

    env: Clock

    def finish(self, command: QueuedCommand) -> None:
        """The command is done and its unit free (compute commands, on-chip copies)."""

    def complete(self, command: QueuedCommand) -> None:
        """The command is done; its unit was freed earlier (a pipelined DMA's data landing)."""


class Unit:
    """One DMA engine or compute unit: an in-order queue of commands."""

    __slots__ = ("name", "queue", "busy")

    def __init__(self, name: str):
        self.name = name
        self.queue: deque[QueuedCommand] = deque()
        self.busy = False

    def push(self, command: QueuedCommand) -> None:
        """Append an issued command; start it at once if it is first, ready and the unit idle."""
        queue = self.queue
        queue.append(command)
        if not self.busy and command.pending == 0 and len(queue) == 1:
            self.start_head()

    def start_head(self) -> None:
        command = self.queue.popleft()
        self.busy = True
        command.start()

    def release(self) -> None:
        """The running command finished: start the next one if it is ready."""
        self.busy = False
        queue = self.queue
        if queue and queue[0].pending == 0:
            self.start_head()


class QueuedCommand:
    """A compiled command (DMA or compute) with its run-time dependency state."""

    __slots__ = ("cid", "name", "unit", "deps", "pending", "done", "waiters", "start_cycle",
                 "busy_end_cycle", "machine", "issued")

    def __init__(self, cid: int, name: str, unit: Unit, machine: Machine):
        self.cid = cid
        self.name = name
        self.unit = unit
        self.machine = machine
        self.deps: tuple[Dependency, ...] = ()  # resolved to the depended-on command objects by the simulator
        self.pending = 0
        self.done = False
        self.issued = False
        self.waiters: list[Waiter] | None = None
        self.start_cycle = 0
        self.busy_end_cycle = 0  # when the unit was free again (a DMA may be done later)

    def dep_done(self) -> None:
        self.pending -= 1
        if self.pending == 0:
            unit = self.unit
            if not unit.busy and unit.queue[0] is self:
                unit.start_head()

    def start(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def act(self) -> None:  # pragma: no cover - overridden
        """Its functional half (what it reads and writes), without its timing."""
        raise NotImplementedError

    @property
    def label(self) -> str:
        return f"command {self.cid}" + (f" ({self.name})" if self.name else "")


class Dependency(Protocol):
    """What a command waits for: a queued command, or a control command the sequencer runs."""

    done: bool
    issued: bool
    waiters: list[Waiter] | None

    @property
    def label(self) -> str: ...
