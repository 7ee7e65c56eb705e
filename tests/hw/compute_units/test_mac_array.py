"""The systolic MAC array's cost: blocks, skew, double-buffered accumulators, dtype rates."""

from __future__ import annotations

import dataclasses
import math

import pytest

from npu_sim.errors import ProgramError
from npu_sim.hw.compute_units import mac_array
from npu_sim.hw.compute_units.mac_array import mac_array_cycles, mac_dims
from npu_sim.hw.config import load_hw_config
from npu_sim.program import KernelStep
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute
from tests.hw.hw_programs import conv_step, make_hw


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


def test_int16_runs_at_its_stated_rate():
    hw = make_hw()  # int16: 16 MACs/cycle on 32 PEs -> 2 cycles per K step
    assert mac_array.step_cycles(hw, conv_step(dtype=DType.INT16)) == 7 * 2 * 72 + (2 * 72 + 10)


def test_dtype_without_a_rate_cannot_use_the_mac_array():
    with pytest.raises(ProgramError, match="mac_array of test has no FP32 rate"):
        mac_array.step_cycles(make_hw(), conv_step(dtype=DType.FP32))


def test_epilogue_steps_drain_cols_per_cycle():
    hw = make_hw()
    rescale_in = TensorType((1, 4, 4, 16), DType.INT32)
    epilogue = KernelStep(Op.CLAMP, make_attribute(Op.CLAMP), (0,), (rescale_in,), (rescale_in,))
    assert mac_array.step_cycles(hw, epilogue) == 256 // 8


def test_a_depthwise_rate_floors_depthwise_steps_only():
    hw = make_hw()
    attribute = make_attribute(Op.DEPTHWISE_CONV2D, stride=(1, 1), pad=(1, 1, 1, 1), dilation=(1, 1))
    step = KernelStep(Op.DEPTHWISE_CONV2D, attribute, (),
                      (TensorType((1, 10, 10, 8), DType.INT8), TensorType((3, 3, 8, 1), DType.INT8)),
                      (TensorType((1, 10, 10, 8), DType.INT8),))
    assert mac_array.depthwise_floor_cycles(hw, step) == 0
    slow = hw.model_copy(update={"mac_array": hw.mac_array.model_copy(update={"depthwise_macs_per_cycle": 16})})
    assert mac_array.depthwise_floor_cycles(slow, step) == 100 * 8 * 9 // 16
    assert mac_array.step_cycles(slow, step) == max(mac_array.step_cycles(hw, step), 450)


def _conv(in_shape: tuple[int, ...], weight_shape: tuple[int, ...], out_shape: tuple[int, ...],
          stride: tuple[int, int] = (1, 1)) -> KernelStep:
    types = (TensorType(in_shape, DType.INT8), TensorType(weight_shape, DType.INT8),
             TensorType((weight_shape[0],), DType.INT32), TensorType((1,), DType.INT8), TensorType((1,), DType.INT8))
    attribute = make_attribute(Op.CONV2D, pad=[1, 0, 1, 0], stride=list(stride), dilation=[1, 1],
                               acc_type=DType.INT32)
    return KernelStep(Op.CONV2D, attribute, (), types, (TensorType(out_shape, DType.INT32),))


