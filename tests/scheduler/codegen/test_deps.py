import dataclasses
import random

import numpy as np
import pytest

from npu_sim.api import load_graph
from npu_sim.program import CondCommand, DmaCommand, LoopCommand, MemorySpace, Program, View, _walk
from npu_sim.simulator import simulate_program
from npu_sim.tosa.dtype import DType
from scheduler.codegen.deps import AccessTracker, ImpliedWaits
from scheduler.memory.byte_ranges import ByteSet, covered, normalize, overlaps, view_ranges
from scheduler.schedule import schedule
from scheduler.verify import verify_program
from tests.scheduler.graphs import machine, random_inputs, small_cnn

TCM = MemorySpace.TCM


def r(*pairs):
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def test_view_ranges_of_a_tile():
    # rows 1..2, columns 2..4 of a 4x8 int16 tensor at offset 100
    v = View(TCM, 100 + (1 * 8 + 2) * 2, (2, 3), DType.INT16, (16, 2))
    assert view_ranges(v).tolist() == [[120, 126], [136, 142]]
    full_rows = View(TCM, 100, (2, 8), DType.INT16, (16, 2))
    assert view_ranges(full_rows).tolist() == [[100, 132]]
    assert view_ranges(View(TCM, 0, (0, 4), DType.INT8)).shape == (0, 2)


def test_range_algebra():
    assert normalize(r((5, 9), (0, 3), (3, 4), (8, 12))).tolist() == [[0, 4], [5, 12]]
    assert overlaps(r((0, 4), (10, 12)), r((4, 10))) is False
    assert overlaps(r((0, 4), (10, 12)), r((11, 30))) is True
    assert covered(r((1, 2), (5, 6)), r((0, 3), (4, 8))) is True
    assert covered(r((1, 2), (5, 9)), r((0, 3), (4, 8))) is False


def test_tracker_orders_conflicts_only():
    t = AccessTracker()
    a, b, c = r((0, 64)), r((64, 128)), r((32, 96))
    assert t.access(0, [], [(TCM, a)]) == set()            # write A
    assert t.access(1, [], [(TCM, b)]) == set()            # write B: no conflict
    assert t.access(2, [(TCM, c)], []) == {0, 1}           # read over both: read after write
    assert t.access(3, [(TCM, a)], []) == {0}              # reads do not order reads
    assert t.access(4, [], [(TCM, a)]) == {0, 2, 3}        # write after read and after write
    # command 4 covered A: later readers of A wait for 4 only
    assert t.access(5, [(TCM, r((0, 8)))], []) == {4}
    # another memory never conflicts
    assert t.access(6, [], [(MemorySpace.DDR, a)]) == set()


def test_a_partly_overwritten_record_keeps_only_the_bytes_left():
    t = AccessTracker()
    assert t.access(0, [], [(TCM, r((0, 64)))]) == set()
    assert t.access(1, [], [(TCM, r((32, 96)))]) == {0}
    # bytes 32..64 are now command 1's: a reader there waits for it alone (1 waits for 0)
    assert t.access(2, [(TCM, r((40, 48)))], []) == {1}
    assert t.access(3, [(TCM, r((0, 8)))], []) == {0}
    # strided writes punch holes: what is left of command 0 is 0..8 and 16..24 and 32..
    assert t.access(4, [], [(TCM, r((8, 16), (24, 32)))]) == {0}
    assert t.access(5, [(TCM, r((0, 32)))], []) == {0, 4}
    assert t.access(6, [], [(TCM, r((0, 8), (16, 24)))]) == {0, 3, 5}
    assert 0 not in t.live_commands()


