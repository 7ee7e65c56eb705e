"""Invocations replayed from an earlier one's record give what the event-driven run gives (bits,
cycles, records and the summary the records give)."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.commands.run_cmd import summary_json
from npu_sim.hw import replay
from npu_sim.hw.ddr import BandwidthChannel
from npu_sim.hw.queues import Clock
from npu_sim.program import Allocation, ComputeCommand, DmaCommand, KernelStep, LoopCommand, Program, View
from npu_sim.simulator import FOLD_MIN_INVOCATIONS, Simulator, simulate_program
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute
from reports.summary import build_summary
from tests.hw.hw_programs import DDR, TCM, add_step, i32, make_hw


def counting_loop(preamble: bool = False) -> Program:
    """``i = 0; while n > i: i = i + 1``, its loads one after another on one DMA engine (each
    transfer moves alone: the closed form a replay checks); ``preamble``: the constant one loaded
    once, before the first invocation."""
    n_ddr, zero_ddr, one_ddr, out = i32(DDR, 0, 1), i32(DDR, 16, 1), i32(DDR, 32, 1), i32(DDR, 48, 1)
    n, i, one = i32(TCM, 0, 1), i32(TCM, 16, 1), i32(TCM, 32, 1)
    flag = View(TCM, 48, (1,), DType.BOOL)
    t32, tb = TensorType((1,), DType.INT32), TensorType((1,), DType.BOOL)
    greater = KernelStep(Op.GREATER, make_attribute(Op.GREATER), (n, i), (t32, t32), (tb,))
    loop = LoopCommand(3, (ComputeCommand(4, "vector", (greater,), (flag,), name="n > i"),), flag,
                       (ComputeCommand(5, "vector", (add_step(i, one, (1,)),), (i,), name="i += 1"),),
                       max_iterations=100, deps=(0, 1, 2), name="while")
    commands = [DmaCommand(0, 0, n_ddr, n), DmaCommand(1, 0, zero_ddr, i), DmaCommand(2, 0, one_ddr, one),
                loop, DmaCommand(6, 0, i, out, deps=(3,), name="store i")]
    constants = [Allocation("zero", DDR, 16, 4, "constant", initial_data=bytes(4)),
                 Allocation("one", DDR, 32, 4, "constant", initial_data=(1).to_bytes(4, "little"))]
    return Program({DDR: 64, TCM: 64}, constants, commands, inputs={"n": n_ddr}, outputs={"i": out},
                   preamble_command_ids=frozenset({2} if preamble else ()))


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
        program, hw = counting_loop(preamble), make_hw()
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
