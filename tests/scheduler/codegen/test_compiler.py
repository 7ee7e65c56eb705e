"""scheduler.codegen.compiler: what a cascade may re-split an operation into."""

from __future__ import annotations

from scheduler.codegen.compiler import _cascade_budgets
from scheduler.passes.residency import ResidencyResult
from scheduler.passes.tiling import TilePlan


def _plan(working_set_bytes: int) -> TilePlan:
    return TilePlan((1, 4, 4, 8), None, (), {}, {}, {}, 1, working_set_bytes, 100.0, 0)


def test_a_cascade_may_not_raise_the_peak_nor_take_less_than_the_plan_has():
    """Residents of 100, 300 and 50 bytes beside working sets of 40, 20 and 30: the peak is 320.
    Operation 0 may then take 220, operation 1 its own 20 (it sets the peak), operation 2 270,
    however much more the TCM's 1,000 bytes would leave; with 300 bytes, operation 2 only 250."""
    result = ResidencyResult(set(), {0: _plan(40), 1: _plan(20), 2: _plan(30)}, [100, 300, 50], [])
    assert _cascade_budgets(result, 1000) == [220, 20, 270]
    assert _cascade_budgets(result, 300)[2] == 250
