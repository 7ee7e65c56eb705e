"""TOSA levels: the argument ranges an implementation supports (specification, "Levels").

TOSA 1.0 defines two levels (tosa.xml ``<levels>``): "none", the full range of each
operator's arguments, and "8K", ranges enough for frames up to 8K. An operator argument
beyond its level's maximum fails a ``LEVEL_CHECK``, which makes the graph's result
unpredictable; npu-sim refuses such a graph with a :class:`GraphValidationError`, as
Arm's reference model does at its default level, 8K (also npu-sim's default).

The checked limits (the ``<levellimit>`` and ``<rank max="MAX_RANK">`` entries of
tosa.xml v1.0.1):

* MAX_RANK: the rank of every tensor an operator reads or writes;
* MAX_KERNEL: convolution and pooling kernel sizes (convolutions: ``dilation * K``),
  their pads and TRANSPOSE_CONV2D's out_pad, FFT2D/RFFT2D's H and W;
* MAX_STRIDE: convolution and pooling strides;
* MAX_SCALE: RESIZE's ``scale_n / scale_d`` in each direction;
* MAX_TENSOR_LIST_SIZE: CONCAT's inputs, and the input and output lists of COND_IF,
  WHILE_LOOP and CUSTOM.

MAX_NESTING (control-flow depth) is checked when the graph runs (an ERROR_IF of
COND_IF and WHILE_LOOP), and MAX_LOG2_SIZE bounds the integer type of sizes and indices.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from npu_sim.errors import GraphValidationError, InputError
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator
from npu_sim.tosa.ops import Op


@dataclass(frozen=True)
class Level:
    """The maxima of one TOSA level."""

    name: str
    max_rank: int
    max_kernel: int
    max_stride: int
    max_scale: int
    max_tensor_list_size: int


LEVELS: dict[str, Level] = {
    "8K": Level("8K", max_rank=6, max_kernel=8192, max_stride=8192, max_scale=256,
                max_tensor_list_size=64),
    "none": Level("none", max_rank=32, max_kernel=2147483647, max_stride=2147483647, max_scale=2048,
                  max_tensor_list_size=256),
}

#: The level graphs are loaded at, as in Arm's reference model.
DEFAULT_LEVEL = "8K"

_CONVOLUTIONS = (Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D)
_POOLS = (Op.AVG_POOL2D, Op.MAX_POOL2D)
_LISTS = (Op.CONCAT, Op.COND_IF, Op.WHILE_LOOP, Op.CUSTOM)
#: the operators with arguments a level bounds besides their operands' ranks
_WITH_ARGUMENTS = frozenset((*_CONVOLUTIONS, *_POOLS, *_LISTS, Op.TRANSPOSE_CONV2D, Op.FFT2D, Op.RFFT2D,
                             Op.RESIZE))


def level_named(name: str) -> Level:
    """The level called ``name`` ("8K" or "none", any case); InputError otherwise."""
    for key, level in LEVELS.items():
        if key.lower() == str(name).lower():
            return level
    raise InputError(f"unknown TOSA level {name!r} (levels: {', '.join(LEVELS)})")


def check_level(graph: Graph, level: str | Level = DEFAULT_LEVEL) -> None:
    """GraphValidationError naming the first operator argument beyond ``level``'s maxima."""
    limits = level if isinstance(level, Level) else level_named(level)
    for block in graph.blocks():
        # an operator passes every check but the rank's unless it has arguments of its own
        over_rank = frozenset(name for name, tensor in block.tensors.items()
                              if tensor.dtype is not DType.SHAPE and not tensor.is_unranked
                              and len(tensor.shape) > limits.max_rank)
        for op in block.operators:
            if op.op in _WITH_ARGUMENTS or over_rank and not (
                    over_rank.isdisjoint(op.inputs) and over_rank.isdisjoint(op.outputs)):
                _check_operator(block, op, limits)


def _check_operator(block: Block, op: Operator, level: Level) -> None:
    check = _OperatorCheck(block, op, level)
    for step in _STEPS:
        step(check)


