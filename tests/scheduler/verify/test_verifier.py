import dataclasses

import pytest

from npu_sim.program import Allocation, ComputeCommand, DmaCommand, MemorySpace, Program, View
from npu_sim.tosa.dtype import DType
from scheduler.schedule import schedule
from scheduler.verify import PlanError, verify_program
from tests.hw.hw_programs import add_step
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
    size = program.memory_sizes[MemorySpace.TCM]
    a, b = next((x, y) for x in tcm for y in tcm if x is not y and x.offset_bytes != y.offset_bytes
                and x.first_use <= y.last_use and y.first_use <= x.last_use and x.offset_bytes + y.size_bytes <= size)
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


def _loop_program(monkeypatch=None):
    import scheduler.codegen.materialize as materialize
    from npu_sim.tosa.loader import load_graph
    if monkeypatch is not None:   # forget that the carried state is live for the whole loop
        monkeypatch.setattr(materialize, "_span_loops", lambda *args: None)
    return schedule(load_graph("examples/while_loop_int32.tosa"), machine("edge"))


def test_loop_carried_value_clobbered_by_the_body_is_caught(monkeypatch):
    """With lifetimes cut at their last touch in command order, the loop bound ``n`` (read by
    the condition every iteration) shares bytes with a buffer the body writes: the second
    iteration reads the body's bytes."""
    verify_program(_loop_program())
    with pytest.raises(PlanError, match=r"GREATER\(keep_going\).*allocation 'n_final'\) after allocation "
                                        r"'WHILE_LOOP\(i_final\):next0' overwrote it"):
        verify_program(_loop_program(monkeypatch))


def test_branch_may_reuse_the_bytes_of_its_condition():
    """The sequencer reads a COND_IF condition before the branch runs: the branch may overwrite it."""
    from npu_sim.program import CondCommand
    from npu_sim.tosa.loader import load_graph
    program = schedule(load_graph("examples/cond_if_int32.tosa"), machine("edge"))
    cond = _first(program, CondCommand)
    assert cond.condition.memory is MemorySpace.TCM
    lo, hi = cond.condition.span
    written = [v for c in cond.then_commands
               for v in ((c.dst,) if isinstance(c, DmaCommand) else c.outputs) if v.memory is MemorySpace.TCM]
    assert any(v.span[0] < hi and lo < v.span[1] for v in written)
    verify_program(program)


def test_the_unit_queue_orders_compute_commands(program):
    """A compute command reading what the previous one of its unit wrote lists no dependency
    on it (the unit runs them in order); on another unit, the verifier finds the race."""
    previous: dict[str, ComputeCommand] = {}
    for c in program.commands:
        if not isinstance(c, ComputeCommand):
            continue
        p = previous.get(c.unit)
        previous[c.unit] = c
        reads = {(v.memory, v.offset_bytes) for s in c.steps for v in s.operands if hasattr(v, "memory")}
        if p is not None and p.id not in c.deps and any((o.memory, o.offset_bytes) in reads for o in p.outputs):
            break
    else:
        pytest.fail("no compute command relies on its unit's order")
    verify_program(program)
    other = next(u for u in ("vector", "mac_array", "lut") if u != c.unit)
    with pytest.raises(PlanError, match=rf"command {c.id} .* not ordered after"):
        verify_program(_replace(program, c.id, unit=other))


@pytest.fixture(scope="module")
def blocked() -> Program:
    """ds_cnn_kws_int16 on tiny with a 36 KiB TCM: 8 block tensors."""
    from npu_sim.hw.config import load_hw_config
    from npu_sim.tosa.loader import load_graph
    return schedule(load_graph("examples/ds_cnn_kws_int16.tosa"), load_hw_config("examples/tiny_tcm36k.yaml"))


def test_a_plan_with_block_tensors_passes(blocked):
    assert len(blocked.block_tensors) == 8
    assert sum(1 for a in blocked.allocations if a.block_of) == 294
    verify_program(blocked)


def test_a_block_on_another_live_allocation_is_caught(blocked):
    tensor = blocked.block_tensors[0]
    block = next(a for a in blocked.allocations if a.name == f"{tensor.name}[block 1]")
    moved = dataclasses.replace(block, offset_bytes=tensor.blocks[0])
    bad = dataclasses.replace(blocked, allocations=[moved if a is block else a for a in blocked.allocations])
    with pytest.raises(PlanError, match=rf"allocations {tensor.name}\[block 0\] .* overlap while both live"):
        verify_program(bad)


