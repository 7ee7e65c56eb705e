"""Command costs: a unit's body, its setup and the TCM-port bound; units refuse what they cannot run."""

from __future__ import annotations

import pytest

from npu_sim.api import load_hw_config
from npu_sim.errors import ProgramError
from npu_sim.hw.compute_units import vector
from npu_sim.hw.cost import ComputeCycles, command_macs, compute_command_cycles
from npu_sim.program import ComputeCommand, KernelStep, View
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, RoundingMode, make_attribute
from tests.hw.hw_programs import DDR, TCM, add_step, conv_step, i32, make_hw


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


def test_vector_unit_cycles_and_tcm_bound():
    hw = make_hw(tcm={"port_count": 1, "port_bytes_per_cycle": 4})  # 4 B/cycle of TCM
    step = add_step(i32(TCM, 0, 64), i32(TCM, 256, 64), (64,))
    assert vector.step_cycles(hw, step) == 64 // 8  # int32 lanes: 8
    command = ComputeCommand(0, "vector", (step,), (i32(TCM, 512, 64),))
    assert compute_command_cycles(hw, command) == 8 + (3 * 256) // 4  # TCM-bound


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


def test_a_compute_command_reads_its_block_tensors_pointer_tables():
    hw = make_hw(tcm={"port_count": 1, "port_bytes_per_cycle": 4}, block_tensors={"table_read_cycles_per_entry": 2})
    a = View(TCM, 0, (64,), DType.INT32, blocks=(1024, 2048), block_bytes=128)   # 256 B: two blocks
    step = add_step(a, i32(TCM, 256, 64), (64,))
    command = ComputeCommand(0, "vector", (step,), (i32(TCM, 512, 64),))
    assert compute_command_cycles(hw, command) == 8 + 2 * 2 + (3 * 256) // 4


def test_mac_array_operations_pay_the_tcm_latencies_once():
    """``tcm.read_latency_cycles`` on an operation's first tile, ``write_latency_cycles`` on its last
    (Vela's MinimumIfmCycles / MinimumOfmCycles of an operation scheduled First / Last)."""
    plain = make_hw()
    hw = make_hw(tcm={"read_latency_cycles": 32, "write_latency_cycles": 20})
    out = (View(TCM, 0, (1, 4, 4, 16), DType.INT32),)

    def cycles(config, region=None, **fields):
        return compute_command_cycles(config, ComputeCommand(0, "mac_array", (conv_step(region),), out, **fields))

    assert cycles(hw) == cycles(plain) + 32 + 20   # the whole operation in one command
    rows = [((0, 1), (0, 2), (0, 4), (0, 16)), ((0, 1), (2, 4), (0, 4), (0, 16))]
    assert cycles(hw, rows[0]) == cycles(plain, rows[0]) + 32   # first tile
    assert cycles(hw, rows[1]) == cycles(plain, rows[1]) + 20   # last tile
    middle = ((0, 1), (1, 2), (0, 4), (0, 16))
    assert cycles(hw, middle) == cycles(plain, middle)
    # a copy of part of a graph input: read where it lives, with the DDR's latency
    assert cycles(hw, reads_ddr_home=True) == cycles(hw)   # the flag alone changes nothing
    in_place = make_hw(tcm={"read_latency_cycles": 32, "write_latency_cycles": 20,
                            "in_place_ddr_feature_maps": True})
    assert cycles(in_place, reads_ddr_home=True) == cycles(plain) + in_place.ddr.read_latency_cycles + 20 \
        and cycles(in_place) == cycles(hw)
    # an LSTM's state kept in the DDR: read with its read latency, written with its write latency
    assert cycles(hw, reads_ddr_state=True, writes_ddr_state=True) == cycles(hw)   # the flags alone: nothing
    state = make_hw(tcm={"read_latency_cycles": 32, "write_latency_cycles": 20, "ddr_recurrent_state": True})
    assert cycles(state, reads_ddr_state=True) == cycles(plain) + state.ddr.read_latency_cycles + 20
    assert cycles(state, writes_ddr_state=True) == cycles(plain) + 32 + state.ddr.write_latency_cycles
    assert cycles(state, rows[1], reads_ddr_state=True) == cycles(hw, rows[1])   # not its first tile


