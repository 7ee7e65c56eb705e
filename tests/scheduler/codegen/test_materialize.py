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
