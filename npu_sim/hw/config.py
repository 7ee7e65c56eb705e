"""The hardware configuration: a validated description of one NPU and its memories.

A config is YAML data checked by the pydantic model :class:`HwConfig`. Every
field carries its unit in its name (``size_bytes``, ``bytes_per_cycle``,
``latency_cycles``). Unknown keys, non-positive sizes or rates, and impossible
combinations are rejected with a :class:`~npu_sim.errors.ConfigError` whose one
line names the field path (``ddr.burst_size_bytes: ...``).

Presets live in ``npu_sim/hw/presets/*.yaml`` (package data; the top-level
``hw_configs`` folder of the repository is a symlink to it). A config may start
with ``extends: <preset name or path>``: it is deep-merged over that base.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from npu_sim.errors import ConfigError
from npu_sim.hw.op_support import PROFILES
from npu_sim.paths import check_regular_file
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op

PRESET_DIR = Path(__file__).with_name("presets")

#: dtype names accepted as keys of per-dtype rate tables (lower-case ``DType`` names)
RATE_DTYPES = frozenset(d.name.lower() for d in DType if d.is_tosa_1_0)

#: Physical sanity limits: a config beyond them is a typo, not a machine (2^70-byte TCMs and
#: 10^30-cycle setups made the scheduler and simulator compute with absurd numbers).
MAX_MEMORY_BYTES = 1 << 48          # any memory: 256 TiB
MAX_ON_CHIP_BYTES = 1 << 40         # TCM and variable SRAM: 1 TiB
MAX_CYCLES = 1 << 32                # a latency or a setup
MAX_COUNT = 1 << 16                 # engines, banks, ports, array rows and columns, outstanding bursts
MAX_RATE = 1 << 20                  # bytes, elements or MACs per cycle
MAX_CLOCK_HZ = 10**11               # 100 GHz
#: ``extends:`` chains deeper than this are refused (a cycle is named as such).
MAX_EXTENDS_DEPTH = 16

Count = Field(gt=0, le=MAX_COUNT)
Cycles = Field(ge=0, le=MAX_CYCLES)
Rate = Field(gt=0, le=MAX_RATE)
MemoryBytes = Field(gt=0, le=MAX_MEMORY_BYTES)
OnChipBytes = Field(gt=0, le=MAX_ON_CHIP_BYTES)


#: The models below are built without pydantic's plugins (its documented switch, set while
#: their classes are made, as typer does for its parameters): looking the plugins up scans the
#: entry points of every installed distribution, milliseconds of every ``npu-sim`` command,
#: and none has any business with a hardware config. Restored after :class:`HwConfig`.
_PLUGINS_SWITCH = "PYDANTIC_DISABLE_PLUGINS"
_plugins_setting = os.environ.get(_PLUGINS_SWITCH)
os.environ[_PLUGINS_SWITCH] = "1"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class DdrConfig(_Strict):
    """External memory shared by all DMA engines."""

    size_bytes: int = MemoryBytes
    bandwidth_bytes_per_cycle: int = Rate
    read_latency_cycles: int = Cycles
    write_latency_cycles: int = Cycles
    burst_size_bytes: int = Rate
    read_only: bool = Field(default=False, description="the off-chip memory is flash: it holds the "
                            "constants, loaded before the run, and nothing writes it")

    @model_validator(mode="after")
    def _check(self) -> DdrConfig:
        if self.burst_size_bytes > self.size_bytes:
            raise ValueError(f"burst_size_bytes: a burst of {self.burst_size_bytes} bytes is larger "
                             f"than the DDR ({self.size_bytes} bytes)")
        return self


class DmaConfig(_Strict):
    """DMA engines: in-order queues of 1D/2D/3D strided descriptors."""

    engine_count: int = Count
    setup_cycles: int = Cycles  # per descriptor (= per DMA command)
    max_outstanding_bursts: int = Count  # per engine
    thin_pixel_access_bytes: int = Field(
        0, ge=0, le=4096, description="a DDR read of a feature map (rank >= 3) whose pixels are narrower than "
        "this many bytes per byte of its element goes in accesses of that size, each taking a whole burst "
        "(0 = whole bursts)")
    prefetch_operations: int = Field(
        8, ge=0, le=64, description="an operation's leading loads (its weights, constant-pool chunks, "
        "graph inputs) may be issued this many operations before it, as far as needed to hide them "
        "(0: each operation loads its own operands when it comes). Vela stages an operation's "
        "buffered weights under the previous operation only (1)")
    prefetch_holds_partner_buffers: bool = Field(
        True, description="an operation's loads issued ahead (prefetch_operations) hold all its tile buffers, "
        "the ping-pong partners of the ones they fill included, from the first of them; False: a partner is "
        "held only from its own first use or the operation's first compute (Vela pre-buffers the first "
        "weight slice of the next operation alone: its debug database's weight_pre_buffer)")
    prefetch_under_last_tile: bool = Field(
        False, description="loads issued ahead into an earlier operation (prefetch_operations) go in before its "
        "last compute command rather than after its own loads: they overlap only its last tile, and its tile "
        "buffers that only earlier tiles read are free to hold them (Vela 5.2 hides a pre-buffered weight slice "
        "under the previous operation's last slice: regor scheduler.cpp ProposeSlicedWeightBuffering, "
        "slackBufferingCycles = lastSliceCycles, and counts it from after that operation)")
    constants_on_first_engine: bool = Field(
        False, description="loads of constants from their home (weights, biases and scales in the DDR or "
        "flash) all go on engine 0, one stream of bursts: the NPU's weight channel, whose bursts in flight "
        "cap it whatever the other engines do; False: a load goes on the engine with the least work queued")


class TcmConfig(_Strict):
    """Tightly coupled scratchpad: the scheduler places every tile in it."""

    size_bytes: int = OnChipBytes
    bank_count: int = Count
    port_count: int = Count
    port_bytes_per_cycle: int = Rate
    keep_reused_constants: bool = Field(
        default=True, description="a constant several operations read (an unrolled recurrent cell's "
        "weights, a loop body's) is copied into the TCM once and kept there; False: every operation "
        "streams it from its home again, as Vela's schedules do")
    elementwise_result_over_input: bool = Field(
        default=False, description="an elementwise operation (a chain of elementwise steps on the vector unit or "
        "the LUT) writes its result over an input of the same shape and dtype that no later operation reads: one "
        "buffer instead of two live at once (scheduler/codegen/result_over_input.py; Vela 5.2's ReuseIFM, regor "
        "live_range.cpp LiveRangeGraph::ReusableIFM: an elementwise operation's OFM takes the live range of an "
        "IFM of its storage shape and data type whose one consumer it is)")
    read_latency_cycles: int = Field(
        0, ge=0, le=1 << 16, description="cycles an operation on the MAC array waits for the first block of "
        "its input from the TCM before it starts (its memory's read latency, paid once per operation: by "
        "its first tile)")
    write_latency_cycles: int = Field(
        0, ge=0, le=1 << 16, description="cycles an operation on the MAC array waits for the last block of "
        "its output to reach the TCM (its memory's write latency, paid once per operation: by its last tile)")
    in_place_ddr_feature_maps: bool = Field(
        default=False, description="an operation reading a copy of part of a graph input (a SLICE of it a "
        "fused operator's lowering made: a .tflite LSTM's time step) waits the DDR's read latency for its "
        "first block instead of the TCM's, as an NPU reading it where it lives, the DDR, at every use (the "
        "copy ahead into the TCM notwithstanding); a slice by an operator of its own (a .tflite UNPACK, a "
        "TOSA SLICE) is an intermediate in the SRAM")
    wide_ifm_block_fetch_bits: int = Field(
        0, ge=0, le=64, description="an operation on the MAC array reading an input of at least this many bits "
        "an element from the TCM fetches it once per OFM block, halo and depth blocks included "
        "(npu_sim/hw/ifm_fetch.py), and those bytes bound its cycles at the TCM's bandwidth (0 = it reads "
        "its window once)")
    ddr_ifm_refetch: bool = Field(
        default=False, description="a convolution or pooling whose input feature map lives in the DDR (a "
        "graph input, a spilled map; also when copied into the TCM ahead) reads it there once per OFM block, "
        "its halo included, and a convolution once per OFM depth block too; so does the transpose before a "
        "sum over H or W (vector.transpose_reductions), once per transpose block: the NPU has no input staging "
        "(npu_sim/hw/ifm_fetch.py; Vela's MeasureElementAccess). The bytes beyond the tile's one copy cross "
        "the DDR while the tile computes")
    graph_inputs_in_place: bool = Field(
        default=False, description="graph inputs living in the DDR are never copied into the TCM ahead "
        "(scheduler/passes/staging.py): every reader reads them where they live, however often (Vela 5.2, "
        "regor scheduler.cpp: only an IFM some operation produces may be staged, ProposeSlicedWeightBuffering's "
        "StagingPref::IFM; with constants and graph inputs in the DRAM its per-layer staging of a network's "
        "first operation is its output alone; its TryExplicitBuffering copy of a lone convolution's graph "
        "input, where that pays, is not modelled); the tiler narrows a reader's tiles of such an input as it "
        "narrows streamed constants (constant_stream_slack_fraction)")
    ddr_recurrent_state: bool = Field(
        default=False, description="an LSTM cell's state (h and c) lives in the DDR, where the NPU reads and "
        "writes it at every time step: an operation reading it (a recurrent product, the forget product) waits "
        "the DDR's read latency for its first block instead of the TCM's, one writing it (c', h') the DDR's write "
        "latency for its last (where the operation pays block latencies at all: tcm.read_latency_cycles)")
    constant_stream_slack_fraction: float | None = Field(
        default=None, ge=0.0, le=1.0, description="None: small constants stay in a TCM pool for the whole "
        "run and an operation's weights load in whatever tiles run fastest (whole tensors where the TCM has "
        "room). A fraction of an operation's estimated cycles: constants stream from their home (DDR or "
        "flash) at every use through buffers that live only around the operations reading them (the "
        "pool's entries in per-operation chunks), and the weights in the narrowest output-channel stripes, "
        "two buffers rotating, whose estimated cycles stay within this fraction of the operation's fastest "
        "plan (Vela's weight buffering, regor scheduler.cpp ProposeWeightBuffering: double-buffered "
        "weight slices of OFM-block depth, just deep enough to hide the next slice's transfer). "
        "Several invocations (-n N) keep the resident pool, loaded once")
    packed_weight_streams: bool = Field(
        default=False, description="with streamed constants (constant_stream_slack_fraction) and "
        "keep_reused_constants false: each operation's small weights and per-channel parameters (bias, "
        "multipliers, shifts), copied per operation where several share them, load as one stream "
        "(one DMA of the pool's chunk, rounded to whole bursts once) before it, as Vela's weight "
        "encoder packs them (regor: one encoded weight-and-scale stream per operation, 10 bytes of "
        "scale a channel); False: one DMA per tensor, each rounded to whole bursts")
    matrix_vector_weights_in_place: bool = Field(
        default=False, description="with streamed constants (constant_stream_slack_fraction): an "
        "operation on the MAC array with one output position (a matrix-vector product: an LSTM or GRU "
        "gate, a dense layer on one vector) reads its constant weights where they live, the DDR or "
        "flash, while it computes (their bytes cross the DDR channel beside the DMAs), with no TCM "
        "copy: every weight is read once, so a buffer would hide nothing. Vela 5.2 on the Ethos-U55 "
        "with its weights in flash buffers none (its debug database for an unrolled LSTM lists no "
        "weight buffer, and each gate convolution's cycles are its flash access cycles)")
    read_once_weights_in_place: bool = Field(
        default=False, description="with matrix_vector_weights_in_place: a convolution or matrix product "
        "whose weights the array reads once (its whole output in one OFM block in H x W: "
        "mac_array.ofm_block_elements), however many OFM depth slices (mac_array.ofm_block_max_depth) "
        "they take, reads them in place too (Vela 5.2, regor scheduler.cpp ProposeSlicedWeightBuffering: "
        "weights fetched once are left unbuffered where their transfer and the read from the SRAM take "
        "longer than the operation unbuffered, as from a flash they do)")
    elementwise_constants_in_place: bool = Field(
        default=False, description="with streamed constants (constant_stream_slack_fraction): an "
        "elementwise operation on the vector unit reads its constant operands (an unrolled LSTM's "
        "gate bias, a broadcast scale) where they live, the DDR or flash, while it computes, with no "
        "TCM copy (Vela 5.2 reads an elementwise operation's constant input from the read-only memory: "
        "a Keras LSTM's BiasAdd on the U55 has flash access cycles and no SRAM staging of the bias)")
    parameters_in_command_stream: bool = Field(
        default=False, description="an NPU operation's parameters are register values of its command "
        "stream, not tensors in a memory: SHAPE tensors (a RESHAPE's new shape) and single values other "
        "than a matrix product's weights and bias (zero points, a RESCALE's or MUL's scalar multiplier and "
        "shift, an elementwise operation's scalar operand) stay where they live, with no TCM copy and no "
        "transfer (Ethos-U: the command stream's zero-point, scale and shift registers and its IFM2 scalar "
        "mode; Vela 5.2 places no such tensor in the SRAM: its debug database of an unrolled LSTM on the "
        "U55 lists only feature maps there)")
    matrix_vector_weights_buffered_when_hidden: bool = Field(
        default=False, description="with matrix_vector_weights_in_place: a matrix-vector product loads its "
        "weights into the TCM as before where that makes it no slower, and only the others read in place: "
        "their transfer (its bytes at one read stream's rate: dma.max_outstanding_bursts in flight, and the "
        "DDR's latency) and the read from the TCM fit within the operation's estimated cycles (its block "
        "latencies included) (Vela 5.2, "
        "regor scheduler.cpp ProposeSlicedWeightBuffering for weights read once; on the U85 it buffers an "
        "LSTM's gate weights and none of an autoencoder's 16-80 KB dense layers)")
    weight_buffer_visible_cycles: int = Field(
        default=0, ge=0, le=1 << 24, description="with matrix_vector_weights_buffered_when_hidden, cycles: a "
        "buffer is also kept only where its transfer, less the estimated cycles of the NPU operation before it "
        "in its block (none at the block's start or after one on the CPU) that hide it, leaves fewer than this "
        "many cycles (or a twentieth of it) in sight (regor scheduler.cpp ProposeSlicedWeightBuffering: "
        "fullBufferingHidden, STARTUP_DELAY_CYCLES = 1000); 0: not asked")
    weight_buffer_transfer_bytes_per_cycle: float = Field(
        default=0.0, ge=0, le=MAX_RATE, description="with matrix_vector_weights_buffered_when_hidden, bytes a "
        "cycle: the rate the buffer's transfer from the DDR is estimated at when weighing a buffer "
        "(Vela 5.2, regor ethos_u85_performance.cpp MemToMemCycles: its DMA's Mem2Mem channel, ChannelBW: "
        "burst x min(the channel's read-buffer words / the burst's words, max reads x ports x 0.8) / "
        "read latency x 0.8; the DDR's latency is added); 0: one read stream's rate "
        "(dma.max_outstanding_bursts in flight)")

    @model_validator(mode="after")
    def _check(self) -> TcmConfig:
        if self.size_bytes % self.bank_count:
            raise ValueError(f"bank_count: {self.bank_count} banks do not divide size_bytes "
                             f"{self.size_bytes}")
        if (self.size_bytes // self.bank_count) % self.port_bytes_per_cycle:
            raise ValueError(f"port_bytes_per_cycle: a bank of {self.size_bytes // self.bank_count} "
                             f"bytes is not a whole number of {self.port_bytes_per_cycle}-byte words")
        return self

    @property
    def bandwidth_bytes_per_cycle(self) -> int:
        """Peak bandwidth: each port serves one bank word per cycle (fewer banks than ports conflict)."""
        return min(self.port_count, self.bank_count) * self.port_bytes_per_cycle


class VariableSramConfig(_Strict):
    """Persistent SRAM bank holding TOSA variables across invocations."""

    size_bytes: int = OnChipBytes
    bytes_per_cycle: int = Rate


class BlockTensorConfig(_Strict):
    """Discontiguous block tensors (seed 002): a TCM buffer the planner cannot place whole may be
    stored as blocks in the holes fragmentation leaves, reached through a pointer table in the
    variable SRAM bank, instead of spilling to DDR."""

    enabled: bool = Field(default=True, description="False: a buffer the TCM plan cannot place whole "
                          "spills (the plan without block tensors, for comparison)")
    block_bytes: int = Field(default=256, gt=0, le=1 << 20, description="bytes of one block (rounded up "
                             "to the TCM alignment); smaller blocks fill smaller holes and need more entries")
    pointer_bytes: int = Field(default=4, gt=0, le=8, description="bytes of one pointer-table entry "
                               "(a 32-bit TCM address, as the seed's example assumes)")
    table_read_cycles_per_entry: int = Field(
        default=1, ge=0, le=MAX_CYCLES, description="cycles a DMA command or a compute unit spends reading one "
        "pointer-table entry before it moves the block's bytes (assumption: one variable-SRAM read per "
        "entry, not hidden behind the transfer)")


class StripesConfig(_Strict):
    """Cascaded stripes (:mod:`scheduler.passes.stripes`): a chain of spatial operations runs in
    horizontal stripes, its intermediates in rolling buffers of a few rows instead of whole
    activation maps (Vela's cascading, MCUNetV2's patch-based inference)."""

    optimise: Literal["performance", "size"] = Field(
        default="performance", description="performance: a chain runs in stripes only where it lowers the "
        "block's peak TCM and its estimated cycles stay within slack_fraction of the whole-tensor plan's "
        "(never with slack_fraction null); size: wherever it lowers the peak, in the stripes that need the "
        "fewest bytes, whatever they cost (Vela's --optimise Size)")
    slack_fraction: float | None = Field(
        default=None, ge=0.0, le=1.0, description="with optimise performance, the estimated cycles a striped "
        "chain may cost over the operations run whole, as a fraction of theirs (null: no stripes)")

    @property
    def enabled(self) -> bool:
        """Whether the planner looks for striped chains at all."""
        return self.optimise == "size" or self.slack_fraction is not None


def _check_rate_table(table: dict[str, int], field: str) -> None:
    for key, value in table.items():
        if key not in RATE_DTYPES:
            raise ValueError(f"{field}.{key}: unknown dtype (known: {', '.join(sorted(RATE_DTYPES))})")
        if value <= 0:
            raise ValueError(f"{field}.{key}: must be > 0, got {value}")


#: Operators the MAC array's output pipeline may apply (MacArrayConfig.epilogue_ops).
EPILOGUE_OPS = ("RESCALE", "CLAMP", "ADD", "TABLE")


class MacArrayConfig(_Strict):
    """Output-stationary systolic array of ``rows`` x ``cols`` processing elements.

    Each PE does one int8 MAC per cycle. Slower dtypes state how many cycles one PE
    takes per MAC in ``pe_cycles_per_mac`` (int8 is 1, implied; e.g. ``int16: 2``,
    ``fp32: 4``): a K step then takes that many cycles. Being relative to one PE, the
    table stays right when ``rows`` or ``cols`` change, so both are free sweep axes.
    ``macs_per_cycle`` (the whole array's MACs/cycle by dtype) is derived from it; an
    older config may state ``macs_per_cycle`` instead (each rate must divide ``rows*cols``,
    and ``int8`` must equal it). A dtype listed in neither cannot run on the array.

    ``accumulator_buffers`` is how many result registers each PE has. With 1 the array
    finishes one ``rows x cols`` output block, fill, reduction and skew, before the next
    starts. With 2 (double-buffered accumulators, as in Gemmini's output-stationary mesh)
    a finished block moves to the shadow registers and drains while the next one
    accumulates, so consecutive blocks of one command overlap their fill and drain.
    """

    rows: int = Count
    cols: int = Count
    pe_cycles_per_mac: dict[str, Annotated[int, Rate]] = Field(default_factory=dict)
    macs_per_cycle: dict[str, Annotated[int, Rate]] = Field(default_factory=dict)
    setup_cycles: int = Cycles  # per command
    accumulator_buffers: int = Field(default=2, ge=1, le=2)
    depthwise_macs_per_cycle: int = Field(
        0, ge=0, le=MAX_RATE, description="MACs/cycle a depthwise convolution reaches (0 = the array mapping alone)")
    ifm_depth_granule: int = Field(
        1, ge=1, le=1024, description="a convolution reads its input channels in groups of this many (a "
        "thin input wastes the rest of a group)")
    ifm_depth_granule_by_dtype: dict[str, Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=dict, description="the group of input channels of a convolution whose input is of "
        "this dtype, where it differs from ifm_depth_granule (Vela's U55/U65 take 16-bit IFM blocks of at "
        "most 16 channels at the cost of an 8-bit block of 32: regor ethos_u55.cpp FindBlockConfig, "
        "ethos_u55_performance.cpp EstimateMacCyclesPerBlock)")
    ofm_micro_block: list[Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=list, max_length=2,
        description="[H, W] of the output micro-blocks a convolution is computed in: its output positions "
        "count rounded up to whole micro-blocks of the operation's output (empty: positions as they are)")
    part_kernel_elements: int = Field(
        default=0, ge=0, le=64, description="where a convolution's input channels would fill their groups "
        "worse, it takes this many kernel elements a step over input channels in groups of "
        "part_kernel_depth_granule instead (part-kernel-first traversal; 0 = never)")
    part_kernel_depth_granule: int = Field(
        default=8, ge=1, le=1024, description="input channels per group of a part-kernel-first convolution")
    part_kernel_elements_by_dtype: dict[str, Annotated[int, Field(ge=1, le=64)]] = Field(
        default_factory=dict, description="kernel elements a part-kernel-first step takes for an input of "
        "this dtype, where it differs from part_kernel_elements (Vela's U85: 2 for 16 bits, 4 for 8: regor "
        "ethos_u85_performance.cpp EstimateMacCyclesPerBlock)")
    part_kernel_ifm_block_depth: int = Field(
        default=0, ge=0, le=1024, description="a part-kernel-first convolution reads its input channels in "
        "blocks of this many, each in groups of part_kernel_depth_granule (0 = one block of all of them; Vela's "
        "U85: 16, regor ethos_u85.cpp FindBlockConfig)")
    part_kernel_choice: Literal["ifm_groups", "kernel_first"] = Field(
        default="ifm_groups", description="when a convolution is traversed part-kernel first: ifm_groups where "
        "its channels fill groups of part_kernel_depth_granule and its kernel elements groups of "
        "part_kernel_elements at least as well as its channels fill groups of ifm_depth_granule (Vela's U55/U65: "
        "regor ethos_u55.cpp ChooseKernelMethod); kernel_first where its channels' use of groups of 16 times its "
        "kernel elements' use of steps of 5 (a remainder taken as at least 2) is at least its channels' use of "
        "groups of 64 (Vela's U85: regor ethos_u85.cpp ChooseKernelFirst, dense weights)")
    transpose_conv_upsampled: bool = Field(
        default=False, description="a TRANSPOSE_CONV2D costs a convolution of its whole kernel over every output "
        "position (the NPU convolves the zero-upsampled input, or one sub-kernel per stride phase over the whole "
        "output); False: each output sees only its ceil(k/stride) taps")
    depth_multiplier_split: bool = Field(
        default=False, description="a DEPTHWISE_CONV2D of depth multiplier M > 1 over C > 1 channels runs as M "
        "depthwise convolutions of C channels into an [M, H, W, C] map, then a transpose of it to [H, W, C, M] "
        "as seven 3-D transposes (regor scheduler_decompose.cpp, DecomposeDepthwiseConv2D and DecomposeTranspose): "
        "the step also costs those transposes, on the vector unit's transpose path (vector.transpose_micro_block) "
        "or at depth_multiplier_transpose_cycles_per_element")
    depth_multiplier_transpose_cycles_per_element: dict[str, Annotated[float, Field(ge=0, le=1 << 10)]] = Field(
        default_factory=dict, description="cycles per element of each transpose of a split depthwise convolution "
        "(depth_multiplier_split) by the dtype of its output ('int8', 'int16'), where the vector unit has no "
        "transpose micro-block")
    transpose_conv_epilogue: bool = Field(
        default=True, description="a TRANSPOSE_CONV2D's output pipeline applies its epilogue; False: it writes "
        "its int32 sums and their RESCALE is an operation of its own")
    matmul_by_columns: bool = Field(
        default=False, description="a MATMUL of two feature maps runs column by column of its output: a MUL of "
        "the first operand by that column of the second, to int32 (the vector's mul_int32 rate), and a sum "
        "over the depth, cols results a cycle (the Ethos-U55/U65 have no such matrix product: regor "
        "EthosU55Performance::EstimateMatMulCycles)")
    channel_parameter_read_cycles: float = Field(
        0.0, ge=0, le=1 << 16, description="cycles per output channel a convolution spends reading its scales "
        "and biases, once per OFM block (a stream beside the MAC work, see ofm_block_elements)")
    channel_parameter_bytes: int = Field(
        0, ge=0, le=1 << 10, description="bytes per output channel a convolution reads again from the "
        "constants' memory beside its weight stream, once per operation (its scales and biases for the "
        "output unit; 0 = none): off-chip bytes, counted with the command's DDR reads; their time is "
        "channel_parameter_read_cycles'")
    max_stride: int = Field(
        0, ge=0, le=1 << 10, description="largest convolution stride the array walks in one operation (0 = any): "
        "a CONV2D or DEPTHWISE_CONV2D of a larger stride runs as one operation per output position, each "
        "fetching the whole weight stream again (decomposed_fetch_latency_cycles + its bytes at "
        "decomposed_fetch_bytes_per_cycle), off-chip bytes counted with the command's DDR reads")
    decomposed_fetch_latency_cycles: float = Field(
        0.0, ge=0, le=1 << 20, description="cycles each such per-position operation waits before its weights arrive")
    decomposed_fetch_bytes_per_cycle: float = Field(
        1.0, gt=0, le=MAX_RATE, description="rate each such per-position operation fetches its weight stream at")
    ofm_block_elements: int = Field(
        0, ge=0, le=1 << 20, description="results one OFM block holds (the accumulators the array walks the "
        "output in); 0 = a command is one block")
    ofm_block_max_depth: int = Field(
        0, ge=0, le=1 << 16, description="most output channels one OFM block spans (0 = all of them)")
    ofm_block_min_depth: int = Field(
        0, ge=0, le=1 << 16, description="where a block this shallow holds all of an output's positions, "
        "the output is one block in H x W (small maps get blocks covering them whole; 0 = never)")
    weight_decode_weights_per_cycle: float = Field(
        0.0, ge=0, le=MAX_RATE, description="weights the array's decoder unpacks a cycle; a convolution "
        "takes at least its weights over this (0 = no decoder limit)")
    epilogue_ops: list[str] = Field(
        default_factory=lambda: ["RESCALE", "CLAMP", "ADD"],
        description="operators the array's output pipeline applies to its results (a fused epilogue)")
    max_epilogue_ops: int = Field(5, ge=0, le=16, description="most operators one fused epilogue chains")
    lut_epilogue_cycles_per_element: float = Field(
        0.0, ge=0, le=MAX_RATE, description="cycles per output element the output pipeline takes to apply a "
        "lookup (a TABLE epilogue: the result's activation), where slower than its drain (0 = the drain rate)")
    epilogue_widens: bool = Field(
        default=True, description="the output pipeline may widen a result it has narrowed (a RESCALE to "
        "int32 for an elementwise consumer); False: that RESCALE is an operation of its own")

    @model_validator(mode="after")
    def _check(self) -> MacArrayConfig:
        unknown = set(self.epilogue_ops) - set(EPILOGUE_OPS)
        if unknown:
            raise ValueError(f"epilogue_ops: {', '.join(sorted(unknown))} cannot be fused "
                             f"(the output pipeline applies {', '.join(EPILOGUE_OPS)})")
        _check_rate_table(self.pe_cycles_per_mac, "pe_cycles_per_mac")
        _check_rate_table(self.macs_per_cycle, "macs_per_cycle")
        pes = self.rows * self.cols
        if self.pe_cycles_per_mac.get("int8", 1) != 1:
            raise ValueError(f"pe_cycles_per_mac.int8: a PE does one int8 MAC per cycle, "
                             f"got {self.pe_cycles_per_mac['int8']}")
        stated = self.macs_per_cycle.get("int8")
        if stated is not None and stated != pes:
            raise ValueError(f"macs_per_cycle.int8: {stated} is inconsistent with rows*cols = {pes}")
        for key, value in self.macs_per_cycle.items():
            if value > pes or pes % value:
                raise ValueError(f"macs_per_cycle.{key}: {value} must divide rows*cols = {pes}")
        cycles = {key: pes // value for key, value in self.macs_per_cycle.items()}
        for key, value in self.pe_cycles_per_mac.items():
            if cycles.setdefault(key, value) != value:
                raise ValueError(f"pe_cycles_per_mac.{key}: {value} disagrees with macs_per_cycle.{key} "
                                 f"= {self.macs_per_cycle[key]} on {pes} PEs")
        cycles = {"int8": 1, **cycles}
        object.__setattr__(self, "pe_cycles_per_mac", cycles)
        object.__setattr__(self, "macs_per_cycle", {key: pes // value for key, value in cycles.items()})
        return self

    @property
    def int8_macs_per_cycle(self) -> int:
        return self.rows * self.cols


#: Kinds of elementwise work with a cycles-per-element figure (VectorConfig.cycles_per_element).
#: ``source_mean``: per input element of a TFLite MEAN compiled as Vela's TFLite reader does (one
#: depthwise pass; :mod:`scheduler.passes.source_means`); ``source_softmax``: per input
#: element of a TFLite SOFTMAX (:mod:`scheduler.passes.source_softmax`), ``source_softmax_int16`` of an
#: int16 one (a 16x8 model's); ``source_squared_difference``:
#: per output element (in channel bricks) of a TFLite SQUARED_DIFFERENCE
#: (:mod:`scheduler.passes.source_squared_difference`), ``source_squared_difference_broadcast`` per output
#: element of one of fewer than four dimensions on an NPU without double broadcast; ``source_activation``: per
#: output element of an 8-bit TFLite activation (RELU, RELU6) that requantizes, its RESCALE and CLAMP.
ELEMENTWISE_KINDS = ("unary_int32", "binary_int32", "mul_int32", "mul", "add", "other", "source_mean",
                     "source_softmax", "source_softmax_int16", "source_squared_difference",
                     "source_squared_difference_broadcast", "source_activation",
                     "rescale_int8", "rescale_int16", "rescale_int32", "reduce_minmax_int32")


#: Elementwise operators an output unit may scale the operands of (VectorConfig.scaled_ops).
SCALED_OPS = ("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM")


class VectorConfig(_Strict):
    """SIMD unit for elementwise, reduction, pooling and data-layout work."""

    elements_per_cycle: dict[str, Annotated[int, Rate]]  # lanes per dtype
    setup_cycles: int = Cycles
    #: elementwise cycles per output element by operation kind (unary_int32, binary_int32,
    #: mul_int32, mul, add, other; see npu_sim/hw/compute_units/vector.py); empty: the lanes
    #: of ``elements_per_cycle`` decide
    cycles_per_element: dict[str, float] = Field(default_factory=dict)
    concat_copy_per_input: bool = Field(
        default=False, description="a CONCAT along the innermost axis runs as one copy per input, each writing "
        "its own channels rounded up to channel_granule (Vela lowers a concatenation to a MemoryCopy per input "
        "into its slice of the output: a one-channel input writes whole 16-channel bricks); False: the output's "
        "bricks once")
    channel_granule: int = Field(
        1, ge=1, le=1024, description="elementwise work rounds the output's last dimension up to a multiple of this")
    max_chained_ops: int = Field(
        8, ge=1, le=64, description="most elementwise operators one vector operation chains (1: none)")
    block_latency_ops: list[str] = Field(
        default_factory=list, description="operators a vector operation starting with one of them runs on "
        "the NPU's pooling path, paying the TCM latencies (tcm.read_latency_cycles, write_latency_cycles) "
        "as the MAC array's operations do")
    rescale_micro_block: list[Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=list, max_length=3,
        description="[H, W, C] a RESCALE's output is processed in (rounded up to; with rescale_int* kinds)")
    source_activation_micro_block: list[Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=list, max_length=3,
        description="[H, W, C] micro-blocks a source activation (the pooling path's no-op: cycles_per_element "
        "source_activation) walks its output in, rounded up to them (empty: 16-channel bricks, "
        "channel_granule). Vela's U55/U65 pooling path: 2x2x8 (regor EstimateMacCyclesPerBlock)")
    transpose_reductions: bool = Field(
        False, description="a REDUCE_SUM over an axis other than the innermost first transposes that axis "
        "innermost, a pass of its own (as Vela lowers it), then sums along it")
    transpose_block_bytes: int = Field(
        0, ge=0, le=1 << 16, description="bytes of output row one block of such a transpose writes; every block "
        "fetches the whole input depth of its rows (0 = the transpose reads its input once)")
    transpose_block_positions: dict[str, Annotated[int, Field(ge=1, le=1 << 16)]] = Field(
        default_factory=dict, description="output positions one block of such a transpose writes, by the "
        "dtype it reads (int8, int16, int32), where they are not transpose_block_bytes' worth")
    transpose_read_bytes_per_cycle: float = Field(
        0.0, ge=0, le=MAX_RATE, description="rate such a transpose reads its input at (0 = the TCM bandwidth)")
    transpose_micro_block: list[Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=list, max_length=3,
        description="[H, W, C] of the output micro-blocks a TRANSPOSE is written in on the pooling path, "
        "each taking transpose_cycles_per_micro_block_bit cycles per input bit (empty: the elementwise rates)")
    transpose_micro_block_by_dtype: dict[str, list[Annotated[int, Field(ge=1, le=1024)]]] = Field(
        default_factory=dict, description="[H, W, C] of a transpose's output micro-blocks for an input of this "
        "dtype, where it differs from transpose_micro_block (Vela's U85 writes int16 in 1x4x8 micro-blocks)")
    transpose_cycles_per_micro_block_bit: float = Field(
        0.0, ge=0, le=MAX_RATE, description="cycles of one transpose micro-block per bit of the input's element")
    per_channel_rescale_read_bytes: int = Field(
        0, ge=0, le=1 << 10, description="bytes a per-channel RESCALE outside a matrix product reads of its "
        "multipliers from their home for each output element, over the DDR channel while it computes "
        "(0 = none): an output unit without per-channel scaling for elementwise work runs it as a MUL by "
        "the [1, 1, 1, C] multipliers, a broadcast operand read per element")
    rescale_multiplier_fetch_bytes: int = Field(
        0, ge=0, le=1 << 10, description="bytes a RESCALE by one 32-bit multiplier reads of it from the "
        "constants' memory, run as a MUL by that scalar (0 = none: the multiplier is a register): the "
        "RESCALE takes at least those bytes at the DDR's rate, at the burst efficiency of its output "
        "rows (depth x 4 bytes of a ddr.burst_size_bytes burst, at most 1)")
    source_softmax_read_bytes: int = Field(
        0, ge=0, le=1 << 10, description="bytes a TFLite SOFTMAX run as one operation (cycles_per_element."
        "source_softmax) reads from the constants' memory per element of its input, over the DDR channel "
        "while it computes (0 = none)")
    source_squared_difference_read_bytes: int = Field(
        0, ge=0, le=1 << 10, description="bytes a TFLite SQUARED_DIFFERENCE run as one operation with its "
        "broadcast pass (cycles_per_element.source_squared_difference_broadcast) reads from the constants' "
        "memory per output element, over the DDR channel while it computes (0 = none)")
    depth_reshape_min_depth: int = Field(
        0, ge=0, le=1024, description="an elementwise-like operation (elementwise, CLAMP, SIGMOID, TANH, "
        "RESCALE, TABLE, CAST) with no broadcast operand and no per-channel scales, whose output is shallower "
        "than 8 and larger than 16 elements, runs on its data reshaped to a depth of at least this many "
        "(0 = as shaped); see npu_sim/hw/compute_units/vector.py, output_unit_shape")
    scaled_ops: list[str] = Field(
        default_factory=list, description="elementwise operators whose output unit scales their inputs and "
        "output: the RESCALEs widening only their inputs and the one narrowing their result fold into them "
        "and cost nothing, and they run at the rate of the narrow data (of SCALED_OPS)")

    @model_validator(mode="after")
    def _check(self) -> VectorConfig:
        _check_rate_table(self.elements_per_cycle, "elements_per_cycle")
        if "int8" not in self.elements_per_cycle:
            raise ValueError("elements_per_cycle.int8: required (the rate other dtypes fall back on)")
        unknown = set(self.cycles_per_element) - set(ELEMENTWISE_KINDS)
        if unknown:
            raise ValueError(f"cycles_per_element: unknown kind(s) {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(ELEMENTWISE_KINDS)})")
        if any(not 0 < v <= 1024 for v in self.cycles_per_element.values()):
            raise ValueError("cycles_per_element: every value must lie in (0, 1024]")
        if set(self.transpose_block_positions) - {"int8", "int16", "int32"}:
            raise ValueError("transpose_block_positions: keys are the dtypes a transpose reads (int8, int16, int32)")
        unknown = set(self.scaled_ops) - set(SCALED_OPS)
        if unknown:
            raise ValueError(f"scaled_ops: {', '.join(sorted(unknown))} cannot be scaled "
                             f"(known: {', '.join(SCALED_OPS)})")
        _check_operator_names("block_latency_ops", self.block_latency_ops)
        return self


def _check_operator_names(field: str, names: list[str]) -> None:
    """ValueError naming ``field`` if a name in ``names`` is no TOSA operator."""
    unknown = sorted(set(names) - set(Op.__members__))
    if unknown:
        raise ValueError(f"{field}: {', '.join(unknown)} is no TOSA operator")


class LutConfig(_Strict):
    """Table-lookup / activation unit (TABLE, SIGMOID, TANH, ...)."""

    elements_per_cycle: int = Rate
    setup_cycles: int = Cycles
    # LUT reload per table operation (0: tables stay resident, no reload cost).
    table_load_bytes_per_cycle: float = Field(
        0.0, ge=0, le=MAX_RATE, description="rate a table operation reloads its LUT memory (0 = preloaded)")
    table_int8_bytes: int = Field(256, ge=0, description="LUT bytes loaded for an int8-input table")
    table_int16_bytes: int = Field(2048, ge=0, description="LUT bytes loaded for an int16-input table")
    builtin_functions: list[Literal["SIGMOID", "TANH"]] = Field(
        default_factory=list, description="functions of int16 values the unit computes built in, loading no "
        "table: a lookup whose table holds one (a legalized LSTM's gates) pays no table load")
    table_load_behind_previous: bool = Field(
        False, description="a table's load into the LUT memory runs while the NPU operation before its "
        "lookup computes, which hides that many cycles of it; where that operation is the vector "
        "operation producing the lookup's input, the lookup is its activation and the operation before "
        "it hides the load (False: every lookup pays its whole load)")
    fused_activation_table_loads_free: bool = Field(
        False, description="a lookup that runs as the activation of the NPU operation producing its input "
        "(that value's one reader, no block output, the operation ending in no activation) pays no table "
        "load: Vela 5.2 fuses it into that operation's group and charges a fused sub-operation nothing "
        "(regor EthosU85OpGroup::Fuse, network_performance.cpp); False: its load is hidden as any lookup's")
    builtin_functions_in_source_operators: bool = Field(
        default=True, description="a lookup of a builtin_functions function that is a source operator of "
        "its own (a .tflite's LOGISTIC or TANH) computes it built in too; False: only a lookup with no "
        "source operator of its own (an LSTM's gates, lowered from one fused operator) does, a standalone "
        "one loads its table")
    table_source_latency_cycles: int = Field(
        0, ge=0, le=1 << 20, description="latency of the memory a reloaded table comes from (the DDR's "
        "bandwidth then limits the copy too); 0 = only the LUT memory's write rate counts")
    cycles_per_element: float = Field(
        default=0.0, ge=0, le=1 << 10, description="cycles per element a lookup in an 8-bit table takes, "
        "where the rate is no whole number of elements a cycle (0 = 1 / elements_per_cycle)")
    wide_cycles_per_element: float = Field(
        default=0.0, ge=0, le=1 << 10, description="cycles per element of a lookup in a 16-bit table "
        "(0 = as an 8-bit one)")
    chained_elementwise: bool = Field(
        default=False, description="an elementwise operation (with the RESCALEs it folds) that alone reads "
        "a TABLE's result, of its shape, runs chained in the lookup's operation at no cost of its own "
        "(the Ethos-U85 chains elementwise operations onto an operation: regor EthosU85OpGroup::Chain)")


class CpuConfig(_Strict):
    """The host CPU (a Cortex-M55/M85-class core) that runs the operators outside the NPU's
    support (:mod:`npu_sim.hw.compute_units.cpu`), in CPU cycles at the NPU's clock (Corstone-300
    and -310 clock the CPU and the NPU alike). Defaults: a Cortex-M55 with Helium (MVE), which
    executes a 128-bit vector instruction in two 64-bit beats: at most 8 int8, 4 int16 or 2 fp32
    multiply-accumulates a cycle (Cortex-M55 Technical Reference Manual); CMSIS-NN's integer
    kernels reach about half of that; TensorFlow Lite Micro's floating-point kernels are its
    portable reference ones (scalar FPU, no CMSIS-NN)."""

    setup_cycles: int = Field(default=200, ge=0, le=MAX_CYCLES, description="cycles per operator invocation "
                              "(the interpreter's dispatch and the kernel's set-up)")
    cycles_per_mac: dict[str, float] = Field(
        default_factory=lambda: {"int8": 0.25, "int16": 0.5, "int32": 1.0, "fp16": 4.0, "fp32": 4.0},
        description="cycles per multiply-accumulate of a convolution or matrix product, by input dtype "
        "(int8/int16: half the MVE peak, CMSIS-NN; float: the scalar reference kernel)")
    elementwise_cycles_per_element: dict[str, float] = Field(
        default_factory=lambda: {"int8": 1.0, "int16": 1.0, "int32": 1.0, "fp16": 4.0, "fp32": 4.0},
        description="cycles per output element of an elementwise operator (per element read of a "
        "reduction or pooling), by dtype")
    transcendental_cycles_per_element: dict[str, float] = Field(
        default_factory=lambda: {"fp16": 50.0, "fp32": 50.0},
        description="cycles per element of EXP, LOG, TANH, SIGMOID, ERF, SIN, COS ... on floating-point "
        "data (a libm call)")
    data_cycles_per_byte: float = Field(default=0.5, gt=0, le=1 << 10, description="cycles per byte written by an "
                                        "operator that moves data (TRANSPOSE, CONCAT, GATHER, PAD, RESIZE ...)")

    @model_validator(mode="after")
    def _check(self) -> CpuConfig:
        for name in ("cycles_per_mac", "elementwise_cycles_per_element", "transcendental_cycles_per_element"):
            table = getattr(self, name)
            if not table:
                raise ValueError(f"{name}: needs at least one dtype")
            for key, value in table.items():
                if key not in RATE_DTYPES:
                    raise ValueError(f"{name}.{key}: unknown dtype (known: {', '.join(sorted(RATE_DTYPES))})")
                if not 0 < value <= 1 << 16:
                    raise ValueError(f"{name}.{key}: must lie in (0, 65536], got {value}")
        return self


class MemoryRolesConfig(_Strict):
    """Which memory holds what (Vela's memory modes; :mod:`scheduler.memory.roles`).

    ``constants``: the weights, biases and tables (``ddr``: streamed from the off-chip memory;
    ``tcm``: resident in the TCM from the start). ``arena``: the graph's inputs and outputs
    (``ddr``, or ``tcm``: the SRAM arena the feature maps live in). ``spills``: where an
    intermediate that does not fit the TCM goes (``ddr``, or ``none``: it must fit, else the
    schedule fails naming it). Vela's Dedicated_Sram is ddr/ddr/ddr (the TCM a cache of the
    DRAM arena), Shared_Sram ddr/tcm/none (feature maps in the SRAM, constants in flash),
    Sram_Only tcm/tcm/none."""

    constants: Literal["ddr", "tcm"] = "ddr"
    arena: Literal["ddr", "tcm"] = "ddr"
    spills: Literal["ddr", "none"] = "ddr"


class NpuSupportConfig(_Strict):
    """Which operators the NPU runs itself (:mod:`npu_sim.hw.op_support`); the others run on the
    host CPU, or with ``strict`` are refused (exit 2 naming the operator)."""

    profile: str = Field(default="all", description="all (every operator on the NPU), ethos-u55, ethos-u65 or "
                         "ethos-u85 (Vela 5.2's TOSA support for that NPU)")
    strict: bool = Field(default=False, description="an operator outside the profile is an error, not a CPU fallback")
    source_operators: bool = Field(
        default=False, description="compile a .tflite as Vela's TFLite reader does: the RESCALEs and "
        "CLAMP that one TFLite operator became around its elementwise operation or transposed "
        "convolution (known by the converter's locations) run in that operation's output unit, one "
        "NPU operation (regor's TFLite front end maps each operator to one NPU operation; the "
        "Ethos-U output unit scales the IFMs of an ADD/SUB and the OFM); no effect on TOSA input")

    @model_validator(mode="after")
    def _check(self) -> NpuSupportConfig:
        if self.profile not in PROFILES:
            raise ValueError(f"profile: unknown profile {self.profile!r} (known: {', '.join(PROFILES)})")
        return self


# --- energy and area (first-order models for design-space exploration) ----------------------
# Defaults are Horowitz, "Computing's energy problem", ISSCC 2014, 45 nm: 8-bit add 0.03 pJ,
# 8-bit multiply 0.2 pJ, 16-bit float multiply 1.1 / add 0.4 pJ, 32-bit float multiply 3.7 /
# add 0.9 pJ; SRAM 64-bit reads 10 pJ (8 KiB) to 100 pJ (1 MiB); DRAM 1.3-2.6 nJ per 64 bits.
# Areas from the same talk (8-bit multiply 282 um2, 16-bit float multiply 1640 um2, 32-bit
# float multiply 7700 um2). ``technology_nm`` scales on-chip figures from 45 nm: energy by
# nm/45 (switched capacitance), area by (nm/45)**2; DDR energy is off-chip and not scaled.

class EnergyConfig(_Strict):
    """Energy per simulated event (pJ) and static power (mW), at ``technology_nm``."""

    technology_nm: float = Field(default=45.0, gt=0)  # node the on-chip figures are scaled to
    #: one multiply-accumulate by operand dtype (multiply + add at 45 nm)
    mac_pj: dict[str, float] = Field(default_factory=lambda: {
        "int8": 0.23, "int16": 0.85, "fp16": 1.5, "bf16": 1.5, "fp32": 4.6})
    vector_element_pj: float = Field(default=0.2, ge=0)  # one element through the vector unit
    lut_element_pj: float = Field(default=0.5, ge=0)  # one table lookup / activation element
    tcm_byte_pj: float = Field(default=2.5, ge=0)  # one byte read or written in the TCM
    variable_sram_byte_pj: float = Field(default=1.25, ge=0)  # one byte of the variable SRAM
    ddr_byte_pj: float = Field(default=160.0, ge=0)  # one DDR byte moved (whole bursts)
    dma_burst_pj: float = Field(default=10.0, ge=0)  # one DMA burst's control and bus overhead
    #: one cycle of the host CPU running an operator the NPU cannot (its core, caches and
    #: TCM accesses): a Cortex-M-class core draws some 10-30 uW/MHz (= pJ a cycle) of dynamic
    #: power at 28-40 nm; an assumption of that order, not a measurement
    cpu_cycle_pj: float = Field(default=20.0, ge=0)
    static_mw: float = Field(default=5.0, ge=0)  # leakage of the logic, times run time
    static_mw_per_kib_sram: float = Field(default=0.01, ge=0)  # leakage per KiB of TCM and SRAM

    @property
    def scale(self) -> float:
        """On-chip energy scale from the 45 nm figures."""
        return self.technology_nm / 45.0


class AreaConfig(_Strict):
    """Silicon area (mm2) per part, at ``technology_nm`` (scaled from 45 nm by (nm/45)**2)."""

    technology_nm: float = Field(default=45.0, gt=0)  # node the figures are scaled to
    #: one PE's datapath for each dtype it supports (int8 multiply + add; others added on top)
    pe_mm2: dict[str, float] = Field(default_factory=lambda: {
        "int8": 0.00032, "int16": 0.0012, "fp16": 0.002, "bf16": 0.002, "fp32": 0.0085})
    sram_mm2_per_kib: float = Field(default=0.008, ge=0)  # TCM and variable SRAM, with periphery
    vector_lane_mm2: float = Field(default=0.0005, ge=0)  # per int8 element/cycle of the vector unit
    lut_lane_mm2: float = Field(default=0.002, ge=0)  # per element/cycle of the LUT unit
    dma_engine_mm2: float = Field(default=0.05, ge=0)  # one DMA engine
    fixed_mm2: float = Field(default=0.2, ge=0)  # control, sequencer, bus interfaces

    @property
    def scale(self) -> float:
        """Area scale from the 45 nm figures."""
        return (self.technology_nm / 45.0) ** 2


class HwConfig(_Strict):
    """One NPU: clock, memories, DMA and compute units (a section per unit of
    :mod:`npu_sim.hw.compute_units`, named as the unit)."""

    name: str = ""
    description: str = ""
    clock_hz: int = Field(gt=0, le=MAX_CLOCK_HZ)
    ddr: DdrConfig
    dma: DmaConfig
    tcm: TcmConfig
    variable_sram: VariableSramConfig
    block_tensors: BlockTensorConfig = Field(default_factory=BlockTensorConfig)
    stripes: StripesConfig = Field(default_factory=StripesConfig)
    mac_array: MacArrayConfig
    vector: VectorConfig
    lut: LutConfig
    #: True: the compute units are stages of one command pipeline, one compute command at a time
    #: (Ethos-U: the MAC array and the output unit serve one NPU operation after the other; only
    #: DMA overlaps them). False: each unit runs its own queue, concurrently.
    shared_compute_pipeline: bool = False
    #: fused composite datapaths the NPU has (:mod:`npu_sim.hw.compute_units.composites`): the
    #: scheduler fuses only these; an NPU without one runs the subgraph op by op
    composites: list[str] = Field(default_factory=lambda: ["lstm_cell", "gru_cell"])
    #: the host CPU running what the NPU cannot, and what that is
    cpu: CpuConfig = Field(default_factory=CpuConfig)
    npu_support: NpuSupportConfig = Field(default_factory=NpuSupportConfig)
    memory_roles: MemoryRolesConfig = Field(default_factory=MemoryRolesConfig)
    energy: EnergyConfig = Field(default_factory=EnergyConfig)
    area: AreaConfig = Field(default_factory=AreaConfig)

    @model_validator(mode="after")
    def _writable_roles(self) -> HwConfig:
        if self.ddr.read_only:
            for role in ("arena", "spills"):
                if getattr(self.memory_roles, role) == "ddr":
                    raise ValueError(f"memory_roles.{role}: the ddr is read-only (flash); nothing may "
                                     "be written there")
        return self

    @model_validator(mode="after")
    def _known_composites(self) -> HwConfig:
        from npu_sim.hw.compute_units.composites import COMPOSITES

        for kind in self.composites:
            if kind not in COMPOSITES:
                raise ValueError(f"composites: unknown composite {kind!r} (known: {', '.join(sorted(COMPOSITES))})")
        return self


if _plugins_setting is None:
    del os.environ[_PLUGINS_SWITCH]
else:
    os.environ[_PLUGINS_SWITCH] = _plugins_setting


def with_block_tensors(hw: HwConfig, enabled: bool) -> HwConfig:
    """``hw`` with block tensors on or off (``--no-block-tensors``, ``block_tensors=False``: the
    plan without them, for comparison)."""
    if hw.block_tensors.enabled == enabled:
        return hw
    return hw.model_copy(update={"block_tensors": hw.block_tensors.model_copy(update={"enabled": enabled})})


def with_optimise(hw: HwConfig, optimise: str | None) -> HwConfig:
    """``hw`` with its planner optimising for ``optimise`` (``--optimise size|performance``;
    None: as the config says)."""
    if optimise is None or hw.stripes.optimise == optimise:
        return hw
    stripes = StripesConfig.model_validate({**hw.stripes.model_dump(), "optimise": optimise})
    return hw.model_copy(update={"stripes": stripes})


# --- loading ------------------------------------------------------------------------------

def preset_names() -> list[str]:
    """Names of the bundled presets (file stems in the presets folder)."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_hw_config(name_or_path: str | Path) -> HwConfig:
    """A validated :class:`HwConfig` from a preset name or a YAML file path."""
    data, source = _load_raw(str(name_or_path), chain=())
    return hw_config_from_dict(data, source)


def hw_config_from_dict(data: dict[str, Any], source: str = "config") -> HwConfig:
    """Validate already-merged config data (no ``extends``); errors name ``source`` and the field."""
    try:
        return HwConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc)}") from None


