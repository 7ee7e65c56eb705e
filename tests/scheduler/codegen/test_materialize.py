"""Memory plans of the DDR: spilled values share bytes only when the DDR would overflow."""

import numpy as np
import pytest

from npu_sim.errors import ScheduleError
from npu_sim.hw.config import deep_merge, hw_config_from_dict
from npu_sim.program import MemorySpace
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from tests.scheduler.graphs import check_end_to_end, machine


def _chain(length: int = 6, size: int = 16384):
    """x -> TABLE -> CLAMP -> TABLE -> ... (int8 [size]; the LUT and the vector unit take turns,
    so nothing fuses): every intermediate spills on a 1 KiB TCM."""
    b = GraphBuilder()
    y = b.input("x", (size,), DType.INT8)
    table = b.const("table", np.arange(-128, 128, dtype=np.int8)[::-1].copy())
    for k in range(length):
        if k % 2 == 0:
            y = b.op(Op.TABLE, [y, table])
        else:
            y = b.op(Op.CLAMP, [y], min_val=np.int8(-100).tobytes(), max_val=np.int8(100).tobytes(),
                     nan_mode="PROPAGATE")
    b.output(y)
    return b.build()


def _small_ddr(ddr_bytes: int):
    data = machine("tiny", tcm_bytes=1024).model_dump(mode="json")
    return hw_config_from_dict(deep_merge(data, {"ddr": {"size_bytes": ddr_bytes}}), "small-ddr")


def _spills(program):
    return [a for a in program.allocations if a.memory is MemorySpace.DDR and a.kind == "spill"]


def test_spills_have_their_own_bytes_when_the_ddr_has_room():
    program, _ = check_end_to_end(_chain(), _small_ddr(1 << 20))
    spills = _spills(program)
    assert len(spills) == 5
    assert len({a.offset_bytes for a in spills}) == 5
    ends = sorted((a.offset_bytes, a.offset_bytes + a.size_bytes) for a in spills)
    assert all(e <= s for (_, e), (s, _) in zip(ends, ends[1:]))   # no two share a byte


def test_spills_share_the_ddr_by_live_range_when_it_is_short():
    # input, output, table and 5 spills of 16 KiB need 112.25 KiB with their own bytes; 80 KiB
    # is enough when a spill reuses the bytes of one that is dead
    program, _ = check_end_to_end(_chain(), _small_ddr(80 << 10))   # verifier: no live overlap
    spills = _spills(program)
    assert len(spills) == 5 and len({a.offset_bytes for a in spills}) < 5
    assert max(a.offset_bytes + a.size_bytes for a in program.allocations
               if a.memory is MemorySpace.DDR) <= 80 << 10


def test_a_ddr_too_small_even_when_shared_is_named():
    with pytest.raises(ScheduleError, match=r"needs \d+ bytes of DDR, only 40960 available"):
        check_end_to_end(_chain(), _small_ddr(40 << 10))


def test_a_buffer_lives_from_its_first_command_to_the_last_a_loop_touching_it_runs():
    """Live ranges in command ids: a buffer a loop reads lives to the loop's last nested command
    (read again at every iteration), a buffer touched only inside it within the body; a tile
    buffer over every command of its operation."""
    from scheduler.codegen.materialize import live_ranges, number
    from scheduler.codegen.stream import ADma, ALoop
    from scheduler.memory.buffers import Buffer, BufView

    def view(b):
        return BufView(b, 0, (16,), DType.INT8)

    state, inner, flag = (Buffer(n, MemorySpace.TCM, 16) for n in ("state", "inner", "flag"))
    tile = Buffer("tile", MemorySpace.TCM, 16, kind="tile", op=2)
    ddr = Buffer("home", MemorySpace.DDR, 16, kind="input")
    cmds = [ADma(0, view(ddr), view(state), "load", 0),                       # 0
            ALoop([ADma(0, view(state), view(flag), "cond", 1)], view(flag),   # 1 (2: cond)
                  [ADma(0, view(state), view(inner), "body", 1),               # 3
                   ADma(0, view(inner), view(tile), "body", 2)], 8, "loop", 1),  # 4
            ADma(0, view(ddr), view(state), "reload", 2),                      # 5
            ADma(1, view(ddr), view(flag), "after", 3)]                        # 6
    usage = live_ranges(cmds, number(cmds))
    spans = {b.name: (first, last) for b, first, last in usage.values()}
    # (the tile buffer outlives the loop: live across all of it)
    assert spans == {"home": (0, 6), "state": (0, 5), "flag": (1, 6), "inner": (3, 4), "tile": (1, 5)}


def test_a_prefetched_load_holds_its_partner_buffer_only_where_the_config_says():
    """Operation 2's load into its first tile buffer is hoisted into operation 1: by default both
    ping-pong buffers are held from that load; with ``dma.prefetch_holds_partner_buffers`` off
    (the Ethos-U presets) the partner is held from the operation's first compute only."""
    from npu_sim.program import KernelStep
    from npu_sim.tosa.ir import TensorType
    from npu_sim.tosa.ops import make_attribute
    from scheduler.codegen.materialize import live_ranges, number
    from scheduler.codegen.stream import ACompute, ADma
    from scheduler.memory.buffers import Buffer, BufView

    def view(b):
        return BufView(b, 0, (16,), DType.INT8)

    home, out = Buffer("home", MemorySpace.DDR, 16, kind="input"), Buffer("out", MemorySpace.TCM, 16)
    ping, pong = (Buffer(n, MemorySpace.TCM, 16, kind="tile", op=2) for n in ("ping", "pong"))
    other = Buffer("other", MemorySpace.TCM, 16)
    step = KernelStep(Op.IDENTITY, make_attribute(Op.IDENTITY), (view(ping),),
                      (TensorType((16,), DType.INT8),), (TensorType((16,), DType.INT8),))
    cmds = [ADma(0, view(home), view(other), "op 1: load", 1),          # 0
            ADma(1, view(home), view(ping), "op 2: load ahead", 2),     # 1
            ADma(0, view(other), view(out), "op 1: work", 1),           # 2
            ADma(1, view(home), view(pong), "op 2: load", 2),           # 3
            ACompute("vector", [step], [view(out)], "op 2: compute", op=2)]   # 4
    for holds, pong_span in ((True, (1, 4)), (False, (3, 4))):
        spans = {b.name: (f, last) for b, f, last in live_ranges(cmds, number(cmds), holds).values()}
        assert spans["ping"] == (1, 4) and spans["pong"] == pong_span, holds