def test_vector_operations_on_the_pooling_path_pay_the_tcm_latencies():
    latency = {"read_latency_cycles": 32, "write_latency_cycles": 32}
    step = add_step(i32(TCM, 0, 64), i32(TCM, 256, 64), (64,))
    command = ComputeCommand(0, "vector", (step,), (i32(TCM, 512, 64),))
    plain, hw = make_hw(), make_hw(tcm=latency)
    assert compute_command_cycles(hw, command) == compute_command_cycles(plain, command)  # elementwise: none
    pooled = make_hw(tcm=latency, vector={**hw.vector.model_dump(), "block_latency_ops": ["ADD"]})
    assert compute_command_cycles(pooled, command) == compute_command_cycles(plain, command) + 64


def _source_add(origins: tuple[str, str, str, str]) -> ComputeCommand:
    """RESCALE, RESCALE, ADD, RESCALE on [1, 64] (int8 -> int32 -> int8), the steps of the given
    source operators (:attr:`KernelStep.origin`): a TFLite ADD's, or four operators'."""
    shape = (1, 64)
    i8, i32_ = TensorType(shape, DType.INT8), TensorType(shape, DType.INT32)
    scales = (TensorType((1,), DType.INT32), TensorType((1,), DType.INT8))

    def rescale(source, in_t, out_t, origin):
        attribute = make_attribute(Op.RESCALE, scale32=True, rounding_mode=RoundingMode.SINGLE_ROUND,
                                   per_channel=False, input_unsigned=False, output_unsigned=False)
        feeds = tuple(View(TCM, 4096 + 64 * k, (1,), t.dtype) for k, t in enumerate((*scales, in_t, out_t)))
        types = (in_t, *scales, TensorType((1,), in_t.dtype), TensorType((1,), out_t.dtype))
        return KernelStep(Op.RESCALE, attribute, (source, *feeds[:2], feeds[2], feeds[3]), types, (out_t,),
                          origin=origin)

    a, b = View(TCM, 0, shape, DType.INT8), View(TCM, 64, shape, DType.INT8)
    add = KernelStep(Op.ADD, make_attribute(Op.ADD), (0, 1), (i32_, i32_), (i32_,), origin=origins[2])
    steps = (rescale(a, i8, i32_, origins[0]), rescale(b, i8, i32_, origins[1]), add, rescale(2, i32_, i8, origins[3]))
    return ComputeCommand(0, "vector", steps, (View(TCM, 256, shape, DType.INT8),))


def test_commands_alike_but_for_their_source_operators_are_costed_apart():
    """The vector unit folds the RESCALEs of a source operator into it (npu_support.source_operators):
    the memo of costs tells a TFLite ADD's four steps from four operators' (it had returned the first
    one's cycles for the other)."""
    hw = load_hw_config("ethos-u85-256")
    one, four = _source_add(("add", "add", "add", "add")), _source_add(("r1", "r2", "add", "r3"))
    assert compute_command_cycles(hw, one) < compute_command_cycles(hw, four)
    costs = ComputeCycles(hw)
    assert (costs(four), costs(one)) == (compute_command_cycles(hw, four), compute_command_cycles(hw, one))


def test_a_source_add_is_elementwise_and_pays_no_pooling_path_latencies():
    """On the U85 a RESCALE or CLAMP of its own runs on the pooling path and pays the TCM latencies
    (vector.block_latency_ops); a TFLite ADD with its RESCALEs folded in starts with a RESCALE step
    but is an elementwise operation, whose latencies Vela amortises (an unrolled GRU's 32-element
    ADDs: Vela 8 cycles each, 80 with the 64 cycles of latencies)."""
    hw = load_hw_config("ethos-u85-256")
    plain = hw.model_copy(update={"tcm": hw.tcm.model_copy(update={"read_latency_cycles": 0,
                                                                   "write_latency_cycles": 0})})
    one = _source_add(("add", "add", "add", "add"))
    assert compute_command_cycles(hw, one) == compute_command_cycles(plain, one)
    lone = ComputeCommand(0, "vector", one.steps[:1], (View(TCM, 256, (1, 64), DType.INT32),))
    assert compute_command_cycles(hw, lone) == compute_command_cycles(plain, lone) + 64


