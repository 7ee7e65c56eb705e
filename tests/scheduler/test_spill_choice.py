"""Which resident intermediate the scheduler spills when the TCM plan overflows.

Found with EfficientNet-B0 (int8) on the edge preset: the constant pool, live for the whole
program, was the largest overflowing buffer, so every attempt spilled the largest
intermediate of the whole graph instead of one live where the plan overflowed: 60 of the
64 allowed recompilations (48 s of scheduling; a slightly larger graph would have been
refused as "fragmentation")."""

from pathlib import Path

from npu_sim.tosa.loader import load_graph
from tests.scheduler.graphs import check_end_to_end, machine

CONVERTED = Path(__file__).resolve().parents[1] / "data" / "converted"


def test_spills_a_value_live_where_the_plan_overflowed_not_the_largest_anywhere():
    graph = load_graph(CONVERTED / "resnet_int16x8.tosa")
    program, _ = check_end_to_end(graph, machine("tiny", tcm_bytes=16384))
    # the pool-driven choice spilled 8 values here (9 compilations); 3 are needed
    assert len(program.stats.evicted_values) <= 3


def test_disjoint_overflows_each_get_a_victim_in_one_attempt():
    """Overflows at disjoint times are separate shortages: one victim each per recompilation
    (MobileNetV3-Small fp32 on edge: 16 compilations before, 4 now); an overflow overlapping
    one already served waits for the next attempt; the whole-program pool names a victim
    only when no timed overflow does."""
    from types import SimpleNamespace

    from npu_sim.program import MemorySpace
    from scheduler.memory.buffers import Buffer
    from scheduler.memory.liveness import LiveRange
    from scheduler.schedule import _victims

    def plan(spans: dict[str, tuple[int, int, int]], overflow: list[str], pool: bool = False):
        buffers = {name: Buffer(name, MemorySpace.TCM, size, whole_program=pool and name == "pool")
                   for name, (size, _, _) in spans.items()}
        ranges = {b.serial: LiveRange(b.serial, b.size_bytes, *spans[n][1:]) for n, b in buffers.items()}
        return (SimpleNamespace(overflow=[buffers[n] for n in overflow], ranges=ranges,
                                buffers={b.serial: b for b in buffers.values()}),
                SimpleNamespace(group_buffers={b.serial: f"value_{n}" for n, b in buffers.items()
                                               if n.startswith("v")}))

    spans = {"t1": (64, 0, 5), "v1": (100, 0, 5), "v2": (50, 3, 4),
             "t2": (64, 10, 12), "v3": (80, 9, 11), "t3": (64, 11, 13), "pool": (500, 0, 20)}
    p, ctx = plan(spans, ["t1", "t2", "t3"], pool=True)
    assert _victims(p, ctx) == {"value_v1", "value_v3"}          # t3 overlaps t2: next attempt
    p, ctx = plan(spans, ["pool", "t2"], pool=True)
    assert _victims(p, ctx) == {"value_v3"}                       # the timed overflow first
    p, ctx = plan({"pool": (500, 0, 20), "v1": (100, 0, 5), "v2": (150, 4, 9)}, ["pool"], pool=True)
    assert _victims(p, ctx) == {"value_v2"}                       # only the pool overflowed
