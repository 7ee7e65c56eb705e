"""Invocations replayed from an earlier one's record give what the event-driven run gives (bits,
cycles, records and the summary the records give)."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.commands.run_cmd import summary_json
from npu_sim.hw import replay
from npu_sim.hw.ddr import BandwidthChannel
from npu_sim.hw.queues import Clock
from npu_sim.simulator import FOLD_MIN_INVOCATIONS, Simulator, simulate_program
from reports.summary import build_summary
from tests.hw.hw_programs import counting_loop, make_hw


def _run(counts: list[int], monkeypatch: pytest.MonkeyPatch, *, replays: bool, preamble: bool = False) -> tuple:
    """Outputs, trace records and per-invocation cycles, and how many invocations were replayed."""
    replayed = []
    original = replay.Replays.replay

    def counted(self: replay.Replays, invocation: int, raw: list) -> replay.InvocationScript | None:
        script = original(self, invocation, raw)
        if script is not None:
            replayed.append(invocation)
        return script

    with monkeypatch.context() as patch:
        patch.setattr(replay.Replays, "replay", counted)
        if not replays:
            patch.setattr(Simulator, "_replays", lambda self: None)
        program, hw = counting_loop(preamble=preamble), make_hw()
        result = simulate_program(program, hw, [{"n": np.array([c], np.int32)} for c in counts])
    trace = result.trace
    summary = summary_json(build_summary(trace, hw, program))
    assert sorted(trace.repeats) == replayed
    return ([o["i"].tolist() for o in result.outputs], trace.commands, trace.allocations, trace.counters,
            result.per_invocation_cycles, trace.invocations, summary), replayed


@pytest.mark.parametrize("counts", [[3] * FOLD_MIN_INVOCATIONS,
                                    [3, 3, 5, 5, 5, 3, 0, 0, 7] * 8,
                                    [3] * 40 + [2, 4] * 12])
@pytest.mark.parametrize("preamble", [False, True])
def test_a_replayed_stream_gives_the_event_driven_bits_cycles_and_records(counts, preamble, monkeypatch):
    expected, none = _run(counts, monkeypatch, replays=False, preamble=preamble)
    got, replayed = _run(counts, monkeypatch, replays=True, preamble=preamble)
    assert not none and replayed   # (some replays, else the test shows nothing)
    assert got == expected
    assert [o[0] for o in got[0]] == counts


def test_a_stream_whose_decisions_keep_changing_stops_replaying(monkeypatch):
    counts = [1, 2] * 40
    expected, _ = _run(counts, monkeypatch, replays=False)
    got, replayed = _run(counts, monkeypatch, replays=True)
    assert got == expected and not replayed


def test_a_transfer_that_would_round_otherwise_later_is_not_replayed():
    """A transfer's last byte at a float time: its closed form is worked out again at the new
    arrival, and a script whose cycles would move otherwise is refused."""
    channel = BandwidthChannel(Clock(), "ddr", 3.0)
    script = replay.InvocationScript([], [], [(channel, 0, 1, 3.0, 1)], 10, 0)
    assert script.fits(100) == {channel: 100 + 1 / 3.0}
    assert replay.InvocationScript([], [], [(channel, 0, 1, 3.0, 2)], 10, 0).fits(100) is None
