"""The vector unit's cost: lanes per dtype, the work of reductions and pooling."""

from __future__ import annotations

import dataclasses
import math

import pytest

from npu_sim.hw.compute_units import vector
from npu_sim.hw.config import ConfigError, deep_merge, hw_config_from_dict, load_hw_config
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


def _step(op: Op, shape: tuple[int, ...], in_dtype: DType, out_dtype: DType, operands: int = 1) -> KernelStep:
    return KernelStep(op, make_attribute(op), (), tuple([TensorType(shape, in_dtype)] * operands),
                      (TensorType(shape, out_dtype),))


def test_elementwise_kinds_follow_the_output_units_table():
    i8, i32 = DType.INT8, DType.INT32
    kinds = vector.elementwise_kinds
    assert kinds(_step(Op.RESCALE, (4,), i8, i32)) == ("add", "binary_int32")   # widen, then scale
    assert kinds(_step(Op.RESCALE, (4,), i32, i8)) == ("binary_int32",)         # multiply and shift
    assert kinds(_step(Op.ADD, (4,), i32, i32, 2)) == ("binary_int32",)
    assert kinds(_step(Op.NEGATE, (4,), i32, i32)) == ("unary_int32",)
    assert kinds(_step(Op.MUL, (4,), i8, i32, 2)) == ("mul_int32",)
    assert kinds(_step(Op.MUL, (4,), i8, i8, 2)) == ("mul",)
    assert kinds(_step(Op.SUB, (4,), i8, i8, 2)) == ("add",)
    assert kinds(_step(Op.CLAMP, (4,), i8, i8)) == ("other",)
    assert kinds(_step(Op.REDUCE_SUM, (4,), i32, i32)) == ()


def test_ethos_u_elementwise_cycles_are_velas():
    """Vela 5.2's per-layer estimates of MobileNetV2 0.35's first residual block on the
    ethos-u55-256 and -u65-256 configs (a [1, 24, 24, 8] map, 16-channel bricks): an int8 ->
    int32 RESCALE is Vela's widening ADD (6,912 cycles) and MUL (10,368), the int32 RESCALEs
    and the int32 ADD 10,368 each."""
    for preset in ("ethos-u55-256", "ethos-u65-256"):
        hw = load_hw_config(preset)
        shape = (1, 24, 24, 8)
        assert vector.step_cycles(hw, _step(Op.RESCALE, shape, DType.INT8, DType.INT32)) == 6912 + 10368
        assert vector.step_cycles(hw, _step(Op.RESCALE, shape, DType.INT32, DType.INT32)) == 10368
        assert vector.step_cycles(hw, _step(Op.ADD, shape, DType.INT32, DType.INT32, 2)) == 10368
    edge = load_hw_config("edge")   # no table: the lanes (int32: 8 per cycle), no brick rounding
    assert vector.step_cycles(edge, _step(Op.ADD, (1, 24, 24, 8), DType.INT32, DType.INT32, 2)) == 24 * 24 * 8 // 8


def test_an_unknown_elementwise_kind_or_epilogue_operator_is_refused():
    edge = load_hw_config("edge").model_dump(mode="json")
    bad_kind = deep_merge(edge, {"vector": {"cycles_per_element": {"sqrt": 1.0}}})
    with pytest.raises(ConfigError, match=r"cycles_per_element: unknown kind\(s\) sqrt"):
        hw_config_from_dict(bad_kind, "mine.yaml")
    bad_epilogue = deep_merge(edge, {"mac_array": {"epilogue_ops": ["RESCALE", "MUL"]}})
    with pytest.raises(ConfigError, match="epilogue_ops: MUL cannot be fused"):
        hw_config_from_dict(bad_epilogue, "mine.yaml")