def test_input_channels_go_in_groups_on_ethos_u():
    """Vela's U55/U65-256 model: a 2x2x8 micro-block takes 4 cycles per kernel element for up to
    32 input channels (depth first), or per 4 kernel elements for up to 8 channels (part-kernel
    first, which a thin input takes). MobileNetV2's first convolution (3x3, 3 -> 16 channels,
    48x48 out): (24 * 24 * 2) micro-blocks x 3 x 4 = 13,824 cycles, as the array does with K =
    12 x 8; a 64-channel input fills its groups of 32. The MACs stay the true count."""
    from npu_sim.hw.config import load_hw_config

    step = _conv((1, 96, 96, 3), (16, 3, 3, 3), (1, 48, 48, 16), stride=(2, 2))
    u65 = load_hw_config("ethos-u65-256")
    assert mac_array.cycle_dims(u65, step) == (48 * 48, 16, 12 * 8)
    assert mac_array.step_macs(step) == 48 * 48 * 16 * 27
    blocks = (48 * 48 // 16) * 1
    assert mac_array.step_cycles(u65, step) == (blocks - 1) * 96 + 96 + 16 + 16 - 2 == 13_854
    deep = _conv((1, 8, 8, 64), (16, 3, 3, 64), (1, 8, 8, 16))
    assert mac_array.cycle_dims(u65, deep) == (64, 16, 9 * 64)
    edge = load_hw_config("edge")   # no channel groups: K is 27
    assert mac_array.cycle_dims(edge, step) == (48 * 48, 16, 27)


def test_scales_and_biases_are_read_per_output_channel_where_the_config_says():
    """Vela's U65/U85 model re-reads a convolution's scales and biases from DRAM: 10 x 256
    channels x 500 cycles latency / 256 = 5,000 cycles for the 256-gate product of a 64-unit
    LSTM step. Depthwise convolutions and the generic presets pay nothing."""
    from npu_sim.hw.config import load_hw_config

    gates = _conv((1, 1, 1, 64), (256, 1, 1, 64), (1, 1, 1, 256))
    u65, edge = load_hw_config("ethos-u65-256"), load_hw_config("edge")
    assert mac_array.channel_parameter_cycles(u65, gates) == 5000
    assert mac_array.channel_parameter_cycles(edge, gates) == 0
    # the reads stream beside the MAC work: the longer of the two
    assert mac_array.body_cycles(u65, [gates]) == max(mac_array.step_cycles(u65, gates), 5000) == 5000
    depthwise = KernelStep(Op.DEPTHWISE_CONV2D, make_attribute(Op.DEPTHWISE_CONV2D), (),
                           (TensorType((1, 4, 4, 8), DType.INT8), TensorType((3, 3, 8, 1), DType.INT8)),
                           (TensorType((1, 4, 4, 8), DType.INT32),))
    assert mac_array.channel_parameter_cycles(edge, depthwise) == 0


def test_scales_and_biases_are_reread_for_every_ofm_block():
    """The U85-256's OFM blocks hold 2,048 results over at most 48 channels (42 positions), and
    its Scale channel reads DRAM at 0.4096 B/cycle: 10 B per channel and block. MobileNetV2's
    48x48x48 expansion: 55 blocks x 48 channels x 24.41 = 64,454 cycles (Vela, with its 5x8
    blocks: 60 blocks, 70,312). However the scheduler tiles the output, the blocks are the
    operation's: a tile of 8 channels pays for 8. A depthwise convolution pays too (its 6x6x128
    block: 128 x 24.41 = 3,125, Vela's figure)."""
    from npu_sim.hw.config import load_hw_config

    u85 = load_hw_config("ethos-u85-256")
    expand = _conv((1, 48, 48, 8), (48, 1, 1, 8), (1, 48, 48, 48))
    assert mac_array.ofm_blocks(u85, expand) == 55
    assert mac_array.channel_parameter_cycles(u85, expand) == 64_454
    assert mac_array.body_cycles(u85, [expand]) == 64_454   # far longer than the MACs
    tile = KernelStep(expand.op, expand.attribute, (), expand.input_types, expand.output_types,
                      out_region=((0, 1), (0, 48), (0, 48), (0, 8)))
    assert mac_array.ofm_blocks(u85, tile) == 55
    assert mac_array.channel_parameter_cycles(u85, tile) == math.ceil(55 * 8 * 24.4140625)
    depthwise = KernelStep(Op.DEPTHWISE_CONV2D, make_attribute(Op.DEPTHWISE_CONV2D), (),
                           (TensorType((1, 6, 6, 128), DType.INT8), TensorType((3, 3, 128, 1), DType.INT8)),
                           (TensorType((1, 6, 6, 128), DType.INT32),))
    assert mac_array.channel_parameter_cycles(u85, depthwise) == 3125


def test_a_small_map_is_one_ofm_block_on_the_u85():
    """Where 32-channel blocks hold all of an output's positions, Vela's U85 blocks cover them whole
    and read the scales once: a 7x7x960 layer (blocks [7, 8, 32]: 960 x 24.41 = 23,437 cycles, Vela's
    figure) and a 49-token FullyConnected to 64 channels (1,562). A 25x5 map stays in 42-position
    blocks (Vela: five [5, 6, 32] ones)."""
    from npu_sim.hw.config import load_hw_config

    u85 = load_hw_config("ethos-u85-256")
    seven = _conv((1, 7, 7, 160), (960, 1, 1, 160), (1, 7, 7, 960))
    assert mac_array.ofm_blocks(u85, seven) == 1
    assert mac_array.channel_parameter_cycles(u85, seven) == 23_438
    tokens = _conv((1, 49, 1, 64), (64, 1, 1, 64), (1, 49, 1, 64))
    assert mac_array.channel_parameter_cycles(u85, tokens) == 1_563
    assert mac_array.ofm_blocks(u85, _conv((1, 25, 5, 64), (64, 1, 1, 64), (1, 25, 5, 64))) == 3


def test_the_u85_decodes_eight_weights_a_cycle():
    """MobileNetV2's last 1x1 convolution (112 -> 1280 channels on a 3x3 map): 143,360 weights
    at 8 a cycle = 17,920 cycles, longer than its MACs; a tile of a third of the output pays a
    third. The generic presets have no decoder limit."""
    from npu_sim.hw.config import load_hw_config

    u85, edge = load_hw_config("ethos-u85-256"), load_hw_config("edge")
    last = _conv((1, 3, 3, 112), (1280, 1, 1, 112), (1, 3, 3, 1280))
    assert mac_array.weight_decode_cycles(u85, last) == 17_920
    assert mac_array.weight_decode_cycles(edge, last) == 0
    third = KernelStep(last.op, last.attribute, (), last.input_types, last.output_types,
                       out_region=((0, 1), (0, 1), (0, 3), (0, 1280)))
    assert mac_array.weight_decode_cycles(u85, third) == math.ceil(17_920 / 3)
    assert mac_array.body_cycles(u85, [last]) == max(17_920, mac_array.channel_parameter_cycles(u85, last),
                                                     mac_array.step_cycles(u85, last))


def test_a_thin_convolution_is_traversed_part_kernel_first_on_the_u55():
    """Vela's ChooseKernelMethod: 8 channels or fewer go part-kernel first, 4 kernel elements a
    step over channels in groups of 8; a deep input stays depth first (groups of 32)."""
    u55 = load_hw_config("ethos-u55-256")
    assert mac_array.part_kernel_depth(u55, 40, 1) == 40 * 8            # KWS: a 10x4 kernel, 1 channel
    assert mac_array.part_kernel_depth(u55, 9, 3) == 12 * 8             # an RGB image, 3x3 kernel
    assert mac_array.part_kernel_depth(u55, 9, 64) == 0                 # depth first: 64 fills its groups
    assert mac_array.part_kernel_depth(u55, 8, 12) == 8 * 16            # 12 of 16 x 8 of 8 beats 12 of 32
    assert mac_array.part_kernel_depth(load_hw_config("edge"), 40, 1) == 0   # no part-kernel traversal
    weights = TensorType((64, 10, 4, 1), DType.INT8)
    step = KernelStep(Op.CONV2D, make_attribute(Op.CONV2D, pad=(4, 5, 1, 2), stride=(2, 2), dilation=(1, 1)), (),
                      (TensorType((1, 49, 10, 1), DType.INT8), weights), (TensorType((1, 25, 5, 64), DType.INT32),))
    assert mac_array.cycle_dims(u55, step) == (26 * 6, 64, 320)   # 25x5 positions in 2x2 micro-blocks


def test_the_u85_traverses_3x3_convolutions_part_kernel_first():
    """Vela's U85 (ChooseKernelFirst: channels in groups of 16 times 9 / 9 kernel elements against
    channels in groups of 64) takes every 3x3 convolution of 16 channels or more part-kernel first:
    4 kernel elements a step of an 8-bit input (2 of a 16-bit one), channels in IFM blocks of 16 in
    groups of 8; a 1x1 one stays depth first. A U-Net's 3x3 of 48 channels to 16 on 64x64 costs 12
    kernel elements' cycles on its 32 positions x 8 channels: 147,494 (Vela 5.2: 150,008; 110,592 at 9)."""
    u85 = load_hw_config("ethos-u85-256")
    assert mac_array.part_kernel_depth(u85, 9, 48, dtype=DType.INT8) == 12 * 48
    assert mac_array.part_kernel_depth(u85, 9, 64, dtype=DType.INT8) == 12 * 64   # 1.0 against 1.0: kernel first
    assert mac_array.part_kernel_depth(u85, 9, 24, dtype=DType.INT8) == 12 * 32   # two IFM blocks of 16
    assert mac_array.part_kernel_depth(u85, 9, 3, dtype=DType.INT8) == 12 * 8     # an RGB image
    assert mac_array.part_kernel_depth(u85, 9, 48, dtype=DType.INT16) == 10 * 48  # 2 elements a step
    assert mac_array.part_kernel_depth(u85, 1, 64, dtype=DType.INT8) == 0         # 1x1: depth first
    weights = TensorType((16, 3, 3, 48), DType.INT8)
    step = KernelStep(Op.CONV2D, make_attribute(Op.CONV2D, pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1)), (),
                      (TensorType((1, 64, 64, 48), DType.INT8), weights), (TensorType((1, 64, 64, 16), DType.INT32),))
    assert mac_array.cycle_dims(u85, step) == (4096, 16, 576)
    assert mac_array.step_cycles(u85, step) == 255 * 576 + 576 + 32 + 8 - 2   # 128 x 2 blocks