def test_a_view_walking_the_wrong_table_is_caught(blocked):
    """A reader whose table names another tensor's block walks no table the plan has."""
    tensor = blocked.block_tensors[0]
    reader = next(c for c in blocked.commands if isinstance(c, ComputeCommand)
                  and any(v.blocks == tensor.blocks for s in c.steps for v in s.operands if hasattr(v, "blocks")))
    step = reader.steps[0]
    swapped = (blocked.block_tensors[1].blocks[0], *tensor.blocks[1:])
    operands = tuple(dataclasses.replace(v, blocks=swapped) if getattr(v, "blocks", None) == tensor.blocks else v
                     for v in step.operands)
    bad = _replace(blocked, reader.id, steps=(dataclasses.replace(step, operands=operands), *reader.steps[1:]))
    with pytest.raises(PlanError, match=rf"command {reader.id} .*: view .* walks no block tensor's pointer table"):
        verify_program(bad)


def test_a_pointer_table_that_does_not_list_the_blocks_is_caught(blocked):
    tensor = blocked.block_tensors[2]
    table = next(a for a in blocked.allocations if a.kind == "pointer_table"
                 and a.offset_bytes == tensor.table_offset_bytes)
    wrong = dataclasses.replace(table, initial_data=bytes(len(table.initial_data)))
    bad = dataclasses.replace(blocked, allocations=[wrong if a is table else a for a in blocked.allocations])
    with pytest.raises(PlanError, match=rf"block tensor {tensor.name}: its pointer table in var_sram at 512 does "
                                        "not list its 63 blocks"):
        verify_program(bad)


def _preamble_program(reader_deps: tuple[int, ...], preamble: bool = True, overwrite: bool = False) -> Program:
    """x -> TCM a (command 0, engine 1); a stored by command 1 (engine 0, after 0); the constant
    pool's load (command 2, engine 0, waiting for nothing); ``a + pool`` (command 3, waiting for
    ``reader_deps``), stored by command 4. ``overwrite``: command 5 then loads x over the pool."""
    ddr, tcm = MemorySpace.DDR, MemorySpace.TCM

    def i32(memory: MemorySpace, offset: int) -> View:
        return View(memory, offset, (4,), DType.INT32)

    x, y, z, pool_ddr = i32(ddr, 0), i32(ddr, 16), i32(ddr, 32), i32(ddr, 48)
    a, b, pool = i32(tcm, 0), i32(tcm, 16), i32(tcm, 32)
    commands = [DmaCommand(0, 1, x, a), DmaCommand(1, 0, a, y, deps=(0,)), DmaCommand(2, 0, pool_ddr, pool),
                ComputeCommand(3, "vector", (add_step(a, pool, (4,)),), (b,), deps=reader_deps),
                DmaCommand(4, 0, b, z, deps=(3,))]
    if overwrite:
        commands.append(DmaCommand(5, 1, x, pool, deps=(3,)))
    allocations = [Allocation("x", ddr, 0, 16, "input"), Allocation("y", ddr, 16, 16, "output"),
                   Allocation("z", ddr, 32, 16, "output"),
                   Allocation("constant_pool", ddr, 48, 16, "constant", initial_data=bytes(range(16))),
                   Allocation("a", tcm, 0, 16, "tile", 0, 3), Allocation("b", tcm, 16, 16, "tile", 3, 4),
                   Allocation("constant_pool", tcm, 32, 16, "constant")]
    return Program({ddr: 64, tcm: 48}, allocations, commands, inputs={"x": x}, outputs={"y": y, "z": z},
                   preamble_command_ids=frozenset({2} if preamble else ()))


def test_a_wait_implied_through_a_preamble_load_is_caught() -> None:
    """Command 3 waits for the pool load alone: in one invocation that load follows, on its
    engine, a DMA that waited for a's writer, so 3 reads a after it is written; with several
    invocations the load ran in the preamble and 3 may read a before command 0 writes it."""
    verify_program(_preamble_program((2,), preamble=False))
    with pytest.raises(PlanError, match=r"command 3: its read of tcm bytes is not ordered after the write "
                                        r"by command 0"):
        verify_program(_preamble_program((2,)))
    verify_program(_preamble_program((0, 2)))


def test_a_write_over_the_preamble_constants_is_caught() -> None:
    """Every invocation reads the pool as the preamble left it: an invocation may not write it,
    even in order (one invocation alone is fine)."""
    verify_program(_preamble_program((0, 2), preamble=False, overwrite=True))
    with pytest.raises(PlanError, match="command 5: writes tcm bytes that preamble command 2 loads once"):
        verify_program(_preamble_program((0, 2), overwrite=True))


def test_a_preamble_command_loads_constants() -> None:
    program = _preamble_program((0, 2))
    with pytest.raises(PlanError, match="command 1: the preamble loads tile a, not a constant"):
        verify_program(dataclasses.replace(program, preamble_command_ids=frozenset({1})))
    with pytest.raises(PlanError, match="command 3: a preamble command must be a DMA"):
        verify_program(dataclasses.replace(program, preamble_command_ids=frozenset({2, 3})))