def test_ethos_u85_rescales_run_micro_block_by_micro_block():
    """Vela 5.2 times a U85 RESCALE on its pooling path: 4 x ifmBits / 2 cycles per 1x2x16
    micro-block. An int32 [1, 256] (one row: half of each micro-block idle) takes 1,024 cycles
    (Vela: 1,424 with its first and last block latencies), [1, 4, 4, 256] 8,192 (Vela: 11,584);
    an int8 input a quarter of that."""
    hw = load_hw_config("ethos-u85-256")
    assert vector.step_cycles(hw, _step(Op.RESCALE, (1, 256), DType.INT32, DType.INT32)) == 1024
    assert vector.step_cycles(hw, _step(Op.RESCALE, (1, 4, 4, 256), DType.INT32, DType.INT32)) == 8192
    assert vector.step_cycles(hw, _step(Op.RESCALE, (1, 4, 4, 256), DType.INT8, DType.INT32)) == 2048
    assert vector.rescale_cycles(load_hw_config("ethos-u55-256"), _step(Op.RESCALE, (1, 256), DType.INT32,
                                                                         DType.INT32)) is None


def _transpose(out_shape: tuple[int, ...], perm: tuple[int, ...], dtype: DType) -> KernelStep:
    in_shape = tuple(out_shape[perm.index(k)] for k in range(len(perm)))
    return KernelStep(Op.TRANSPOSE, make_attribute(Op.TRANSPOSE, perms=list(perm)), (),
                      (TensorType(in_shape, dtype),), (TensorType(out_shape, dtype),))


def test_ethos_u85_transposes_pay_per_output_micro_block():
    """Vela 5.2 runs a U85 TRANSPOSE as a 1x1 pooling written transposed: 4 x ifmBits / 2 cycles
    per 1x2x16 output micro-block. A keyword transformer's LayerNorm writes [1, 49, 64, 1]:
    49 x 32 x 1 blocks, 25,088 cycles (Vela's MAC cycles 25,104), where its elementwise rate over
    16-channel bricks gave half; [1, 2, 49, 32] from attention: 2 x 25 x 2 blocks, 1,600 (Vela
    1,664); an int16 input in 1x4x8 micro-blocks of 32 cycles, 2 x 13 x 4 of them (Vela's int16
    transposes of a split depthwise convolution: 1,152 such blocks written [24, 2, 384], 37,512
    cycles). Leading dimensions fold into H. The generic presets keep the elementwise rates."""
    u85, edge = load_hw_config("ethos-u85-256"), load_hw_config("edge")
    layer_norm = _transpose((1, 49, 64, 1), (0, 3, 1, 2), DType.INT8)
    assert vector.step_cycles(u85, layer_norm) == 25_088
    assert vector.step_cycles(u85, _transpose((1, 2, 49, 32), (0, 2, 1, 3), DType.INT8)) == 1_600
    assert vector.step_cycles(u85, _transpose((1, 2, 49, 32), (0, 2, 1, 3), DType.INT16)) == 3_328
    assert vector.step_cycles(u85, _transpose((3, 2, 49, 32), (1, 0, 2, 3), DType.INT8)) == 4_800
    assert vector.transpose_cycles(edge, layer_norm) is None


def _reduce(in_shape: tuple[int, ...], axis: int, dtype: DType) -> KernelStep:
    out = tuple(1 if k == axis else n for k, n in enumerate(in_shape))
    return KernelStep(Op.REDUCE_SUM, make_attribute(Op.REDUCE_SUM, axis=axis), (), (TensorType(in_shape, dtype),),
                      (TensorType(out, dtype),))


