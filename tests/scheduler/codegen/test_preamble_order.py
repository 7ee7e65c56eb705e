"""Resident constants: the constant-pool loads that several invocations run once, before the
first (the preamble), order nothing inside an invocation (zoo3 P1: ``run -n 2`` on edge gave
wrong outputs in every invocation, or read bytes before they were written)."""

from __future__ import annotations

import dataclasses

import pytest

from npu_sim.program import ComputeCommand, Program
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.ops import Op
from scheduler.codegen.deps import ImpliedWaits
from scheduler.schedule import schedule
from scheduler.verify import PlanError, verify_program
from tests.scheduler.graphs import _rescale, _widen, check_end_to_end, conv_block, machine

#: (image size, channels, residual blocks, TCM bytes of the edge preset): plans in which a pool
#: chunk loads mid-stream, after a DMA on its engine that waited for a feature map's writer,
#: and the chunk's first reader waited for the load alone
CASES = [(8, 16, 2, 6144), (24, 16, 4, 16384)]


def residual_stack(size: int, channels: int, blocks: int) -> Graph:
    """A stem convolution, then ``blocks`` ResNet basic blocks (conv, conv, int32 residual ADD)."""
    b = GraphBuilder()
    y = conv_block(b, b.input("image", (1, size, size, 3), DType.INT8), channels, seed=0)
    for k in range(blocks):
        r = conv_block(b, y, channels, seed=10 * k + 1)
        r = conv_block(b, r, channels, seed=10 * k + 2, relu=False)
        y = _rescale(b, b.op(Op.ADD, [_widen(b, r), _widen(b, y)]), shift=31)
    b.output(y)
    return b.build()


def _resident_program(case: tuple[int, int, int, int]) -> Program:
    size, channels, blocks, tcm_bytes = case
    return schedule(residual_stack(size, channels, blocks), machine("edge", tcm_bytes=tcm_bytes),
                    resident_constants=True)


@pytest.mark.parametrize("case", CASES, ids=["8x8", "24x24"])
def test_several_invocations_after_a_preamble_match_the_reference(case: tuple[int, int, int, int]) -> None:
    """Before, the 8x8 plan's second block read its input before it was written, and the 24x24
    one gave some 650 wrong values in each invocation, the first included, without an error."""
    size, channels, blocks, tcm_bytes = case
    program, result = check_end_to_end(residual_stack(size, channels, blocks),
                                       machine("edge", tcm_bytes=tcm_bytes), invocations=3,
                                       resident_constants=True)
    first_compute = min(c.id for c in program.commands if isinstance(c, ComputeCommand))
    assert max(program.preamble_command_ids) > first_compute   # a chunk loads mid-stream
    assert result.preamble_cycles > 0


@pytest.mark.parametrize("case", CASES, ids=["8x8", "24x24"])
def test_the_verifier_rejects_waits_implied_through_a_preamble_load(case: tuple[int, int, int, int],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan of these graphs as built before (a wait implied through a pool load, as if it
    ran in line) passes as one invocation but not as several."""
    reduce = ImpliedWaits.reduce

    def in_line(self: ImpliedWaits, cmd: int, deps: set[int], queue: object = None, pipelined: bool = False,
                resident: bool = False) -> tuple[int, ...]:
        return reduce(self, cmd, deps, queue, pipelined)

    monkeypatch.setattr(ImpliedWaits, "reduce", in_line)
    program = _resident_program(case)
    with pytest.raises(PlanError, match="is not ordered after"):
        verify_program(program)
    verify_program(dataclasses.replace(program, preamble_command_ids=frozenset()))