class _Model:
    """The tracker's rules on explicit byte sets: reads wait for overlapping live writes,
    writes for overlapping live reads and writes; a write takes its bytes out of the records
    it meets (a record with no byte left is dead)."""

    def __init__(self):
        self.records = []   # [cmd, memory, bytes, write, alive]

    def access(self, cmd, reads, writes):
        deps = set()
        for memory, b in reads:
            deps |= {r[0] for r in self.records if r[4] and r[3] and r[1] is memory and r[2] & b}
        written = {}
        for memory, b in writes:
            written[memory] = written.get(memory, set()) | b
        for memory, b in written.items():
            for r in self.records:
                if r[4] and r[1] is memory and r[2] & b:
                    deps.add(r[0])
                    r[2] = r[2] - b
                    r[4] = bool(r[2])
        deps.discard(cmd)
        self.records += [[cmd, m, b, False, True] for m, b in reads if b]
        self.records += [[cmd, m, b, True, True] for m, b in written.items()]
        return deps


def _random_access(rng):
    """Byte ranges of a small random strided view, as (numpy ranges, byte set)."""
    runs, run_bytes, stride = rng.randint(1, 24), rng.randint(1, 12), rng.randint(1, 40)
    start = rng.randint(0, 300)
    starts = [start + k * stride for k in range(runs)]
    ranges = normalize(np.array([[s, s + run_bytes] for s in starts], dtype=np.int64))
    return ranges, {x for s in starts for x in range(s, s + run_bytes)}


@pytest.mark.parametrize("page_bytes", [8, 64, 4096, 1 << 62])
def test_tracker_matches_the_rules_on_random_accesses(page_bytes):
    rng = random.Random(page_bytes)
    memories = [TCM, MemorySpace.DDR]
    for _ in range(20):
        # (the DDR's page size is the default one: the implied order's one page per buffer at 1 << 62)
        tracker, model = AccessTracker({TCM: page_bytes}, default_page_bytes=page_bytes), _Model()
        used = []   # accesses seen so far: views repeat (the same ByteSet object, shared records)
        for cmd in range(60):
            reads, writes, model_reads, model_writes = [], [], [], []
            for target, model_target, count in ((reads, model_reads, rng.randint(0, 3)),
                                                (writes, model_writes, rng.randint(0, 2))):
                for _ in range(count):
                    if used and rng.random() < 0.4:
                        memory, bytes_, byte_set = rng.choice(used)
                    else:
                        memory = rng.choice(memories)
                        ranges, byte_set = _random_access(rng)
                        # the tracker takes numpy ranges or ByteSets alike
                        bytes_ = ByteSet.of(ranges) if rng.random() < 0.7 else ranges
                        used.append((memory, bytes_, byte_set))
                    target.append((memory, bytes_))
                    model_target.append((memory, byte_set))
            assert tracker.access(cmd, reads, writes) == model.access(cmd, model_reads, model_writes)
        assert tracker.live_commands() == {r[0] for r in model.records if r[4]}


def test_implied_waits_drop_what_other_waits_imply():
    implied = ImpliedWaits()
    assert implied.reduce(0, set()) == ()
    assert implied.reduce(1, {0}) == (0,)
    assert implied.reduce(2, set()) == ()
    assert implied.reduce(3, {0, 1, 2}) == (1, 2)      # 1 waits for 0
    assert implied.reduce(4, {0, 3}) == (3,)           # 3 waits for 1, which waits for 0
    assert implied.after[4] == 0b1111
    # in-order queues: a compute command starts after the previous one of its unit is done,
    # a DMA after the previous one of its engine started (so after what that one waited for)
    assert implied.reduce(5, {4}, "vector") == (4,)
    assert implied.reduce(6, {4, 5}, "vector") == ()
    assert implied.reduce(7, {4}, ("dma", 0), pipelined=True) == (4,)
    assert implied.reduce(8, {2, 7}, ("dma", 0), pipelined=True) == (7,)     # 7 started after 4, after 2
    implied.restart_queues()
    assert implied.reduce(9, {5}, "vector") == (5,)