def test_ethos_u85_sums_over_h_or_w_after_a_transpose_that_refetches_the_input_depth():
    """Vela 5.2 lowers MobileNetV2's global pool, sums over H then W of [1, 3, 3, 1280], to
    transposes of [1, 3, 3840] and [1, 3, 1280] written in 16-byte blocks, each fetching the
    whole input depth at 20.48 B/cycle: 240 x 3 x 3,840 int8 bytes = 135,000 cycles and
    320 x 3 x 1,280 x 4 int32 bytes = 240,000 cycles, Vela's figures. The sum then writes each
    of its 1,280 int32 results as a 16-channel brick at 0.25 cycles an element (5,120 cycles,
    more than its lanes' 3,840 / 8). A sum over the innermost axis and the generic presets need
    no transpose."""
    u85, edge = load_hw_config("ethos-u85-256"), load_hw_config("edge")
    over_h = _reduce((1, 3, 3, 1280), 1, DType.INT32)
    assert vector.reduction_transpose_cycles(u85, over_h, read_bits=8) == 135_000
    over_w = _reduce((1, 1, 3, 1280), 2, DType.INT32)
    assert vector.reduction_transpose_cycles(u85, over_w) == 240_000
    assert vector.step_cycles(u85, over_w) == 240_000 + 1280 * 16 // 4
    assert vector.reduction_transpose_cycles(u85, _reduce((1, 3, 3, 1280), 3, DType.INT32)) == 0
    assert vector.reduction_transpose_cycles(edge, over_w) == 0


def test_an_int16_transpose_writes_blocks_of_as_many_positions_as_int8():
    """Vela 5.2's int16 MobileNetV2 (Keras 16x8): the sum over H of [1, 3, 3, 1280] int16 reads
    5,529,600 B, 240 blocks of 16 positions x 3 x 3,840 x 2 B (vector.transpose_block_positions:
    {int16: 16}, not 16 bytes' 8): 270,000 cycles at 20.48 B/cycle, Vela's figure; int8 and int32
    keep their 16-byte blocks."""
    u85 = load_hw_config("ethos-u85-256")
    over_h = _reduce((1, 3, 3, 1280), 1, DType.INT32)
    assert vector.reduction_transpose_cycles(u85, over_h, read_bits=16) == 270_000
    assert vector.transpose_fetched_elements(u85, over_h, read_bits=16) == 240 * 3 * 3840
    assert vector.transpose_fetched_elements(u85, over_h, read_bits=8) == 240 * 3 * 3840
    assert vector.transpose_fetched_elements(u85, over_h) == 960 * 3 * 3840


def test_a_tile_of_the_sum_pays_its_share_of_the_operations_transpose():
    """The transpose's blocks are the operation's: two channel halves of the sum over W pay
    half of the whole each."""
    u85 = load_hw_config("ethos-u85-256")
    whole = _reduce((1, 1, 3, 1280), 2, DType.INT32)
    half = KernelStep(whole.op, whole.attribute, (), whole.input_types, whole.output_types,
                      out_region=((0, 1), (0, 1), (0, 1), (0, 640)))
    assert vector.reduction_transpose_cycles(u85, half) == 120_000


def test_a_widening_rescale_folded_into_its_sum_costs_a_zero_point_pass():
    """A RESCALE int8 -> int32 feeding a REDUCE_SUM in one command: the transpose reads the int8
    values (a quarter of the bytes), the RESCALE costs nothing of its own and the zero point is
    subtracted from the 3,840 results of the [1, 1, 3, 1280] output (binary_int32, 0.5 cycles
    an element), after the sum wrote them as bricks (3,840 x 16 x 0.25)."""
    u85 = load_hw_config("ethos-u85-256")
    rescale = KernelStep(Op.RESCALE, make_attribute(Op.RESCALE), (), (TensorType((1, 3, 3, 1280), DType.INT8),),
                         (TensorType((1, 3, 3, 1280), DType.INT32),))
    over_h = _reduce((1, 3, 3, 1280), 1, DType.INT32)
    fused = KernelStep(over_h.op, over_h.attribute, (0,), over_h.input_types, over_h.output_types)
    assert vector.folded_prologue(u85, [rescale, fused], 1) is rescale
    zero_point = 3 * 1280 // 2
    assert vector.UNIT.body_cycles(u85, [rescale, fused]) == 135_000 + 3840 * 16 // 4 + zero_point
    assert vector.folded_prologue(load_hw_config("edge"), [rescale, fused], 1) is None


