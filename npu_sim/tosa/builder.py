"""Build TOSA graphs in Python: ``GraphBuilder``.

::

    b = GraphBuilder()
    x = b.input("x", (1, 8), DType.INT32)
    c = b.const("c", np.arange(8, dtype=np.int32).reshape(1, 8))
    y = b.op(Op.ADD, [x, c])                 # output type inferred from the spec's rules
    z = b.op(Op.CAST, [y], (1, 8), DType.INT8, name="z")   # or given explicitly
    b.output(z)
    graph = b.build()                        # validated

Tensors are referred to by name (plain ``str``); names are generated when not
given. Attributes are keyword fields (``b.op(Op.CONV2D, [...], pad=(0,0,0,0),
stride=(1,1), dilation=(1,1), acc_type=DType.INT32)``) or an ``attribute=``
object. Control flow builds its blocks from Python functions::

    (r,) = b.cond_if(cond, [x], lambda bb, a: bb.op(Op.NEGATE, [a, zp, zp]),
                     lambda bb, a: a)
    (n, acc) = b.while_loop([i0, acc0], cond_fn, body_fn)

where each function receives a :class:`BlockBuilder` and the block's input
names and returns its output name(s). Variables: ``v = b.variable("state", shape,
dtype, initial)``, then ``b.variable_read(v)`` / ``b.variable_write(v, value)`` in
any block. The graph follows the conventions of :mod:`npu_sim.tosa.ir`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, overload

import ml_dtypes
import numpy as np

from npu_sim.errors import GraphValidationError
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, Region, Tensor, TensorType
from npu_sim.tosa.ops import Attribute, Op, make_attribute
from npu_sim.tosa.type_rules import RuleViolation, expected_outputs
from npu_sim.tosa.validation import validate as validate_graph

_NUMPY_TO_DTYPE = {
    np.dtype(np.bool_): DType.BOOL, np.dtype(np.int8): DType.INT8, np.dtype(np.int16): DType.INT16,
    np.dtype(np.int32): DType.INT32, np.dtype(np.float16): DType.FP16,
    np.dtype(np.float32): DType.FP32, np.dtype(ml_dtypes.bfloat16): DType.BF16,
    np.dtype(ml_dtypes.float8_e4m3fn): DType.FP8E4M3,
    np.dtype(ml_dtypes.float8_e5m2): DType.FP8E5M2,
}

BranchFn = Callable[..., "str | Sequence[str]"]


class BlockBuilder:
    """Adds tensors and operators to one block of a graph under construction."""

    def __init__(self, graph: GraphBuilder, block: Block):
        self.graph_builder = graph
        self.block = block

    # -- names and types
    @property
    def name(self) -> str:
        return self.block.name

    def type_of(self, name: str) -> TensorType:
        """Shape and dtype of a tensor of this block."""
        return self.block.tensor(name).type

    def _new_name(self, name: str | None, stem: str) -> str:
        if name is None:
            name = self.graph_builder.fresh_name(stem)
        if name in self.block.tensors:
            raise GraphValidationError(f"block {self.block.name!r} already has a tensor {name!r}")
        return name

    def _add(self, tensor: Tensor) -> str:
        self.block.tensors[tensor.name] = tensor
        return tensor.name

    # -- tensors
    def input(self, name: str | None, shape: Sequence[int], dtype: DType) -> str:
        """A block input (a graph input for the main block)."""
        name = self._add(Tensor(self._new_name(name, "input"), tuple(shape), DType(dtype)))
        self.block.inputs.append(name)
        return name

    def tensor(self, name: str | None, shape: Sequence[int], dtype: DType) -> str:
        """Declare a tensor without producing it (to wire up operators by hand)."""
        return self._add(Tensor(self._new_name(name, "t"), tuple(shape), DType(dtype)))

    def const(self, name: str | None, value: Any, dtype: DType | None = None,
              shape: Sequence[int] | None = None) -> str:
        """A constant (CONST, or CONST_SHAPE for dtype SHAPE).

        ``value`` is an array (dtype inferred from numpy's, except for int64, INT4,
        INT48 and SHAPE which need ``dtype``) or a Python scalar/list with ``dtype``;
        a scalar becomes a shape-(1,) tensor, the shape TOSA gives zero points.
        """
        if dtype is None:
            if not isinstance(value, np.ndarray) or value.dtype not in _NUMPY_TO_DTYPE:
                raise GraphValidationError(f"const {name!r}: give the TOSA dtype "
                                           f"(cannot infer it from {type(value).__name__})")
            dtype = _NUMPY_TO_DTYPE[value.dtype]
        dtype = DType(dtype)
        if shape is None:
            shape = np.shape(value) if np.ndim(value) else (1,)
        raw = np.asarray(value)
        if dtype.is_integer and dtype is not DType.BOOL and dtype is not DType.SHAPE and \
                raw.size and raw.dtype.kind in "iu":  # check before the cast wraps around
            low, high = dtype.int_range
            if int(raw.min()) < low or int(raw.max()) > high:
                raise GraphValidationError(f"const {name!r}: values outside the {dtype.name} range")
        data = raw.astype(dtype.numpy_dtype).reshape(tuple(shape))
        out = self._add(Tensor(self._new_name(name, "const"), tuple(shape), dtype, data))
        op = Op.CONST_SHAPE if dtype is DType.SHAPE else Op.CONST
        self.block.operators.append(Operator(op, [], [out]))
        return out

    def const_shape(self, name: str | None, values: Sequence[int]) -> str:
        """A CONST_SHAPE: a SHAPE tensor of shape (len(values),)."""
        array = np.asarray(list(values), dtype=np.int64)
        return self.const(name, array, DType.SHAPE, (array.size,))

    # -- operators
    @overload
    def op(self, op: Op, inputs: Sequence[str], shape: Sequence[int] | None = None,
           dtype: DType | None = None, *, outputs: None = None,
           name: str | None = None, names: Sequence[str] | None = None,
           attribute: Attribute | None = None, location: str = "", **fields: Any) -> str: ...

    @overload
    def op(self, op: Op, inputs: Sequence[str], shape: Sequence[int] | None = None,
           dtype: DType | None = None, *, outputs: Sequence[TensorType | tuple[Sequence[int], DType]],
           name: str | None = None, names: Sequence[str] | None = None,
           attribute: Attribute | None = None, location: str = "", **fields: Any) -> list[str]: ...

    def op(self, op: Op, inputs: Sequence[str], shape: Sequence[int] | None = None,
           dtype: DType | None = None, *, outputs: Sequence[TensorType | tuple[Sequence[int], DType]] | None = None,
           name: str | None = None, names: Sequence[str] | None = None,
           attribute: Attribute | None = None, location: str = "", **fields: Any) -> str | list[str]:
        """Append operator ``op``; returns its output name (or list of names with ``outputs``).

        Without ``shape``/``dtype`` the output type comes from the specification's
        shape rules (elementwise broadcast, convolution sizes, reshape values...).
        """
        op = Op(op)
        inputs = list(inputs)
        for n in inputs:
            if n not in self.block.tensors:
                raise GraphValidationError(f"block {self.block.name!r}: {op.name} input {n!r} "
                                           "does not exist")
        if attribute is None:
            attribute = make_attribute(op, **fields)
        elif fields:
            raise GraphValidationError(f"{op.name}: give either attribute= or fields, not both")
        if outputs is None:
            types = [self._infer(op, inputs, attribute, shape, dtype)]
            single = True
        else:
            types = [TensorType(tuple(t[0]), DType(t[1])) for t in outputs]
            single = False
        out_names = list(names) if names is not None else [name] * len(types) if single else \
            [None] * len(types)
        if len(out_names) != len(types):
            raise GraphValidationError(f"{op.name}: {len(out_names)} names for "
                                       f"{len(types)} outputs")
        created = [self._add(Tensor(self._new_name(n, op.name.lower()), t.shape, t.dtype))
                   for n, t in zip(out_names, types)]
        self.block.operators.append(Operator(op, inputs, created, attribute, location))
        return created[0] if single else created

    def _infer(self, op: Op, inputs: list[str], attribute: Attribute,
               shape: Sequence[int] | None, dtype: DType | None) -> TensorType:
        if shape is not None and dtype is not None:
            return TensorType(tuple(shape), DType(dtype))
        in_types = [self.type_of(n) for n in inputs]
        values = [t.data if t.dtype is DType.SHAPE else None
                  for t in (self.block.tensors[n] for n in inputs)]
        try:
            expected = expected_outputs(op, attribute, in_types, values)
        except RuleViolation as exc:
            raise GraphValidationError(f"{op.name}: {exc}") from None
        if expected is None or len(expected) != 1:
            raise GraphValidationError(f"{op.name}: give the output shape and dtype "
                                       "(no single-output rule to infer them)")
        rule_shape, rule_dtype = expected[0]
        shape = tuple(shape) if shape is not None else rule_shape
        dtype = dtype if dtype is not None else rule_dtype
        if shape is None or dtype is None:
            raise GraphValidationError(f"{op.name}: give the output "
                                       f"{'shape' if shape is None else 'dtype'} (not inferable)")
        return TensorType(tuple(shape), DType(dtype))

    def output(self, *names: str) -> None:
        """Mark tensors as outputs of the block (graph outputs for the main block)."""
        for n in names:
            self.block.tensor(n)
            self.block.outputs.append(n)

    # -- variables
    def variable_read(self, variable: str, name: str | None = None) -> str:
        """VARIABLE_READ of a variable declared with :meth:`GraphBuilder.variable`."""
        declared = self._variable(variable)
        out = self._add(Tensor(self._new_name(name, "read"), declared.shape, declared.dtype))
        self.block.operators.append(Operator(Op.VARIABLE_READ, [variable], [out]))
        return out

    def variable_write(self, variable: str, value: str) -> None:
        """VARIABLE_WRITE of ``value`` into a variable."""
        self._variable(variable)
        self.block.tensor(value)
        self.block.operators.append(Operator(Op.VARIABLE_WRITE, [variable, value], []))

    def _variable(self, name: str) -> Tensor:
        declared = self.graph_builder.main.block.tensors.get(name)
        if declared is None or not declared.variable:
            raise GraphValidationError(f"no variable named {name!r} (declare it with variable())")
        if name not in self.block.tensors:
            self.block.tensors[name] = Tensor(declared.name, declared.shape, declared.dtype,
                                              declared.data, True, declared.variable_name)
        return declared

    # -- control flow
    def cond_if(self, condition: str, args: Sequence[str], then_fn: BranchFn, else_fn: BranchFn,
                names: Sequence[str] | None = None, block_names: tuple[str, str] | None = None
                ) -> list[str]:
        """COND_IF: runs ``then_fn``'s block if ``condition`` holds, else ``else_fn``'s."""
        args = list(args)
        stem = self.graph_builder.fresh_name("cond_if")
        then_name, else_name = block_names or (f"{stem}_then", f"{stem}_else")
        types = [self.type_of(a) for a in args]
        then_block = self.graph_builder.new_block(then_name, types, then_fn)
        else_block = self.graph_builder.new_block(else_name, types, else_fn)
        out_types = [then_block.tensors[n].type for n in then_block.outputs]
        else_types = [else_block.tensors[n].type for n in else_block.outputs]
        if out_types != else_types:
            raise GraphValidationError(f"COND_IF: then block returns {out_types}, else block "
                                       f"returns {else_types}")
        return self.op(Op.COND_IF, [condition, *args], outputs=out_types, names=names,
                       attribute=make_attribute(Op.COND_IF, then_graph=then_name,
                                                else_graph=else_name))

    def while_loop(self, args: Sequence[str], cond_fn: BranchFn, body_fn: BranchFn,
                   names: Sequence[str] | None = None,
                   block_names: tuple[str, str] | None = None) -> list[str]:
        """WHILE_LOOP over loop-carried ``args``: ``cond_fn`` returns a one-element BOOL."""
        args = list(args)
        types = [self.type_of(a) for a in args]
        stem = self.graph_builder.fresh_name("while")
        cond_name, body_name = block_names or (f"{stem}_cond", f"{stem}_body")
        self.graph_builder.new_block(cond_name, types, cond_fn)
        self.graph_builder.new_block(body_name, types, body_fn)
        return self.op(Op.WHILE_LOOP, args, outputs=types, names=names,
                       attribute=make_attribute(Op.WHILE_LOOP, cond_graph=cond_name,
                                                body_graph=body_name))


class GraphBuilder(BlockBuilder):
    """Builds a :class:`~npu_sim.tosa.ir.Graph`; its own methods add to the main block.

    ``layout="regions"`` (default) puts each control-flow block in a region of its
    own named like the block (tosa-tools 2026.8's layout); ``layout="main"`` puts
    them in the main region after the main block (the serialization README's).
    """

    def __init__(self, version: tuple[int, int, int, bool] = (1, 0, 0, False),
                 layout: str = "regions"):
        if layout not in ("regions", "main"):
            raise ValueError(f"layout must be 'regions' or 'main', not {layout!r}")
        self.version = version
        self.layout = layout
        self._counter = itertools.count()
        self._used: set[str] = set()
        self.regions = [Region("main", [Block("main")])]
        super().__init__(self, self.regions[0].blocks[0])

    @classmethod
    def over(cls, regions: list[Region]) -> GraphBuilder:
        """A builder adding to regions being read elsewhere (the first block of the first
        region is the main block): a reader that meets an operation it legalizes builds
        the replacement with it, names kept unique across all the blocks."""
        builder = cls.__new__(cls)
        builder.version, builder.layout = (1, 0, 0, False), "regions"
        builder._counter, builder._used = itertools.count(), set()
        builder.regions = regions
        BlockBuilder.__init__(builder, builder, regions[0].blocks[0])
        return builder

    @property
    def main(self) -> BlockBuilder:
        return self

    def fresh_name(self, stem: str) -> str:
        """A name not generated before in this graph."""
        while True:
            name = f"{stem}_{next(self._counter)}"
            if name not in self._used and all(name not in b.tensors for r in self.regions
                                              for b in r.blocks):
                self._used.add(name)
                return name

    def variable(self, name: str, shape: Sequence[int], dtype: DType, initial: Any = None,
                 variable_name: str | None = None) -> str:
        """Declare a variable (in the main block); ``initial`` is its initial value or None."""
        dtype = DType(dtype)
        data = None if initial is None else \
            np.asarray(initial).astype(dtype.numpy_dtype).reshape(tuple(shape))
        return self._add(Tensor(self._new_name(name, "var"), tuple(shape), dtype, data,
                                variable=True, variable_name=variable_name or name))

    def new_block(self, name: str, input_types: Sequence[TensorType], fn: BranchFn) -> Block:
        """Create a block with inputs of ``input_types``; ``fn(builder, *inputs)`` fills it."""
        if any(b.name == name for r in self.regions for b in r.blocks):
            raise GraphValidationError(f"a block named {name!r} already exists")
        block = Block(name)
        if self.layout == "regions":
            self.regions.append(Region(name, [block]))
        else:
            self.regions[0].blocks.append(block)
        builder = BlockBuilder(self, block)
        args = [builder.input(None, t.shape, t.dtype) for t in input_types]
        result = fn(builder, *args)
        outputs = [result] if isinstance(result, str) else list(result)
        builder.output(*outputs)
        return block

    def build(self, validate: bool = True) -> Graph:
        """The graph; validated (GraphValidationError) unless ``validate=False``."""
        graph = Graph(regions=self.regions, version=self.version)
        if validate:
            validate_graph(graph)
        return graph


__all__ = ["GraphBuilder", "BlockBuilder"]