def test_a_preamble_load_implies_no_wait() -> None:
    """With several invocations a constant-pool load runs once, before them: a command waiting
    for it still waits for what the DMA before it on its engine waited for, and the next DMA of
    that engine follows the one before the load."""
    implied = ImpliedWaits()
    assert implied.reduce(0, set(), "mac_array") == ()
    assert implied.reduce(1, {0}, ("dma", 0), pipelined=True) == (0,)     # stores 0's result
    assert implied.reduce(2, set(), ("dma", 0), pipelined=True, resident=True) == ()
    assert implied.reduce(3, {0, 2}, "vector") == (0, 2)    # not implied through the load
    assert implied.reduce(4, {0}, ("dma", 0), pipelined=True) == ()       # follows 1, which waited for 0
    plain = ImpliedWaits()
    for cmd, deps, queue in [(0, set(), "mac_array"), (1, {0}, ("dma", 0)), (2, set(), ("dma", 0))]:
        plain.reduce(cmd, deps, queue, pipelined=queue != "mac_array")
    assert plain.reduce(3, {0, 2}, "vector") == (2,)        # in line, the load starts after 1


def _closure(program: Program) -> tuple[Program, dict[int, set[int]]]:
    """``program`` with every command of a list waiting for all the commands its dependencies
    and its unit's queue order before its start (transitively): the previous compute command of
    its unit, what the previous DMA of its engine waited for; and command id -> the commands
    its queue order alone puts before it. As several invocations run it: a preamble command is
    done before they start, orders nothing else and is in no queue."""
    after: dict[int, set[int]] = {}
    by_queue: dict[int, set[int]] = {}

    def expand(commands):
        out, last = [], {}
        for c in commands:
            waits = set(c.deps).union(*[after[d] for d in c.deps])
            queue = ("dma", c.engine) if isinstance(c, DmaCommand) else getattr(c, "unit", None)
            previous = last.get(queue)
            by_queue[c.id] = set() if previous is None else \
                after[previous] | (set() if isinstance(c, DmaCommand) else {previous})
            waits |= by_queue[c.id]
            if c.id in program.preamble_command_ids:   # done before the invocation: it implies nothing
                after[c.id] = set()
                out.append(c)
                continue
            if queue is not None:
                last[queue] = c.id
            after[c.id] = waits
            changes = {"deps": tuple(sorted(waits))}
            if isinstance(c, CondCommand):
                changes.update(then_commands=expand(c.then_commands), else_commands=expand(c.else_commands))
            elif isinstance(c, LoopCommand):
                changes.update(cond_commands=expand(c.cond_commands), body_commands=expand(c.body_commands))
            if queue is None:
                last = {}
            out.append(dataclasses.replace(c, **changes))
        return tuple(out)

    return dataclasses.replace(program, commands=expand(program.commands)), by_queue


@pytest.mark.parametrize("graph, hw", [
    (lambda: small_cnn(8), lambda: machine("tiny", tcm_bytes=2048)),
    (lambda: load_graph("examples/ds_cnn_kws_int8.tosa"), lambda: machine("tiny")),
    (lambda: load_graph("examples/while_loop_int32.tosa"), lambda: machine("edge")),
], ids=["small_cnn", "ds_cnn", "while_loop"])
def test_scheduled_waits_are_minimal_and_implied_ones_change_no_cycle(graph, hw):
    g, machine_ = graph(), hw()
    program = schedule(g, machine_)
    verify_program(program)
    full, by_queue = _closure(program)
    commands = list(_walk(program.commands))
    assert sum(len(c.deps) for c in _walk(full.commands)) > sum(len(c.deps) for c in commands)
    # no dependency is implied by another one of the same command or by its queue
    after = {c.id: set(c.deps) for c in _walk(full.commands)}
    for c in commands:
        for d in c.deps:
            assert d not in by_queue[c.id] and not any(d in after[e] for e in c.deps if e != d), (c.id, d)
    inputs = [random_inputs(g, seed=k) for k in range(2)]
    runs = [simulate_program(p, machine_, inputs) for p in (program, full)]
    records = [[(r.id, r.invocation, r.start_cycle, r.end_cycle, r.busy_end_cycle) for r in run.trace.commands]
               for run in runs]
    assert records[0] == records[1]
    for a, b in zip(runs[0].outputs, runs[1].outputs):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
