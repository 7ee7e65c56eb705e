"""Pure cost functions of the hardware model: cycles of compute commands and uncontended DMAs.

The simulator times every compute command with :func:`compute_command_cycles`; the
scheduler imports the same functions to make its decisions, so both agree by
construction. Nothing here has state or side effects.

Compute units (``ComputeCommand.unit``):

* ``mac_array`` - an output-stationary systolic array of ``rows x cols`` PEs. A
  multiply-accumulate step (:data:`MAC_OPS`) of an ``M x N`` output with reduction
  depth ``K`` works through ``ceil(M/rows) * ceil(N/cols)`` output blocks of
  ``K*k_step`` cycles each plus the skew of the operands across the PEs in use,
  ``k_step = rows*cols // macs_per_cycle[dtype]`` (1 for int8; a dtype the config
  does not list cannot run on the array); with double-buffered accumulators
  consecutive blocks overlap (see :func:`mac_array_cycles`); see :func:`mac_dims` for M, N, K of
  each operator (FFT2D/RFFT2D run as DFT matrix products). Other steps of the command are the
  fused epilogue (RESCALE, CLAMP, ADD): the array drains ``cols`` results a cycle, so
  the epilogue streams ``ceil(out_elements / cols)`` cycles plus one per extra fused
  operator (its stages form one output pipeline), pipelined with the array (see
  :func:`mac_array_body_cycles`): it costs only its drain beyond the MAC time,
  unless it is the slower stage.
* ``vector`` - ``ceil(work / elements_per_cycle[dtype])`` per step; ``work`` is the
  output elements, the input elements for reductions, ``out * kernel window`` for
  pooling and M*N*K for a MAC operator (see :func:`vector_work_elements`).
* ``lut`` - ``ceil(out_elements / elements_per_cycle)`` per step.

A command costs ``setup_cycles + max(body, TCM cycles)``: its operands and results
cross the TCM ports at ``tcm.bandwidth_bytes_per_cycle`` (a bound that stops a tiny-K
tile from looking free). ``body`` is the sum of the step cycles on the vector and LUT
units, and :func:`mac_array_body_cycles` on the MAC array.
"""

from __future__ import annotations

from math import prod
from typing import Union

from npu_sim.errors import ProgramError
from npu_sim.hw.config import LUT, MAC_ARRAY, VECTOR, HwConfig
from npu_sim.hw.ddr import ceil_cycles
from npu_sim.hw.dma import channel_bandwidth_bytes_per_cycle, dma_timing
from npu_sim.program import ComputeCommand, DmaCommand, KernelStep, MemorySpace, View
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op

#: operators the MAC array runs (multiply-accumulate reductions)
MAC_OPS = frozenset({Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.TRANSPOSE_CONV2D, Op.MATMUL,
                     Op.FFT2D, Op.RFFT2D})
#: operators the LUT unit evaluates by table lookup
LUT_OPS = frozenset({Op.TABLE, Op.SIGMOID, Op.TANH, Op.ERF, Op.EXP, Op.LOG, Op.RECIPROCAL,
                     Op.RSQRT, Op.SIN, Op.COS, Op.POW})
POOL_OPS = frozenset({Op.AVG_POOL2D, Op.MAX_POOL2D})
REDUCE_OPS = frozenset({Op.REDUCE_ALL, Op.REDUCE_ANY, Op.REDUCE_MAX, Op.REDUCE_MIN,
                        Op.REDUCE_PRODUCT, Op.REDUCE_SUM, Op.ARGMAX})


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# --- primitives ---------------------------------------------------------------------------

