"""Read TOSA MLIR text (``tosa-opt``, ``tosa-converter-for-tflite``, IREE, torch-mlir) into
the same :class:`~npu_sim.tosa.ir.Graph` the flatbuffer reader builds.

Reads a ``module`` holding ``tosa.variable`` declarations and one ``func.func`` (``@main``,
or the only one): its arguments and results become the main block's inputs and outputs;
every ``tosa.*`` operation in generic (``"tosa.const"() <{...}>``) or custom form becomes
an operator; ``tosa.cond_if`` / ``tosa.while_loop`` regions become blocks of their own
region; ``builtin.unrealized_conversion_cast`` between equal types is an identity (the
converter leaves such casts around variables). Names follow ``tosa-opt``'s serializer:
``TosaInput_k``, ``TosaOutput_k`` (or the ``tosa.tensor_name`` given), ``layer_N`` for the
value ``%N``, ``Variable_k`` for the k-th variable. Operations of another dialect left in
the text (``tfl.*``: what a converter could not legalize) are refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from npu_sim.errors import GraphValidationError, TosaFormatError, UnknownOperatorError
from npu_sim.tosa.builder import BlockBuilder, GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, Region, Tensor
from npu_sim.tosa.mlir_text import (
    MlirType,
    Scanner,
    TypedValue,
    dense_array,
    location_aliases,
    location_name,
    one_line,
    parse_resources,
)
from npu_sim.tosa.ops import Op, attribute_class, op_from_name
from npu_sim.tosa.unsigned_io import unsigned_boundaries

if TYPE_CHECKING:
    from npu_sim.tosa.tflite.legalize import Legalizer

#: What to do about an operator another dialect left in the graph.
_FOREIGN_HINTS = {
    "tfl.custom": "a CUSTOM TFLite operator has no TOSA form",
}


#: What ``"tfl.no_value"`` (an omitted optional operand) stands for among the SSA values.
_NO_VALUE = ""

#: Attribute values the TOSA dialect does not print when they are the default.
_MLIR_DEFAULTS = {"nan_mode": "PROPAGATE"}


@dataclass
class _Variable:
    tensor_name: str
    symbol: str
    type: MlirType
    data: np.ndarray | None


@dataclass
class _Captures:
    """The values of enclosing blocks that the regions of one COND_IF/WHILE_LOOP read: each
    becomes an extra operand of the operator and an extra input of every one of its blocks
    (for WHILE_LOOP also an extra loop-carried value the body hands back unchanged), as TOSA
    regions take everything through their inputs."""

    outer_names: list[str] = field(default_factory=list)       # tensors of the enclosing block
    blocks: list[_BlockState] = field(default_factory=list)    # the regions' blocks read so far

    def inner_name(self, block: Block, k: int) -> str:
        return f"{block.name}_captured_{k}"


@dataclass
class _BlockState:
    block: Block
    values: dict[str, str] = field(default_factory=dict)   # %ssa -> tensor name
    outer: _BlockState | None = None
    captures: _Captures | None = None   # a region's block: what its operator passes in
    replaced_operands: list[str] = field(default_factory=list)   # read by legalized operations


class _Reader:
    def __init__(self, text: str, source: str, legalizer: Legalizer | None = None):
        self.legalizer = legalizer
        self.foreign_seen: dict[str, int] = {}
        text, self.location_aliases = location_aliases(text)
        self.scanner = Scanner(text, source)
        self.source = source
        self.resources = parse_resources(text)
        self.variables: dict[str, _Variable] = {}
        self.regions: list[Region] = []
        self.names: dict[str, int] = {}
        self.functions = 0
        self.original_names: dict[str, str] = {}
        #: the tensors of an unsigned MLIR type (``ui8``, ``ui16``), held in their signed storage
        self.unsigned: dict[int, Tensor] = {}

    def error(self, what: str) -> TosaFormatError:
        return self.scanner.error(what)

    # -- module level
    def module(self) -> Graph:
        s = self.scanner
        if s.accept("module"):
            if s.peek("@"):
                s.symbol()
            if s.accept("attributes"):
                s.attr_dict()
            s.expect("{")
            self.items(closing="}")
        else:
            self.items(closing=None)
        if not self.regions:
            raise TosaFormatError(f"{self.source}: no func.func in the MLIR text")
        graph = Graph(self.regions, version=(1, 0, 0, False), original_names=self.original_names)
        graph.unsigned_io = unsigned_boundaries(graph, {t.name for t in self.unsigned.values()}, self.source)
        return graph

    def items(self, closing: str | None) -> None:
        s = self.scanner
        while True:
            if closing is not None and s.accept(closing):
                return
            if s.at_end() or s.peek("{-#"):
                if closing is not None:
                    raise s.error("unclosed module")
                return
            if s.peek("tosa.variable"):
                self.variable()
            elif s.accept("func.func"):
                self.function()
            else:
                raise s.error("expected tosa.variable or func.func")

    def variable(self) -> None:
        s = self.scanner
        s.expect("tosa.variable")
        symbol = s.symbol()
        data = None
        if s.accept("="):
            initial = s.attr_value()
            if not isinstance(initial, TypedValue) or initial.mlir_type is None:
                raise s.error(f"variable @{symbol}: expected a dense<...> initial value")
            mlir_type = initial.mlir_type
            data = dense_array(initial.value, mlir_type, self.resources, f"{self.source}: variable @{symbol}")
        else:
            s.expect(":")
            mlir_type = s.type_()
        if s.peek("{"):
            s.attr_dict()
        self.variables[symbol] = _Variable(f"Variable_{len(self.variables)}", symbol, mlir_type, data)

    def function(self) -> None:
        s = self.scanner
        if s.peek("private") or s.peek("public"):
            s.ident()
        name = s.symbol()
        self.functions += 1
        if self.functions > 1:
            raise s.error(f"a second function @{name}: a TOSA graph is one function (inline the others)")
        block = Block("main")
        state = _BlockState(block)
        s.expect("(")
        index = 0
        while not s.accept(")"):
            ssa = s.value_name()
            s.expect(":")
            t = s.type_()
            attrs = s.attr_dict() if s.peek("{") else {}
            tensor_name = attrs.get("tosa.tensor_name") or f"TosaInput_{index}"
            self.remember_original_name(tensor_name, attrs)
            self.add_tensor(state, tensor_name, t)
            block.inputs.append(tensor_name)
            state.values[ssa] = tensor_name
            index += 1
            s.accept(",")
        output_names = self.result_names(s) if s.accept("->") else []
        if s.accept("attributes"):
            s.attr_dict()
        for variable in self.variables.values():
            tensor = self.add_tensor(state, variable.tensor_name, variable.type)
            tensor.variable = True
            tensor.variable_name = variable.symbol
            tensor.data = variable.data
        self.regions.insert(0, Region("main", [block]))
        s.expect("{")
        returned = self.body(state)
        _drop_unread_constants(block, state.replaced_operands, {state.values.get(r, "") for r in returned})
        if len(returned) != len(output_names):
            raise s.error(f"@{name} returns {len(returned)} values, its signature {len(output_names)}")
        block.outputs = [self.output(state, value, out_name) for value, out_name in zip(returned, output_names)]
        _serializer_order(block)

    def result_names(self, s: Scanner) -> list[str]:
        names: list[str] = []
        grouped = s.accept("(")
        while True:
            if grouped and s.accept(")"):
                break
            s.type_()
            attrs = s.attr_dict() if grouped and s.peek("{") else {}
            names.append(attrs.get("tosa.tensor_name") or f"TosaOutput_{len(names)}")
            self.remember_original_name(names[-1], attrs)
            if not grouped:
                break
            s.accept(",")
        return names

    def remember_original_name(self, tensor_name: str, attrs: dict[str, Any]) -> None:
        """The name a converter kept from the source model's signature (``index_path``)."""
        path = attrs.get("tf_saved_model.index_path")
        if isinstance(path, list) and path and isinstance(path[0], str) and path[0] != tensor_name:
            self.original_names[tensor_name] = path[0]

    def output(self, state: _BlockState, value: str, out_name: str) -> str:
        """Name the returned tensor ``out_name``: renamed where this block produced it, else
        (an input, a constant, a value returned twice) through an IDENTITY."""
        block = state.block
        tensor_name = self.lookup(state, value, f"{self.source}: the value returned")
        producer = next((op for op in block.operators if tensor_name in op.outputs), None)
        if tensor_name == out_name:
            return out_name
        if producer is not None and tensor_name not in block.outputs and out_name not in block.tensors:
            self.rename(state, tensor_name, out_name)
            return out_name
        source = block.tensors[tensor_name]
        self.add_tensor(state, out_name, None, like=source)
        block.operators.append(Operator(Op.IDENTITY, [tensor_name], [out_name]))
        return out_name

    @staticmethod
    def rename(state: _BlockState, old: str, new: str) -> None:
        block = state.block
        tensor = block.tensors.pop(old)
        tensor.name = new
        block.tensors[new] = tensor
        for op in block.operators:
            op.inputs = [new if n == old else n for n in op.inputs]
            op.outputs = [new if n == old else n for n in op.outputs]
        for ssa, name in state.values.items():
            if name == old:
                state.values[ssa] = new

    # -- blocks and statements
    def body(self, state: _BlockState) -> list[str]:
        """Statements up to the closing ``}``; returns the SSA values the block returns."""
        s = self.scanner
        returned: list[str] | None = None
        while not s.accept("}"):
            if s.at_end():
                raise s.error("unclosed block")
            if s.accept("return") or s.accept("func.return") or s.accept("tosa.yield") \
                    or s.accept('"tosa.yield"') or s.accept('"func.return"'):
                returned = self.operand_list(s)
                if s.accept(":"):
                    s.type_list() if s.peek("(") else self.types_after_colon(s)
                continue
            self.statement(state)
        if returned is None:
            raise s.error(f"block {state.block.name!r} has no return")
        return returned

    @staticmethod
    def types_after_colon(s: Scanner) -> list[MlirType]:
        types = [s.type_()]
        while s.accept(","):
            types.append(s.type_())
        return types

    @staticmethod
    def operand_list(s: Scanner) -> list[str]:
        grouped = s.accept("(")
        operands = s.value_list()
        if grouped:
            s.expect(")")
        return operands

    def statement(self, state: _BlockState) -> None:
        s = self.scanner
        results = self.results(s)
        generic = s.peek('"')
        opname = s.string() if generic else s.ident()
        if not opname.startswith(("tosa.", "builtin.")):
            self.foreign(state, results, opname, generic)
            return
        short = opname.removeprefix("tosa.")
        special = {"cond_if": self.cond_if, "while_loop": self.while_loop,
                   "variable_read": self.variable_read, "variable_write": self.variable_write}
        if opname == "builtin.unrealized_conversion_cast":
            self.cast(state, results)
        elif short in special and not generic:
            special[short](state, results)
        else:
            self.operation(state, results, short, generic=generic)

    def foreign(self, state: _BlockState, results: list[str], opname: str, generic: bool) -> None:
        """An operation of another dialect: an omitted operand (``tfl.no_value``), one the
        legalizer turns into TOSA operators, or else refused by name."""
        s = self.scanner
        name = opname.lower()
        handled = name == "tfl.no_value" or self.legalizer is not None and self.legalizer.handles(name)
        if not handled or not generic or len(results) > 1:
            hint = _FOREIGN_HINTS.get(name, "it has no TOSA form (the converter could not legalize it)")
            raise s.error(f"operator {opname} is not TOSA: {hint}")
        operands, attrs, result_type = self.foreign_signature()
        if name == "tfl.no_value":
            state.values.update({r: _NO_VALUE for r in results})
            return
        self.legalize(state, results, opname, operands, attrs, result_type)

    def legalize(self, state: _BlockState, results: list[str], opname: str, operands: list[str],
                 attrs: dict[str, Any], result_type: MlirType | None) -> None:
        """Hand a foreign operation the legalizer handles to it; its results become the values
        of ``results`` (checked against the type the MLIR gives them)."""
        assert self.legalizer is not None
        name = opname.lower()
        where = f"{self.source}: {results[0] if results else opname}"
        values = [self.lookup(state, v, where) or None for v in operands]
        occurrence = self.foreign_seen.get(name, 0)
        self.foreign_seen[name] = occurrence + 1
        builder = BlockBuilder(GraphBuilder.over(self.regions), state.block)
        outputs = self.legalizer.legalize(name, occurrence, builder, values, attrs)
        state.replaced_operands += [v for v in values if v]
        for ssa, out in zip(results, outputs):
            if result_type is None or tuple(state.block.tensors[out].shape) != result_type.dims:
                raise self.scanner.error(f"{opname}: the legalized result does not have the type the MLIR gives it")
            state.values[ssa] = out

    def foreign_signature(self) -> tuple[list[str], dict[str, Any], MlirType | None]:
        """``(operands) <{attributes}> : (operand types) -> result type`` of a generic
        operation of another dialect (the result type None for ``none``)."""
        s = self.scanner
        operands = self.operand_list(s)
        attrs: dict[str, Any] = {}
        if s.accept("<"):
            attrs.update(s.attr_dict())
            s.expect(">")
        if s.peek("{"):
            attrs.update(s.attr_dict())
        s.expect(":")
        s.balanced("(", ")")
        s.expect("->")
        return operands, attrs, None if s.accept("none") else s.type_()

    @staticmethod
    def results(s: Scanner) -> list[str]:
        save = s.pos
        names = s.value_list()
        if names and s.accept("="):
            expanded = []
            for name in names:
                base, _, count = name.partition(":")
                expanded += [f"{base}#{k}" for k in range(int(count))] if count else [base]
            return expanded
        s.pos = save
        return []

    def operation(self, state: _BlockState, results: list[str], short: str, generic: bool) -> None:
        s = self.scanner
        operands = self.operand_list(s)
        attrs: dict[str, Any] = {}
        if generic and s.accept("<"):
            attrs.update(s.attr_dict())
            s.expect(">")
        if s.peek("{"):
            attrs.update(s.attr_dict())
        s.expect(":")
        if s.peek("("):
            s.type_list()
            s.expect("->")
            result_types = s.type_list()
        else:
            result_types = self.types_after_colon(s)
            if s.accept("->"):
                result_types = s.type_list()
        body = s.trailing_location()
        location = location_name(body, self.location_aliases) if body is not None else ""
        self.emit(state, short, operands, attrs, results, result_types, location)

    def emit(self, state: _BlockState, short: str, operands: list[str], attrs: dict[str, Any],
             results: list[str], result_types: list[MlirType], location: str = "") -> None:
        where = f"{self.source}: {results[0] if results else short}"
        try:
            op = op_from_name(short)
        except UnknownOperatorError:
            raise TosaFormatError(one_line(f"{where}: unknown TOSA operator tosa.{short}")) from None
        if len(result_types) != len(results):
            raise TosaFormatError(f"{where}: {len(results)} results but {len(result_types)} result types")
        inputs = [self.lookup(state, v, where) for v in operands]
        outputs = []
        for ssa, t in zip(results, result_types):
            name = self.layer_name(state, ssa)
            tensor = self.add_tensor(state, name, t)
            if op in (Op.CONST, Op.CONST_SHAPE):
                values = attrs.get("values")
                if not isinstance(values, TypedValue) or values.mlir_type is None:
                    raise TosaFormatError(f"{where}: tosa.{short} without dense values")
                tensor.data = dense_array(values.value, values.mlir_type, self.resources, where)
            state.values[ssa] = name
            outputs.append(name)
        attribute = _attribute(op, attrs, where)
        state.block.operators.append(Operator(op, inputs, outputs, attribute, location))

    def layer_name(self, state: _BlockState, ssa: str) -> str:
        """``layer_K`` for the result of the block's K-th operator with results (``layer_K_I``
        for its I-th of several), as tosa-opt's serializer names them."""
        index = sum(1 for op in state.block.operators if op.outputs)
        _, _, result = ssa.partition("#")
        name = f"layer_{index}" if not result else f"layer_{index}_{result}"
        while name in state.block.tensors:
            name += "_"
        return name

    def lookup(self, state: _BlockState, ssa: str, where: str) -> str:
        if ssa in state.values:
            return state.values[ssa]
        outer, depth = state.outer, 0
        while outer is not None and ssa not in outer.values:
            outer, depth = outer.outer, depth + 1
        if outer is None or state.outer is None:
            raise TosaFormatError(f"{where}: use of undefined value {ssa}")
        if outer.values[ssa] == _NO_VALUE:
            return _NO_VALUE
        tensor = outer.block.tensors[outer.values[ssa]]
        if tensor.data is not None:   # a constant: the region gets a copy of its own
            name = self.layer_name(state, ssa)
            copy = self.add_tensor(state, name, None, like=tensor)
            copy.data = tensor.data
            op = Op.CONST_SHAPE if tensor.dtype is DType.SHAPE else Op.CONST
            state.block.operators.append(Operator(op, [], [name]))
            state.values[ssa] = name
            return name
        if state.captures is None:
            raise TosaFormatError(f"{where}: {ssa} comes from outside the region")
        # any other value is passed in: first into the enclosing block (if it is a region too)
        outer_name = self.lookup(state.outer, ssa, where)
        return self.capture(state, ssa, outer_name)

    def capture(self, state: _BlockState, ssa: str, outer_name: str) -> str:
        """Make ``outer_name`` (a tensor of the enclosing block) an extra input of every block of
        the region operator ``state`` belongs to; the name it has in ``state``'s block."""
        captures = state.captures
        assert captures is not None and state.outer is not None
        if outer_name not in captures.outer_names:
            captures.outer_names.append(outer_name)
            for block_state in captures.blocks:
                self.add_capture_input(block_state, len(captures.outer_names) - 1, outer_name)
        k = captures.outer_names.index(outer_name)
        name = captures.inner_name(state.block, k)
        state.values[ssa] = name
        return name

    def add_capture_input(self, block_state: _BlockState, k: int, outer_name: str) -> None:
        assert block_state.outer is not None and block_state.captures is not None
        source = block_state.outer.block.tensors[outer_name]
        name = block_state.captures.inner_name(block_state.block, k)
        self.add_tensor(block_state, name, None, like=source)
        block_state.block.inputs.append(name)

    def add_tensor(self, state: _BlockState, name: str, t: MlirType | None, like: Tensor | None = None) -> Tensor:
        if name in state.block.tensors:
            raise self.error(f"tensor {name!r} defined twice in block {state.block.name!r}")
        if like is not None:
            tensor = Tensor(name, like.shape, like.dtype)
            unsigned = id(like) in self.unsigned
        else:
            assert t is not None
            tensor = Tensor(name, t.dims, t.dtype)
            unsigned = t.unsigned
        if unsigned:
            self.unsigned[id(tensor)] = tensor
        state.block.tensors[name] = tensor
        return tensor

    # -- the operations with a syntax of their own
    def cast(self, state: _BlockState, results: list[str]) -> None:
        s = self.scanner
        operands = self.operand_list(s)
        s.expect(":")
        source_types = self.types_after_colon(s)
        s.expect("to")
        target_types = self.types_after_colon(s)
        if source_types != target_types or len(operands) != len(results):
            raise s.error("builtin.unrealized_conversion_cast between different types is not TOSA")
        for result, operand in zip(results, operands):
            state.values[result] = self.lookup(state, operand, self.source)

    def variable_read(self, state: _BlockState, results: list[str]) -> None:
        s = self.scanner
        variable = self.variable_named(s.symbol())
        s.expect(":")
        t = s.type_()
        name = self.layer_name(state, results[0])
        self.add_tensor(state, name, t)
        state.values[results[0]] = name
        state.block.operators.append(Operator(Op.VARIABLE_READ, [self.variable_tensor(state, variable)], [name]))

    def variable_write(self, state: _BlockState, results: list[str]) -> None:
        s = self.scanner
        variable = self.variable_named(s.symbol())
        s.expect(",")
        value = self.lookup(state, s.value_name(), self.source)
        s.expect(":")
        s.type_()
        state.block.operators.append(Operator(Op.VARIABLE_WRITE, [self.variable_tensor(state, variable), value], []))

    def variable_named(self, symbol: str) -> _Variable:
        if symbol not in self.variables:
            raise self.error(f"no tosa.variable @{symbol}")
        return self.variables[symbol]

    def variable_tensor(self, state: _BlockState, variable: _Variable) -> str:
        if variable.tensor_name not in state.block.tensors:   # a nested block declares it too
            tensor = self.add_tensor(state, variable.tensor_name, variable.type)
            tensor.variable, tensor.variable_name = True, variable.symbol
        return variable.tensor_name

    def cond_if(self, state: _BlockState, results: list[str]) -> None:
        s = self.scanner
        condition = self.lookup(state, s.value_name(), self.source)
        names, values = self.bindings(state) if s.peek("(") else ([], [])
        s.expect(":")
        s.type_()                              # the condition's type
        arg_types = s.type_list() if not s.peek("->") else []
        self.two_regions(state, Op.COND_IF, ("then", "else"), "else", (names, arg_types),
                         [condition, *values], results)

    def while_loop(self, state: _BlockState, results: list[str]) -> None:
        s = self.scanner
        names, values = self.bindings(state)
        s.expect(":")
        arg_types = s.type_list()
        self.two_regions(state, Op.WHILE_LOOP, ("cond", "body"), "do", (names, arg_types), values, results)

    def two_regions(self, state: _BlockState, op: Op, kinds: tuple[str, str], separator: str,
                    arguments: tuple[list[str], list[MlirType]], inputs: list[str], results: list[str]) -> None:
        """``-> result types { first } separator { second }``: the regions of a control-flow op."""
        s = self.scanner
        s.expect("->")
        result_types = s.type_list()
        first, second = self.block_names(results, kinds)
        captures = _Captures()
        s.expect("{")
        self.region(state, first, *arguments, captures)
        s.expect(separator)
        s.expect("{")
        self.region(state, second, *arguments, captures)
        if op is Op.WHILE_LOOP:   # the body hands each captured value back unchanged
            body = captures.blocks[1].block
            body.outputs += [captures.inner_name(body, k) for k in range(len(captures.outer_names))]
        fields = ("then_graph", "else_graph") if op is Op.COND_IF else ("cond_graph", "body_graph")
        self.finish_control(state, op, inputs + captures.outer_names, dict(zip(fields, (first, second))),
                            results, result_types, captures.outer_names if op is Op.WHILE_LOOP else [])

    def bindings(self, state: _BlockState) -> tuple[list[str], list[str]]:
        """``(%arg3 = %a, %arg4 = %b)``: the region's argument names and the values passed."""
        s = self.scanner
        names: list[str] = []
        values: list[str] = []
        s.expect("(")
        while not s.accept(")"):
            names.append(s.value_name())
            s.expect("=")
            values.append(self.lookup(state, s.value_name(), self.source))
            s.accept(",")
        return names, values

    def block_names(self, results: list[str], kinds: tuple[str, str]) -> tuple[str, str]:
        stem = (results[0].split("#")[0][1:] if results else "cf").replace(".", "_")
        count = self.names.get(stem, 0)
        self.names[stem] = count + 1
        suffix = f"_{count}" if count else ""
        return f"layer_{stem}{suffix}_{kinds[0]}", f"layer_{stem}{suffix}_{kinds[1]}"

    def region(self, outer: _BlockState, name: str, names: list[str], types: list[MlirType],
               captures: _Captures) -> None:
        """A region's block (the ``{`` already read): arguments from ``^bb0(...)`` or else the
        binding names, then its statements."""
        s = self.scanner
        if s.accept("^"):
            s.ident()
            s.expect("(")
            names = []
            while not s.accept(")"):
                names.append(s.value_name())
                s.expect(":")
                s.type_()
                s.accept(",")
            s.expect(":")
        if len(names) != len(types):
            raise s.error(f"region {name}: {len(names)} arguments for {len(types)} types")
        state = _BlockState(Block(name), outer=outer, captures=captures)
        for ssa, t in zip(names, types):
            tensor_name = ssa[1:]
            self.add_tensor(state, tensor_name, t)
            state.block.inputs.append(tensor_name)
            state.values[ssa] = tensor_name
        captures.blocks.append(state)
        for k, outer_name in enumerate(captures.outer_names):   # captured by an earlier region
            self.add_capture_input(state, k, outer_name)
        returned = self.body(state)
        state.block.outputs = [self.region_output(state, value) for value in returned]
        self.regions.append(Region(name, [state.block]))

    def region_output(self, state: _BlockState, value: str) -> str:
        name = self.lookup(state, value, self.source)
        if name in state.block.outputs:   # a block output listed twice needs a tensor of its own
            copy = f"{name}_{len(state.block.outputs)}"
            self.add_tensor(state, copy, None, like=state.block.tensors[name])
            state.block.operators.append(Operator(Op.IDENTITY, [name], [copy]))
            return copy
        return name

    def finish_control(self, state: _BlockState, op: Op, inputs: list[str], attrs: dict[str, str],
                       results: list[str], result_types: list[MlirType], carried: list[str]) -> None:
        """Append the operator; ``carried``: captured values a WHILE_LOOP carries along (extra
        results nobody reads)."""
        if len(results) != len(result_types):
            raise self.error(f"{op.name}: {len(results)} results but {len(result_types)} result types")
        outputs = []
        for ssa, t in zip(results, result_types):
            name = self.layer_name(state, ssa)
            self.add_tensor(state, name, t)
            state.values[ssa] = name
            outputs.append(name)
        stem = outputs[0] if outputs else f"layer_{len(state.block.operators)}"
        for k, source in enumerate(carried):
            name = f"{stem}_captured_{k}"
            self.add_tensor(state, name, None, like=state.block.tensors[source])
            outputs.append(name)
        state.block.operators.append(Operator(op, inputs, outputs, attribute_class(op)(**attrs)))


