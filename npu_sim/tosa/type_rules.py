"""Static shape rules of the TOSA 1.0 operators: what their outputs must look like.

``expected_outputs(op, attribute, inputs, shape_values)`` returns, per output,
the ``(shape, dtype)`` the specification fixes given the input types (``None``
where it leaves a choice, e.g. CAST's output type), or ``None`` for operators
without a static rule here. A combination the specification forbids (shapes
that do not broadcast, a convolution whose channel counts disagree, an
attribute of the wrong length...) raises :class:`RuleViolation` with the reason.

The rules are the ERROR_IF conditions on shapes of the v1.0.1 pseudocode
(``broadcast_shape``, the ``idiv_check`` output-size formulas of convolution and
pooling, CONCAT, PAD, SLICE, TILE, ...). Validation uses them to check a graph,
the builder to infer output types. Element-type combinations are checked
against the specification's type-support tables (:mod:`npu_sim.tosa.profiles`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op
from npu_sim.tosa.schema_generated import RoundingMode

#: TOSA's DOUBLE_ROUND rounding mode (only with scale32)
_DOUBLE_ROUND = int(RoundingMode.DOUBLE_ROUND)

Shape = tuple[int, ...]
Expected = tuple["Shape | None", "DType | None"]


class RuleViolation(Exception):
    """An operator's operands break a shape rule of the specification."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise RuleViolation(message)


def broadcast(shapes: Sequence[Shape]) -> Shape:
    """TOSA's broadcast_shape over several operands: equal ranks, dims equal or 1."""
    result = list(shapes[0])
    for shape in shapes[1:]:
        _require(len(shape) == len(result), f"operand ranks differ ({len(result)} vs "
                                            f"{len(shape)}): TOSA broadcasts only between equal ranks")
        for i, d in enumerate(shape):
            if result[i] == 1:
                result[i] = d
            else:
                _require(d in (1, result[i]), f"shapes {list(shapes[0])} and {list(shape)} do not "
                                              f"broadcast (dimension {i})")
    return tuple(result)


def _exact_size(numerator: int, divisor: int, what: str) -> int:
    _require(divisor >= 1, f"{what}: stride must be >= 1, is {divisor}")
    _require(numerator % divisor == 0, f"{what}: ({numerator}) is not a multiple of the stride "
                                       f"{divisor} (the specification's idiv_check)")
    return numerator // divisor + 1


def _length(values: Sequence[int], n: int, what: str) -> None:
    _require(len(values) == n, f"attribute {what} must have {n} values, has {len(values)}")


def _rank(t: TensorType, n: int, what: str) -> None:
    _require(len(t.shape) == n, f"{what} must have rank {n}, has shape {list(t.shape)}")


def _axis(axis: int, rank: int) -> None:
    _require(0 <= axis < max(rank, 1), f"axis {axis} is out of range for rank {rank}")


def _conv_out_dtype(in_dtype: DType) -> DType | None:
    return {DType.INT8: DType.INT32, DType.INT16: DType.INT48, DType.FP8E4M3: DType.FP16,
            DType.FP8E5M2: DType.FP16}.get(in_dtype)


#: per input, its value where known at compile time (SHAPE operands), else None
ShapeValues = list["np.ndarray | None"]
Rule = Callable[[Attribute, list[TensorType], ShapeValues], "list[Expected]"]
_RULES: dict[Op, Rule] = {}


def _rule(*ops: Op) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for op in ops:
            _RULES[op] = fn
        return fn
    return register


_SAME_TYPE_BINARY = (Op.ADD, Op.SUB, Op.MAXIMUM, Op.MINIMUM, Op.POW, Op.INTDIV,
                     Op.BITWISE_AND, Op.BITWISE_OR, Op.BITWISE_XOR, Op.LOGICAL_AND,
                     Op.LOGICAL_OR, Op.LOGICAL_XOR, Op.LOGICAL_LEFT_SHIFT,
                     Op.LOGICAL_RIGHT_SHIFT, Op.ARITHMETIC_RIGHT_SHIFT)
