"""Unknown dimensions (``?`` in MLIR, -1 here) resolved from the inputs a user gives.

Converters keep the batch dimension of most models unknown. Given the shapes of the
graph inputs (from the input files, ``--input-shape``, or batch 1 for random inputs), every
operator's output shape follows from the TOSA shape rules (:mod:`npu_sim.tosa.type_rules`),
block by block in operator order; a RESHAPE whose new shape holds -1 takes the one size that
keeps the element count. A dimension no rule fixes is refused by name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from npu_sim.errors import InputError, TosaFormatError
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, Tensor
from npu_sim.tosa.ops import Op
from npu_sim.tosa.type_rules import RuleViolation, expected_outputs


def has_unknown_dims(graph: Graph) -> bool:
    return any(d < 0 for b in graph.blocks() for t in b.tensors.values() for d in t.shape)


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME=1x96x96x3`` -> ``("NAME", (1, 96, 96, 3))``."""
    name, sep, dims = text.rpartition("=")
    try:
        shape = tuple(int(d) for d in dims.lower().split("x")) if dims else ()
    except ValueError:
        shape = ()
    if not sep or not name or not shape or any(d < 1 for d in shape):
        raise InputError(f"--input-shape {text!r}: expected NAME=D0xD1x... with positive sizes (e.g. x=1x96x96x3)")
    return name, shape


def resolve_unknown_dims(graph: Graph, input_shapes: Mapping[str, Sequence[int]] | None = None) -> None:
    """Fix every -1 of ``graph`` (in place): graph inputs from ``input_shapes`` (by name),
    else each unknown dimension of an input is 1 (batch 1); the rest by the shape rules."""
    given = dict(input_shapes or {})
    main = graph.main
    unknown = [n for n in given if n not in main.inputs]
    if unknown:
        raise InputError(f"--input-shape {unknown[0]}: the graph has no input {unknown[0]!r} "
                         f"(its inputs are {', '.join(map(repr, main.inputs))})")
    for name in main.inputs:
        tensor = main.tensors[name]
        shape = tuple(given.get(name, [1 if d < 0 else d for d in tensor.shape]))
        if len(shape) != len(tensor.shape) or any(k >= 0 and k != d for k, d in zip(tensor.shape, shape)):
            raise InputError(f"input {name!r} has shape {_show(tensor.shape)}; {list(shape)} does not fit it")
        tensor.shape = shape
    _resolve_block(graph, main, depth=0)


def _show(shape: Sequence[int]) -> str:
    return "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"


def _resolve_block(graph: Graph, block: Block, depth: int) -> None:
    for tensor in block.tensors.values():
        if tensor.data is not None and any(d < 0 for d in tensor.shape):
            raise TosaFormatError(f"constant {tensor.name!r} has unknown dimensions {_show(tensor.shape)}")
    for operator in block.operators:
        if operator.op in (Op.COND_IF, Op.WHILE_LOOP):
            _resolve_control(graph, block, operator, depth)
        elif any(d < 0 for n in operator.outputs for d in block.tensors[n].shape):
            _resolve_operator(block, operator)


def _resolve_operator(block: Block, operator: Operator) -> None:
    tensors = [block.tensors[n] for n in operator.inputs]
    if operator.op is Op.RESHAPE and len(tensors) > 1 and tensors[1].data is not None:
        _complete_reshape(tensors[0], tensors[1])
    types = [t.type for t in tensors]
    values = [t.data if t.dtype is DType.SHAPE else None for t in tensors]
    try:
        expected = expected_outputs(operator.op, operator.attribute, types, values)
    except RuleViolation as exc:
        raise TosaFormatError(f"{operator.name}: {exc}") from None
    for k, name in enumerate(operator.outputs):
        rule = expected[k][0] if expected is not None and k < len(expected) else None
        _set_shape(operator, block.tensors[name], rule)


def _set_shape(operator: Operator, tensor: Tensor, rule: Sequence[int] | None) -> None:
    """Give ``tensor`` the shape the rule fixes, where it agrees with the dimensions known."""
    if rule is None or any(d < 0 for d in rule):
        raise TosaFormatError(f"{operator.name}: cannot work out the unknown dimensions of {tensor.name!r} "
                              f"{_show(tensor.shape)} from its inputs (give --input-shape)")
    if len(rule) != len(tensor.shape) or any(d >= 0 and d != r for d, r in zip(tensor.shape, rule)):
        raise TosaFormatError(f"{operator.name}: output {tensor.name!r} {_show(tensor.shape)} cannot be {list(rule)}")
    tensor.shape = tuple(rule)


def _complete_reshape(source: Tensor, new_shape: Tensor) -> None:
    """A RESHAPE to a shape holding one -1: the size that keeps the element count."""
    assert new_shape.data is not None
    dims = [int(d) for d in np.asarray(new_shape.data).reshape(-1)]
    if dims.count(-1) != 1 or any(d < 0 for d in source.shape):
        return
    known = math.prod(d for d in dims if d != -1)
    total = math.prod(source.shape)
    if known <= 0 or total % known:
        raise TosaFormatError(f"RESHAPE: {list(source.shape)} cannot take the shape {dims}")
    dims[dims.index(-1)] = total // known
    new_shape.data = np.array(dims, dtype=np.asarray(new_shape.data).dtype)


def _resolve_control(graph: Graph, block: Block, operator: Operator, depth: int) -> None:
    """The branches' inputs from the operator's arguments; the results from the first branch."""
    attribute = operator.attribute
    if operator.op is Op.COND_IF:
        names = [attribute.then_graph, attribute.else_graph]
        arguments = operator.inputs[1:]
    else:
        names = [attribute.cond_graph, attribute.body_graph]
        arguments = operator.inputs
    branches = [graph.block(n) for n in names]
    for branch in branches:
        for inner, outer in zip(branch.inputs, arguments):
            branch.tensors[inner].shape = block.tensors[outer].shape
        _resolve_block(graph, branch, depth + 1)
    results = branches[0] if operator.op is Op.COND_IF else branches[1]
    for name, source in zip(operator.outputs, results.outputs):
        block.tensors[name].shape = results.tensors[source].shape