def test_u55_convolutions_compute_whole_output_micro_blocks():
    """Vela's U55/U65 compute a convolution in 2x2x8 OFM micro-blocks (EstimateMacCyclesPerBlock),
    a one-row output of even width from a one-row kernel in 1x4 ones (GetOfmMicroBlock): the
    positions count rounded up over the whole operation's output, a tile paying its share. A
    matrix-vector product keeps its one position; the generic presets count positions as they are."""
    u55, edge = load_hw_config("ethos-u55-256"), load_hw_config("edge")
    attribute = make_attribute(Op.CONV2D, pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1))

    def conv(out_hw: tuple[int, int], kernel_h: int = 1, tile_rows: int = 0) -> KernelStep:
        h, w = out_hw
        region = ((0, 1), (0, tile_rows), (0, w), (0, 8)) if tile_rows else None
        return KernelStep(Op.CONV2D, attribute, (), (TensorType((1, h + kernel_h - 1, w, 16), DType.INT8),
                                                     TensorType((8, kernel_h, 1, 16), DType.INT8)),
                          (TensorType((1, h, w, 8), DType.INT32),), out_region=region)

    assert mac_array.micro_blocked_positions([2, 2], conv((25, 5)), 125) == 156
    assert mac_array.micro_blocked_positions([2, 2], conv((1, 10)), 10) == 12       # 1x4 blocks
    assert mac_array.micro_blocked_positions([2, 2], conv((1, 10), kernel_h=3), 10) == 20
    assert mac_array.micro_blocked_positions([2, 2], conv((1, 1)), 1) == 1
    assert mac_array.cycle_dims(u55, conv((25, 5), tile_rows=5))[0] == math.ceil(25 * 156 / 125)
    assert mac_array.cycle_dims(edge, conv((25, 5)))[0] == 125


