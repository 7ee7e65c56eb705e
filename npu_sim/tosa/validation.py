"""Structural validation of a TOSA graph: ``validate(graph)``.

Checks, raising :class:`~npu_sim.errors.GraphValidationError` naming the block,
operator and tensor at fault:

* the graph has a main block; block names are unique; every tensor an operator
  or a block signature names exists in the block;
* operator arity (:data:`npu_sim.tosa.ops.ARITY`) and attribute class;
* dataflow: no tensor produced twice, no operator cycle, every input produced
  before it is used (or a block input, a constant, a variable), every block
  output produced;
* variables (see :mod:`npu_sim.tosa.ir`): accessed only through VARIABLE_READ /
  VARIABLE_WRITE with matching types, declared in the main block, copies agree;
* control flow: COND_IF / WHILE_LOOP name existing blocks, no recursion, the
  condition is a one-element BOOL, operands and results match the blocks'
  signatures by position;
* static shape rules of the specification (:mod:`npu_sim.tosa.type_rules`) and,
  for TOSA 1.0 element types, that some typesupport row of the specification
  covers each operator's element types (:mod:`npu_sim.tosa.profiles`).

TOSA 1.1-draft operators are accepted here (reading and inspecting work);
:func:`check_supported` is what an executor or scheduler calls to refuse them,
and other valid-but-unimplemented features, with UnsupportedFeatureError.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np

from npu_sim.errors import GraphValidationError, UnsupportedFeatureError
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, TensorType
from npu_sim.tosa.ops import ARITY, TOSA_1_0_OPS, Op, attribute_class
from npu_sim.tosa.profiles import describe_binding, supported_rows, type_binding
from npu_sim.tosa.type_rules import RuleViolation, expected_outputs

_VARIABLE_ACCESSES = frozenset((Op.VARIABLE_READ, Op.VARIABLE_WRITE))
_CONSTANTS = frozenset((Op.CONST, Op.CONST_SHAPE))
#: the operators whose types no shape rule checks: control flow and variable accesses
_SPECIAL_TYPING = _VARIABLE_ACCESSES | {Op.COND_IF, Op.WHILE_LOOP}
#: element types TOSA 1.0 defines (DType.is_tosa_1_0, as a set for the per-operand checks)
_TOSA_1_0_DTYPES = frozenset(d for d in DType if d.is_tosa_1_0)


def validate(graph: Graph) -> None:
    """Raise GraphValidationError for the first structural problem found in ``graph``."""
    if not graph.regions or not any(r.blocks for r in graph.regions):
        raise GraphValidationError("graph has no main block")
    names: set[str] = set()
    for block in graph.blocks():
        if block.name in names:
            raise GraphValidationError(f"two blocks are named {block.name!r}")
        names.add(block.name)
    _check_variables(graph)
    for block in graph.blocks():  # names first: control flow looks into other blocks
        _check_names(block)
    for block in graph.blocks():
        _check_block(graph, block)
    _check_no_recursion(graph)


def _where(block: Block, op: Operator | None = None) -> str:
    return f"block {block.name!r}" + (f", {op.name}" if op is not None else "")


def _check_variables(graph: Graph) -> None:
    main = graph.main
    for block in graph.blocks():
        for tensor in block.tensors.values():
            if not tensor.variable or block is main:
                continue
            declared = main.tensors.get(tensor.name)
            if declared is None or not declared.variable:
                raise GraphValidationError(f"block {block.name!r}: variable {tensor.name!r} is "
                                           "not declared in the main block")
            if declared.type != tensor.type or declared.variable_key != tensor.variable_key:
                raise GraphValidationError(f"block {block.name!r}: variable {tensor.name!r} is "
                                           f"{tensor.type.dtype.name}{list(tensor.shape)}, "
                                           "declared as "
                                           f"{declared.dtype.name}{list(declared.shape)}")
    keys: dict[str, str] = {}
    for tensor in main.tensors.values():
        if tensor.variable:
            if tensor.variable_key in keys:
                raise GraphValidationError(f"variables {keys[tensor.variable_key]!r} and "
                                           f"{tensor.name!r} share the name "
                                           f"{tensor.variable_key!r}")
            keys[tensor.variable_key] = tensor.name
            if tensor.data is not None and np.asarray(tensor.data).size != tensor.element_count:
                raise GraphValidationError(f"variable {tensor.name!r}: its initial value holds "
                                           f"{np.asarray(tensor.data).size} element(s), "
                                           f"expected {tensor.element_count}")


def _check_names(block: Block) -> None:
    for kind, names in (("input", block.inputs), ("output", block.outputs)):
        for name in names:
            if name not in block.tensors:
                raise GraphValidationError(f"{_where(block)}: block {kind} {name!r} does not exist")
    for op in block.operators:
        for kind, names in (("input", op.inputs), ("output", op.outputs)):
            for name in names:
                if name not in block.tensors:
                    raise GraphValidationError(f"{_where(block, op)}: {kind} tensor {name!r} does "
                                               "not exist in the block")


def _check_block(graph: Graph, block: Block) -> None:
    for name in block.inputs:
        if block.tensors[name].variable:
            raise GraphValidationError(f"{_where(block)}: variable {name!r} cannot be a block "
                                       "input")
    producers, later = _producers(block)
    if not later.isdisjoint(producers):   # some operand is produced after its use, if at all
        _check_no_cycle(block, producers)
    _check_dataflow(graph, block, producers)


def _producers(block: Block) -> tuple[dict[str, Operator], set[str]]:
    """Tensor name -> the one operator producing it (each operator's form checked on the way),
    and the operands not produced by then where they are used."""
    producers: dict[str, Operator] = {}
    later: set[str] = set()
    variables = frozenset(n for n, t in block.tensors.items() if t.variable)
    inputs = set(block.inputs)
    forms: set[tuple] = set()
    for op in block.operators:
        _check_operator_form(block, op, variables, forms)
        later.update(name for name in op.inputs if name not in producers)
        for name in op.outputs:
            if name in producers:
                raise GraphValidationError(f"{_where(block, op)}: tensor {name!r} is already "
                                           f"produced by {producers[name].name}")
            if name in inputs:
                raise GraphValidationError(f"{_where(block, op)}: writes block input {name!r}")
            producers[name] = op
    return producers, later


def _check_dataflow(graph: Graph, block: Block, producers: dict[str, Operator]) -> None:
    """Every operand is available before its use, every operator's types are right and
    every block output is produced."""
    tensors = block.tensors
    facts = _BlockFacts.of(block)
    available = set(block.inputs)
    available.update(n for n, t in tensors.items() if t.variable)
    available.update(n for n, t in tensors.items() if t.data is not None and n not in producers)
    for op in block.operators:
        for name in op.inputs:
            if name not in available:
                raise _unavailable(block, op, name, producers)
        available.update(op.outputs)
        _check_types(graph, block, op, facts)
    for name in block.outputs:
        if name not in available:
            raise GraphValidationError(f"{_where(block)}: output {name!r} is never produced")


def _unavailable(block: Block, op: Operator, name: str, producers: dict[str, Operator]) -> GraphValidationError:
    if name in producers:
        return GraphValidationError(
            f"{_where(block, op)}: uses tensor {name!r} before "
            f"{producers[name].name} produces it (operators must be listed in "
            "dependency order)")
    return GraphValidationError(f"{_where(block, op)}: input tensor {name!r} is never "
                                "produced (not a block input, constant or operator "
                                "output)")


def _check_operator_form(block: Block, op: Operator, variables: frozenset[str], forms: set[tuple]) -> None:
    """Arity, attribute class and variable operands; ``variables``: the block's variable tensors,
    ``forms``: the (op, attribute class, operand counts) found right so far."""
    kind = op.op
    form = (kind, type(kind), type(op.attribute), len(op.inputs), len(op.outputs))
    if form not in forms:
        if kind == Op.VARIABLE:
            raise GraphValidationError(f"{_where(block, op)}: the IR declares variables as variable "
                                       "tensors (Tensor.variable), not with VARIABLE operators")
        _check_arity(block, op)
        expected = attribute_class(kind)
        if not isinstance(op.attribute, expected):
            raise GraphValidationError(f"{_where(block, op)}: attribute is "
                                       f"{type(op.attribute).__name__}, expected {expected.__name__}")
        forms.add(form)
    if kind in _VARIABLE_ACCESSES or not (variables.isdisjoint(op.inputs) and variables.isdisjoint(op.outputs)):
        _check_variable_operands(block, op)


def _check_arity(block: Block, op: Operator) -> None:
    arity = ARITY.get(op.op)
    if arity is None:
        return
    lo_in, hi_in, lo_out, hi_out = arity
    if not (lo_in <= len(op.inputs) and (hi_in is None or len(op.inputs) <= hi_in)):
        raise GraphValidationError(f"{_where(block, op)}: takes {_count(lo_in, hi_in)} "
                                   f"input(s), has {len(op.inputs)}")
    if not (lo_out <= len(op.outputs) and (hi_out is None or len(op.outputs) <= hi_out)):
        raise GraphValidationError(f"{_where(block, op)}: produces "
                                   f"{_count(lo_out, hi_out)} output(s), "
                                   f"has {len(op.outputs)}")


def _check_variable_operands(block: Block, op: Operator) -> None:
    """Variables are read and written only through VARIABLE_READ / VARIABLE_WRITE."""
    tensors = block.tensors
    accesses_variable = op.op in _VARIABLE_ACCESSES
    for index, name in enumerate(op.inputs):
        is_variable_operand = accesses_variable and index == 0
        variable = tensors[name].variable
        if is_variable_operand and not variable:
            raise GraphValidationError(f"{_where(block, op)}: {name!r} is not a variable tensor")
        if variable and not is_variable_operand:
            raise GraphValidationError(f"{_where(block, op)}: reads variable {name!r} directly "
                                       "(use VARIABLE_READ)")
    for name in op.outputs:
        if tensors[name].variable:
            raise GraphValidationError(f"{_where(block, op)}: writes variable {name!r} directly "
                                       "(use VARIABLE_WRITE)")


def _count(lo: int, hi: int | None) -> str:
    if hi is None:
        return f"at least {lo}"
    return str(lo) if lo == hi else f"{lo} to {hi}"


def _check_no_cycle(block: Block, producers: dict[str, Operator]) -> None:
    """Depth-first search over operator -> producer-of-input edges (variables excluded)."""
    index = {id(op): i for i, op in enumerate(block.operators)}
    state = [0] * len(block.operators)  # 0 new, 1 on stack, 2 done
    for start in range(len(block.operators)):
        if state[start]:
            continue
        stack = [(start, iter(block.operators[start].inputs))]
        path = [start]
        state[start] = 1
        while stack:
            node, inputs = stack[-1]
            for name in inputs:
                producer = producers.get(name)
                if producer is None:
                    continue
                nxt = index[id(producer)]
                if state[nxt] == 1:
                    cycle = path[path.index(nxt):] + [nxt]
                    names = " -> ".join(block.operators[i].name for i in cycle)
                    raise GraphValidationError(f"{_where(block)}: operator cycle {names}")
                if state[nxt] == 0:
                    state[nxt] = 1
                    stack.append((nxt, iter(block.operators[nxt].inputs)))
                    path.append(nxt)
                    break
            else:
                state[node] = 2
                stack.pop()
                path.pop()


class _BlockFacts(NamedTuple):
    """What the type checks of a block's operators look up, worked out once per block."""

    #: tensor name -> its TensorType
    types: dict[str, TensorType]
    #: names of the unranked or dynamically shaped tensors
    dynamic: frozenset[str]
    #: names of the tensors of element types TOSA 1.0 does not define
    draft: frozenset[str]
    #: (op, attribute, input and output element types) -> does a profile support it?
    supported: dict[tuple, bool]
    #: name of a SHAPE tensor -> what the shape rules read of it (its values)
    shape_values: dict[str, object]
    #: (op, attribute, operand types, values of SHAPE operands) of the operators found right
    #: so far: their repeats need no second look
    passed: set[tuple]

    @staticmethod
    def of(block: Block) -> _BlockFacts:
        tensors = block.tensors.items()
        return _BlockFacts(
            types={n: t.type for n, t in tensors},
            dynamic=frozenset(n for n, t in tensors
                              if t.is_unranked or any(d < 0 for d in t.shape)),
            draft=frozenset(n for n, t in tensors if t.dtype not in _TOSA_1_0_DTYPES),
            supported={}, passed=set(),
            shape_values={n: _value_key(t.data) for n, t in tensors if t.dtype is DType.SHAPE})


def _value_key(data: object) -> object:
    """What tells the values of a SHAPE tensor's data apart (a fresh object, equal to no other,
    where the data is not an array)."""
    if data is None:
        return None
    if not isinstance(data, np.ndarray):
        return object()
    return data.dtype.str, data.shape, data.tobytes()


def _check_types(graph: Graph, block: Block, op: Operator, facts: _BlockFacts) -> None:
    kind = op.op
    if kind in _CONSTANTS:
        _check_constant(block, op)
        return
    in_types = list(map(facts.types.__getitem__, op.inputs))
    out_types = list(map(facts.types.__getitem__, op.outputs))
    if kind in _SPECIAL_TYPING:
        if kind in _VARIABLE_ACCESSES:
            _check_variable_value(block, op, out_types[0] if kind == Op.VARIABLE_READ else in_types[1])
        else:
            _check_control_flow(graph, block, op, in_types, out_types)
        return
    operands = (*op.inputs, *op.outputs)
    if facts.dynamic and any(n in facts.dynamic for n in operands):
        return  # dynamic shapes (1.1 draft): no static rule applies
    key = (kind, op.attribute, *in_types, None, *out_types, *map(facts.shape_values.get, op.inputs))
    if key in facts.passed:
        return
    _check_shape_rules(block, op, in_types, out_types)
    if op.op in TOSA_1_0_OPS and not (facts.draft and any(n in facts.draft for n in operands)):
        _check_profile_support(block, op, in_types, out_types, facts.supported)
    facts.passed.add(key)


def _check_constant(block: Block, op: Operator) -> None:
    tensor = block.tensors[op.outputs[0]]
    if (op.op == Op.CONST_SHAPE) != (tensor.dtype is DType.SHAPE):
        raise GraphValidationError(f"{_where(block, op)}: {op.op.name} cannot produce a "
                                   f"{tensor.dtype.name} tensor")
    if tensor.data is None:
        raise GraphValidationError(f"{_where(block, op)}: constant {tensor.name!r} has no "
                                   "data")
    if np.asarray(tensor.data).size != tensor.element_count and \
            tensor.dtype in _TOSA_1_0_DTYPES:
        raise GraphValidationError(f"{_where(block, op)}: constant {tensor.name!r} holds "
                                   f"{np.asarray(tensor.data).size} element(s), its shape "
                                   f"{list(tensor.shape)} needs {tensor.element_count}")


def _check_variable_value(block: Block, op: Operator, value: TensorType) -> None:
    """The value a VARIABLE_READ gives or a VARIABLE_WRITE stores has the variable's type."""
    variable = block.tensors[op.inputs[0]]
    if value != variable.type:
        raise GraphValidationError(f"{_where(block, op)}: value "
                                   f"{value.dtype.name}{list(value.shape)} "
                                   f"does not match variable {variable.variable_key!r} "
                                   f"({variable.dtype.name}{list(variable.shape)})")


def _check_shape_rules(block: Block, op: Operator, in_types: list[TensorType],
                       out_types: list[TensorType]) -> None:
    """The outputs have the shapes and element types the specification's rules give."""
    tensors = block.tensors
    try:
        expected = expected_outputs(op.op, op.attribute, in_types,
                                    [tensors[n].data if t.dtype is DType.SHAPE else None
                                     for n, t in zip(op.inputs, in_types)])
    except RuleViolation as exc:
        raise GraphValidationError(f"{_where(block, op)}: {exc}") from None
    if expected is None:
        return
    for name, got, (shape, dtype) in zip(op.outputs, out_types, expected):
        if shape is not None and tuple(shape) != got.shape:
            raise GraphValidationError(f"{_where(block, op)}: output {name!r} has shape "
                                       f"{list(got.shape)}, the specification gives "
                                       f"{list(shape)}")
        if dtype is not None and dtype != got.dtype:
            raise GraphValidationError(f"{_where(block, op)}: output {name!r} is "
                                       f"{got.dtype.name}, the specification gives "
                                       f"{dtype.name}")


def _check_profile_support(block: Block, op: Operator, in_types: list[TensorType],
                           out_types: list[TensorType], known: dict[tuple, bool]) -> None:
    """Some typesupport row of the specification covers the operator's element types.

    This is what ``profiles.operator_requirements(block, op) is None`` says, without its
    scan of the block's constants (which only adds EXT-DYNAMIC to a supported row).
    The answer depends only on the operator, its attribute and its operands' element
    types (``type_binding`` reads no more), so ``known`` keeps it for repeats.
    """
    key = (op.op, op.attribute, tuple(t.dtype for t in in_types),
           tuple(t.dtype for t in out_types))
    supported = known.get(key)
    if supported is None:
        binding = type_binding(block, op)
        supported = known[key] = binding is not None and \
            _any_row_supports(op.op, tuple(binding.items()))
    if not supported:
        binding = type_binding(block, op)
        detail = describe_binding(binding) if binding is not None else \
            "operand element types contradict each other"
        raise GraphValidationError(f"{_where(block, op)}: no TOSA 1.0 profile supports "
                                   f"this element type combination ({detail})")


@cache
def _any_row_supports(op: Op, binding: tuple[tuple[str, DType], ...]) -> bool:
    """True if some typesupport row of the specification covers ``binding`` (cached: the
    tables are constant and a graph repeats few combinations)."""
    return bool(supported_rows(op, dict(binding)))


def _types(block: Block, names: list[str]) -> list[TensorType]:
    return [block.tensors[n].type for n in names]


def _describe(types: list[TensorType]) -> str:
    return "[" + ", ".join(f"{t.dtype.name}{list(t.shape)}" for t in types) + "]"


def _branch(graph: Graph, block: Block, op: Operator, name: str) -> Block:
    if not graph.has_block(name):
        raise GraphValidationError(f"{_where(block, op)}: names block {name!r}, which does not "
                                   "exist")
    return graph.block(name)


def _check_control_flow(graph: Graph, block: Block, op: Operator,
                        in_types: list[TensorType], out_types: list[TensorType]) -> None:
    where = _where(block, op)
    attr = op.attribute
    if op.op == Op.COND_IF:
        cond = in_types[0]
        if cond.dtype != DType.BOOL or cond.element_count != 1:
            raise GraphValidationError(f"{where}: the condition must be a one-element BOOL "
                                       f"tensor, is {cond.dtype.name}{list(cond.shape)}")
        for label, name in (("then_graph", attr.then_graph), ("else_graph", attr.else_graph)):
            branch = _branch(graph, block, op, name)
            if _types(branch, branch.inputs) != in_types[1:]:
                raise GraphValidationError(
                    f"{where}: operands {_describe(in_types[1:])} do not match the inputs "
                    f"{_describe(_types(branch, branch.inputs))} of {label} {branch.name!r}")
            if _types(branch, branch.outputs) != out_types:
                raise GraphValidationError(
                    f"{where}: results {_describe(out_types)} do not match the outputs "
                    f"{_describe(_types(branch, branch.outputs))} of {label} {branch.name!r}")
        return
    cond_block = _branch(graph, block, op, attr.cond_graph)
    body = _branch(graph, block, op, attr.body_graph)
    if out_types != in_types:
        raise GraphValidationError(f"{where}: results {_describe(out_types)} differ from the "
                                   f"loop-carried operands {_describe(in_types)}")
    for label, types in (("inputs of cond_graph", _types(cond_block, cond_block.inputs)),
                         ("inputs of body_graph", _types(body, body.inputs)),
                         ("outputs of body_graph", _types(body, body.outputs))):
        if types != in_types:
            raise GraphValidationError(f"{where}: {label} {_describe(types)} differ from the "
                                       f"loop-carried operands {_describe(in_types)}")
    cond_out = _types(cond_block, cond_block.outputs)
    if len(cond_out) != 1 or cond_out[0].dtype != DType.BOOL or cond_out[0].element_count != 1:
        raise GraphValidationError(f"{where}: cond_graph {cond_block.name!r} must output one "
                                   f"one-element BOOL tensor, outputs {_describe(cond_out)}")


def _check_no_recursion(graph: Graph) -> None:
    """A block may not (directly or indirectly) run itself through control flow."""
    calls: dict[str, list[str]] = {}
    for block in graph.blocks():
        targets = []
        for op in block.operators:
            if op.op == Op.COND_IF:
                targets += [op.attribute.then_graph, op.attribute.else_graph]
            elif op.op == Op.WHILE_LOOP:
                targets += [op.attribute.cond_graph, op.attribute.body_graph]
        calls[block.name] = [graph.block(t).name for t in targets]
    done: set[str] = set()
    for root in calls:   # depth first, with an explicit stack: graphs may nest thousands deep
        if root in done:
            continue
        path = [root]
        pending = [iter(calls[root])]
        while pending:
            target = next(pending[-1], None)
            if target is None:
                done.add(path.pop())
                pending.pop()
            elif target in path:
                cycle = path[path.index(target):] + [target]
                raise GraphValidationError("control flow recursion: " + " -> ".join(cycle))
            elif target not in done:
                path.append(target)
                pending.append(iter(calls.get(target, [])))


# --- what npu-sim can run -------------------------------------------------------------
def check_supported(graph: Graph) -> None:
    """Raise UnsupportedFeatureError for valid TOSA that npu-sim does not execute.

    TOSA 1.1-draft operators and element types, unranked or dynamic shapes, and
    block-scaled tensors. Called by the executor and the scheduler, not on load.
    """
    for block in graph.blocks():
        for op in block.operators:
            if op.op not in TOSA_1_0_OPS:
                raise UnsupportedFeatureError(f"{_where(block, op)}: {op.op.name} is a TOSA 1.1 "
                                              "draft operator, which npu-sim does not execute")
        for tensor in block.tensors.values():   # (messages are built only on an error)
            if not tensor.dtype.is_tosa_1_0:
                raise UnsupportedFeatureError(f"{_where(block)}: tensor {tensor.name!r}: element type "
                                              f"{tensor.dtype.name} is TOSA 1.1 draft, which npu-sim "
                                              "does not execute")
            if tensor.is_unranked or (tensor.shape and min(tensor.shape) < 0):
                raise UnsupportedFeatureError(f"{_where(block)}: tensor {tensor.name!r}: unranked or "
                                              f"dynamic shape {list(tensor.shape)} (npu-sim needs "
                                              "static shapes)")
            if tensor.block_scale is not None:
                raise UnsupportedFeatureError(f"{_where(block)}: tensor {tensor.name!r}: block-scaled "
                                              "tensors are TOSA 1.1 draft")
