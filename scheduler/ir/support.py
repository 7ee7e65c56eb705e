"""Support check: which NPU unit runs each TOSA operator, and refusal of the rest.

Every operator the reference executor runs must run on the NPU too, so the
compute-unit registry (:mod:`npu_sim.hw.compute_units`) covers all of TOSA 1.0:
the MAC array runs convolutions, MATMUL and the DFTs, the LUT unit table lookups
and transcendental functions, the vector unit everything else that computes.

Some operators need no unit (:data:`~npu_sim.hw.compute_units.NO_UNIT_OPS`):
constants live in DDR, variable reads/writes are DMA copies, control flow is run
by the sequencer. TOSA 1.1-draft operators and operators without a kernel raise
:class:`UnsupportedFeatureError` naming the operator.
"""

from __future__ import annotations

from npu_sim.errors import UnsupportedFeatureError
from npu_sim.hw.compute_units import NO_UNIT_OPS, unit_for_op
from npu_sim.reference.kernel_api import KERNELS
from npu_sim.tosa.ir import Graph, Operator
from npu_sim.tosa.ops import TOSA_1_0_OPS, Op
from npu_sim.tosa.validation import check_supported


def unit_of(operator: Operator) -> str:
    """The compute unit running ``operator`` (raises if it has none or is unsupported)."""
    check_operator(operator)
    unit = unit_for_op(operator.op)
    if unit is None:
        raise UnsupportedFeatureError(f"{operator.name}: {operator.op.name} runs on no compute unit")
    return unit.name


def check_operator(operator: Operator) -> None:
    """Raise :class:`UnsupportedFeatureError` naming ``operator`` if the NPU cannot run it."""
    op = operator.op
    if op not in TOSA_1_0_OPS:
        raise UnsupportedFeatureError(
            f"{operator.name}: {op.name} is not a TOSA 1.0 operator; the NPU does not support it")
    if op in NO_UNIT_OPS or op in (Op.CUSTOM, Op.IDENTITY):
        return
    if op not in KERNELS:
        raise UnsupportedFeatureError(f"{operator.name}: no NPU kernel for {op.name}")


def check_graph(graph: Graph) -> None:
    """Check the graph's features (draft types, unranked tensors: :func:`check_supported`)
    and every operator of every block."""
    check_supported(graph)
    for block in graph.blocks():
        for operator in block.operators:
            check_operator(operator)