def _drop_unread_constants(block: Block, names: list[str], returned: set[str]) -> None:
    """Forget the constants among ``names`` nothing reads or returns any more (the operands a
    legalization copied into constants of its own)."""
    read = {n for op in block.operators for n in op.inputs} | returned
    unread = {n for n in names if n not in read and block.tensors[n].data is not None}
    if unread:
        block.operators = [op for op in block.operators if not (op.outputs and set(op.outputs) <= unread)]
        for name in unread:
            del block.tensors[name]


def _serializer_order(block: Block) -> None:
    """List the tensors in the order ``tosa-opt``'s serializer writes them (variables last
    declared first, inputs, outputs, the others by name, shapes at the end), so that a graph
    read from MLIR is the very graph its flatbuffer holds, down to the order the scheduler sees."""
    tensors = block.tensors
    variables = [n for n in reversed(tensors) if tensors[n].variable]
    head = variables + [n for n in (*block.inputs, *block.outputs) if n not in variables]
    rest = sorted(n for n in tensors if n not in head)
    ordered = head + [n for n in rest if tensors[n].dtype is not DType.SHAPE] + \
        [n for n in rest if tensors[n].dtype is DType.SHAPE]
    block.tensors = {n: tensors[n] for n in dict.fromkeys(ordered)}