def mac_array_cycles(m: int, n: int, k: int, rows: int, cols: int, k_step_cycles: int = 1,
                     accumulator_buffers: int = 1) -> int:
    """Cycles of an ``m x n`` output with reduction depth ``k`` on an output-stationary array.

    The output is cut into ``blocks = ceil(m/rows) * ceil(n/cols)`` blocks. A block
    takes ``k*k_step + skew`` cycles: its reduction, plus the skew of the operands
    across the PEs in use until the farthest one has its last pair,
    ``skew = min(m, rows) + min(n, cols) - 2`` (``rows + cols - 2`` on a full array; a
    matrix-vector product, ``m = 1``, only crosses the columns).

    * One accumulator per PE: blocks run one after the other, each paying the skew:
      ``blocks * (k*k_step + skew)``.
    * Two (double-buffered): a finished block moves to the shadow registers and shifts
      out, ``cols`` results a cycle (``min(m, rows)`` cycles), while the next block
      accumulates. The next block's operands follow the previous ones without a gap,
      so a block costs ``max(k*k_step, min(m, rows))`` and only the last block pays
      the skew: ``(blocks - 1) * max(k*k_step, min(m, rows)) + k*k_step + skew``.
    """
    if m <= 0 or n <= 0 or k <= 0:
        return 0
    blocks = ceil_div(m, rows) * ceil_div(n, cols)
    used_rows = min(m, rows)
    reduce_cycles = k * k_step_cycles
    block_cycles = reduce_cycles + used_rows + min(n, cols) - 2
    if accumulator_buffers < 2:
        return blocks * block_cycles
    return (blocks - 1) * max(reduce_cycles, used_rows) + block_cycles


def vector_cycles(element_count: int, elements_per_cycle: int) -> int:
    return ceil_div(max(element_count, 0), elements_per_cycle)


def lut_cycles(element_count: int, elements_per_cycle: int) -> int:
    return ceil_div(max(element_count, 0), elements_per_cycle)


def tcm_cycles(size_bytes: int, hw: HwConfig) -> int:
    """Cycles to move ``size_bytes`` through all TCM ports at peak bandwidth."""
    return ceil_div(max(size_bytes, 0), hw.tcm.bandwidth_bytes_per_cycle)


def mac_k_step_cycles(hw: HwConfig, dtype: DType) -> int:
    """Cycles per K step of the MAC array for ``dtype`` operands (1 for int8)."""
    rate = hw.mac_array.macs_per_cycle.get(dtype.name.lower())
    if rate is None:
        raise ProgramError(f"the mac_array of {hw.name or 'this config'} has no {dtype.name} rate "
                           f"(configured: {', '.join(sorted(hw.mac_array.macs_per_cycle))})")
    return hw.mac_array.rows * hw.mac_array.cols // rate


