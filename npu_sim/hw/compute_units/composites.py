"""Cost functions of fused composite operations (``ComputeCommand.composite``).

A composite is one NPU operation standing for a whole subgraph the scheduler
recognised (see :mod:`scheduler.passes.lstm_cell`). It runs on the MAC array with
the vector and LUT units chained behind it, so it pays one command setup (the MAC
array's) and its intermediates never cross the TCM ports; its operands and
results still do (the ``max(body, TCM cycles)`` bound of :mod:`npu_sim.hw.cost`), and
the state it reads straight from the variable SRAM crosses that bank's port.

``lstm_cell``:

* **gate products** (the MAC steps; those of one data operand, a gate each, as one): a
  matrix-vector product of ``M*N`` outputs
  (M = batch) spread over all ``rows x cols`` PEs, the input element broadcast to
  every PE each step: ``ceil(M*N / (rows*cols)) * K * k_step`` cycles per product,
  plus one drain of the array's results (``ceil(min(outputs, rows*cols) / cols)``); a
  dtype the array has no rate for multiplies on the vector lanes (``M*N*K`` elements);
  the int8 cell's two products go into the two accumulator sets one after the other;
* **gate tail** (every other step): each operator is a stage of a pipeline the gate
  values stream through (rescale, add, table lookup, multiply, ...), so the tail
  takes as long as its slowest stage (its own unit's cycles for the step, as
  :mod:`~npu_sim.hw.compute_units.vector` and :mod:`~npu_sim.hw.compute_units.lut`
  count them) plus one cycle per stage on the longest chain of dependent stages
  (the pipeline's depth); RESHAPE and SLICE only address the unit-local buffers
  and cost nothing;
* **tables**: each distinct table is loaded into the LUT once per command at
  ``lut.table_load_bytes_per_cycle`` (nothing where the config sets no rate).

``body = gate products + gate tail + table loads``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from npu_sim.errors import ProgramError
from npu_sim.hw.compute_units import lut, mac_array, vector
from npu_sim.hw.compute_units.unit import ceil_div, out_elements
from npu_sim.program import KernelStep
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op

if TYPE_CHECKING:
    from npu_sim.hw.config import HwConfig

#: Steps that only address data already in the unit (no cycles of their own).
ADDRESSING_OPS = frozenset({Op.RESHAPE, Op.SLICE, Op.IDENTITY})


def gate_product_cycles(hw: HwConfig, steps: Sequence[KernelStep]) -> int:
    """The MAC steps as matrix-vector products over the whole array, plus one drain. Products
    of the same data operand (each gate's own product of x, or of h) are one product of all
    their output channels: the datapath broadcasts the vector once to every PE."""
    pes = hw.mac_array.rows * hw.mac_array.cols
    cycles = outputs = 0
    products: dict[tuple[object, int, int, DType], int] = {}   # (data, m, k, dtype) -> output channels
    for step in steps:
        if step.op not in mac_array.MAC_OPS:
            continue
        m, n, k = mac_array.mac_dims(step)
        dtype = step.input_types[0].dtype
        if mac_array.supports(hw, dtype):
            key = (step.operands[0] if step.operands else None, m, k, dtype)
            products[key] = products.get(key, 0) + n
        else:   # no rate on the array: the vector lanes multiply, as unit choice does for one operator
            cycles += vector.vector_cycles(m * n * k, vector.elements_per_cycle(hw, dtype))
    for (_, m, k, dtype), n in products.items():
        cycles += ceil_div(m * n, pes) * k * mac_array.k_step_cycles(hw, dtype)
        outputs = max(outputs, m * n)
    if not outputs:
        return 0
    return cycles + ceil_div(min(outputs, pes), hw.mac_array.cols)


def _stage_cycles(hw: HwConfig, step: KernelStep) -> int:
    if step.op in ADDRESSING_OPS:
        return 0
    if step.op in lut.LUT_OPS or step.op in lut.LOOKUP_OPS:
        return lut.lut_cycles(out_elements(step), hw.lut.elements_per_cycle)
    return vector.step_cycles(hw, step)


def gate_tail_cycles(hw: HwConfig, steps: Sequence[KernelStep]) -> int:
    """The non-MAC steps as one pipeline: its slowest stage plus its depth."""
    depth = [0] * len(steps)
    slowest = 0
    for index, step in enumerate(steps):
        if step.op in mac_array.MAC_OPS:
            continue
        before = max([depth[o] for o in step.operands if isinstance(o, int)], default=0)
        stage = step.op not in ADDRESSING_OPS
        depth[index] = before + (1 if stage else 0)
        slowest = max(slowest, _stage_cycles(hw, step))
    return slowest + max(depth, default=0)


def table_load_cycles(hw: HwConfig, steps: Sequence[KernelStep]) -> int:
    """Each distinct table (a TABLE's, a lookup's) loaded into the LUT once."""
    seen: set[object] = set()
    cycles = 0
    for step in steps:
        position = 1 if step.op is Op.TABLE else 0 if step.op in lut.LOOKUP_OPS else None
        if position is not None and len(step.operands) > position:
            table = step.operands[position]
            if table in seen:
                continue
            seen.add(table)
            cycles += lut.table_load_cycles(hw, step)
    return cycles


def recurrent_cell_body_cycles(hw: HwConfig, steps: Sequence[KernelStep]) -> int:
    """A fused LSTM or GRU cell (see the module doc)."""
    return gate_product_cycles(hw, steps) + gate_tail_cycles(hw, steps) + table_load_cycles(hw, steps)


#: Body cost of each composite kind.
COMPOSITES: dict[str, Callable[[HwConfig, Sequence[KernelStep]], int]] = {
    "lstm_cell": recurrent_cell_body_cycles,
    "gru_cell": recurrent_cell_body_cycles,
}


def composite_body_cycles(hw: HwConfig, kind: str, steps: Sequence[KernelStep]) -> int:
    """Cycles of a composite's steps (setup and the TCM bound excluded)."""
    cost = COMPOSITES.get(kind)
    if cost is None:
        raise ProgramError(f"unknown composite {kind!r} (known: {', '.join(sorted(COMPOSITES))})")
    return cost(hw, steps)
