"""A compute command reading a few bytes remembered by them (npu_sim.hw.result_memo)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import npu_sim.hw.compute as compute_module
import npu_sim.hw.result_memo as result_memo
import npu_sim.simulator as simulator_module
from npu_sim.api import load_graph, load_hw_config
from npu_sim.hw.result_memo import ResultMemo
from npu_sim.inputs import load_inputs
from npu_sim.reference.session import Session
from npu_sim.reference.unpredictable import allowing_unpredictable
from npu_sim.simulation import compile_graph
from npu_sim.simulator import simulate_program

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class _Access:
    """An operand read from memory: its value and bytes now (as ``ViewAccess.read`` and
    ``read_bytes`` give them)."""

    def __init__(self, value: np.ndarray):
        self.value = value

    @property
    def size_bytes(self) -> int:
        return self.value.nbytes

    def read(self) -> np.ndarray:
        return self.value.copy()

    def read_bytes(self) -> bytes:
        return self.value.tobytes()


def test_a_command_reading_a_few_bytes_is_keyed_by_them():
    i, j = _Access(np.array(3, np.int32)), _Access(np.array([1.5], np.float32))
    memo = ResultMemo.of([[(0, i), (2, np.ones(64, np.int8))], [(0, j), (1, 0), (0, i)]])
    assert memo is not None and memo.reads == [i, j]   # each read once, the constant not at all
    first = memo.key()
    j.value = np.array([-0.0], np.float32)
    assert memo.key() != first                        # the bits, not the value: -0.0 is not 1.5 (nor 0.0)
    out = [np.array(4, np.int32)]
    assert memo.remember(first, out) and memo.results[first] is out and not out[0].flags.writeable


def test_wide_operands_and_runs_going_on_past_requires_are_not_remembered(monkeypatch):
    wide = _Access(np.zeros(5, np.int32))
    assert ResultMemo.of([[(0, wide)]]) is None      # 20 bytes
    assert ResultMemo.of([[(2, np.zeros(1))]]) is None   # reads nothing from memory
    with allowing_unpredictable():
        assert ResultMemo.of([[(0, _Access(np.zeros(1, np.int32)))]]) is None
    monkeypatch.setattr(result_memo, "MAX_ENTRIES", 2)
    memo = ResultMemo.of([[(0, _Access(np.zeros(1, np.int32)))]])
    assert memo is not None
    assert memo.remember(b"a", [np.zeros(1)]) and memo.remember(b"b", [np.zeros(1)])
    assert not memo.remember(b"c", [np.zeros(1)]) and set(memo.results) == {b"a", b"b"}


def test_a_long_stream_of_a_loop_gives_the_reference_outputs(monkeypatch):
    """while_loop_int32: its condition and counter commands remembered, its carries (IDENTITY)
    plain copies, from the second invocation on (FOLD_MIN_INVOCATIONS lowered), every output
    the reference executor's."""
    graph, hw = load_graph(EXAMPLES / "while_loop_int32.tosa"), load_hw_config("edge")
    program = compile_graph(graph, hw, resident_constants=True)
    inputs = load_inputs(graph, [], invocations=6, random_seed=7).invocations
    kept: list[bytes] = []
    remember = ResultMemo.remember
    monkeypatch.setattr(ResultMemo, "remember", lambda self, key, produced: kept.append(key) or
                        remember(self, key, produced))
    copies: list[object] = []
    identity_source = compute_module._identity_source
    monkeypatch.setattr(compute_module, "_identity_source",
                        lambda *args: (copies.append(source := identity_source(*args)), source)[1])
    monkeypatch.setattr(simulator_module, "FOLD_MIN_INVOCATIONS", 2)
    result = simulate_program(program, hw, inputs)
    assert kept   # some commands were remembered
    assert any(copies)   # and the loop's carries copied without a kernel
    session = Session(graph)
    for got, x in zip(result.outputs, inputs):
        want = session.invoke(x)
        assert all(np.array_equal(got[name], want[name]) for name in want)