def _attribute(op: Op, attrs: dict[str, Any], where: str) -> Any:
    """The operator's attribute from its MLIR attributes (``values`` of constants aside)."""
    cls = attribute_class(op)
    fields: dict[str, Any] = {}
    for name, kind in cls.field_kinds.items():
        if name not in attrs:
            if name in _MLIR_DEFAULTS:   # the dialect leaves default values out of the text
                fields[name] = _MLIR_DEFAULTS[name]
            continue
        fields[name] = _field_value(attrs[name], kind, f"{where}: {name}")
    try:
        return cls(**fields)
    except GraphValidationError as exc:
        raise TosaFormatError(f"{where}: {exc}") from None


#: MLIR spellings of enum cases that the schema names otherwise.
_ENUM_ALIASES = {"NEAREST_NEIGHBOR": "NEAREST"}


def _field_value(value: Any, kind: str, where: str) -> Any:
    if isinstance(value, str) and value in _ENUM_ALIASES:
        value = _ENUM_ALIASES[value]
    if kind == "DType":
        from_mlir = {"i8": DType.INT8, "i16": DType.INT16, "i32": DType.INT32, "i48": DType.INT48,
                     "f16": DType.FP16, "f32": DType.FP32, "bf16": DType.BF16}
        if value not in from_mlir:
            raise TosaFormatError(f"{where}: unknown accumulator type {value!r}")
        return from_mlir[value]
    if kind == "[ubyte]" and isinstance(value, TypedValue):   # CLAMP's min_val / max_val
        dtype = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "f16": np.float16,
                 "f32": np.float32}.get(value.type_name)
        if value.type_name == "bf16":
            return DType.BF16.numpy_dtype.type(float(value.value)).tobytes().ljust(8, b"\0")
        if dtype is None:
            raise TosaFormatError(f"{where}: a value of type {value.type_name!r}")
        number = float(value.value) if np.dtype(dtype).kind == "f" else int(value.value, 0)
        return np.array([number], dtype).tobytes().ljust(8, b"\0")   # tosa-opt writes 8 bytes
    if kind == "[ubyte]" and isinstance(value, str):
        return value.encode()
    if isinstance(value, TypedValue):
        return float(value.value) if "." in value.value or "e" in value.value else int(value.value, 0)
    return value


def read_mlir(data: bytes | str, source: str = "graph.mlir", legalizer: Legalizer | None = None) -> Graph:
    """The graph of a TOSA MLIR text (see the module docstring for what it reads);
    ``legalizer`` turns the operations of another dialect it knows into TOSA operators."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TosaFormatError(f"{source}: MLIR text is not UTF-8 (byte offset {exc.start})") from None
    reader = _Reader(data, source, legalizer)
    try:
        return reader.module()
    except (ValueError, KeyError, IndexError, OverflowError, MemoryError, RecursionError) as exc:
        # a damaged file that got past the checks above: still one clear line, with where
        raise reader.scanner.error(f"damaged MLIR text ({type(exc).__name__}: {exc})") from None


def looks_like_mlir(data: bytes) -> bool:
    """True for text that starts like MLIR (a module, a function or a comment)."""
    head = data[:4096].lstrip()
    return head.startswith((b"module", b"func.func", b"//", b"#", b"tosa.variable", b'"builtin.module"'))
