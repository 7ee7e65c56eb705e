"""The host CPU's cost: cycles per MAC, element or byte by operator class and dtype (the cpu section)."""

from __future__ import annotations

import pytest

from npu_sim.hw.compute_units import CPU, cpu
from npu_sim.program import KernelStep
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute
from tests.hw.hw_programs import conv_step, make_hw


def _unary(op: Op, dtype: DType, shape=(1, 10, 10)) -> KernelStep:
    t = TensorType(shape, dtype)
    return KernelStep(op, make_attribute(op), (), (t,), (t,))


def test_a_convolution_costs_its_macs_at_the_dtype_rate():
    hw = make_hw()   # the Cortex-M55 defaults: int8 0.25, fp32 4 cycles per MAC
    # CONV2D [1,4,4,8] * [16,3,3,8]: 16 positions x 16 channels x 72 = 18,432 MACs
    assert cpu.step_cycles(hw, conv_step()) == 18_432 // 4
    assert cpu.step_cycles(hw, conv_step(dtype=DType.FP32)) == 18_432 * 4


@pytest.mark.parametrize("op, dtype, cycles", [
    (Op.ADD, DType.INT8, 100), (Op.ADD, DType.FP32, 400), (Op.ABS, DType.INT32, 100),
    (Op.EXP, DType.FP32, 5_000), (Op.TANH, DType.FP16, 5_000),
    (Op.TRANSPOSE, DType.INT8, 50), (Op.TRANSPOSE, DType.FP32, 200),   # 0.5 cycles per byte written
    (Op.ADD, DType.BF16, 400),    # no bf16 entry: the next wider float, fp32
    (Op.ADD, DType.INT48, 100),   # no int48 entry, none wider: the widest integer, int32
])
def test_elementwise_transcendental_and_data_movement_rates(op, dtype, cycles):
    assert cpu.step_cycles(make_hw(), _unary(op, dtype)) == cycles


def test_a_reduction_costs_the_elements_it_reads():
    t_in, t_out = TensorType((1, 10, 10), DType.FP32), TensorType((1, 10, 1), DType.FP32)
    step = KernelStep(Op.REDUCE_SUM, make_attribute(Op.REDUCE_SUM, axis=2), (), (t_in,), (t_out,))
    assert cpu.step_cycles(make_hw(), step) == 100 * 4


def test_the_rates_come_from_the_config():
    hw = make_hw()
    hw = hw.model_copy(update={"cpu": hw.cpu.model_copy(update={"cycles_per_mac": {"int8": 1.0}, "setup_cycles": 7})})
    assert cpu.step_cycles(hw, conv_step(dtype=DType.FP32)) == 18_432   # no float entry: the widest
    assert CPU.setup_cycles(hw) == 7
    assert CPU.body_cycles(hw, [conv_step(), conv_step()]) == 2 * 18_432


def test_the_cpu_runs_any_operator_but_claims_none():
    assert CPU.ops == frozenset() and not CPU.fallback
    assert CPU.can_run([conv_step()]) and CPU.can_run([_unary(Op.ADD, DType.INT8)])
