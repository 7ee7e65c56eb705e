"""Shared-bandwidth channels: how concurrent transfers split a memory's bandwidth (DDR above all).

The model: fluid max-min fair sharing, rounded up to whole cycles
-----------------------------------------------------------------
A channel of bandwidth ``W`` bytes/cycle serves a set of active transfers. Each
transfer has a size in bytes (for DDR: whole bursts, see
:func:`npu_sim.hw.dma.ddr_burst_count`), an arrival cycle, a rate cap ``c`` in
bytes/cycle (for DDR the outstanding-burst limit of its engine,
``max_outstanding_bursts * burst_size_bytes / (latency_cycles + burst_size_bytes / W)``
by Little's law, and the port rate of the other memory) and a latency. At every
instant the bandwidth is split max-min fairly ("water-filling"): transfers whose cap
is below the equal share get their cap, the others share the rest equally. Between
two arrivals or departures every rate is constant, so the exact (real-valued) time
``t`` at which a transfer's last byte moves is a closed form. Its owner is told at
cycle ``ceil(t) + latency``. Bandwidth is re-divided at the exact departure time, so
work is conserved; latency delays the data but occupies no bandwidth (a pipelined
memory).

Closed forms (``S`` bytes, arriving at cycle 0, latency 0):

* one transfer: ``ceil(S / min(W, c))``;
* two uncapped transfers ``S1 <= S2``: ``ceil(2*S1 / W)`` and ``ceil((S1 + S2) / W)``.

Few events: arrivals are registered ahead of time (a DMA's setup cycles need no
event), departures need none (the fluid state is brought up to date lazily when the
next transfer is started), and each transfer has one pending notification event,
replaced only if a later arrival delays it (arrivals never speed anything up).

Times are floats inside the channel (exact fractions would be slow); a time within
``1e-7 + 1e-12*t`` cycles above a whole cycle counts as on it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import simpy

from npu_sim.hw.queues import Clock

_INF = math.inf


def ceil_cycles(t: float) -> int:
    """``ceil(t)`` tolerant of float noise just above a whole cycle."""
    return math.ceil(t - (1e-7 + 1e-12 * abs(t)))


def fair_rates(bandwidth: float, caps: list[float]) -> list[float]:
    """Max-min fair split of ``bandwidth`` among flows with rate ``caps`` (water-filling)."""
    n = len(caps)
    if n == 0:
        return []
    fair = bandwidth / n
    if min(caps) >= fair:
        return [fair] * n
    rates = [0.0] * n
    remaining, left = bandwidth, n
    for i in sorted(range(n), key=caps.__getitem__):
        share = remaining / left
        rate = caps[i] if caps[i] < share else share
        rates[i] = rate
        remaining -= rate
        left -= 1
    return rates


class Transfer:
    """One transfer registered with a channel."""

    __slots__ = ("size_bytes", "cap_bytes_per_cycle", "arrive_cycle", "latency_cycles", "on_done",
                 "notify_cycle", "event")

    def __init__(self, size_bytes: float, cap_bytes_per_cycle: float, arrive_cycle: int,
                 latency_cycles: int, on_done: Callable[[object], None]):
        self.size_bytes = size_bytes
        self.cap_bytes_per_cycle = cap_bytes_per_cycle
        self.arrive_cycle = arrive_cycle
        self.latency_cycles = latency_cycles
        self.on_done = on_done
        self.notify_cycle = -1  # when its owner will be told (ceil(last byte) + latency)
        self.event: simpy.Event | None = None  # the notification that counts


def _evolve(bandwidth: float, flows: list[list], pending: list[Transfer], t: float, until: float,
            finished: list[tuple[Transfer, float]] | None) -> float:
    """Run the fluid model from ``t`` to ``until`` (may be infinite).

    ``flows`` are ``[transfer, remaining_bytes]`` pairs, ``pending`` transfers not yet
    arrived (by arrival cycle); both are updated in place. Departures are appended to
    ``finished`` as ``(transfer, exact time)``. Returns the time reached.
    """
    while True:
        next_arrival = pending[0].arrive_cycle if pending else _INF
        if not flows:
            if not pending or next_arrival > until:
                return t if until == _INF else until
            t = next_arrival
            f = pending.pop(0)
            flows.append([f, float(f.size_bytes)])
            continue
        t_done, step_to = _share(bandwidth, flows, t, min(next_arrival, until))
        t = step_to
        if t_done <= step_to:  # the first to finish has run out
            _retire(flows, finished, t)
        while pending and pending[0].arrive_cycle <= t:
            f = pending.pop(0)
            flows.append([f, float(f.size_bytes)])
        if t >= until:
            return until


def _share(bandwidth: float, flows: list[list], t: float, horizon: float) -> tuple[float, float]:
    """Move the flows' bytes at their max-min fair rates from ``t`` until the first finishes or
    ``horizon``; ``(when the first would finish, the time reached)``."""
    fair = bandwidth / len(flows)
    if all(flow[0].cap_bytes_per_cycle >= fair for flow in flows):  # the usual case: equal shares
        t_done = t + min(flow[1] for flow in flows) / fair
        step_to = min(t_done, horizon)
        moved = fair * (step_to - t)
        for flow in flows:
            flow[1] -= moved
        return t_done, step_to
    rates = fair_rates(bandwidth, [flow[0].cap_bytes_per_cycle for flow in flows])
    t_done = t + min(flow[1] / r for flow, r in zip(flows, rates))
    step_to = min(t_done, horizon)
    dt = step_to - t
    for flow, r in zip(flows, rates):
        flow[1] -= r * dt
    return t_done, step_to


def _retire(flows: list[list], finished: list[tuple[Transfer, float]] | None, t: float) -> None:
    """Drop the flows that have moved their bytes at ``t`` (at least one: float noise
    retires the closest), noting them in ``finished``."""
    left = [flow for flow in flows if flow[1] > 1e-9 * flow[0].size_bytes + 1e-9]
    if len(left) == len(flows):  # float noise: retire the closest one
        left.remove(min(flows, key=lambda flow: flow[1]))
    if finished is not None:
        finished.extend((flow[0], t) for flow in flows if flow not in left)
    flows[:] = left


class BandwidthChannel:
    """``bandwidth_bytes_per_cycle`` shared max-min fairly by concurrent transfers (see module doc)."""

    def __init__(self, env: Clock, name: str, bandwidth_bytes_per_cycle: float):
        if bandwidth_bytes_per_cycle <= 0:
            raise ValueError(f"{name}: bandwidth must be > 0, got {bandwidth_bytes_per_cycle}")
        self.env = env
        self.name = name
        self.bandwidth = float(bandwidth_bytes_per_cycle)
        self.flows: list[list] = []  # [transfer, remaining bytes] of arrived transfers
        self.pending: list[Transfer] = []  # arriving later, by arrival cycle
        self._last = 0.0  # time up to which ``flows`` are accounted
        self._idle_at = 0.0  # exact time the last known transfer moves its last byte
        #: transfers started while another one moved (not the closed form): see :mod:`npu_sim.hw.replay`
        self.shared_starts = 0

    def start(self, arrive_cycle: int, size_bytes: float, cap_bytes_per_cycle: float,
              latency_cycles: int, on_done: Callable[[object], None]) -> Transfer:
        """Register a transfer of ``size_bytes`` (> 0) arriving at ``arrive_cycle`` (>= now);
        ``on_done(event)`` is called at cycle ``ceil(time of its last byte) + latency_cycles``."""
        transfer = Transfer(size_bytes, cap_bytes_per_cycle, arrive_cycle, latency_cycles, on_done)
        env = self.env
        now = env.now
        if now >= self._idle_at:  # every earlier transfer has moved its last byte
            self.flows.clear()
            self.pending.clear()
            self._last = now
        elif arrive_cycle < self._idle_at:  # it will share the channel: the general case
            self._last = _evolve(self.bandwidth, self.flows, self.pending, self._last, now, None)
        if arrive_cycle >= self._idle_at:  # alone while it moves: the closed form
            self.pending.append(transfer)  # (after every known arrival: the order holds)
            rate = cap_bytes_per_cycle if cap_bytes_per_cycle < self.bandwidth else self.bandwidth
            t_done = self._idle_at = arrive_cycle + size_bytes / rate
            notify = transfer.notify_cycle = ceil_cycles(t_done) + latency_cycles
            event = transfer.event = env.timeout(notify - now, transfer)
            event.callbacks.append(_notify)
            return transfer
        self.shared_starts += 1
        pending = self.pending
        if not pending or pending[-1].arrive_cycle <= arrive_cycle:
            pending.append(transfer)
        else:
            index = next(i for i, t in enumerate(pending) if t.arrive_cycle > arrive_cycle)
            pending.insert(index, transfer)
        self._predict(now)
        return transfer

    @property
    def idle_at(self) -> float:
        """The exact time the last transfer known moves its last byte."""
        return self._idle_at

    def rate_alone(self, cap_bytes_per_cycle: float) -> float:
        """The rate of a transfer moving alone (the closed form of :meth:`start`)."""
        return cap_bytes_per_cycle if cap_bytes_per_cycle < self.bandwidth else self.bandwidth

    def replayed(self, idle_at: float) -> None:
        """Transfers that moved alone, replayed without events (:mod:`npu_sim.hw.replay`), the
        last of them moving its last byte at ``idle_at``: the state :meth:`start` leaves."""
        self.flows.clear()
        self.pending.clear()
        self._idle_at = idle_at

    def _predict(self, now: int) -> None:
        """Exact finish times assuming no further arrivals; (re)schedule changed notifications."""
        finished: list[tuple[Transfer, float]] = []
        _evolve(self.bandwidth, [[f, rem] for f, rem in self.flows], list(self.pending), self._last,
                _INF, finished)
        env = self.env
        self._idle_at = max(t_done for _, t_done in finished)
        for f, t_done in finished:
            notify = ceil_cycles(t_done) + f.latency_cycles
            if notify != f.notify_cycle:  # arrivals only ever delay a transfer: a later time
                f.notify_cycle = notify
                event = f.event = env.timeout(notify - now, f)
                event.callbacks.append(_notify)


def _notify(event: simpy.Event) -> None:
    transfer: Transfer = event._value  # the Timeout's value
    if transfer.event is event:  # not superseded by a later prediction
        transfer.event = None    # (no reference cycle with its event once it is done)
        transfer.on_done(event)
