import dataclasses

import pytest

from npu_sim.program import ComputeCommand, DmaCommand, MemorySpace, Program
from scheduler.schedule import schedule
from scheduler.verify import PlanError, verify_program
from tests.scheduler.graphs import machine, small_cnn


@pytest.fixture(scope="module")
def program() -> Program:
    return schedule(small_cnn(8), machine("tiny", tcm_bytes=2048))


def _replace(program: Program, cid: int, **changes) -> Program:
    commands = [dataclasses.replace(c, **changes) if c.id == cid else c for c in program.commands]
    return dataclasses.replace(program, commands=commands)


def _first(program, kind, pred=lambda c: True):
    return next(c for c in program.commands if isinstance(c, kind) and pred(c))


def test_valid_plan_passes(program):
    verify_program(program)


def test_missing_dependency_is_caught(program):
    compute = _first(program, ComputeCommand, lambda c: c.deps)
    with pytest.raises(PlanError, match=rf"command {compute.id} .* not ordered after"):
        verify_program(_replace(program, compute.id, deps=()))


def test_overlapping_allocations_are_caught(program):
    tcm = sorted((a for a in program.allocations if a.memory is MemorySpace.TCM and a.first_use is not None),
                 key=lambda a: a.first_use)
    a, b = next((x, y) for x in tcm for y in tcm if x is not y and x.offset_bytes != y.offset_bytes
                and x.first_use <= y.last_use and y.first_use <= x.last_use)
    moved = dataclasses.replace(b, offset_bytes=a.offset_bytes)
    bad = dataclasses.replace(program, allocations=[moved if x is b else x for x in program.allocations])
    with pytest.raises(PlanError, match="overlap while both live"):
        verify_program(bad)


def test_view_outside_allocations_is_caught(program):
    dma = _first(program, DmaCommand, lambda c: c.dst.memory is MemorySpace.TCM)
    size = program.memory_sizes[MemorySpace.TCM]
    stray = dataclasses.replace(dma.dst, offset_bytes=size - dma.dst.size_bytes)
    with pytest.raises(PlanError, match="lies in no allocation"):
        verify_program(_replace(program, dma.id, dst=stray))


def test_read_before_write_is_caught(program):
    compute = _first(program, ComputeCommand, lambda c: c.deps)
    loads = [c for c in program.commands if isinstance(c, DmaCommand) and c.id in compute.deps
             and c.dst.memory is MemorySpace.TCM]
    load = loads[0]
    # the load now writes elsewhere in the same buffer region: its old target is never written
    dropped = dataclasses.replace(program, commands=[c for c in program.commands if c.id != load.id])
    dropped.commands = [dataclasses.replace(c, deps=tuple(d for d in c.deps if d != load.id))
                        for c in dropped.commands]
    with pytest.raises(PlanError, match="before anything writes it"):
        verify_program(dropped)


def test_compute_outside_tcm_is_caught(program):
    compute = _first(program, ComputeCommand)
    ddr_out = _first(program, DmaCommand, lambda c: c.dst.memory is MemorySpace.DDR).dst
    with pytest.raises(PlanError, match="not in TCM"):
        verify_program(_replace(program, compute.id, outputs=(ddr_out,)))