def test_the_u55_sums_over_h_after_a_transpose_through_its_sram():
    """On the U55 the transpose reads and writes its 8 B/cycle SRAM (4 B/cycle of reads, no
    per-block refetch): [1, 1, 3, 1280] int32 over W, 15,360 B in 3,840 cycles (Vela's figure);
    the sum writes 1,280 int32 results as bricks at 0.625 cycles an element (12,800)."""
    u55 = load_hw_config("ethos-u55-256")
    over_w = _reduce((1, 1, 3, 1280), 2, DType.INT32)
    assert vector.reduction_transpose_cycles(u55, over_w) == 3840
    assert vector.step_cycles(u55, over_w) == 3840 + 12_800


def _mul_chain(shape=(1, 32, 32, 16)) -> list[KernelStep]:
    """TFLite's quantized MUL in TOSA: each int8 input widened, the int32 product, rescaled back to
    int8, clamped (a fused activation); step k's result read by the next steps as ``k``."""
    i8, i32 = TensorType(shape, DType.INT8), TensorType(shape, DType.INT32)
    widen = [KernelStep(Op.RESCALE, make_attribute(Op.RESCALE), (), (i8,), (i32,)) for _ in range(2)]
    mul = KernelStep(Op.MUL, make_attribute(Op.MUL), (0, 1), (i32, i32), (i32,))
    back = KernelStep(Op.RESCALE, make_attribute(Op.RESCALE), (2,), (i32,), (i8,))
    clamp = KernelStep(Op.CLAMP, make_attribute(Op.CLAMP), (3,), (i8,), (i8,))
    return [*widen, mul, back, clamp]


def test_a_mul_whose_rescales_the_output_unit_applies_runs_at_its_int8_rate():
    """Vela's swish multiply on the ethos-u55-256 (EfficientNet-style, [1, 32, 32, 16]): 6,144
    cycles, its RESCALEs folded into it (0.375 cycles an int8 product). Without scaled_ops every
    step costs what it costs alone."""
    u55 = load_hw_config("ethos-u55-256")
    steps = _mul_chain()
    folded, scaled = vector.rescale_folds(u55, steps)
    assert folded == {0, 1, 3, 4}
    assert [t.dtype for t in (*scaled[2].input_types, *scaled[2].output_types)] == [DType.INT8] * 3
    assert vector.UNIT.body_cycles(u55, steps) == 6144
    plain = u55.model_copy(update={"vector": u55.vector.model_copy(update={"scaled_ops": []})})
    assert vector.rescale_folds(plain, steps) == (set(), {})
    assert vector.UNIT.body_cycles(plain, steps) == sum(vector.step_cycles(plain, s) for s in steps)


def test_a_rescale_another_step_also_reads_is_not_folded():
    steps = _mul_chain()
    steps.append(KernelStep(Op.ADD, make_attribute(Op.ADD), (0, 2), steps[2].input_types, steps[2].output_types))
    folded, _ = vector.rescale_folds(load_hw_config("ethos-u55-256"), steps)
    assert folded == {1}   # step 0 has two readers, step 2's result too (so no output rescale)


