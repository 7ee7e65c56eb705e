"""Lowering: a graph block (after fusion) becomes a list of NPU operations.

* fused groups and single computing operators become COMPUTE operations on the
  unit of their first operator (see :mod:`scheduler.ir.support`);
* CONST / CONST_SHAPE / VARIABLE need no operation (constants are placed in
  memory at load time, variables in the variable SRAM);
* VARIABLE_READ / VARIABLE_WRITE, IDENTITY / RESHAPE whose result is
  just the same bytes, and a SLICE whose result is a contiguous run of its
  input's bytes become COPY operations (a RESHAPE or SLICE copy may later alias
  its source: the SLICE at an offset);
* an operator writing a variable-flagged tensor (tosa-opt's encoding of a
  variable write) writes a fresh intermediate, followed by a COPY into the
  variable, so tiles never overwrite what later tiles still read;
* COND_IF / WHILE_LOOP lower their blocks recursively;
* a graph output that later operations of the main block read is computed into
  a fresh intermediate (which may stay in TCM), copied out to the output right
  after, and the readers read the intermediate: they need not wait for the store
  to DDR and its latency (:func:`read_outputs_through_tcm`).

Value keys are the tensor names in the main block, ``block/name`` in other
blocks, and ``var:uid`` for variables (shared by every block).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from npu_sim.errors import GraphValidationError
from npu_sim.hw.compute_units import MAC_ARRAY
from npu_sim.hw.compute_units.mac_array import MAC_OPS
from npu_sim.memory_layout import contiguous_strides
from npu_sim.program import CompositeCandidate
from npu_sim.reference.data_layout import LAYOUT_DTYPES
from npu_sim.reference.executor import DEFAULT_MAX_NESTING
from npu_sim.tosa.ir import Block, Graph, Operator, Tensor
from npu_sim.tosa.ops import Op
from scheduler.cost_model import step_macs
from scheduler.ir import support
from scheduler.ir.npu_ops import (
    VARIABLE_KEY_PREFIX,
    LoweredBlock,
    LoweredGraph,
    NpuOp,
    OpKind,
    Step,
    Value,
    ValueKind,
)
from scheduler.passes import lstm_cell
from scheduler.passes.cell_graph import NoMatch
from scheduler.passes.fusion import DEFAULT_RULES, FusedGroup, FusionContext, FusionRule, fuse_block


def variable_key(tensor: Tensor) -> str:
    return VARIABLE_KEY_PREFIX + (tensor.variable_name or tensor.name)


class _Lowerer:
    """Lowers the blocks of one graph, declaring their values as it goes."""

    def __init__(self, graph: Graph, rules: Sequence[FusionRule], max_composite_bytes: int | None = None,
                 find_recurrent_state: bool = False):
        self.graph = graph
        self.rules = rules
        self.max_composite_bytes = max_composite_bytes
        self.find_recurrent_state = find_recurrent_state
        self.recurrent_state: set[str] = set()
        self.values: dict[str, Value] = {}
        self.temp_count = 0
        self.candidates: list[CompositeCandidate] = []

    # -- values
    def key(self, block: Block, name: str, main: bool) -> str:
        tensor = block.tensor(name)
        if tensor.variable:
            return variable_key(tensor)
        return name if main else f"{block.name}/{name}"

    def declare_values(self, block: Block, main: bool) -> None:
        for name, tensor in block.tensors.items():
            key = self.key(block, name, main)
            if tensor.variable:
                self.declare_variable(key, tensor)
                continue
            kind = _value_kind(block, name, tensor, main)
            data = _as_array(tensor) if kind is ValueKind.CONSTANT else None
            self.values[key] = Value(key, tensor.type, kind, data, name)

    def declare_variable(self, key: str, tensor: Tensor) -> None:
        """A variable is declared once for all blocks; a declaration with an initial value wins."""
        existing = self.values.get(key)
        if existing is None or (existing.data is None and tensor.data is not None):
            data = None if tensor.data is None else _as_array(tensor)
            self.values[key] = Value(key, tensor.type, ValueKind.VARIABLE, data, key[4:])

    def temp(self, like: Value) -> str:
        self.temp_count += 1
        key = f"{like.key}@{self.temp_count}"
        self.values[key] = Value(key, like.type, ValueKind.INTERMEDIATE, None, like.name)
        return key

    # -- blocks
    def lower_block(self, block: Block, main: bool, depth: int) -> LoweredBlock:
        if depth > DEFAULT_MAX_NESTING:
            raise GraphValidationError(f"block {block.name!r}: control flow nested deeper than {DEFAULT_MAX_NESTING}")
        self.declare_values(block, main)
        ops: list[NpuOp] = []
        fusion = fuse_block(block, self.rules, self.max_composite_bytes)
        self.candidates += fusion.candidates
        if self.find_recurrent_state:
            self.recurrent_state |= {self.key(block, n, main) for n in recurrent_state(block)}
        for group in fusion.groups:
            operators = [block.operators[i] for i in group.indices]
            if group.composite is not None:
                for part in self.lower_composite(block, operators, group, main):
                    ops.extend(self.with_variable_outputs(part))
                continue
            lowered = self.lower_group(block, operators, main, depth)
            if group.unit is not None:
                for op in lowered:
                    if op.kind is OpKind.COMPUTE:
                        op.unit, op.lut_function = group.unit, group.lut_function
            ops.extend(lowered)
        key = lambda n: self.key(block, n, main)  # noqa: E731
        return LoweredBlock(block.name, ops, [key(n) for n in block.inputs], [key(n) for n in block.outputs])

    def lower_group(self, block: Block, operators: list[Operator], main: bool, depth: int) -> list[NpuOp]:
        """The NPU operations of one fused group (none for declarations)."""
        first = operators[0]
        op = first.op
        if op in (Op.CONST, Op.CONST_SHAPE):
            _check_constants(block, first)
            return []
        if op == Op.VARIABLE:
            self.variable_initial_value(block, first, main)
            return []
        if op in (Op.VARIABLE_READ, Op.VARIABLE_WRITE):
            return [self.lower_variable_access(block, operators, main)]
        if op in (Op.COND_IF, Op.WHILE_LOOP):
            return [self.lower_control(block, first, main, depth)]
        npu_op = self.lower_copy(block, operators, main) or self.lower_compute(block, operators, main)
        return self.with_variable_outputs(npu_op)

    def lower_variable_access(self, block: Block, operators: list[Operator], main: bool) -> NpuOp:
        """VARIABLE_READ / VARIABLE_WRITE: a COPY between the variable and a tensor of the block."""
        first = operators[0]
        names = tuple([o.name for o in operators])
        reading = first.op == Op.VARIABLE_READ
        ends = [*first.inputs, *first.outputs] if reading else [*first.outputs, *first.inputs]
        var = self.variable_operand(block, first, ends)
        tensors = [n for n in (first.outputs if reading else first.inputs) if not block.tensor(n).variable]
        if len(tensors) != 1:
            needed = "one output tensor" if reading else "one input tensor"
            raise GraphValidationError(f"{first.name}: {first.op.name} needs {needed}")
        other = self.key(block, tensors[0], main)
        sources, outputs = ((var,), (other,)) if reading else ((other,), (var,))
        return NpuOp(first.name, OpKind.COPY, sources=sources, outputs=outputs, graph_ops=names)

    def lower_copy(self, block: Block, operators: list[Operator], main: bool) -> NpuOp | None:
        """A COPY for IDENTITY/RESHAPE of the same bytes and for a contiguous SLICE (both may
        alias their source), else None."""
        first = operators[0]
        offset: int | None = None
        if first.op in (Op.IDENTITY, Op.RESHAPE):
            if not self.is_plain_copy(block, first):
                return None
        elif first.op == Op.SLICE and len(operators) == 1:
            offset = contiguous_slice_offset(block, first)
            if offset is None:
                return None
        else:
            return None
        return NpuOp(first.name, OpKind.COPY, sources=(self.key(block, first.inputs[0], main),),
                     outputs=(self.key(block, first.outputs[0], main),), graph_ops=tuple([o.name for o in operators]),
                     alias_ok=True, slice_offset_elements=offset,
                     origin=first.location if first.op == Op.SLICE else "")

    def lower_compute(self, block: Block, operators: list[Operator], main: bool,
                      renamed: dict[str, str] | None = None) -> NpuOp:
        """A COMPUTE operation: one kernel step per operator, each step's result handed to the
        next; ``renamed``: tensors read as other values (a composite's state, as the variable)."""
        steps: list[Step] = []
        produced: dict[str, int] = {}
        renamed = renamed or {}
        for index, operator in enumerate(operators):
            support.check_operator(operator)
            operands = tuple([produced[n] if n in produced else renamed.get(n) or self.key(block, n, main)
                              for n in operator.inputs])
            steps.append(Step(operator.op, operator.attribute, operands,
                              tuple([block.tensor(n).type for n in operator.inputs]),
                              tuple([block.tensor(n).type for n in operator.outputs]), operator.name,
                              operator.location))
            if index + 1 < len(operators) and operator.outputs:
                produced[operator.outputs[0]] = index
        first, last = operators[0], operators[-1]
        name = first.name if len(operators) == 1 else "+".join(o.name for o in operators)
        return NpuOp(name, OpKind.COMPUTE, unit=support.unit_of(first), steps=tuple(steps),
                     outputs=tuple(self.key(block, n, main) for n in last.outputs),
                     graph_ops=tuple([o.name for o in operators]), macs=sum(step_macs(s) for s in steps))

    def lower_composite(self, block: Block, operators: list[Operator], group: FusedGroup,
                        main: bool) -> list[NpuOp]:
        """A fused composite: COMPUTE operations on the MAC array whose steps are every
        operator's kernel in graph order, handing out the results the group names.

        The operators that do not wait for the group's late inputs (an LSTM cell's
        recurrent product needs the state, not the step input) are issued as an early
        part of their own when they include a matrix product: it runs while the late
        input is still being loaded, and hands its results to the main part."""
        reads = self.state_reads(block, operators)   # the state, read straight from the variable SRAM
        operators = [o for o in operators if o.op is not Op.VARIABLE_READ]
        name = f"{group.composite.kind if group.composite else 'composite'}({operators[0].name})"
        early, main_part = _split_early(operators, group.late_inputs)
        if not main_part or not any(o.op in MAC_OPS for o in early):
            return [self.composite_part(block, operators, group.outputs, group, main, name, reads)]
        main_reads = {n for o in main_part for n in o.inputs}
        handed = [n for o in early for n in o.outputs if n in main_reads or n in group.outputs]
        return [self.composite_part(block, early, tuple(handed), group, main, name + ":recurrent", reads),
                self.composite_part(block, main_part, tuple(n for n in group.outputs if n not in handed),
                                    group, main, name, reads)]

    def state_reads(self, block: Block, operators: list[Operator]) -> dict[str, str]:
        """Tensor -> variable key of the VARIABLE_READs among ``operators``."""
        return {o.outputs[0]: self.variable_operand(block, o, o.inputs) for o in operators
                if o.op is Op.VARIABLE_READ}

    def composite_part(self, block: Block, operators: list[Operator], outputs: tuple[str, ...],
                       group: FusedGroup, main: bool, name: str, reads: dict[str, str]) -> NpuOp:
        op = self.lower_compute(block, operators, main, reads)
        step_of = {operator.outputs[0]: k for k, operator in enumerate(operators) if operator.outputs}
        op.outputs = tuple(self.key(block, n, main) for n in outputs)
        op.output_steps = tuple(step_of[n] for n in outputs)
        op.composite = group.composite
        op.name = name
        op.unit = MAC_ARRAY.name
        return op

    def with_variable_outputs(self, npu_op: NpuOp) -> list[NpuOp]:
        """Redirect outputs that are variables through a fresh value and a COPY."""
        copies = []
        outputs = list(npu_op.outputs)
        for i, out in enumerate(outputs):
            if self.values[out].kind is ValueKind.VARIABLE:
                temp = self.temp(self.values[out])
                outputs[i] = temp
                copies.append(NpuOp(f"{npu_op.name}:write {out[4:]}", OpKind.COPY, sources=(temp,),
                                    outputs=(out,), graph_ops=npu_op.graph_ops))
        npu_op.outputs = tuple(outputs)
        if npu_op.kind is OpKind.COPY:
            npu_op.alias_ok = npu_op.alias_ok and not copies
        return [npu_op, *copies]

    def is_plain_copy(self, block: Block, operator: Operator) -> bool:
        """IDENTITY/RESHAPE whose output is provably the input's bytes (else the kernel checks)."""
        if len(operator.outputs) != 1 or not operator.inputs:
            return False
        src, dst = block.tensor(operator.inputs[0]), block.tensor(operator.outputs[0])
        if src.dtype != dst.dtype or src.element_count != dst.element_count:
            return False
        if operator.op == Op.IDENTITY:
            return len(operator.inputs) == 1 and src.shape == dst.shape
        if len(operator.inputs) != 2:
            return False
        shape = block.tensor(operator.inputs[1])
        if shape.data is None:
            return False
        return tuple(int(v) for v in np.asarray(shape.data).reshape(-1)) == tuple(dst.shape)

    def variable_operand(self, block: Block, operator: Operator, names: list[str]) -> str:
        for name in names:
            tensor = block.tensors.get(name)
            if tensor is not None and tensor.variable:
                return variable_key(tensor)
        raise GraphValidationError(f"{operator.name}: names no variable tensor")

    def variable_initial_value(self, block: Block, operator: Operator, main: bool) -> None:
        var = self.variable_operand(block, operator, [*operator.outputs, *operator.inputs])
        for name in operator.inputs:
            tensor = block.tensors.get(name)
            if tensor is not None and not tensor.variable and tensor.data is not None:
                value = self.values[var]
                value.data = _as_array(tensor).reshape(value.type.shape)

    def lower_control(self, block: Block, operator: Operator, main: bool, depth: int) -> NpuOp:
        key = lambda n: self.key(block, n, main)  # noqa: E731
        attribute = operator.attribute
        if operator.op == Op.COND_IF:
            names = (attribute.then_graph, attribute.else_graph)
            kind = OpKind.COND_IF
        else:
            names = (attribute.cond_graph, attribute.body_graph)
            kind = OpKind.WHILE_LOOP
        blocks = tuple(self.lower_block(self.resolve(name, operator), False, depth + 1) for name in names)
        return NpuOp(operator.name, kind, sources=tuple(key(n) for n in operator.inputs),
                     outputs=tuple(key(n) for n in operator.outputs), graph_ops=(operator.name,),
                     operator=operator, blocks=blocks)

    def resolve(self, name: str, operator: Operator) -> Block:
        try:
            return self.graph.block(name)
        except GraphValidationError as exc:
            raise GraphValidationError(f"{operator.name}: {exc}") from None


def _split_early(operators: list[Operator], late_inputs: Sequence[str]) -> tuple[list[Operator], list[Operator]]:
    """The operators that do not depend on ``late_inputs``, and those that do (graph order)."""
    late = set(late_inputs)
    for operator in operators:
        if late.intersection(operator.inputs):
            late.update(operator.outputs)
    return ([o for o in operators if not late.intersection(o.outputs)],
            [o for o in operators if late.intersection(o.outputs)])


def _value_kind(block: Block, name: str, tensor: Tensor, main: bool) -> ValueKind:
    """What a (non-variable) tensor of ``block`` is; a nested block's signature is bound by its caller."""
    if tensor.data is not None:
        return ValueKind.CONSTANT
    if main and name in block.inputs:
        return ValueKind.INPUT
    if main and name in block.outputs:
        return ValueKind.OUTPUT
    if not main and (name in block.inputs or name in block.outputs):
        return ValueKind.BOUND
    return ValueKind.INTERMEDIATE


def _check_constants(block: Block, operator: Operator) -> None:
    for name in operator.outputs:
        if block.tensor(name).data is None:
            raise GraphValidationError(f"{operator.name}: constant tensor {name!r} has no data")


def _as_array(tensor: Tensor) -> np.ndarray:
    data = np.asarray(tensor.data)
    want = tensor.dtype.numpy_dtype
    if data.dtype != want or data.size != tensor.element_count:
        raise GraphValidationError(f"constant {tensor.name!r} holds {data.dtype.name} x {data.size}, "
                                   f"expected {tensor.dtype.name} x {tensor.element_count}")
    return data.reshape(tensor.shape)


def read_outputs_through_tcm(block: LoweredBlock, lowerer: _Lowerer) -> None:
    """Outputs of compute operations that later compute/copy operations read: write a
    fresh intermediate, copy it to the output, let the readers read the intermediate.

    Outputs read by control flow are left alone (control flow reads DDR values)."""
    values = lowerer.values
    readers: dict[str, list[int]] = {}
    for i, op in enumerate(block.ops):
        for key in op.inputs:
            if values[key].kind is ValueKind.OUTPUT:
                readers.setdefault(key, []).append(i)
    if not readers:
        return
    renamed: dict[str, str] = {}
    ops: list[NpuOp] = []
    for i, op in enumerate(block.ops):
        if renamed and op.kind in (OpKind.COMPUTE, OpKind.COPY):
            _rename_inputs(op, renamed)
        ops.append(op)
        if op.kind is OpKind.COMPUTE:
            ops += _outputs_through_tcm(block, i, readers, renamed, lowerer)
    block.ops = ops


def _rename_inputs(op: NpuOp, renamed: dict[str, str]) -> None:
    op.steps = tuple(dataclasses.replace(s, operands=tuple(renamed.get(o, o) if isinstance(o, str) else o
                                                             for o in s.operands)) for s in op.steps)
    op.sources = tuple(renamed.get(k, k) for k in op.sources)


def _outputs_through_tcm(block: LoweredBlock, i: int, readers: dict[str, list[int]], renamed: dict[str, str],
                         lowerer: _Lowerer) -> list[NpuOp]:
    """Compute operation ``i`` writes the outputs later operations read into fresh values
    (``renamed`` learns them); the COPYs of those values to the outputs."""
    op = block.ops[i]
    values = lowerer.values
    copies = []
    outputs = list(op.outputs)
    for k, key in enumerate(outputs):
        later = [j for j in readers.get(key, ()) if j > i]
        if not later or key in renamed or \
                any(block.ops[j].kind not in (OpKind.COMPUTE, OpKind.COPY) for j in later):
            continue
        temp = lowerer.temp(values[key])
        outputs[k] = temp
        renamed[key] = temp
        copies.append(NpuOp(f"{op.name}:output {values[key].name}", OpKind.COPY, sources=(temp,),
                            outputs=(key,), graph_ops=op.graph_ops))
    op.outputs = tuple(outputs)
    return copies


def contiguous_slice_offset(block: Block, operator: Operator) -> int | None:
    """Element offset of a SLICE whose result is one contiguous run of its input's bytes
    (every dimension after the last partly taken one is whole, every one before it has
    extent 1), else None. The result is then the input's bytes at that offset: a copy
    that may alias them, like a RESHAPE. Slices the kernel would refuse (bad start or
    size, a dtype outside its LAYOUT_DTYPES) stay kernel calls."""
    bounds = _slice_bounds(block, operator)
    if bounds is None:
        return None
    shape, start, size = bounds
    partial = [k for k in range(len(shape)) if size[k] != shape[k]]
    if partial and any(size[k] != 1 for k in range(partial[-1])):
        return None
    return sum(a * stride for a, stride in zip(start, contiguous_strides(shape, 1)))


def _slice_bounds(block: Block, operator: Operator) -> tuple[tuple[int, ...], list[int], list[int]] | None:
    """``(input shape, start, size)`` of a SLICE with constant, valid bounds and a layout
    dtype kept, else None."""
    if len(operator.inputs) != 3 or len(operator.outputs) != 1:
        return None
    src, dst = block.tensor(operator.inputs[0]), block.tensor(operator.outputs[0])
    start_t, size_t = block.tensor(operator.inputs[1]), block.tensor(operator.inputs[2])
    if start_t.data is None or size_t.data is None or src.dtype != dst.dtype \
            or src.dtype not in LAYOUT_DTYPES:
        return None
    shape = tuple(src.shape)
    start = [int(v) for v in np.asarray(start_t.data).reshape(-1)]
    size = [int(v) for v in np.asarray(size_t.data).reshape(-1)]
    if not (len(start) == len(size) == len(shape) == len(dst.shape)) or tuple(dst.shape) != tuple(size):
        return None
    if any(a < 0 or n <= 0 or a + n > d for a, n, d in zip(start, size, shape)):
        return None
    return shape, start, size


def lower(graph: Graph, rules: tuple[FusionRule, ...] = DEFAULT_RULES,
          max_composite_bytes: int | None = None, find_recurrent_state: bool = False) -> LoweredGraph:
    """Fuse and lower every block reachable from the main block (a composite whose tensors
    take more than ``max_composite_bytes`` stays op by op). ``find_recurrent_state``: note the
    state values of the LSTM cells run op by op (``LoweredGraph.recurrent_state``)."""
    support.check_graph(graph)
    lowerer = _Lowerer(graph, rules, max_composite_bytes, find_recurrent_state)
    main = lowerer.lower_block(graph.main, True, 0)
    read_outputs_through_tcm(main, lowerer)
    return LoweredGraph(main, lowerer.values, set(main.outputs), lowerer.candidates,
                        recurrent_state=lowerer.recurrent_state)


def recurrent_state(block: Block) -> set[str]:
    """The tensors of ``block`` that carry an LSTM cell's state (h and c) into or out of a cell
    the LSTM-cell matcher recognises (:mod:`scheduler.passes.lstm_cell`), fused or not, where the
    cell computes each gate with products of its own: TFLite's fused LSTM as npu-sim legalizes it
    and Vela lowers it (regor compiler/lstm.cpp: its state in persistent tensors). A converted
    Keras LSTM (gates split from one product) passes its state from step to step as any other
    intermediate, and so does Vela."""
    ctx = FusionContext.of(block)
    graph = ctx.cell_graph()
    state: set[str] = set()
    for index, operator in enumerate(block.operators):
        if operator.op is not Op.ADD:   # the anchor of a cell with gates of their own
            continue
        try:
            found = lstm_cell.match_cell(graph, index, None)
        except NoMatch:
            continue
        if found is not None:
            state |= {*found.state_inputs, *found.facts.outputs}
    return state
