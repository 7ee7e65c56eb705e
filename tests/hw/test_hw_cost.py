"""Pure cost functions: systolic MAC array, vector and LUT units, TCM bound."""

from __future__ import annotations

import pytest

from npu_sim.errors import ProgramError
from npu_sim.hw.cost import (command_macs, compute_command_cycles, mac_array_cycles, mac_dims,
                             step_cycles, vector_elements_per_cycle)
from npu_sim.program import ComputeCommand, KernelStep, View
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute
from tests.hw.hw_programs import TCM, add_step, i32, make_hw


def conv_step(out_region=None, dtype=DType.INT8, kernel=3) -> KernelStep:
    """CONV2D [1,4,4,8] * [16,k,k,8] 'same' padding -> [1,4,4,16] int32 (k = 3 or 1)."""
    types = (TensorType((1, 4, 4, 8), dtype), TensorType((16, kernel, kernel, 8), dtype),
             TensorType((16,), DType.INT32), TensorType((1,), dtype), TensorType((1,), dtype))
    pad = (kernel // 2,) * 4
    attr = make_attribute(Op.CONV2D, pad=pad, stride=(1, 1), dilation=(1, 1), acc_type=DType.INT32)
    views = tuple(View(TCM, 0, t.shape, t.dtype) for t in types)
    return KernelStep(Op.CONV2D, attr, views, types, (TensorType((1, 4, 4, 16), DType.INT32),),
                      out_region=out_region)


@pytest.mark.parametrize("m, n, k, rows, cols, step, expected", [
    (16, 16, 72, 4, 8, 1, 4 * 2 * (72 + 4 + 8 - 2)),
    (1, 1, 1, 16, 16, 1, 1 + 0),       # one PE in use: no skew
    (1, 64, 16, 16, 16, 1, 4 * (16 + 1 + 16 - 2)),   # matrix-vector: the skew crosses the columns only
    (17, 16, 10, 16, 16, 1, 2 * 1 * (10 + 30)),
    (16, 16, 10, 16, 16, 2, 1 * 1 * (20 + 30)),
    (0, 16, 10, 16, 16, 1, 0),
])
def test_mac_array_cycles_one_accumulator_per_pe(m, n, k, rows, cols, step, expected):
    assert mac_array_cycles(m, n, k, rows, cols, step, accumulator_buffers=1) == expected
    assert mac_array_cycles(m, n, k, rows, cols, step) == expected  # the function's default


@pytest.mark.parametrize("m, n, k, rows, cols, step, expected", [
    # 8 blocks: 7 back to back at K = 72 cycles, then the last one with its skew of 4 + 8 - 2
    (16, 16, 72, 4, 8, 1, 7 * 72 + (72 + 4 + 8 - 2)),
    (1, 1, 1, 16, 16, 1, 1 + 0),  # one block, one PE in use: nothing to overlap, no skew
    # matrix-vector: one row in use drains in 1 cycle, so 4 blocks of K = 16 back to back
    (1, 64, 16, 16, 16, 1, 3 * 16 + (16 + 1 + 16 - 2)),
    (3, 16, 1, 16, 16, 1, 1 + 3 + 16 - 2),
    # K = 10 < 16 rows: a block cannot leave the shadow registers faster than 16 cycles
    (17, 16, 10, 16, 16, 1, 1 * 16 + (10 + 30)),
    (48, 16, 10, 16, 16, 2, 2 * 20 + (20 + 30)),  # int16-like: 2 cycles per K step
    (0, 16, 10, 16, 16, 1, 0),
])
def test_mac_array_cycles_double_buffered_accumulators(m, n, k, rows, cols, step, expected):
    assert mac_array_cycles(m, n, k, rows, cols, step, accumulator_buffers=2) == expected


def test_conv2d_dims_whole_and_tile():
    assert mac_dims(conv_step()) == (16, 16, 72)
    assert mac_dims(conv_step(out_region=((0, 1), (0, 2), (0, 4), (0, 8)))) == (8, 8, 72)


def test_mac_array_command_cycles_and_macs():
    hw = make_hw()  # 4 x 8 array, setup 5; TCM 2 ports x 16 B = 32 B/cycle
    command = ComputeCommand(0, "mac_array", (conv_step(),), (View(TCM, 0, (1, 4, 4, 16), DType.INT32),))
    # operands in the TCM: 128 + 1152 + 64 + 1 + 1 bytes, output 1024: 2370 / 32 -> 75 cycles < 586
    # double-buffered (the default): 8 blocks, 7 of K = 72 cycles, the last with its skew
    assert compute_command_cycles(hw, command) == 5 + 7 * 72 + (72 + 4 + 8 - 2)
    assert command_macs(command) == 16 * 16 * 72
    single = make_hw(mac_array={"rows": 4, "cols": 8, "macs_per_cycle": {"int8": 32, "int16": 16},
                                "setup_cycles": 5, "accumulator_buffers": 1})
    assert compute_command_cycles(single, command) == 5 + 4 * 2 * (72 + 4 + 8 - 2)


def epilogue_steps() -> tuple[KernelStep, KernelStep]:
    """CLAMP then ADD of a residual in the TCM, both on the [1,4,4,16] int32 accumulator."""
    acc = TensorType((1, 4, 4, 16), DType.INT32)
    clamp = KernelStep(Op.CLAMP, make_attribute(Op.CLAMP), (0,), (acc,), (acc,))
    add = KernelStep(Op.ADD, make_attribute(Op.ADD), (0, View(TCM, 4096, acc.shape, DType.INT32)), (acc, acc), (acc,))
    return clamp, add


def test_epilogue_is_pipelined_behind_the_mac_array():
    hw = make_hw()  # 4 x 8 array, setup 5
    command = ComputeCommand(0, "mac_array", (conv_step(), *epilogue_steps()),
                             (View(TCM, 8192, (1, 4, 4, 16), DType.INT32),))
    # MAC: 8 blocks, 7 * 72 + (72 + 4 + 8 - 2) = 586, the first block done after 82 cycles;
    # epilogue: CLAMP and ADD are two stages of one output pipeline, 256 results / 8 a cycle
    # + 1 stage deep = 33. MAC-bound: the array, then the last 4 x 8 block through the
    # pipeline (32 / 8 + 1). TCM: 1346 + 1024 residual + 1024 out = 3394 B / 32 -> 107 cycles.
    assert compute_command_cycles(hw, command) == 5 + max(586 + 4 + 1, 82 + 33)
    assert compute_command_cycles(hw, command) == 5 + 591


def test_each_extra_epilogue_operator_adds_one_pipeline_stage():
    hw = make_hw(mac_array={"rows": 16, "cols": 2, "macs_per_cycle": {"int8": 32}})
    out = (View(TCM, 8192, (1, 4, 4, 16), DType.INT32),)
    clamp, add = epilogue_steps()
    one = compute_command_cycles(hw, ComputeCommand(0, "mac_array", (conv_step(kernel=1), clamp), out))
    two = compute_command_cycles(hw, ComputeCommand(0, "mac_array", (conv_step(kernel=1), clamp, add), out))
    # 1x1 conv: M = 16, N = 16, K = 8 -> 8 blocks of 16 x 2; each leaves the shadow registers
    # in 16 cycles (> K), so the array takes 7 * 16 + (8 + 16 + 2 - 2) = 136; the last block
    # drains in 32 / 2 = 16 cycles (+1 with a second stage). The epilogue alone streams
    # 256 / 2 = 128 (+1) cycles after the first block (24), the same 152 (153).
    assert (one, two) == (5 + 136 + 16, 5 + 136 + 17)


def test_int16_runs_at_its_stated_rate():
    hw = make_hw()  # int16: 16 MACs/cycle on 32 PEs -> 2 cycles per K step
    assert step_cycles(hw, "mac_array", conv_step(dtype=DType.INT16)) == 7 * 2 * 72 + (2 * 72 + 10)


def test_dtype_without_a_rate_cannot_use_the_mac_array():
    with pytest.raises(ProgramError, match="mac_array of test has no FP32 rate"):
        step_cycles(make_hw(), "mac_array", conv_step(dtype=DType.FP32))


def test_epilogue_steps_drain_cols_per_cycle():
    hw = make_hw()
    rescale_in = TensorType((1, 4, 4, 16), DType.INT32)
    epilogue = KernelStep(Op.CLAMP, make_attribute(Op.CLAMP), (0,), (rescale_in,), (rescale_in,))
    assert step_cycles(hw, "mac_array", epilogue) == 256 // 8


def test_vector_unit_cycles_and_tcm_bound():
    hw = make_hw(tcm={"port_count": 1, "port_bytes_per_cycle": 4})  # 4 B/cycle of TCM
    step = add_step(i32(TCM, 0, 64), i32(TCM, 256, 64), (64,))
    assert step_cycles(hw, "vector", step) == 64 // 8  # int32 lanes: 8
    command = ComputeCommand(0, "vector", (step,), (i32(TCM, 512, 64),))
    assert compute_command_cycles(hw, command) == 8 + (3 * 256) // 4  # TCM-bound


def test_vector_lanes_fall_back_by_element_width():
    hw = make_hw()  # int8: 32, int32: 8 configured
    assert vector_elements_per_cycle(hw, DType.INT16) == 16
    assert vector_elements_per_cycle(hw, DType.FP32) == 8
    assert vector_elements_per_cycle(hw, DType.BOOL) == 32


def test_lut_unit_cycles():
    hw = make_hw()
    t = TensorType((100,), DType.INT8)
    table = KernelStep(Op.TABLE, make_attribute(Op.TABLE), (View(TCM, 0, (100,), DType.INT8),
                                                           View(TCM, 128, (256,), DType.INT8)),
                       (t, TensorType((256,), DType.INT8)), (t,))
    command = ComputeCommand(0, "lut", (table,), (View(TCM, 512, (100,), DType.INT8),))
    assert compute_command_cycles(hw, command) == 3 + 100 // 4


def test_units_refuse_what_they_cannot_run():
    hw = make_hw()
    add = ComputeCommand(4, "mac_array", (add_step(i32(TCM, 0, 4), i32(TCM, 16, 4), (4,)),),
                         (i32(TCM, 32, 4),), name="add")
    with pytest.raises(ProgramError, match=r"command 4 \(add\): the mac_array needs a multiply-accumulate"):
        compute_command_cycles(hw, add)
    with pytest.raises(ProgramError, match="unknown compute unit 'gpu'"):
        compute_command_cycles(hw, ComputeCommand(5, "gpu", add.steps, add.outputs))
    with pytest.raises(ProgramError, match="the lut unit needs a table-lookup step"):
        compute_command_cycles(hw, ComputeCommand(6, "lut", add.steps, add.outputs))


def test_fewer_banks_than_ports_limit_the_tcm_bandwidth():
    assert make_hw(tcm={"bank_count": 1, "port_count": 2}).tcm.bandwidth_bytes_per_cycle == 16
    assert make_hw(tcm={"bank_count": 4, "port_count": 2}).tcm.bandwidth_bytes_per_cycle == 32