def test_an_upsampled_transpose_convolution_takes_its_whole_kernel_at_every_output():
    """A 3x3 stride-2 TRANSPOSE_CONV2D of 16x16x32 -> 32x32x16: each output sees 2x2 taps of the
    kernel (K = 4 x 32) where only the taps count, all 3x3 (K = 9 x 32) where the NPU convolves the
    upsampled input or one sub-kernel per stride phase over the whole output (the Ethos-U)."""
    attribute = make_attribute(Op.TRANSPOSE_CONV2D, out_pad=(0, -1, 0, -1), stride=(2, 2))
    step = KernelStep(Op.TRANSPOSE_CONV2D, attribute, (), (TensorType((1, 16, 16, 32), DType.INT8),
                                                          TensorType((16, 3, 3, 32), DType.INT8)),
                      (TensorType((1, 32, 32, 16), DType.INT32),))
    assert mac_array.cycle_dims(load_hw_config("edge"), step) == (1024, 16, 4 * 32)
    assert mac_array.cycle_dims(load_hw_config("ethos-u85-256"), step) == (1024, 16, 9 * 32)
    assert mac_array.step_macs(step) == 1024 * 16 * 4 * 32   # the MACs that count stay the taps'


def test_a_depthwise_convolution_of_int16_takes_twice_the_int8_time():
    """Vela's U55 depthwise: 4 x ifmBits / 8 cycles per micro-block and kernel step."""
    u55 = load_hw_config("ethos-u55-256")
    weights = (3, 3, 64, 1)
    steps = [KernelStep(Op.DEPTHWISE_CONV2D, make_attribute(Op.DEPTHWISE_CONV2D, pad=(1, 1, 1, 1), stride=(1, 1),
                                                            dilation=(1, 1)), (),
                        (TensorType((1, 25, 5, 64), dtype), TensorType(weights, DType.INT8)),
                        (TensorType((1, 25, 5, 64), DType.INT32),)) for dtype in (DType.INT8, DType.INT16)]
    assert [mac_array.depthwise_floor_cycles(u55, s) for s in steps] == [72_000 // 16, 72_000 * 2 // 16]


def test_a_matmul_by_columns_is_a_mul_and_a_depth_sum_per_output_column():
    """The U55 has no product of two feature maps (mac_array.matmul_by_columns): attention's
    [1, 49, 32] x [1, 32, 49] is 49 columns of a MUL over A's 1,568 elements to int32 (0.5 cycles
    each) and a depth sum (16 results a cycle); the edge NPU's array takes 49 x 49 x 32 MACs."""
    a, b, out = (TensorType((1, 49, 32), DType.INT8), TensorType((1, 32, 49), DType.INT8),
                 TensorType((1, 49, 49), DType.INT32))
    zero = TensorType((1,), DType.INT8)
    step = KernelStep(Op.MATMUL, make_attribute(Op.MATMUL), (), (a, b, zero, zero), (out,))
    u55 = load_hw_config("ethos-u55-256")
    assert mac_array.step_cycles(u55, step) == 49 * (784 + 98)
    edge = load_hw_config("edge")
    assert not edge.mac_array.matmul_by_columns
    assert mac_array.step_cycles(edge, step) < mac_array.step_cycles(u55, step) // 10


def test_the_u85_reads_its_channel_parameters_again_as_off_chip_bytes_once_per_operation():
    """10 B per output channel beside the weight stream (Vela 5.2's DramWeights_read less its
    weight_total_bytes), once per operation: a tile of a quarter of the outputs pays a quarter;
    the other presets count none."""
    from npu_sim.hw.config import load_hw_config

    u85, u55 = load_hw_config("ethos-u85-256"), load_hw_config("ethos-u55-256")
    gates = _conv((1, 1, 1, 64), (256, 1, 1, 64), (1, 1, 1, 256))
    assert mac_array.channel_parameter_bytes(u85, gates) == 2560
    assert mac_array.channel_parameter_bytes(u55, gates) == 0
    conv = _conv((1, 8, 8, 16), (32, 3, 3, 16), (1, 8, 8, 32))
    quarter = dataclasses.replace(conv, out_region=((0, 1), (0, 4), (0, 4), (0, 32)))
    assert mac_array.channel_parameter_bytes(u85, conv) == 320
    assert mac_array.channel_parameter_bytes(u85, quarter) == 80


def _patch_embedding(out_region=None) -> KernelStep:
    """A ViT's 4x4 stride-4 patch embedding: [1, 32, 32, 3] -> [1, 8, 8, 64], 3,072 int8 weights and
    64 int32 biases (3,328 B)."""
    attribute = make_attribute(Op.CONV2D, pad=(0, 0, 0, 0), stride=(4, 4), dilation=(1, 1))
    return KernelStep(Op.CONV2D, attribute, (), (TensorType((1, 32, 32, 3), DType.INT8),
                                                 TensorType((64, 4, 4, 3), DType.INT8),
                                                 TensorType((64,), DType.INT32)),
                      (TensorType((1, 8, 8, 64), DType.INT32),), out_region=out_region)


def test_a_stride_beyond_the_array_runs_one_output_position_at_a_time():
    """Vela 5.2 compiles the patch embedding as 64 operations each fetching the weight stream: 4,800
    cycles each on ethos-u55-256 (flash), 2,515 on ethos-u85-256; ours 171 + 3,328 / 0.741 and
    523 + 3,328 / 1.767 per position. Off-chip, every position but the one the plan loads reads
    the stream again."""
    u55, u85, edge = load_hw_config("ethos-u55-256"), load_hw_config("ethos-u85-256"), load_hw_config("edge")
    step = _patch_embedding()
    assert mac_array.decomposed_positions(u55, step) == 64
    assert mac_array.decomposed_cycles(u55, step) == math.ceil(64 * (171 + 3328 / 0.741)) == 298_383
    assert mac_array.decomposed_cycles(u85, step) == math.ceil(64 * (523 + 3328 / 1.767)) == 154_011
    assert mac_array.body_cycles(u55, [step]) >= 298_383
    assert mac_array.decomposed_read_bytes(u55, step) == 63 * 3328
    half = _patch_embedding(((0, 1), (0, 4), (0, 8), (0, 64)))            # a tile of half the rows
    assert mac_array.decomposed_positions(u55, half) == 32
    assert mac_array.decomposed_read_bytes(u55, half) == math.ceil(32 * 3328 * 63 / 64)
    assert mac_array.decomposed_positions(edge, step) == 0 and mac_array.decomposed_read_bytes(edge, step) == 0
    three = dataclasses.replace(step, attribute=make_attribute(Op.CONV2D, pad=(0, 0, 0, 0), stride=(3, 3),
                                                               dilation=(1, 1)))
    assert mac_array.decomposed_positions(u55, three) == 0


def _conv_of(channels: int, dtype: DType) -> KernelStep:
    """CONV2D [1, 8, 8, channels] * [16, 3, 3, channels], 'same'."""
    types = (TensorType((1, 8, 8, channels), dtype), TensorType((16, 3, 3, channels), DType.INT8),
             TensorType((16,), DType.INT32), TensorType((1,), dtype), TensorType((1,), DType.INT8))
    attr = make_attribute(Op.CONV2D, pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1), acc_type=DType.INT32)
    return KernelStep(Op.CONV2D, attr, (), types, (TensorType((1, 8, 8, 16), DType.INT32),))


