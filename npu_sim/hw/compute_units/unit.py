"""What a compute unit is: a :class:`ComputeUnit` entry, and the step geometry its cost functions share."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING

from npu_sim.program import KernelStep
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import TOSA_1_0_OPS, Op

if TYPE_CHECKING:
    from npu_sim.hw.config import HwConfig

#: Cycles of one kernel step on a unit (no setup, no TCM-port bound).
StepCost = Callable[["HwConfig", KernelStep], int]
#: Cycles of a compute command's steps on a unit (no setup, no TCM-port bound).
BodyCost = Callable[["HwConfig", Sequence[KernelStep]], int]

#: Operators no compute unit runs: data the scheduler places (constants, variables), variable
#: reads and writes (DMA copies) and control flow (the sequencer).
NO_UNIT_OPS = frozenset({Op.CONST, Op.CONST_SHAPE, Op.VARIABLE, Op.VARIABLE_READ, Op.VARIABLE_WRITE,
                         Op.COND_IF, Op.WHILE_LOOP})
#: Every TOSA 1.0 operator that computes (CUSTOM and IDENTITY included).
COMPUTE_OPS = frozenset(TOSA_1_0_OPS) - NO_UNIT_OPS


@dataclass(frozen=True)
class ComputeUnit:
    """One compute unit of the NPU: its name, the TOSA operators it runs and its cost.

    ``name`` is how ``ComputeCommand.unit``, traces and reports spell it, and the HwConfig
    section holding its parameters (``setup_cycles`` and its rates). ``ops``: the operators
    it runs. A *fallback* unit (the vector unit) runs every operator and is chosen for
    those no other unit claims; the others are chosen for their ``ops`` and refuse a
    command without one of them (``required_step`` names it in the message).
    ``step_cycles`` and ``body_cycles`` are pure functions of the HwConfig and the steps:
    swapping them swaps the unit's timing everywhere (simulator and scheduler).
    """

    name: str
    ops: frozenset[Op]
    step_cycles: StepCost
    body_cycles: BodyCost
    fallback: bool = False
    label: str = ""            # "the mac_array": how messages name it
    required_step: str = ""    # "a multiply-accumulate step": what a command on it must include
    #: operators it also runs when the scheduler gives it them (never chosen for them alone)
    accepted_ops: frozenset[Op] = frozenset()

    def setup_cycles(self, hw: HwConfig) -> int:
        """Cycles every command on this unit pays before its body (its HwConfig section's)."""
        return int(getattr(hw, self.name).setup_cycles)

    def can_run(self, steps: Sequence[KernelStep]) -> bool:
        """True if a command of ``steps`` may run here (one of ``ops`` among them, unless fallback)."""
        return self.fallback or any(step.op in self.ops or step.op in self.accepted_ops for step in steps)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def out_shape(step: KernelStep) -> tuple[int, ...]:
    """Shape of the output tile the step computes."""
    if step.out_region is not None:
        return tuple(stop - start for start, stop in step.out_region)
    return tuple(step.output_types[0].shape)


def out_elements(step: KernelStep) -> int:
    return prod(out_shape(step))


def step_dtype(step: KernelStep) -> DType:
    """The widest of the first input's and the first output's dtypes (sets the lane count)."""
    types = [t.dtype for t in step.input_types[:1]] + [t.dtype for t in step.output_types[:1]]
    return max(types, key=lambda d: d.bits) if types else DType.INT8


def micro_blocked_elements(shape: Sequence[int], block: Sequence[int]) -> int:
    """Elements of ``shape`` seen as ``[H, W, C]`` (leading dimensions folded into H) with each
    dimension rounded up to a multiple of ``block``'s (``[H, W, C]``, missing leading ones 1)."""
    dims = (1, 1, 1, *shape)[-max(3, len(shape)):]
    folded = (prod(dims[:-2]), dims[-2], dims[-1])
    sizes = (1, 1, 1, *block)[-3:]
    return prod(ceil_div(n, b) * b for n, b in zip(folded, sizes))


def transpose_shape_cycles(hw: HwConfig, shape: Sequence[int], bits: int) -> int:
    """A transpose written as ``shape`` (of ``bits``-bit elements) on the vector unit's transpose path:
    its micro-blocks of ``vector.transpose_micro_block`` (of ``transpose_micro_block_by_dtype`` for the
    element's width where that gives one) at ``vector.transpose_cycles_per_micro_block_bit`` cycles per
    bit of the element (0 where the config gives no micro-block)."""
    block = hw.vector.transpose_micro_block
    if not block:
        return 0
    block = hw.vector.transpose_micro_block_by_dtype.get(f"int{bits}", block)
    blocks = micro_blocked_elements(shape, block) // prod(block)
    return math.ceil(blocks * hw.vector.transpose_cycles_per_micro_block_bit * bits)


def summed_step_cycles(step_cycles: StepCost) -> BodyCost:
    """The body cost of a unit that runs a command's steps one after the other."""
    def body_cycles(hw: HwConfig, steps: Sequence[KernelStep]) -> int:
        return sum(step_cycles(hw, step) for step in steps)
    return body_cycles
