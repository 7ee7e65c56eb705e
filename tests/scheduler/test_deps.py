import numpy as np

from npu_sim.program import MemorySpace, View
from npu_sim.tosa.dtype import DType
from scheduler.byte_ranges import covered, normalize, overlaps, view_ranges
from scheduler.deps import AccessTracker

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