_UNARY = (Op.ABS, Op.BITWISE_NOT, Op.CEIL, Op.CLZ, Op.COS, Op.EXP, Op.FLOOR, Op.LOG,
          Op.LOGICAL_NOT, Op.RECIPROCAL, Op.RSQRT, Op.SIN, Op.ERF, Op.SIGMOID, Op.TANH,
          Op.CLAMP, Op.IDENTITY)


@_rule(*_SAME_TYPE_BINARY)
def _binary(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    _require(ins[0].dtype == ins[1].dtype, f"input types differ: {ins[0].dtype.name} and "
                                           f"{ins[1].dtype.name}")
    return [(broadcast([ins[0].shape, ins[1].shape]), ins[0].dtype)]


@_rule(Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL)
def _compare(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    _require(ins[0].dtype == ins[1].dtype, f"input types differ: {ins[0].dtype.name} and "
                                           f"{ins[1].dtype.name}")
    return [(broadcast([ins[0].shape, ins[1].shape]), DType.BOOL)]


@_rule(Op.MUL)
def _mul(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    _require(ins[0].dtype == ins[1].dtype, f"input types differ: {ins[0].dtype.name} and "
                                           f"{ins[1].dtype.name}")
    out = DType.INT32 if ins[0].dtype in (DType.INT8, DType.INT16, DType.INT32) else ins[0].dtype
    return [(broadcast([ins[0].shape, ins[1].shape]), out)]


@_rule(Op.SELECT)
def _select(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    _require(ins[0].dtype == DType.BOOL, f"the condition must be BOOL, is {ins[0].dtype.name}")
    _require(ins[1].dtype == ins[2].dtype, f"input types differ: {ins[1].dtype.name} and "
                                           f"{ins[2].dtype.name}")
    return [(broadcast([t.shape for t in ins]), ins[1].dtype)]


@_rule(*_UNARY)
def _unary(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    return [(ins[0].shape, ins[0].dtype)]


@_rule(Op.NEGATE)
def _negate(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    return [(ins[0].shape, ins[0].dtype)]


@_rule(Op.TABLE)
def _table(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    out = {DType.INT8: DType.INT8, DType.INT16: DType.INT32}.get(ins[0].dtype)
    return [(ins[0].shape, out)]


@_rule(Op.CAST)
def _convert(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    return [(ins[0].shape, None)]


def rescale_attribute_errors(attr: Attribute, ins: Sequence[TensorType]) -> list[str]:
    """The ERROR_IFs of RESCALE its attributes and input types break (the multiplier's width,
    scale32 with int48, DOUBLE_ROUND without scale32, an unsigned int32 or int48 input): decided
    before any data, so validation refuses them (a timing-only run runs no kernel) and the kernel
    checks the same list."""
    scale32 = bool(getattr(attr, "scale32", False))
    in_t = ins[0].dtype
    failed = []
    if len(ins) > 1:
        mul_t = DType.INT32 if scale32 else DType.INT16
        if ins[1].dtype is not mul_t:
            failed.append(f"multiplier must be {mul_t.name} when scale32 is {scale32}")
    if scale32 and in_t is DType.INT48:
        failed.append("ERROR_IF(scale32 && is_same<in_t,i48_t>())")
    if not scale32 and int(getattr(attr, "rounding_mode", 0)) == _DOUBLE_ROUND:
        failed.append("ERROR_IF(!scale32 && (rounding_mode == DOUBLE_ROUND))")
    if bool(getattr(attr, "input_unsigned", False)) and in_t in (DType.INT32, DType.INT48):
        failed.append(f"ERROR_IF(is_same<in_t, {'i32_t' if in_t is DType.INT32 else 'i48_t'}> && input_unsigned)")
    return failed


@_rule(Op.RESCALE)
def _rescale(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    failed = rescale_attribute_errors(attr, ins)
    _require(not failed, failed[0] if failed else "")
    return [(ins[0].shape, None)]


@_rule(Op.ARGMAX)
def _argmax(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    shape = ins[0].shape
    _require(0 <= attr.axis < len(shape), f"axis {attr.axis} is out of range for rank {len(shape)}")
    return [(shape[:attr.axis] + shape[attr.axis + 1:], DType.INT32)]


@_rule(Op.REDUCE_ALL, Op.REDUCE_ANY, Op.REDUCE_MAX, Op.REDUCE_MIN, Op.REDUCE_PRODUCT,
       Op.REDUCE_SUM)
def _reduce(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    shape = ins[0].shape
    _require(0 <= attr.axis < len(shape), f"axis {attr.axis} is out of range for rank {len(shape)}")
    return [(shape[:attr.axis] + (1,) + shape[attr.axis + 1:], ins[0].dtype)]


@_rule(Op.REVERSE)
def _reverse(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    _axis(attr.axis, len(ins[0].shape))
    return [(ins[0].shape, ins[0].dtype)]


@_rule(Op.CONCAT)
def _concat(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    first = ins[0].shape
    _axis(attr.axis, len(first))
    total = 0
    for t in ins:
        _require(t.dtype == ins[0].dtype,
                 f"input types differ: {ins[0].dtype.name} and {t.dtype.name}")
        _require(len(t.shape) == len(first),
                 f"input ranks differ: {list(first)} and {list(t.shape)}")
        for i, (a, b) in enumerate(zip(first, t.shape)):
            _require(i == attr.axis or a == b, f"inputs {list(first)} and {list(t.shape)} differ "
                                               f"outside the concatenation axis {attr.axis}")
        total += t.shape[attr.axis] if t.shape else 1
    shape = list(first)
    if shape:
        shape[attr.axis] = total
    return [(tuple(shape), ins[0].dtype)]


def _shape_values(values: ShapeValues, index: int, n: int | None, what: str) -> list[int] | None:
    value = values[index] if index < len(values) else None
    if value is None:
        return None
    flat = [int(v) for v in np.asarray(value).reshape(-1).tolist()]
    if n is not None:
        _require(len(flat) == n, f"{what} must hold {n} values, holds {len(flat)}")
    return flat


@_rule(Op.RESHAPE)
def _reshape(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    new = _shape_values(values, 1, None, "the shape operand")
    if new is None:
        return [(None, ins[0].dtype)]
    _require(all(d >= 0 for d in new), f"new shape {new} has a negative dimension")
    _require(TensorType(tuple(new), ins[0].dtype).element_count == ins[0].element_count,
             f"new shape {new} does not hold the {ins[0].element_count} elements of "
             f"{list(ins[0].shape)}")
    return [(tuple(new), ins[0].dtype)]


@_rule(Op.PAD)
def _pad(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    shape = ins[0].shape
    padding = _shape_values(values, 1, 2 * len(shape), "padding")
    _require(ins[2].dtype == ins[0].dtype, f"pad_const is {ins[2].dtype.name}, the input "
                                           f"{ins[0].dtype.name}")
    if padding is None:
        return [(None, ins[0].dtype)]
    _require(all(p >= 0 for p in padding), f"padding {padding} has a negative value")
    return [(tuple(d + padding[2 * i] + padding[2 * i + 1] for i, d in enumerate(shape)),
             ins[0].dtype)]


@_rule(Op.SLICE)
def _slice(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    shape = ins[0].shape
    start = _shape_values(values, 1, len(shape), "start")
    size = _shape_values(values, 2, len(shape), "size")
    if start is None or size is None:
        return [(tuple(size) if size is not None else None, ins[0].dtype)]
    for i, d in enumerate(shape):
        _require(start[i] >= 0 and size[i] > 0 and start[i] + size[i] <= d,
                 f"slice start {start} size {size} does not fit in {list(shape)}")
    return [(tuple(size), ins[0].dtype)]


@_rule(Op.TILE)
def _tile(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    multiples = _shape_values(values, 1, len(ins[0].shape), "multiples")
    if multiples is None:
        return [(None, ins[0].dtype)]
    return [(tuple(d * m for d, m in zip(ins[0].shape, multiples)), ins[0].dtype)]


@_rule(Op.TRANSPOSE)
def _transpose(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    shape = ins[0].shape
    perms = list(attr.perms)
    _require(sorted(perms) == list(range(len(shape))),
             f"perms {perms} is not a permutation of the {len(shape)} axes")
    return [(tuple(shape[p] for p in perms), ins[0].dtype)]


@_rule(Op.GATHER)
def _gather(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    values_t, indices = ins
    _rank(values_t, 3, "values")
    _rank(indices, 2, "indices")
    n, _, c = values_t.shape
    _require(indices.shape[0] == n,
             f"indices batch {indices.shape[0]} differs from values batch {n}")
    return [((n, indices.shape[1], c), values_t.dtype)]


@_rule(Op.SCATTER)
def _scatter(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    values_in, indices, inputs = ins
    _rank(values_in, 3, "values_in")
    _rank(indices, 2, "indices")
    _rank(inputs, 3, "input")
    n, _, c = values_in.shape
    _require(indices.shape[0] == n and inputs.shape[0] == n, "batch sizes differ")
    _require(inputs.shape == (n, indices.shape[1], c),
             f"input {list(inputs.shape)} must be [N, W, C] = {[n, indices.shape[1], c]}")
    _require(inputs.dtype == values_in.dtype, "values_in and input types differ")
    return [(values_in.shape, values_in.dtype)]


@_rule(Op.MATMUL)
def _matmul(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    a, b = ins[0], ins[1]
    _rank(a, 3, "A")
    _rank(b, 3, "B")
    _require(a.shape[0] == b.shape[0], f"batch sizes differ: {a.shape[0]} and {b.shape[0]}")
    _require(a.shape[2] == b.shape[1], f"A {list(a.shape)} and B {list(b.shape)}: inner "
                                       "dimensions differ")
    _require(a.dtype == b.dtype, f"A is {a.dtype.name}, B is {b.dtype.name}")
    return [((a.shape[0], a.shape[1], b.shape[2]), _conv_out_dtype(a.dtype))]


def _bias(bias: TensorType, channels: int) -> None:
    _rank(bias, 1, "bias")
    _require(bias.shape[0] in (channels, 1), f"bias has {bias.shape[0]} values for "
                                             f"{channels} output channels")


def _forward_conv_sizes(attr: Attribute, inp: TensorType, weight: TensorType, kernel: Sequence[int]) -> list[int]:
    """Checks shared by CONV2D, CONV3D and DEPTHWISE_CONV2D; the output's spatial sizes.

    ``kernel`` holds the kernel's spatial sizes (their place in the weight differs by op).
    """
    spatial = len(kernel)
    _rank(inp, spatial + 2, "input")
    _rank(weight, spatial + 2, "weight")
    _length(attr.pad, 2 * spatial, "pad")
    _length(attr.stride, spatial, "stride")
    _length(attr.dilation, spatial, "dilation")
    _require(min(attr.pad) >= 0, f"pad {list(attr.pad)} is negative")
    _require(min(attr.dilation) >= 1, f"dilation {list(attr.dilation)} must be >= 1")
    names = ("depth", "height", "width")[-spatial:]
    return [_exact_size(inp.shape[1 + i] - 1 + attr.pad[2 * i] + attr.pad[2 * i + 1]
                        - (k - 1) * attr.dilation[i], attr.stride[i], names[i])
            for i, k in enumerate(kernel)]


def _same_input_channels(inp: TensorType, weight: TensorType, weight_channels: int) -> None:
    _require(weight_channels == inp.shape[-1],
             f"weight {list(weight.shape)} expects {weight_channels} input channels, the input "
             f"{list(inp.shape)} has {inp.shape[-1]}")


def _forward_conv(attr: Attribute, ins: list[TensorType], spatial: int) -> list[Expected]:
    inp, weight, bias = ins[0], ins[1], ins[2]
    sizes = _forward_conv_sizes(attr, inp, weight, weight.shape[1:1 + spatial])
    oc = weight.shape[0]
    _same_input_channels(inp, weight, weight.shape[-1])
    _bias(bias, oc)
    return [((inp.shape[0], *sizes, oc), _conv_out_dtype(inp.dtype) or inp.dtype)]


@_rule(Op.CONV2D)
def _conv2d(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    return _forward_conv(attr, ins, spatial=2)


@_rule(Op.CONV3D)
def _conv3d(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    return _forward_conv(attr, ins, spatial=3)


@_rule(Op.DEPTHWISE_CONV2D)
def _depthwise(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    inp, weight, bias = ins[0], ins[1], ins[2]
    sizes = _forward_conv_sizes(attr, inp, weight, weight.shape[:2])
    wc, m = weight.shape[2:]
    _require(wc == inp.shape[-1], f"weight {list(weight.shape)} expects {wc} channels, the input "
                                  f"{list(inp.shape)} has {inp.shape[-1]}")
    _bias(bias, wc * m)
    return [((inp.shape[0], *sizes, wc * m), _conv_out_dtype(inp.dtype) or inp.dtype)]


@_rule(Op.TRANSPOSE_CONV2D)
def _transpose_conv(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    inp, weight, bias = ins[0], ins[1], ins[2]
    _rank(inp, 4, "input")
    _rank(weight, 4, "weight")
    _length(attr.out_pad, 4, "out_pad")
    _length(attr.stride, 2, "stride")
    n, ih, iw, ic = inp.shape
    oc, kh, kw, wic = weight.shape
    _same_input_channels(inp, weight, wic)
    _require(min(attr.stride) >= 1, f"stride {list(attr.stride)} must be >= 1")
    top, bottom, left, right = attr.out_pad
    oh = (ih - 1) * attr.stride[0] + top + bottom + kh
    ow = (iw - 1) * attr.stride[1] + left + right + kw
    _bias(bias, oc)
    return [((n, oh, ow, oc), _conv_out_dtype(inp.dtype) or inp.dtype)]


@_rule(Op.AVG_POOL2D, Op.MAX_POOL2D)
def _pool(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    inp = ins[0]
    _rank(inp, 4, "input")
    _length(attr.kernel, 2, "kernel")
    _length(attr.stride, 2, "stride")
    _length(attr.pad, 4, "pad")
    n, ih, iw, c = inp.shape
    _require(min(attr.kernel) >= 1, f"kernel {list(attr.kernel)} must be >= 1")
    _require(min(attr.pad) >= 0, f"pad {list(attr.pad)} is negative")
    top, bottom, left, right = attr.pad
    oh = _exact_size(ih + top + bottom - attr.kernel[0], attr.stride[0], "height")
    ow = _exact_size(iw + left + right - attr.kernel[1], attr.stride[1], "width")
    return [((n, oh, ow, c), inp.dtype)]


@_rule(Op.RESIZE)
def _resize(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    inp = ins[0]
    _rank(inp, 4, "input")
    scale = _shape_values(values, 1, 4, "scale")
    offset = _shape_values(values, 2, 2, "offset")
    border = _shape_values(values, 3, 2, "border")
    if scale is None or offset is None or border is None:
        return [(None, None)]
    n, ih, iw, c = inp.shape
    _require(min(scale) > 0, f"scale {scale} must be positive")
    oh = _exact_size((ih - 1) * scale[0] - offset[0] + border[0], scale[1], "height")
    ow = _exact_size((iw - 1) * scale[2] - offset[1] + border[1], scale[3], "width")
    return [((n, oh, ow, c), None)]


@_rule(Op.FFT2D)
def _fft(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    _rank(ins[0], 3, "input_real")
    _require(ins[0] == ins[1], "input_real and input_imag differ")
    return [(ins[0].shape, ins[0].dtype), (ins[0].shape, ins[0].dtype)]


@_rule(Op.RFFT2D)
def _rfft(attr: Attribute, ins: list[TensorType], values: ShapeValues) -> list[Expected]:
    _rank(ins[0], 3, "input")
    n, h, w = ins[0].shape
    return [((n, h, w // 2 + 1), ins[0].dtype), ((n, h, w // 2 + 1), ins[0].dtype)]


def expected_outputs(op: Op, attribute: Attribute, inputs: list[TensorType],
                     shape_values: ShapeValues) -> list[Expected] | None:
    """Output (shape, dtype) pairs the specification fixes; None where no rule applies."""
    rule = _RULES.get(op)
    if rule is None:
        return None
    return rule(attribute, inputs, shape_values)
