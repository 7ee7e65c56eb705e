"""Support check: which NPU unit runs each TOSA operator, and refusal of the rest.

Every operator the reference executor runs must run on the NPU too, so the
table covers all of TOSA 1.0. Three compute units:

* the MAC array: convolutions, MATMUL and the DFTs (FFT2D/RFFT2D are
  matrix products with twiddle factors; their FP sums stay whole per output
  element, as the kernels compute them);
* the LUT/activation unit: table lookups and transcendental functions;
* the vector unit: elementwise arithmetic, comparisons, reductions, pooling,
  data layout, RESCALE/CAST, gather/scatter, resize and CUSTOM operators.

Some operators need no unit: constants live in DDR, variable reads/writes are
DMA copies, control flow is run by the sequencer. TOSA 1.1-draft operators and
operators without a kernel raise :class:`UnsupportedFeatureError` naming the
operator.
"""

from __future__ import annotations

from npu_sim.errors import UnsupportedFeatureError
from npu_sim.hw.config import LUT, MAC_ARRAY, VECTOR
from npu_sim.reference.kernel_api import KERNELS
from npu_sim.tosa.ir import Graph, Operator
from npu_sim.tosa.ops import TOSA_1_0_OPS, Op
from npu_sim.tosa.validation import check_supported

MAC = MAC_ARRAY  # unit names as HwConfig and traces spell them
COMPUTE_UNITS = (MAC, VECTOR, LUT)

#: Operators that need no compute unit (kind of lowering instead).
NO_UNIT: dict[Op, str] = {
    Op.CONST: "constant",
    Op.CONST_SHAPE: "constant",
    Op.VARIABLE: "variable",
    Op.VARIABLE_READ: "dma",
    Op.VARIABLE_WRITE: "dma",
    Op.COND_IF: "sequencer",
    Op.WHILE_LOOP: "sequencer",
}

_MAC_OPS = (Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.TRANSPOSE_CONV2D, Op.MATMUL,
            Op.FFT2D, Op.RFFT2D)
_LUT_OPS = (Op.TABLE, Op.SIGMOID, Op.TANH, Op.EXP, Op.LOG, Op.ERF, Op.SIN, Op.COS,
            Op.RECIPROCAL, Op.RSQRT, Op.POW)

#: op -> compute unit, for every TOSA 1.0 operator that computes.
UNIT_OF: dict[Op, str] = {
    **{op: MAC for op in _MAC_OPS},
    **{op: LUT for op in _LUT_OPS},
    **{op: VECTOR for op in TOSA_1_0_OPS
       if op not in _MAC_OPS and op not in _LUT_OPS and op not in NO_UNIT},
}


def unit_of(operator: Operator) -> str:
    """The compute unit running ``operator`` (raises if it has none or is unsupported)."""
    check_operator(operator)
    try:
        return UNIT_OF[operator.op]
    except KeyError:
        raise UnsupportedFeatureError(f"{operator.name}: {operator.op.name} runs on no compute unit") from None


def check_operator(operator: Operator) -> None:
    """Raise :class:`UnsupportedFeatureError` naming ``operator`` if the NPU cannot run it."""
    op = operator.op
    if op not in TOSA_1_0_OPS:
        raise UnsupportedFeatureError(
            f"{operator.name}: {op.name} is not a TOSA 1.0 operator; the NPU does not support it")
    if op in NO_UNIT or op in (Op.CUSTOM, Op.IDENTITY):
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