def raw_config_dict(name_or_path: str | Path) -> dict[str, Any]:
    """The config's data with ``extends`` merged in, not yet validated (what a sweep edits)."""
    return _load_raw(str(name_or_path), chain=())[0]


def resolved_config_dict(name_or_path: str | Path) -> dict[str, Any]:
    """The config as plain data after ``extends`` is resolved and defaults filled in."""
    return load_hw_config(name_or_path).model_dump(mode="json")


def _resolve_path(name_or_path: str, relative_to: Path | None) -> Path:
    candidates = []
    as_path = Path(name_or_path)
    if relative_to is not None and not as_path.is_absolute():
        candidates.append(relative_to / as_path)
    candidates.append(as_path)
    looks_like_path = as_path.suffix in (".yaml", ".yml") or "/" in name_or_path
    for candidate in candidates:
        if looks_like_path and candidate.is_file():
            return candidate
    if not looks_like_path:
        preset = PRESET_DIR / f"{name_or_path}.yaml"
        if preset.is_file():
            return preset
        raise ConfigError(f"unknown hardware config {name_or_path!r} "
                          f"(presets: {', '.join(preset_names())}; or give a .yaml path)")
    raise ConfigError(f"hardware config file {name_or_path!r} not found")


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's safe loader when PyYAML has it (5x faster), refusing a key given twice in
    one mapping (plain YAML keeps the later value silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                mark = key_node.start_mark
                raise ConfigError(f"duplicate key {key!r} (line {mark.line + 1})")
            seen.add(key)
        return dict(super().construct_mapping(node, deep=deep))


def load_yaml_strictly(path: Path, source: str) -> Any:
    """The data of a YAML file read as configs are: a regular UTF-8 file, no key repeated.
    Raises :class:`ConfigError` naming ``source``."""
    check_regular_file(path, "")   # names the path; never opens a FIFO
    text = read_yaml_text(path, source)
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML ({' '.join(str(exc).split())})") from None
    except RecursionError:
        raise ConfigError(f"{source}: YAML nested too deeply") from None


def read_yaml_text(path: Path, source: str) -> str:
    """The file's text: UTF-8 only (a byte that is not UTF-8 is named with its offset)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read ({exc.strerror})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None


def _load_raw(name_or_path: str, chain: tuple[Path, ...],
              relative_to: Path | None = None) -> tuple[dict[str, Any], str]:
    path = _resolve_path(name_or_path, relative_to).resolve()
    source = path.stem if path.parent == PRESET_DIR.resolve() else str(path)
    if path in chain:
        raise ConfigError(f"{source}: extends cycle ({' -> '.join(p.stem for p in chain + (path,))})")
    if len(chain) >= MAX_EXTENDS_DEPTH:
        raise ConfigError(f"{chain[0]}: extends chain deeper than {MAX_EXTENDS_DEPTH} files "
                          f"(at {source})")
    data = load_yaml_strictly(path, source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a hardware config must be a mapping, got {type(data).__name__}")
    own_name, own_description = data.get("name"), data.get("description")
    base_name = data.pop("extends", None)
    if base_name is not None:
        if not isinstance(base_name, str):
            raise ConfigError(f"{source}: extends: expected a preset name or path, got {base_name!r}")
        base, _ = _load_raw(base_name, chain + (path,), relative_to=path.parent)
        data = deep_merge(base, data)
        if own_description is None:  # the base's description no longer describes it
            data["description"] = f"{base['name']} with overrides"
    data["name"] = own_name if own_name is not None else path.stem
    return data, source


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` merged into a copy of ``base``: mappings merge key by key, other values replace."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _describe(exc: ValidationError) -> str:
    errors = exc.errors()
    first = errors[0]
    loc = ".".join(str(part) for part in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "value_error" and ":" in msg.split(" ")[0]:
        # our cross-field checks name the sub-field first: "bank_count: ..."
        field, _, rest = msg.partition(": ")
        loc = f"{loc}.{field}" if loc else field
        msg = rest
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc or 'config'}: {msg}{more}"