@dataclass(frozen=True)
class _OperatorCheck:
    """One operator against one level: ``over`` raises for an argument beyond a maximum."""

    block: Block
    op: Operator
    level: Level

    def over(self, what: str, value: int | Fraction, limit_name: str, limit: int) -> None:
        if value > limit:
            raise GraphValidationError(
                f"block {self.block.name!r}, {self.op.name}: {what} is {value}, more than {limit_name} = "
                f"{limit} of TOSA level {self.level.name} (level 'none' allows it)")

    def shape(self, index: int) -> tuple[int, ...]:
        """Shape of input ``index``."""
        return self.block.tensors[self.op.inputs[index]].shape


def _check_ranks(c: _OperatorCheck) -> None:
    for name in (*c.op.inputs, *c.op.outputs):
        tensor = c.block.tensors.get(name)
        if tensor is not None and tensor.dtype is not DType.SHAPE and not tensor.is_unranked:
            c.over(f"the rank of {name!r}", len(tensor.shape), "MAX_RANK", c.level.max_rank)


def _check_kernels(c: _OperatorCheck) -> None:
    op, max_kernel = c.op.op, c.level.max_kernel
    if op in _CONVOLUTIONS:
        weights = c.shape(1)
        kernel = weights[:2] if op is Op.DEPTHWISE_CONV2D else weights[1:-1]
        for axis, (size, dilation) in enumerate(zip(kernel, c.op.attribute.dilation)):
            c.over(f"dilation * kernel size on axis {axis}", dilation * size, "MAX_KERNEL", max_kernel)
    if op is Op.TRANSPOSE_CONV2D:
        for size in c.shape(1)[1:3]:
            c.over("the kernel size", size, "MAX_KERNEL", max_kernel)
    if op in _POOLS:
        for size in c.op.attribute.kernel:
            c.over("the kernel size", size, "MAX_KERNEL", max_kernel)


def _check_strides_and_pads(c: _OperatorCheck) -> None:
    op, attr = c.op.op, c.op.attribute
    if op in _CONVOLUTIONS or op in _POOLS or op is Op.TRANSPOSE_CONV2D:
        for stride in attr.stride:
            c.over("the stride", stride, "MAX_STRIDE", c.level.max_stride)
        pads = attr.out_pad if op is Op.TRANSPOSE_CONV2D else attr.pad
        for pad in pads:
            c.over("the pad", pad, "MAX_KERNEL", c.level.max_kernel)


def _check_transform_sizes(c: _OperatorCheck) -> None:
    if c.op.op in (Op.FFT2D, Op.RFFT2D):
        for size in c.shape(0)[1:3]:
            c.over("the transform size", size, "MAX_KERNEL", c.level.max_kernel)


def _check_resize_scale(c: _OperatorCheck) -> None:
    if c.op.op is not Op.RESIZE:
        return
    scale = c.block.tensors[c.op.inputs[1]].data
    if scale is not None and len(scale) == 4 and scale[1] > 0 and scale[3] > 0:
        for axis, first in (("y", 0), ("x", 2)):
            # scale_n / scale_d, exactly
            ratio = Fraction(int(scale[first]), int(scale[first + 1]))
            c.over(f"scale_{axis}", ratio, "MAX_SCALE", c.level.max_scale)


def _check_list_sizes(c: _OperatorCheck) -> None:
    op, limit = c.op, c.level.max_tensor_list_size
    if op.op in _LISTS:
        c.over("the input list length", len(op.inputs) - (1 if op.op is Op.COND_IF else 0),
               "MAX_TENSOR_LIST_SIZE", limit)
        c.over("the output list length", len(op.outputs), "MAX_TENSOR_LIST_SIZE", limit)


#: the checks in the order their violations are reported
_STEPS = (_check_ranks, _check_kernels, _check_strides_and_pads, _check_transform_sizes,
          _check_resize_scale, _check_list_sizes)
