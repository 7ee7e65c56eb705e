"""IFM fetches per OFM block (npu_sim/hw/ifm_fetch.py): Vela's MeasureElementAccess on our OFM blocks."""

from __future__ import annotations

from npu_sim.hw.config import load_hw_config
from npu_sim.hw.ifm_fetch import block_shape, fetch_burst_bytes, ifm_fetch_elements
from npu_sim.program import KernelStep
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute


def _conv(ifm, weights, ofm, stride=1, pad=1, dtype=DType.INT8, region=None):
    attribute = make_attribute(Op.CONV2D, pad=(pad,) * 4, stride=(stride, stride), dilation=(1, 1),
                               local_bound=False, acc_type=DType.INT32)
    types = (TensorType(ifm, dtype), TensorType(weights, DType.INT8), TensorType((ofm[-1],), DType.INT32))
    return KernelStep(Op.CONV2D, attribute, ("x", "w", "b"), types, (TensorType(ofm, DType.INT32),),
                      out_region=region)


def test_the_block_needing_fewest_inputs_per_position_is_chosen():
    # 42 positions of a 3x3 stride-1 convolution on a 16x16 map: 6 x 7 needs an 8 x 9 window
    # (72 inputs for 42 positions, 1.71 each; 1 x 16 would need 3 x 18 for 16)
    assert block_shape(42, 16, 16, (3, 3, 1, 1, 1, 1), 16, 16) == (6, 7, 8, 9)
    # a 1x1 stride-1 kernel needs no halo: every shape ties, the widest within the tile wins
    assert block_shape(42, 16, 16, (1, 1, 1, 1, 1, 1), 16, 16)[:2] == (2, 16)


def test_a_convolution_fetches_its_whole_input_depth_per_block_and_depth_block():
    """ethos-u85-256: blocks of 2,048 results over at most 48 channels (42 positions). A 3x3
    convolution of 16x16x8 into 64 channels: 3 x 3 blocks of 6 x 7 positions in H x W, 2 depth
    blocks, each fetching an 8 x 9 window of all 8 input channels: 18 x 72 x 8 = 10,368 elements."""
    hw = load_hw_config("ethos-u85-256")
    step = _conv((1, 16, 16, 8), (64, 3, 3, 8), (1, 16, 16, 64))
    assert ifm_fetch_elements(hw, step) == 10368
    # a tile of 8 rows and 32 channels, a quarter of the output, takes a quarter of the fetches
    tile = _conv((1, 16, 16, 8), (64, 3, 3, 8), (1, 16, 16, 64), region=((0, 1), (8, 16), (0, 16), (32, 64)))
    assert ifm_fetch_elements(hw, tile) == 10368 // 4
    # a small map is one block (its 16 positions x 32 channels fit 2,048 results): read once
    small = _conv((1, 4, 4, 8), (64, 3, 3, 8), (1, 4, 4, 64))
    assert ifm_fetch_elements(hw, small) == 4 * 4 * 8


def test_depthwise_and_pooling_fetch_per_block_in_h_and_w_only():
    hw = load_hw_config("ethos-u85-256")
    attribute = make_attribute(Op.MAX_POOL2D, kernel=(3, 3), stride=(2, 2), pad=(0, 1, 0, 1),
                               nan_mode=make_attribute(Op.MAX_POOL2D).nan_mode)
    t = TensorType((1, 112, 112, 64), DType.INT8)
    pool = KernelStep(Op.MAX_POOL2D, attribute, ("x",), (t,), (TensorType((1, 56, 56, 64), DType.INT8),))
    # blocks of 42 positions (2,048 results over 48 channels): 6 x 7, a 13 x 15 window at stride 2;
    # 10 x 8 blocks over the 56 x 56 output, each fetching all 64 channels, no depth blocks
    assert block_shape(42, 56, 56, (3, 3, 2, 2, 1, 1), 112, 112) == (6, 7, 13, 15)
    assert ifm_fetch_elements(hw, pool) == 10 * 8 * 13 * 15 * 64
    assert ifm_fetch_elements(hw, KernelStep(Op.ADD, make_attribute(Op.ADD), ("x", "y"), (t, t), (t,))) == 0


def test_thin_pixels_cost_a_burst_per_access_of_sixteen_elements():
    """Vela: DS-CNN int16's 1-channel input is read in 32-byte accesses (16 int16 elements), each a
    128-byte burst on the U85's DRAM: four times its bytes. An int8 3-channel image: 16-byte
    accesses, eight times. A deep map: whole bursts."""
    hw = load_hw_config("ethos-u85-256")
    int16 = _conv((1, 49, 10, 1), (64, 10, 4, 1), (1, 25, 5, 64), stride=2, dtype=DType.INT16)
    assert fetch_burst_bytes(hw, int16, 10944) == 43776
    rgb = _conv((1, 96, 96, 3), (16, 3, 3, 3), (1, 48, 48, 16), stride=2)
    assert fetch_burst_bytes(hw, rgb, 1600) == 12800
    deep = _conv((1, 8, 8, 64), (16, 1, 1, 64), (1, 8, 8, 16), pad=0)
    assert fetch_burst_bytes(hw, deep, 1000) == 1024