def test_an_int32_maximum_over_channels_costs_per_element_read_on_the_u85():
    """Vela's U85 REDUCE_MAX of a softmax's [1, 2, 49, 49] int32 rows: 43,576 cycles, 9 an element."""
    step = _reduce((1, 2, 49, 49), 3, DType.INT32)
    step = KernelStep(Op.REDUCE_MAX, make_attribute(Op.REDUCE_MAX, axis=3), (), step.input_types, step.output_types)
    assert vector.step_cycles(load_hw_config("ethos-u85-256"), step) == 2 * 49 * 49 * 9
    assert vector.step_cycles(make_hw(), step) == -(-2 * 49 * 49 // 8)   # the int32 lanes


def _rescale(channels: int, multipliers: int) -> KernelStep:
    shape = (1, 32, 32, channels)
    return KernelStep(Op.RESCALE, make_attribute(Op.RESCALE, per_channel=multipliers > 1), (),
                      (TensorType(shape, DType.INT32), TensorType((multipliers,), DType.INT32),
                       TensorType((multipliers,), DType.INT8), TensorType((1,), DType.INT32),
                       TensorType((1,), DType.INT8)),
                      (TensorType(shape, DType.INT8),))


def test_a_per_channel_rescale_reads_its_multipliers_per_element_on_the_u55():
    """Vela 5.2 runs a U-Net's per-channel RESCALE (after its TRANSPOSE_CONV2D, TOSA input) on the
    U55 as a MUL by the multipliers in flash: 8 B read per output element, 131,072 for 32x32x16.
    A per-tensor RESCALE, and the U85 (which scales by channel), read none."""
    u55, u85 = load_hw_config("ethos-u55-256"), load_hw_config("ethos-u85-256")
    assert vector.per_channel_rescale_bytes(u55, _rescale(16, 16)) == 131072
    assert vector.per_channel_rescale_bytes(u55, _rescale(16, 1)) == 0
    assert vector.per_channel_rescale_bytes(u85, _rescale(16, 16)) == 0


def test_the_u_net_reads_its_rescale_multipliers_from_the_flash_while_it_computes():
    from pathlib import Path

    import npu_sim
    from benchmarks.graphs import random_inputs

    graph = npu_sim.load_graph(Path(__file__).resolve().parents[3] / "examples" / "unet_int8.tosa")
    summary = npu_sim.simulate(graph, "ethos-u55-256", random_inputs(graph, seed=0)).summary
    rescale = next(op for op in summary["ops"] if op["name"].startswith("RESCALE(layer_49)"))
    assert rescale["ddr_read_bytes"] == 32 * 32 * 16 * 8
    assert rescale["cycles"] >= 131072   # (the flash gives a byte a cycle)


def test_a_tflite_softmax_on_the_u55_reads_the_flash_as_velas_does():
    """Vela's softmax on the U55 adds two int32 tensors of its input's shape, one read from the
    flash: 19,208 B for the keyword transformer's 2 x 49 x 49 (its debug database). Its time is the
    source_softmax rate already; the bytes count (vector.source_softmax_read_bytes)."""
    from pathlib import Path

    import npu_sim
    from benchmarks.graphs import random_inputs

    graph = npu_sim.load_graph(Path(__file__).resolve().parents[3] / "examples" / "kws_transformer_int8.tflite")
    for preset, expected in (("ethos-u55-256", 2 * 49 * 49 * 4), ("ethos-u85-256", 0)):
        summary = npu_sim.simulate(graph, preset, random_inputs(graph, seed=0)).summary
        softmaxes = [op for op in summary["ops"] if "REDUCE_MAX" in op["op"] and "TABLE" in op["op"]]
        assert len(softmaxes) == 2 and all(op["ddr_read_bytes"] == expected for op in softmaxes), preset


def test_depth_reshape_factors_as_velas_reshape_to_increase_depth():
    """regor's test_operation_utils.cpp cases: [1, 512, 4, 1] -> [16, 8, 16], [256, 2] -> [8, 4, 16],
    [3, 7, 11] -> [11, 1, 21]; a prime count stays one deep; MobileNetV3's 96x96x3 input -> [72, 24, 16]."""
    assert vector.depth_reshaped(512 * 4, 16) == (16, 8, 16)
    assert vector.depth_reshaped(256 * 2, 16) == (8, 4, 16)
    assert vector.depth_reshaped(3 * 7 * 11, 16) == (11, 1, 21)
    assert vector.depth_reshaped(97, 16) == (1, 1, 97)
    assert vector.depth_reshaped(96 * 96 * 3, 16) == (72, 24, 16)
    assert vector.depth_reshaped(1, 16) == (1, 1, 1)


def _scalar_mul(shape: tuple[int, ...], other: tuple[int, ...] = (1, 1, 1, 1)) -> KernelStep:
    return KernelStep(Op.MUL, make_attribute(Op.MUL), (), (TensorType(shape, DType.INT8), TensorType(other, DType.INT8),
                                                           TensorType((1,), DType.INT8)),
                      (TensorType(shape, DType.INT8),))


def test_a_shallow_elementwise_operation_runs_reshaped_deeper_on_ethos_u():
    """Vela 5.2 on a Keras MobileNetV3-Small at 96x96 (.tflite, TOSA alike): its input rescaling MUL by a
    scalar runs on [72, 24, 16] (ethos-u55-256: 10,368 cycles, 0.375 per element; ethos-u85-256:
    6,912, 0.25), not on 96 x 96 bricks 16 deep of which 3 hold data (5.3 times that)."""
    u55, u85, edge = load_hw_config("ethos-u55-256"), load_hw_config("ethos-u85-256"), load_hw_config("edge")
    image = (1, 96, 96, 3)
    assert vector.output_unit_shape(u55, _scalar_mul(image)) == (72, 24, 16)
    assert vector.step_cycles(u55, _scalar_mul(image)) == 10368
    assert vector.step_cycles(u85, _scalar_mul(image)) == 6912
    assert vector.output_unit_shape(edge, _scalar_mul(image)) == image       # the generic presets: as shaped
    assert vector.output_unit_shape(u55, _scalar_mul(image, image)) == (72, 24, 16)   # same-shape operands too


def test_broadcasts_per_channel_scales_deep_or_small_outputs_keep_their_shape():
    u85 = load_hw_config("ethos-u85-256")
    image = (1, 96, 96, 3)
    assert vector.output_unit_shape(u85, _scalar_mul(image, (1, 1, 1, 3))) == image     # a broadcast operand
    assert vector.output_unit_shape(u85, _scalar_mul((1, 96, 96, 8))) == (1, 96, 96, 8)  # deep enough
    assert vector.output_unit_shape(u85, _scalar_mul((1, 2, 2, 4))) == (1, 2, 2, 4)      # 16 elements: too small
    assert vector.output_unit_shape(u85, _rescale(4, 4)) == (1, 32, 32, 4)             # per-channel multipliers
    assert vector.output_unit_shape(u85, _rescale(4, 1)) == (16, 16, 16)              # one multiplier
    pool = KernelStep(Op.AVG_POOL2D, make_attribute(Op.AVG_POOL2D, kernel=(1, 1), stride=(1, 1), pad=(0, 0, 0, 0)),
                      (), (TensorType(image, DType.INT8),), (TensorType(image, DType.INT8),))
    assert vector.output_unit_shape(u85, pool) == image                                 # not elementwise


def test_the_operation_decides_and_a_tile_runs_its_part_reshaped():
    """Vela reshapes an operation by its whole output; a tile of a reshaped operation runs its own
    elements reshaped, a 4-deep tile of an 8-deep operation keeps its shape (16-deep bricks)."""
    u55 = load_hw_config("ethos-u55-256")
    half = dataclasses.replace(_scalar_mul((1, 96, 96, 3)), out_region=((0, 1), (0, 48), (0, 96), (0, 3)))
    assert vector.output_unit_shape(u55, half) == (36, 24, 16)
    split = dataclasses.replace(_scalar_mul((1, 24, 24, 8)), out_region=((0, 1), (0, 24), (0, 24), (4, 8)))
    assert vector.output_unit_shape(u55, split) == (1, 24, 24, 4)


def _rescale_by(shape: tuple[int, ...], multiplier: DType) -> KernelStep:
    return KernelStep(Op.RESCALE, make_attribute(Op.RESCALE, scale32=multiplier is DType.INT32), (),
                      (TensorType(shape, DType.INT32), TensorType((1,), multiplier), TensorType((1,), DType.INT8),
                       TensorType((1,), DType.INT32), TensorType((1,), DType.INT32)),
                      (TensorType(shape, DType.INT32),))


def test_a_u55_rescale_by_a_32_bit_multiplier_fetches_it_from_the_flash():
    """Vela 5.2 on a TOSA LSTM (ethos-u55-256): a [1, 16] int32 RESCALE runs as a MUL by the int32
    multiplier in flash, 128 cycles (64 B at half a burst's efficiency, 1 B/cycle) where its work
    is 18; a [1, 64] one takes its 72 of work (the fetch, 64 cycles, hides). A 16-bit multiplier is
    a register; the U85 holds either."""
    u55, u85 = load_hw_config("ethos-u55-256"), load_hw_config("ethos-u85-256")
    assert vector.multiplier_fetch_cycles(u55, _rescale_by((1, 16), DType.INT32)) == 128
    assert vector.step_cycles(u55, _rescale_by((1, 16), DType.INT32)) == 128
    assert vector.multiplier_fetch_cycles(u55, _rescale_by((1, 64), DType.INT32)) == 64
    assert vector.step_cycles(u55, _rescale_by((1, 64), DType.INT32)) == 72
    assert vector.multiplier_fetch_cycles(u55, _rescale_by((1, 16), DType.INT16)) == 0
    assert vector.multiplier_fetch_cycles(u85, _rescale_by((1, 16), DType.INT32)) == 0


def test_a_channel_concat_on_the_ethos_presets_writes_each_input_in_whole_bricks():
    """Vela's one MemoryCopy per input (vector.concat_copy_per_input): a 96x96x1 input tripled writes
    three times 9,216 x 16 brick elements, 0.25 cycles each on the U55 (Vela 36,961 per copy), not
    the 3-channel output's one brick; aligned inputs write the output's bricks, and the generic
    presets keep those."""
    one = TensorType((1, 96, 96, 1), DType.INT8)
    concat = KernelStep(Op.CONCAT, make_attribute(Op.CONCAT, axis=3), (), (one, one, one),
                        (TensorType((1, 96, 96, 3), DType.INT8),))
    u55 = load_hw_config("ethos-u55-256")
    assert vector.concat_brick_elements(u55, concat) == 3 * 9_216 * 16
    assert vector.step_cycles(u55, concat) == 110_592
    wide = TensorType((1, 8, 8, 16), DType.INT8)
    aligned = KernelStep(Op.CONCAT, make_attribute(Op.CONCAT, axis=3), (), (wide, wide),
                         (TensorType((1, 8, 8, 32), DType.INT8),))
    assert vector.concat_brick_elements(u55, aligned) == vector.brick_elements(u55, aligned) == 2_048
    assert vector.concat_brick_elements(load_hw_config("edge"), concat) == vector.brick_elements(
        load_hw_config("edge"), concat)


def test_an_int16_softmax_costs_its_own_rate():
    """A 16x8 model's int16 SOFTMAX (its first step reads int16) is timed at
    ``source_softmax_int16``: 7.55 cycles an element on the U85-256 against 2.94 for an int8 one
    (Vela 5.2: a Keras encoder's [1, 2, 32, 32] int16 softmax 15,566 cycles); 17.2 on the U55-256.
    A preset without that rate keeps its int8 one."""
    def steps(dtype):
        shape = (1, 2, 32, 32)
        widen = KernelStep(Op.RESCALE, make_attribute(Op.RESCALE), (), (TensorType(shape, dtype),),
                           (TensorType(shape, DType.INT32),), origin="model/softmax")
        rest = [KernelStep(op, make_attribute(op, **({"axis": 3} if op is not Op.TABLE else {})), (),
                           (TensorType(shape, DType.INT32),), (TensorType(shape, DType.INT32),), origin="model/softmax")
                for op in (Op.REDUCE_MAX, Op.TABLE, Op.REDUCE_SUM)]
        return [widen, *rest]

    u85, u55 = load_hw_config("ethos-u85-256"), load_hw_config("ethos-u55-256")
    assert vector.source_softmax_cycles(u85, steps(DType.INT16)) == math.ceil(2048 * 7.55)
    assert vector.source_softmax_cycles(u85, steps(DType.INT8)) == math.ceil(2048 * 2.94)
    assert vector.source_softmax_cycles(u55, steps(DType.INT16)) == math.ceil(2048 * 17.2)
    data = u85.model_dump()
    del data["vector"]["cycles_per_element"]["source_softmax_int16"]
    plain = hw_config_from_dict(data, "u85-without-int16-rate")
    assert vector.source_softmax_cycles(plain, steps(DType.INT16)) == math.ceil(2048 * 2.94)