def vector_elements_per_cycle(hw: HwConfig, dtype: DType) -> int:
    """Vector lanes for ``dtype``; unlisted dtypes fall back on the int8 lanes scaled by width."""
    table = hw.vector.elements_per_cycle
    key = dtype.name.lower()
    if key in table:
        return table[key]
    width_bytes = max(1, dtype.bits // 8) if dtype is not DType.BOOL else 1
    return max(1, table["int8"] // width_bytes)


# --- operator geometry --------------------------------------------------------------------

def out_shape(step: KernelStep) -> tuple[int, ...]:
    """Shape of the output tile the step computes."""
    if step.out_region is not None:
        return tuple(stop - start for start, stop in step.out_region)
    return tuple(step.output_types[0].shape)


def out_elements(step: KernelStep) -> int:
    return prod(out_shape(step))


def mac_dims(step: KernelStep) -> tuple[int, int, int]:
    """``(M, N, K)`` of a MAC operator: output rows x output channels x reduction depth."""
    out = out_shape(step)
    op = step.op
    if op is Op.CONV2D:  # weights [OC, KH, KW, IC]
        _, kh, kw, ic = step.input_types[1].shape
        return out[0] * out[1] * out[2], out[3], kh * kw * ic
    if op is Op.CONV3D:  # weights [OC, KD, KH, KW, IC]
        _, kd, kh, kw, ic = step.input_types[1].shape
        return out[0] * out[1] * out[2] * out[3], out[4], kd * kh * kw * ic
    if op is Op.DEPTHWISE_CONV2D:  # weights [KH, KW, C, M]: one PE column per output channel
        kh, kw, _, _ = step.input_types[1].shape
        return out[0] * out[1] * out[2], out[3], kh * kw
    if op is Op.TRANSPOSE_CONV2D:  # each output sees ceil(KH/sy)*ceil(KW/sx) taps of each IC
        _, kh, kw, ic = step.input_types[1].shape
        sy, sx = (tuple(step.attribute.stride) + (1, 1))[:2]
        return out[0] * out[1] * out[2], out[3], ceil_div(kh, max(sy, 1)) * ceil_div(kw, max(sx, 1)) * ic
    if op is Op.MATMUL:  # A [N, H, C] x B [N, C, W]
        return out[0] * out[1], out[2], step.input_types[0].shape[2]
    if op in (Op.FFT2D, Op.RFFT2D):  # a DFT as a matrix product: every output sums H*W inputs
        _, h, w = step.input_types[0].shape[:3]
        real_macs_per_term = 4 if op is Op.FFT2D else 2  # complex x complex, or real x complex
        return out[0] * out[1], out[2], real_macs_per_term * h * w
    raise ProgramError(f"{step.name or op.name}: {op.name} is not a multiply-accumulate operator")


def step_macs(step: KernelStep) -> int:
    """Multiply-accumulates a step performs (0 for non-MAC operators)."""
    if step.op not in MAC_OPS:
        return 0
    m, n, k = mac_dims(step)
    return m * n * k


def _operand_elements(step: KernelStep, index: int) -> int:
    operand = step.operands[index] if index < len(step.operands) else None
    if isinstance(operand, View):
        return operand.element_count
    return prod(step.input_types[index].shape) if index < len(step.input_types) else 0


def vector_work_elements(step: KernelStep) -> int:
    """Elements the vector unit processes for ``step`` (see module doc)."""
    if step.op in MAC_OPS:
        return step_macs(step)
    if step.op in REDUCE_OPS:
        return _operand_elements(step, 0)
    if step.op in POOL_OPS:
        kh, kw = (tuple(step.attribute.kernel) + (1, 1))[:2]
        return out_elements(step) * kh * kw
    return out_elements(step)


def step_dtype(step: KernelStep) -> DType:
    """The widest of the first input's and the first output's dtypes (sets the lane count)."""
    types = [t.dtype for t in step.input_types[:1]] + [t.dtype for t in step.output_types[:1]]
    return max(types, key=lambda d: d.bits) if types else DType.INT8


# --- commands ------------------------------------------------------------------------------

def step_cycles(hw: HwConfig, unit: str, step: KernelStep) -> int:
    """Cycles of one kernel step on ``unit`` (without setup or the TCM bound)."""
    if unit == MAC_ARRAY:
        if step.op in MAC_OPS:
            m, n, k = mac_dims(step)
            return mac_array_cycles(m, n, k, hw.mac_array.rows, hw.mac_array.cols,
                                    mac_k_step_cycles(hw, step.input_types[0].dtype),
                                    hw.mac_array.accumulator_buffers)
        return ceil_div(out_elements(step), hw.mac_array.cols)
    if unit == VECTOR:
        return vector_cycles(vector_work_elements(step), vector_elements_per_cycle(hw, step_dtype(step)))
    if unit == LUT:
        return lut_cycles(out_elements(step), hw.lut.elements_per_cycle)
    raise ProgramError(f"unknown compute unit {unit!r} (units: {MAC_ARRAY}, {VECTOR}, {LUT})")


def check_unit_can_run(unit: str, steps: tuple[KernelStep, ...], where: str) -> None:
    """ProgramError unless ``unit`` can run the command: a MAC op on the array, a LUT op on the LUT."""
    ops = [s.op for s in steps]
    if unit == MAC_ARRAY and not any(op in MAC_OPS for op in ops):
        raise ProgramError(f"{where}: the mac_array needs a multiply-accumulate step "
                           f"({'+'.join(op.name for op in ops)} has none)")
    if unit == LUT and not any(op in LUT_OPS for op in ops):
        raise ProgramError(f"{where}: the lut unit needs a table-lookup step "
                           f"({'+'.join(op.name for op in ops)} has none)")
    if unit not in (MAC_ARRAY, VECTOR, LUT):
        raise ProgramError(f"{where}: unknown compute unit {unit!r} (units: {MAC_ARRAY}, {VECTOR}, {LUT})")


def command_tcm_bytes(steps: tuple[KernelStep, ...], outputs: tuple[View, ...]) -> int:
    """Bytes a compute command reads and writes in the TCM (each view once per reference)."""
    read = sum(v.size_bytes for s in steps for v in s.operands
               if isinstance(v, View) and v.memory is MemorySpace.TCM)
    return read + sum(v.size_bytes for v in outputs if v.memory is MemorySpace.TCM)


def mac_array_body_cycles(hw: HwConfig, steps: tuple[KernelStep, ...]) -> int:
    """Cycles of a MAC-array command's steps, the epilogue pipelined behind the array.

    The fused epilogue operators are stages of one output pipeline: every result goes
    through all of them in turn, ``cols`` results a cycle (each stage keeps that rate),
    so the epilogue streams an output of ``out`` elements in ``ceil(out / cols)`` cycles
    plus one cycle per stage after the first (its depth), not once per operator. (Vela's
    Ethos-U model likewise takes the slowest of its output and activation stages per
    element, not their sum.)

    The array works through ``ceil(M/rows) * ceil(N/cols)`` output blocks of
    ``rows x cols`` results; each block drains into the epilogue as soon as it is done,
    so the two run as a two-stage pipeline over those blocks:

        body = max(mac + epilogue_block, mac_block + epilogue)

    ``mac`` is the MAC step cycles, ``epilogue`` the epilogue's cycles over the whole
    output and ``epilogue_block`` over one output block (``min(rows*cols, out)``
    results): the drain of the last block after the array is done. ``mac_block`` is the
    array cycles of one block, ``K*k_step`` plus the skew: the fill before the first
    results reach the epilogue. For equal blocks this is exactly a two-stage pipeline;
    in the usual MAC-bound case it is ``mac + epilogue_block``. Without epilogue,
    ``body = mac``.
    """
    rows, cols = hw.mac_array.rows, hw.mac_array.cols
    mac = mac_block = 0
    stages = out = 0
    for step in steps:
        if step.op in MAC_OPS:
            mac += step_cycles(hw, MAC_ARRAY, step)
            m, n, k = mac_dims(step)
            mac_block = max(mac_block, mac_array_cycles(min(m, rows), min(n, cols), k, rows, cols,
                                                        mac_k_step_cycles(hw, step.input_types[0].dtype)))
        else:
            stages += 1
            out = max(out, out_elements(step))
    if not stages:
        return mac
    depth = stages - 1
    epilogue = ceil_div(out, cols) + depth
    epilogue_block = ceil_div(min(rows * cols, out), cols) + depth
    return max(mac + epilogue_block, mac_block + epilogue)


def compute_command_cycles(hw: HwConfig, command: ComputeCommand) -> int:
    """Cycles of a compute command: ``setup + max(body, TCM cycles)`` (see the module doc)."""
    where = f"command {command.id} ({command.name})" if command.name else f"command {command.id}"
    check_unit_can_run(command.unit, command.steps, where)
    if command.unit == MAC_ARRAY:
        body = mac_array_body_cycles(hw, command.steps)
    else:
        body = sum(step_cycles(hw, command.unit, step) for step in command.steps)
    tcm = tcm_cycles(command_tcm_bytes(command.steps, command.outputs), hw)
    return hw.unit_setup_cycles(command.unit) + max(body, tcm)


def command_macs(command: ComputeCommand) -> int:
    return sum(step_macs(step) for step in command.steps)


def command_mac_pe_cycles(hw: HwConfig, command: ComputeCommand) -> int:
    """PE-cycles the MAC array's peak needs for the command's MACs: each MAC takes
    ``k_step`` PE-cycles of its dtype (1 for int8, ``rows*cols // macs_per_cycle[dtype]``
    else). 0 off the array. ``mac_utilization`` divides this by ``cycles * rows * cols``,
    so an fp32 graph is measured against the fp32 peak, not the int8 one."""
    if command.unit != MAC_ARRAY:
        return 0
    return sum(step_macs(step) * mac_k_step_cycles(hw, step.input_types[0].dtype)
               for step in command.steps if step.op in MAC_OPS)


def dma_cycles(hw: HwConfig, command: Union[DmaCommand, tuple[View, View]]) -> int:
    """Cycles of a DMA with the machine otherwise idle: ``setup + ceil(bytes / rate) + latency``.

    ``bytes`` are the bytes charged on the arbitrating channel (whole DDR bursts), ``rate``
    is ``min(channel bandwidth, cap)`` (see :mod:`npu_sim.hw.dma`).
    """
    if isinstance(command, tuple):
        command = DmaCommand(id=-1, engine=0, src=command[0], dst=command[1])
    timing = dma_timing(hw, command)
    rate = min(channel_bandwidth_bytes_per_cycle(hw, timing.channel), timing.cap_bytes_per_cycle)
    data = ceil_cycles(timing.channel_bytes / rate) if timing.channel_bytes else 0
    return timing.setup_cycles + data + (timing.latency_cycles if timing.channel_bytes else 0)
