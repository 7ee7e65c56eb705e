"""The vector unit's cost: lanes per dtype, the work of reductions and pooling."""

from __future__ import annotations

from npu_sim.hw.compute_units import vector
from npu_sim.program import KernelStep, View
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute
from tests.hw.hw_programs import TCM, make_hw


def test_vector_lanes_fall_back_by_element_width():
    hw = make_hw()  # int8: 32, int32: 8 configured
    assert vector.elements_per_cycle(hw, DType.INT16) == 16
    assert vector.elements_per_cycle(hw, DType.FP32) == 8
    assert vector.elements_per_cycle(hw, DType.BOOL) == 32


def test_a_reduction_is_charged_its_input_window_with_or_without_views():
    """The simulator's command reads the window through a view; the scheduler plans the same
    step without views, from the output region and the reduced axis: the same work."""
    hw = make_hw()  # int32: 8 lanes
    types = (TensorType((4, 6, 5), DType.INT32),)
    out = (TensorType((4, 1, 5), DType.INT32),)
    region = ((1, 3), (0, 1), (0, 5))
    attribute = make_attribute(Op.REDUCE_SUM, axis=1)
    with_view = KernelStep(Op.REDUCE_SUM, attribute, (View(TCM, 0, (2, 6, 5), DType.INT32),), types, out,
                           out_region=region)
    planned = KernelStep(Op.REDUCE_SUM, attribute, (), types, out, out_region=region)
    assert vector.work_elements(with_view) == vector.work_elements(planned) == 2 * 6 * 5
    assert vector.step_cycles(hw, planned) == 60 // 8 + 1
    whole = KernelStep(Op.REDUCE_SUM, attribute, (), types, out)
    assert vector.work_elements(whole) == 4 * 6 * 5


def test_pooling_is_charged_its_kernel_window_per_output():
    t_in, t_out = TensorType((1, 8, 8, 4), DType.INT8), TensorType((1, 4, 4, 4), DType.INT8)
    attribute = make_attribute(Op.MAX_POOL2D, kernel=(3, 2), stride=(2, 2), pad=(0, 1, 0, 0))
    step = KernelStep(Op.MAX_POOL2D, attribute, (), (t_in,), (t_out,))
    assert vector.work_elements(step) == 64 * 3 * 2