@pytest.mark.parametrize("channels, dtype, k", [
    (16, DType.INT8, 12 * 16),    # 8-bit groups of 32 half empty: part-kernel first (4 elements over 8 channels)
    (16, DType.INT16, 9 * 16),    # a 16-bit IFM block holds 16 channels: depth first, full
    (32, DType.INT16, 9 * 32),
    (40, DType.INT16, 9 * 48),
    (64, DType.INT8, 9 * 64),
])
def test_a_16_bit_input_is_read_in_groups_of_16_channels_on_the_u55(channels, dtype, k):
    """Vela's U55 takes 16-bit IFM blocks of at most 16 channels at an 8-bit block's cost of 32
    (regor ethos_u55.cpp FindBlockConfig; ethos_u55_performance.cpp EstimateMacCyclesPerBlock):
    a ResNet-8 16x8's 16-channel 3x3 convolutions cost Vela 20,548 cycles, not twice an 8-bit one's."""
    hw = load_hw_config("ethos-u55-256")
    assert mac_array.ifm_depth_granule(hw, dtype) == (16 if dtype is DType.INT16 else 32)
    assert mac_array.cycle_dims(hw, _conv_of(channels, dtype))[2] == k


def _multiplier_depthwise(dtype: DType, channels: int = 16, multiplier: int = 2,
                          region: tuple[tuple[int, int], ...] | None = None) -> KernelStep:
    """A 3x3 DEPTHWISE_CONV2D of depth multiplier ``multiplier`` over 24x24x``channels``."""
    attribute = make_attribute(Op.DEPTHWISE_CONV2D, pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1))
    return KernelStep(Op.DEPTHWISE_CONV2D, attribute, (),
                      (TensorType((1, 24, 24, channels), dtype), TensorType((3, 3, channels, multiplier), DType.INT8)),
                      (TensorType((1, 24, 24, channels * multiplier), DType.INT32),), out_region=region)


