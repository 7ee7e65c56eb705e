"""Which TOSA operators an NPU runs itself: a preset's ``npu_support.profile``.

An operator outside its NPU's profile runs on the host CPU (the ``cpu`` unit of
:mod:`npu_sim.hw.compute_units`), or, with ``npu_support.strict``, is refused. The generic
presets run everything on the NPU (profile ``all``). The Ethos-U profiles are Vela 5.2's rules
for TOSA input (ethos-u-vela 5.2.0 source distribution):

* ``SUPPORTED_OPS.md``, "Ethos-U55 and Ethos-U65 TOSA Operator Support" and "Ethos-U85 TOSA
  Operator Support": TOSA 1.0 PRO-INT with EXT-INT16, EXT-INT4 and EXT-DOUBLEROUND (and, on the
  U85, EXT-CONTROLFLOW); no floating point; the per-operator data types and constraints;
* ``regor/architecture/ethosu55/ethos_u55_constraints.cpp`` (``SupportedDtypes``: no float, MATMUL
  with 8-bit inputs, the pooling types of REDUCE_MAX; ``OperatorQuery``: RESIZE, TRANSPOSE_CONV2D
  strides, ARGMAX) and ``ethos_u55.cpp`` (``GetHWOp``: the operators with a hardware operation,
  DEPTHWISE_CONV2D among them although the summary table omits it);
* ``regor/architecture/ethosu85/ethos_u85_constraints.cpp`` (``SupportedDtypes``: no float; every
  PRO-INT operator otherwise).

Only what decides where an operator runs is modelled: its operator, data types and the
structural limits named below. Quantisation limits (zero points, scales) are not checked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op

#: Profiles a config may name (``npu_support.profile``).
PROFILES = ("all", "ethos-u55", "ethos-u65", "ethos-u85")

_SOURCE_U55 = "Vela 5.2 SUPPORTED_OPS.md, Ethos-U55/U65 TOSA"
_SOURCE_U85 = "Vela 5.2 SUPPORTED_OPS.md, Ethos-U85 TOSA"


@dataclass(frozen=True)
class OpFacts:
    """What the support rules look at: one operator (a kernel step) of an NPU operation.

    ``constants``: the values of its constant inputs (None where an input is not constant);
    ``fused``: it is a later step of a fused operation (an epilogue the MAC array applies);
    ``tflite_source``: it comes from a TFLite operator and the preset compiles as Vela's TFLite
    reader does (``npu_support.source_operators``), whose rules then apply where they differ."""

    op: Op
    attribute: Attribute | None
    input_types: tuple[TensorType, ...]
    output_types: tuple[TensorType, ...]
    constants: tuple[np.ndarray | None, ...] = field(default=(), compare=False)
    fused: bool = False
    tflite_source: bool = False

    def in_dtype(self, index: int = 0) -> DType | None:
        return self.input_types[index].dtype if index < len(self.input_types) else None

    @property
    def out_dtype(self) -> DType | None:
        return self.output_types[0].dtype if self.output_types else None

    def constant(self, index: int) -> np.ndarray | None:
        return self.constants[index] if index < len(self.constants) else None


#: Operators with an Ethos-U55/U65 hardware operation for TOSA input (the summary table, plus
#: DEPTHWISE_CONV2D from ethos_u55.cpp GetHWOp). The rest (BITWISE_*, INTDIV, LOGICAL_* but the
#: left shift, SELECT, comparisons, REDUCE_ALL/ANY, GATHER, SCATTER: its "Not Supported
#: Operators"; float-only operators; CUSTOM) are not.
U55_OPS = frozenset({
    Op.ABS, Op.ADD, Op.ARGMAX, Op.ARITHMETIC_RIGHT_SHIFT, Op.AVG_POOL2D, Op.CAST, Op.CLAMP, Op.CLZ,
    Op.CONCAT, Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.IDENTITY, Op.LOGICAL_LEFT_SHIFT, Op.MATMUL,
    Op.MAXIMUM, Op.MAX_POOL2D, Op.MINIMUM, Op.MUL, Op.NEGATE, Op.PAD, Op.REDUCE_MAX, Op.REDUCE_MIN,
    Op.REDUCE_SUM, Op.RESCALE, Op.RESHAPE, Op.RESIZE, Op.REVERSE, Op.SLICE, Op.SUB, Op.TABLE, Op.TILE,
    Op.TRANSPOSE, Op.TRANSPOSE_CONV2D})

#: TOSA 1.0 operators of the PRO-FP profile only (no integer form): never on an Ethos-U.
FLOAT_ONLY_OPS = frozenset({Op.ERF, Op.SIGMOID, Op.TANH, Op.CEIL, Op.FLOOR, Op.EXP, Op.LOG, Op.RECIPROCAL,
                            Op.RSQRT, Op.SIN, Op.COS, Op.POW, Op.REDUCE_PRODUCT, Op.FFT2D, Op.RFFT2D})

_INT = (DType.INT8, DType.INT16, DType.INT32)
_CONV_OPS = (Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.TRANSPOSE_CONV2D)


def npu_operators(profile: str) -> frozenset[Op] | None:
    """The operators the NPU of ``profile`` runs at all (for some data types), None for all."""
    return U55_OPS if profile in ("ethos-u55", "ethos-u65") else None


def unsupported_reason(profile: str, facts: OpFacts) -> str | None:
    """Why the NPU of ``profile`` cannot run the operator (one line naming the rule and its
    source), or None if it runs it."""
    if profile == "all":
        return None
    if facts.op is Op.CUSTOM:
        return "a CUSTOM operator runs on the host CPU"
    floating = _floating_dtype(facts)
    if floating is not None:
        source = _SOURCE_U85 if profile == "ethos-u85" else _SOURCE_U55
        return f"{floating.name} data: the NPU runs TOSA PRO-INT only, no floating point ({source})"
    if profile == "ethos-u85":
        return None
    if facts.op not in U55_OPS:
        return f"{facts.op.name} is not an Ethos-U55/U65 operator ({_SOURCE_U55})"
    check = _U55_CHECKS.get(facts.op)
    reason = check(facts) if check is not None else None
    return f"{facts.op.name}: {reason} ({_SOURCE_U55})" if reason else None


def _floating_dtype(facts: OpFacts) -> DType | None:
    for t in (*facts.input_types, *facts.output_types):
        if t.dtype.is_float:
            return t.dtype
    return None


# --- the Ethos-U55/U65 per-operator rules (each returns what breaks it, or None) ---------------

def _conv(facts: OpFacts) -> str | None:
    if facts.in_dtype() not in (DType.INT8, DType.INT16):
        return f"input {_name(facts.in_dtype())}, needs int8 or int16"
    if facts.in_dtype() is DType.INT16 and facts.in_dtype(1) not in (DType.INT8, DType.INT4):
        return "int16 input needs int8 weights"
    kernel = _kernel_hw(facts)
    if kernel is not None and (kernel[0] > 64 or kernel[0] * kernel[1] > 4096):
        return f"kernel {kernel[0]}x{kernel[1]}, at most 64 high and 4096 elements"
    stride = tuple(getattr(facts.attribute, "stride", ()) or ())
    if facts.op is Op.TRANSPOSE_CONV2D:
        return None if stride in ((1, 1), (2, 2)) else f"stride {stride}, needs (1, 1) or (2, 2)"
    if any(not 1 <= s <= 3 for s in _effective_stride(facts, stride[-2:])) and not _tflite_large_stride(facts):
        return f"stride {stride}, each 1..3"
    return None


def _tflite_large_stride(facts: OpFacts) -> bool:
    """True for a TFLite CONV_2D that Vela's TFLite reader runs with a stride above 3: without
    dilation and padding (SUPPORTED_OPS.md, Ethos-U55/U65 TFLite CONV_2D: "Stride>3 is only
    supported IF (dilation = 1 AND padding = VALID)"; it then runs one output position at a time,
    ``mac_array.max_stride``)."""
    if not facts.tflite_source or facts.op is not Op.CONV2D:
        return False
    dilation = tuple(getattr(facts.attribute, "dilation", ()) or ())
    pad = tuple(getattr(facts.attribute, "pad", ()) or ())
    return all(d == 1 for d in dilation) and not any(pad)


def _effective_stride(facts: OpFacts, stride: tuple[int, ...]) -> tuple[int, ...]:
    """The (height, width) stride the NPU is given: 1 along an output dimension of one element,
    where the stride moves nothing (regor graphir_optimiser.cpp, ResetKernelAttributes; a global
    8x8 average pool of stride 8 runs on the NPU)."""
    shape = facts.output_types[0].shape if facts.output_types else ()
    if len(shape) < 3 or len(stride) != 2:
        return stride
    return tuple(1 if n == 1 else s for s, n in zip(stride, shape[-3:-1]))


def _kernel_hw(facts: OpFacts) -> tuple[int, int] | None:
    """A convolution's kernel (height, width) from its weights' shape."""
    if len(facts.input_types) < 2:
        return None
    shape = facts.input_types[1].shape
    if facts.op is Op.DEPTHWISE_CONV2D:   # [KH, KW, C, M]
        return shape[0], shape[1]
    return (shape[-3], shape[-2]) if len(shape) >= 3 else None


def _pool(facts: OpFacts) -> str | None:
    if facts.in_dtype() not in (DType.INT8, DType.INT16) or facts.out_dtype != facts.in_dtype():
        return f"{_name(facts.in_dtype())} to {_name(facts.out_dtype)}, needs int8 or int16 kept"
    stride = tuple(getattr(facts.attribute, "stride", ()) or ())
    if any(not 1 <= s <= 3 for s in _effective_stride(facts, stride)):
        return f"stride {stride}, each 1..3"
    kernel = tuple(getattr(facts.attribute, "kernel", ()) or ())
    padded = any(getattr(facts.attribute, "pad", ()) or ())
    if facts.op is Op.AVG_POOL2D and padded and any(k > 8 for k in kernel):
        return f"padded kernel {kernel}, at most 8x8"
    if len(kernel) == 2 and (kernel[0] > 256 or kernel[0] * kernel[1] > 65536):
        return f"kernel {kernel}, at most 256 high and 65536 elements"
    return None


def _matmul(facts: OpFacts) -> str | None:
    return None if facts.in_dtype() is DType.INT8 else f"{_name(facts.in_dtype())} inputs, needs int8"


def _reduce_extreme(facts: OpFacts) -> str | None:
    if facts.in_dtype() in (DType.INT8, DType.INT16) and facts.out_dtype == facts.in_dtype():
        return None
    return f"{_name(facts.in_dtype())}, needs int8 or int16 (a pooling operation)"


def _table(facts: OpFacts) -> str | None:
    return None if facts.in_dtype() is DType.INT8 else f"{_name(facts.in_dtype())} table, int8 only"


def _int32_only(facts: OpFacts) -> str | None:
    return None if facts.in_dtype() is DType.INT32 else f"{_name(facts.in_dtype())} input, int32 only"


def _shift_right(facts: OpFacts) -> str | None:
    if facts.in_dtype() is not DType.INT32:
        return f"{_name(facts.in_dtype())} input, int32 only"
    return None if getattr(facts.attribute, "round", True) else "round false, needs round true"


def _cast(facts: OpFacts) -> str | None:
    src, dst = facts.in_dtype(), facts.out_dtype
    if DType.BOOL in (src, dst):
        return "bool is not supported"
    if src is DType.INT32 and dst is not None and dst.bits < 32:
        return "a down-cast from int32 is not supported"
    return None


def _reverse(facts: OpFacts) -> str | None:
    if facts.in_dtype() not in (DType.INT8, DType.INT16):
        return f"{_name(facts.in_dtype())}, needs int8 or int16"
    rank = len(facts.input_types[0].shape)
    axis = getattr(facts.attribute, "axis", 0)
    return None if rank >= 3 and axis in (rank - 3, rank - 2) else f"axis {axis}, only H or W"


def _data_movement(facts: OpFacts) -> str | None:
    return None if facts.in_dtype() in _INT or facts.in_dtype() is DType.INT48 else \
        f"{_name(facts.in_dtype())}, needs int8, int16 or int32"


def _transpose(facts: OpFacts) -> str | None:
    if facts.in_dtype() not in _INT:
        return f"{_name(facts.in_dtype())}, needs int8, int16 or int32"
    if facts.in_dtype() is DType.INT32 and len(facts.input_types[0].shape) > 4:
        return "int32 of rank above 4"
    return None


def _argmax(facts: OpFacts) -> str | None:
    shape = facts.input_types[0].shape
    axis = getattr(facts.attribute, "axis", -1)
    if facts.in_dtype() is not DType.INT8:
        return f"{_name(facts.in_dtype())}, int8 only"
    if axis not in (-1, len(shape) - 1) or not shape or shape[-1] > 127:
        return "reduces over channels of at most 127 only"
    return None


def _rescale(facts: OpFacts) -> str | None:
    if facts.in_dtype() is DType.INT48 and not facts.fused:
        return "an int48 input only fused after an int16 convolution"
    return None


def _resize(facts: OpFacts) -> str | None:
    scale = facts.constant(1)
    if scale is None or len(scale) != 4:
        return None
    factors = [scale[0] / scale[1], scale[2] / scale[3]]
    if all(f in (1, 2, 4, 8) for f in factors) and any(f > 1 for f in factors):
        return None
    return f"scale {factors[0]:g}x{factors[1]:g}, needs a power-of-two upscale 2x..8x"


def _name(dtype: DType | None) -> str:
    return dtype.name.lower() if dtype is not None else "no"


_U55_CHECKS: dict[Op, Callable[[OpFacts], str | None]] = {
    **dict.fromkeys(_CONV_OPS, _conv),
    Op.AVG_POOL2D: _pool, Op.MAX_POOL2D: _pool, Op.MATMUL: _matmul,
    Op.REDUCE_MAX: _reduce_extreme, Op.REDUCE_MIN: _reduce_extreme, Op.TABLE: _table,
    Op.CLZ: _int32_only, Op.LOGICAL_LEFT_SHIFT: _int32_only, Op.ARITHMETIC_RIGHT_SHIFT: _shift_right,
    Op.CAST: _cast, Op.REVERSE: _reverse, Op.TRANSPOSE: _transpose, Op.ARGMAX: _argmax,
    Op.RESCALE: _rescale, Op.RESIZE: _resize,
    **dict.fromkeys((Op.CONCAT, Op.RESHAPE, Op.SLICE, Op.TILE, Op.PAD, Op.IDENTITY), _data_movement),
}

