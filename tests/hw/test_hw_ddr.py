"""The fluid bandwidth channel: exact closed forms for solo, shared and capped transfers."""

from __future__ import annotations

import math

import simpy

from npu_sim.hw.ddr import BandwidthChannel, ceil_cycles, fair_rates


def _run(bandwidth: float, transfers: list[tuple[int, float, float, int]]) -> list[int]:
    """Start ``(arrive, size, cap, latency)`` transfers at cycle 0; the cycle each owner is told."""
    env = simpy.Environment()
    channel = BandwidthChannel(env, "ddr", bandwidth)
    done: dict[int, int] = {}
    for index, (arrive, size, cap, latency) in enumerate(transfers):
        channel.start(arrive, size, cap, latency, lambda _e, i=index: done.__setitem__(i, env.now))
    env.run()
    return [done[i] for i in range(len(transfers))]


def _run_staggered(bandwidth: float, starts: list[tuple[int, float]]) -> list[int]:
    """Transfers registered at their own start cycles (no setup, no latency, uncapped)."""
    env = simpy.Environment()
    channel = BandwidthChannel(env, "ddr", bandwidth)
    done: dict[int, int] = {}

    def starter(index: int, at: int, size: float):
        yield env.timeout(at)
        channel.start(at, size, math.inf, 0, lambda _e: done.__setitem__(index, env.now))

    for index, (at, size) in enumerate(starts):
        env.process(starter(index, at, size))
    env.run()
    return [done[i] for i in range(len(starts))]


def test_one_transfer_takes_size_over_bandwidth_plus_latency():
    assert _run(16, [(10, 1000, math.inf, 100)]) == [10 + math.ceil(1000 / 16) + 100]


def test_two_equal_transfers_share_the_bandwidth():
    # each gets 8 B/cycle: 1024 bytes take 128 cycles
    assert _run(16, [(0, 1024, math.inf, 0), (0, 1024, math.inf, 0)]) == [128, 128]


def test_two_unequal_transfers_closed_form():
    s1, s2, w = 640, 1600, 16
    assert _run(w, [(0, s1, math.inf, 5), (0, s2, math.inf, 7)]) == [
        math.ceil(2 * s1 / w) + 5, math.ceil((s1 + s2) / w) + 7]


def test_capped_transfer_leaves_the_rest_to_the_other():
    # caps 4 B/cycle: the other gets 12 B/cycle while both run
    t_capped = 400 / 4  # 100 cycles
    other_after = 2400 - 12 * t_capped  # 1200 bytes left at cycle 100, then alone at 16 B/cycle
    assert _run(16, [(0, 400, 4.0, 0), (0, 2400, math.inf, 0)]) == [
        100, math.ceil(t_capped + other_after / 16)]


def test_solo_rate_is_the_cap_when_below_bandwidth():
    assert _run(16, [(0, 1000, 3.0, 0)]) == [math.ceil(1000 / 3)]


def test_a_later_arrival_slows_down_the_running_transfer():
    # A: 1600 bytes from 0; B: 320 bytes from 50. A alone moves 800 bytes by 50, then both at 8.
    # B done at 50 + 320/8 = 90; A has 800 - 320 = 480 left at 90, alone: 90 + 30 = 120.
    assert _run_staggered(16, [(0, 1600), (50, 320)]) == [120, 90]


def test_fractional_completion_rounds_up_and_conserves_work():
    # three equal transfers of 100 bytes at 16 B/cycle: all done at 300/16 = 18.75 -> 19
    assert _run(16, [(0, 100, math.inf, 0)] * 3) == [19, 19, 19]


def test_fair_rates_water_filling():
    assert fair_rates(12, [100, 100, 100]) == [4, 4, 4]
    assert fair_rates(12, [1, 100, 100]) == [1, 5.5, 5.5]
    assert fair_rates(12, [1, 2, 100]) == [1, 2, 9]


def test_ceil_cycles_tolerates_float_noise():
    assert ceil_cycles(100.0000000001) == 100
    assert ceil_cycles(100.001) == 101
    assert ceil_cycles(0.1 + 0.2) == 1