def _pointwise(dtype: DType) -> ComputeCommand:
    """DS-CNN's pointwise convolution: [1, 25, 5, 64] * [64, 1, 1, 64] -> [1, 25, 5, 64], in the TCM."""
    types = (TensorType((1, 25, 5, 64), dtype), TensorType((64, 1, 1, 64), DType.INT8),
             TensorType((64,), DType.INT48 if dtype is DType.INT16 else DType.INT32),
             TensorType((1,), dtype), TensorType((1,), DType.INT8))
    attr = make_attribute(Op.CONV2D, pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1),
                          acc_type=DType.INT48 if dtype is DType.INT16 else DType.INT32)
    views = tuple(View(TCM, 0, t.shape, t.dtype) for t in types)
    out = TensorType((1, 25, 5, 64), DType.INT48 if dtype is DType.INT16 else DType.INT32)
    step = KernelStep(Op.CONV2D, attr, views, types, (out,))
    return ComputeCommand(0, "mac_array", [step], [View(TCM, 0, (1, 25, 5, 64), dtype)])


def test_a_wide_input_is_fetched_per_ofm_block_where_the_preset_says():
    """ethos-u55-256 (tcm.wide_ifm_block_fetch_bits: 16): the int16 pointwise convolution fetches its
    16,000-byte input per OFM block of 12 x 5 positions and 32 channels: 3 blocks in H (whole blocks,
    as Vela counts them) times 2 in depth, 46,080 B, 30,080 beyond one read. With its results and
    weights, 66,563 B cross the 8 B/cycle SRAM port: 8,337 cycles against 5,166 without the fetches
    (Vela: 8,342 of SRAM access for 6,256 of NPU). The int8 convolution reads its window once."""
    from npu_sim.hw.cost import wide_ifm_refetch_bytes

    u55 = load_hw_config("ethos-u55-256")
    wide, narrow = _pointwise(DType.INT16), _pointwise(DType.INT8)
    assert (wide_ifm_refetch_bytes(u55, wide.steps), wide_ifm_refetch_bytes(u55, narrow.steps)) == (30_080, 0)
    plain = u55.model_copy(update={"tcm": u55.tcm.model_copy(update={"wide_ifm_block_fetch_bits": 0})})
    assert (compute_command_cycles(u55, wide), compute_command_cycles(plain, wide)) == (8337, 5166)
    assert load_hw_config("edge").tcm.wide_ifm_block_fetch_bits == 0


def _int16_sigmoid(origin: str) -> ComputeCommand:
    """A 16-bit sigmoid of 48 values as the converter's lookup: a GATHER of a 65,536-entry table
    (read where it lives) by the values as indices, from source operator ``origin``."""
    table = TensorType((1, 65536, 1), DType.INT16)
    indices = TensorType((1, 48), DType.INT32)
    step = KernelStep(Op.GATHER, make_attribute(Op.GATHER),
                      (View(DDR, 0, table.shape, table.dtype), View(TCM, 0, indices.shape, indices.dtype)),
                      (table, indices), (TensorType((1, 48, 1), DType.INT16),), origin=origin)
    return ComputeCommand(0, "lut", (step,), (View(TCM, 256, (1, 48, 1), DType.INT16),), lut_function="SIGMOID")


def test_on_the_u85_a_standalone_int16_sigmoid_loads_its_table():
    """The U85 computes an int16 sigmoid built in (6 cycles for 48 values, 8 a cycle, bound by its
    288 bytes through the TCM's 32 a cycle: 9, after 8 of setup) where it comes from no source
    operator of its own (an LSTM's gates, lowered from one fused operator: Vela's LSTM lowering),
    but a standalone LOGISTIC (a Keras unrolled LSTM's 16x8 Sigmoid) looks its 48 values up at 1.25
    cycles each after loading its 2 KiB table at 1 byte a cycle (Vela 5.2: 1,349-1,578 cycles each;
    lut.builtin_functions_in_source_operators false)."""
    u85 = load_hw_config("ethos-u85-256")
    assert compute_command_cycles(u85, _int16_sigmoid("")) == 8 + 9
    assert compute_command_cycles(u85, _int16_sigmoid("model/lstm/lstm_cell/Sigmoid")) == 8 + 60 + 2048
