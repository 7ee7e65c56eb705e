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
    assert len(program.notes["evicted_values"]) <= 3