def test_the_split_of_a_depth_multiplier_takes_seven_transposes_of_the_whole_map():
    """Vela's DecomposeTranspose of [M, H, W, C] -> [H, W, C, M]: seven 3-D transposes, the
    fourth and the seventh written with M innermost."""
    assert mac_array.split_transpose_shapes(2, 24, 24, 16) == (
        (24, 2, 384), (2, 24, 384), (48, 16, 24), (24, 384, 2), (576, 2, 16), (24, 24, 32), (576, 16, 2))


def test_a_depth_multiplier_on_the_u85_adds_its_transposes_micro_block_by_micro_block():
    """int8: 1x2x16 micro-blocks, 16 cycles each (Vela 204,214 for the seven); int16: 1x4x8, 32 each
    (Vela 285,030)."""
    u85 = load_hw_config("ethos-u85-256")
    blocks8 = 576 + 576 + 768 + 4608 + 576 + 576 + 4608
    blocks16 = 1152 + 576 + 576 + 2304 + 1152 + 576 + 2304
    assert mac_array.depth_multiplier_split_cycles(u85, _multiplier_depthwise(DType.INT8)) == blocks8 * 16 == 196_608
    assert mac_array.depth_multiplier_split_cycles(u85, _multiplier_depthwise(DType.INT16)) == blocks16 * 32 == 276_480
    plain = _multiplier_depthwise(DType.INT8)
    assert mac_array.step_cycles(u85, plain) == max(
        mac_array.mac_array_cycles(*mac_array.cycle_dims(u85, plain), 32, 8, 1, 2),
        mac_array.depthwise_floor_cycles(u85, plain)) + 196_608
    # a tile pays its share by output elements
    half = _multiplier_depthwise(DType.INT8, region=((0, 1), (0, 12), (0, 24), (0, 32)))
    assert mac_array.depth_multiplier_split_cycles(u85, half) == 98_304


def test_a_depth_multiplier_on_the_u55_adds_its_transposes_at_their_sram_rate():
    """0.375 cycles an int8 element, 0.5 an int16 one, seven times the 18,432-element map."""
    u55 = load_hw_config("ethos-u55-256")
    assert mac_array.depth_multiplier_split_cycles(u55, _multiplier_depthwise(DType.INT8)) == 7 * 6_912
    assert mac_array.depth_multiplier_split_cycles(u55, _multiplier_depthwise(DType.INT16)) == 7 * 9_216


def test_no_split_without_a_multiplier_over_several_channels_or_off_the_ethos_presets():
    """Multiplier 1, or one input channel (Vela makes that a CONV2D), or a preset that does not split."""
    u85 = load_hw_config("ethos-u85-256")
    assert mac_array.depth_multiplier_split_cycles(u85, _multiplier_depthwise(DType.INT8, multiplier=1)) == 0
    assert mac_array.depth_multiplier_split_cycles(u85, _multiplier_depthwise(DType.INT8, channels=1)) == 0
    assert mac_array.depth_multiplier_split_cycles(load_hw_config("edge"), _multiplier_depthwise(DType.INT8)) == 0
