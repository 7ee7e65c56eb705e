"""The reference executor: runs a TOSA graph operator by operator on whole tensors.

This is the golden model of npu-sim: every operator goes through the same
bit-exact kernels (:func:`~npu_sim.reference.kernel_api.run_kernel`) that the
simulated NPU runs on tiles. The executor itself only moves values around:

* ``CONST`` / ``CONST_SHAPE`` produce the data stored in their output tensor;
  ``IDENTITY`` passes its input through (after checking the types agree).
* Variables (TOSA's stateful extension) live in a
  :class:`~npu_sim.reference.session.VariableStore` owned by a ``Session``.
  Two encodings are understood: variable-flagged block tensors (what tosa-opt
  writes: reading such a tensor reads the variable, producing it writes the
  variable, its data is the initial value) and the specification's
  ``VARIABLE`` / ``VARIABLE_READ`` / ``VARIABLE_WRITE`` operators.
* ``COND_IF`` and ``WHILE_LOOP`` run their blocks with explicit inputs only:
  operands are bound by position to the block's inputs, the block's outputs
  by position to the operator's outputs. A loop that does not finish within
  ``max_iterations`` raises :class:`~npu_sim.errors.TosaRuntimeError`.
* ``CUSTOM`` operators run the implementation registered for their
  (domain, name) in :mod:`npu_sim.reference.custom`.

Blocks are run in the order their operators are listed (the serialized
order, which TOSA writers emit topologically); reading a tensor nobody has
produced yet is a :class:`~npu_sim.errors.GraphValidationError`.

Use :func:`execute` for one invocation, or ``Session`` for several with
variables persisting between them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

import npu_sim.reference  # noqa: F401  (registers every kernel)
from npu_sim.errors import GraphValidationError, InputError, TosaRuntimeError
from npu_sim.reference.custom import custom_implementation
from npu_sim.reference.kernel_api import KernelArgs, run_kernel
from npu_sim.tosa.dtype import DType, outside_storage_range
from npu_sim.tosa.ir import Block, Graph, Operator, Tensor, TensorType
from npu_sim.tosa.ops import Op

if TYPE_CHECKING:
    from npu_sim.reference.session import VariableStore

#: Iterations after which a WHILE_LOOP is declared runaway (an error, never a hang).
DEFAULT_MAX_ITERATIONS = 100_000
#: TOSA's MAX_NESTING for level "none" (the 8K level allows 6).
DEFAULT_MAX_NESTING = 256

Inputs = Mapping[str, np.ndarray] | Sequence[np.ndarray]


@dataclass(frozen=True)
class ExecutionLimits:
    """Bounds that turn runaway graphs into errors instead of hangs."""

    max_iterations: int = DEFAULT_MAX_ITERATIONS
    max_nesting: int = DEFAULT_MAX_NESTING

    def __post_init__(self) -> None:
        if int(self.max_iterations) < 0:
            raise ValueError(f"max_iterations must be >= 0, got {self.max_iterations}")
        if int(self.max_nesting) < 1:
            raise ValueError(f"max_nesting must be >= 1, got {self.max_nesting}")


def execute(graph: Graph, inputs: Inputs | None = None, *,
            max_iterations: int = DEFAULT_MAX_ITERATIONS,
            max_nesting: int = DEFAULT_MAX_NESTING) -> dict[str, np.ndarray]:
    """Run ``graph`` once on ``inputs`` (by name, or a list in input order).

    Returns the graph outputs by name, as arrays of their storage dtypes.
    Equivalent to ``Session(graph).invoke(inputs)``: variables start from
    their initial values and are discarded afterwards.
    """
    from npu_sim.reference.session import Session

    session = Session(graph, max_iterations=max_iterations, max_nesting=max_nesting)
    return session.invoke(inputs)


# --- graph inputs -----------------------------------------------------------
def describe_type(t: TensorType) -> str:
    """``INT8 (int8) of shape [1, 4]``: how messages name an expected value."""
    return f"{t.dtype.name} ({t.dtype.numpy_dtype.name}) of shape {list(t.shape)}"


def check_input_array(name: str, value: object, expected: TensorType, *,
                      what: str = "input") -> np.ndarray:
    """``value`` as the array for graph input ``name``, or :class:`InputError`.

    The dtype must be exactly the storage dtype of ``expected`` and the shape
    exactly its shape (an array with the same element count but another shape
    is refused). INT4 and INT48 values must lie in their type's range.
    """
    if not isinstance(value, (np.ndarray, np.generic)):
        raise InputError(f"{what} {name!r}: expected a numpy array, {describe_type(expected)}; "
                         f"got {type(value).__name__}")
    array = np.asarray(value)
    want = expected.dtype.numpy_dtype
    if array.dtype != want or tuple(array.shape) != tuple(expected.shape):
        raise InputError(f"{what} {name!r}: expected {describe_type(expected)}, "
                         f"got {array.dtype.name} of shape {list(array.shape)}")
    bounds = outside_storage_range(array, expected.dtype)
    if bounds is not None:
        raise InputError(f"{what} {name!r}: {expected.dtype.name} values must lie in "
                         f"[{bounds[0]}, {bounds[1]}], got [{int(array.min())}, {int(array.max())}]")
    return array


def check_inputs(graph: Graph, inputs: Inputs | None) -> dict[str, np.ndarray]:
    """Match ``inputs`` (a name->array mapping, or a list in the graph's input
    order) against the graph's inputs; raise :class:`InputError` naming the
    first missing, unknown or ill-typed one."""
    expected = graph.input_types
    names = list(expected)
    if inputs is None:
        inputs = {}
    if isinstance(inputs, Mapping):
        unknown = [k for k in inputs if k not in expected]
        if unknown:
            raise InputError(f"unknown input {unknown[0]!r}; the graph's inputs are "
                             f"{', '.join(map(repr, names)) or '(none)'}")
        for name in names:
            if name not in inputs:
                raise InputError(f"missing input {name!r}: expected {describe_type(expected[name])}")
        pairs = [(name, inputs[name]) for name in names]
    elif isinstance(inputs, (list, tuple)):
        if len(inputs) != len(names):
            raise InputError(f"expected {len(names)} input(s) ({', '.join(map(repr, names))}), "
                             f"got {len(inputs)}")
        pairs = list(zip(names, inputs))
    else:
        raise InputError("inputs must be a mapping from input name to array, "
                         "or a list of arrays in the graph's input order")
    return {name: check_input_array(name, value, expected[name]) for name, value in pairs}


# --- running blocks -----------------------------------------------------------
@dataclass
class _Step:
    """One operator, with what the executor needs of it worked out once per block."""

    operator: Operator
    name: str
    input_types: list[TensorType]
    output_types: list[TensorType]
    frees: list[str]  # values no later operator reads: dropped after this step
    constants: list[np.ndarray] | None = None  # CONST / CONST_SHAPE data, checked


@dataclass
class _BlockPlan:
    """Per-block facts computed once: the steps, and the variables the block declares."""

    steps: list[_Step]
    variable_tensors: list[Tensor]
    any_variable: bool


class GraphRunner:
    """Runs the blocks of one graph against one variable store."""

    def __init__(self, graph: Graph, variables: VariableStore,
                 limits: ExecutionLimits = ExecutionLimits()):
        self.graph = graph
        self.variables = variables
        self.limits = limits
        self._plans: dict[int, _BlockPlan] = {}
        self._blocks: dict[str, Block] = {}

    # -- entry point
    def run_main(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        main = self.graph.main
        outputs = self.run_block(main, [inputs[name] for name in main.inputs], depth=0)
        # Fresh C-ordered copies: callers may mutate them without touching inputs or
        # variables, and .npy files of them are plain row-major.
        return {name: np.array(value, copy=True, order="C") for name, value in zip(main.outputs, outputs)}

    def run_block(self, block: Block, args: Sequence[np.ndarray], depth: int) -> list[np.ndarray]:
        """Bind ``args`` to ``block.inputs``, run its operators, return its outputs."""
        if len(args) != len(block.inputs):
            raise GraphValidationError(f"block {block.name!r} takes {len(block.inputs)} input(s), "
                                       f"given {len(args)}")
        plan = self._plan(block)
        for tensor in plan.variable_tensors:
            self.variables.declare_tensor(tensor, where=f"block {block.name!r}")
        values: dict[str, np.ndarray] = dict(zip(block.inputs, args))
        for step in plan.steps:
            self._run_step(block, step, values, depth, plan.any_variable)
            for name in step.frees:
                values.pop(name, None)
        return [self._get(block, values, name, "block output") for name in block.outputs]

    def _plan(self, block: Block) -> _BlockPlan:
        plan = self._plans.get(id(block))
        if plan is None:
            plan = self._make_plan(block)
            self._plans[id(block)] = plan
        return plan

    def _make_plan(self, block: Block) -> _BlockPlan:
        last_use = {name: i for i, op in enumerate(block.operators) for name in op.inputs}
        keep = set(block.outputs)
        steps = []
        for index, operator in enumerate(block.operators):
            frees = [n for n in dict.fromkeys(operator.inputs)
                     if last_use[n] == index and n not in keep]
            step = _Step(operator, operator.name, self._types(block, operator.inputs),
                         self._types(block, operator.outputs), frees)
            if operator.op in (Op.CONST, Op.CONST_SHAPE):
                step.constants = [_constant(block.tensor(n), step.name) for n in operator.outputs]
            steps.append(step)
        # Variable tensors declare themselves on block entry, unless a VARIABLE
        # operator of the block declares them explicitly.
        declared = {name for op in block.operators if op.op == Op.VARIABLE
                    for name in [*op.inputs, *op.outputs]}
        variables = [t for t in block.tensors.values() if t.variable]
        return _BlockPlan(steps, [t for t in variables if t.name not in declared], bool(variables))

    def resolve_block(self, name: str, where: str) -> Block:
        """A control-flow operator's block by name (or the only block of a region so named)."""
        block = self._blocks.get(name)
        if block is None:
            try:
                block = self.graph.block(name)
            except GraphValidationError as exc:
                raise GraphValidationError(f"{where}: {exc}") from None
            self._blocks[name] = block
        return block

    # -- values
    def _get(self, block: Block, values: dict[str, np.ndarray], name: str, use: str) -> np.ndarray:
        tensor = block.tensors.get(name)
        if tensor is not None and tensor.variable:
            return self.variables.read_tensor(tensor, where=use)
        try:
            return values[name]
        except KeyError:
            pass
        if tensor is None:
            raise GraphValidationError(f"block {block.name!r}: {use} names unknown tensor {name!r}")
        if tensor.data is not None:  # a constant tensor without a CONST operator
            return _constant(tensor, use)
        raise GraphValidationError(f"block {block.name!r}: {use} reads tensor {name!r} "
                                   "before any operator produces it")

    def _put(self, block: Block, values: dict[str, np.ndarray], name: str,
             value: np.ndarray, where: str) -> None:
        tensor = block.tensors.get(name)
        if tensor is not None and tensor.variable:
            self.variables.write_tensor(tensor, value, where=where)
        else:
            values[name] = value

    def _types(self, block: Block, names: Sequence[str]) -> list[TensorType]:
        return [block.tensor(n).type for n in names]

    # -- operators
    def _run_step(self, block: Block, step: _Step, values: dict[str, np.ndarray], depth: int,
                  any_variable: bool) -> None:
        operator = step.operator
        op = operator.op
        where = step.name
        if step.constants is not None:
            results = step.constants
        elif op == Op.VARIABLE:
            self._variable_declare(block, operator)
            return
        elif op == Op.VARIABLE_READ:
            self._variable_read(block, operator, values)
            return
        elif op == Op.VARIABLE_WRITE:
            self._variable_write(block, operator, values)
            return
        else:
            if any_variable:
                args = [self._get(block, values, name, where) for name in operator.inputs]
            else:  # the fast path: plain dataflow values
                try:
                    args = [values[name] for name in operator.inputs]
                except KeyError:
                    args = [self._get(block, values, name, where) for name in operator.inputs]
            if op == Op.IDENTITY:
                results = self._identity(block, operator, args)
            elif op == Op.COND_IF:
                results = self._cond_if(block, operator, args, depth)
            elif op == Op.WHILE_LOOP:
                results = self._while_loop(block, operator, args, depth)
            else:
                kernel_args = KernelArgs(op=op, attribute=operator.attribute, inputs=args,
                                         input_types=step.input_types,
                                         output_types=step.output_types, name=where)
                if op == Op.CUSTOM:
                    attribute = operator.attribute
                    fn = custom_implementation(attribute.domain_name, attribute.operator_name)
                    results = fn(kernel_args)
                    _check_results(operator, results, step.output_types, TosaRuntimeError)
                else:
                    results = run_kernel(kernel_args)
                    _check_results(operator, results, step.output_types, KernelBugError)
        if any_variable:
            for name, value in zip(operator.outputs, results):
                self._put(block, values, name, value, where)
        else:
            values.update(zip(operator.outputs, results))

    def _identity(self, block: Block, operator: Operator, args: list[np.ndarray]) -> list[np.ndarray]:
        if len(args) != 1 or len(operator.outputs) != 1:
            raise GraphValidationError(f"{operator.name}: IDENTITY takes one input and one output")
        in_type = block.tensor(operator.inputs[0]).type
        out_type = block.tensor(operator.outputs[0]).type
        if in_type != out_type:
            raise TosaRuntimeError(operator.name, f"input {describe_type(in_type)} differs from "
                                                  f"output {describe_type(out_type)}")
        return args

    # -- control flow
    def _check_list(self, operator: Operator, what: str, got: list[TensorType],
                    want: list[TensorType]) -> None:
        if got != want:
            raise TosaRuntimeError(operator.name, f"{what}: operator has "
                                   f"{_describe_list(got)}, block has {_describe_list(want)}")

    def _enter(self, operator: Operator, depth: int) -> None:
        if depth + 1 > self.limits.max_nesting:
            raise TosaRuntimeError(operator.name, f"control flow nested deeper than MAX_NESTING="
                                                  f"{self.limits.max_nesting}")

    def _cond_if(self, block: Block, operator: Operator, args: list[np.ndarray],
                 depth: int) -> list[np.ndarray]:
        attribute = operator.attribute
        if not args:
            raise GraphValidationError(f"{operator.name}: COND_IF needs a condition input")
        cond_type = block.tensor(operator.inputs[0]).type
        if cond_type.dtype != DType.BOOL:
            raise TosaRuntimeError(operator.name, f"condition must be BOOL, got {cond_type.dtype.name}")
        if args[0].size != 1:
            raise TosaRuntimeError(operator.name, f"condition must hold one element, has {args[0].size}")
        then_block = self.resolve_block(attribute.then_graph, operator.name)
        else_block = self.resolve_block(attribute.else_graph, operator.name)
        in_types = self._types(block, operator.inputs[1:])
        out_types = self._types(block, operator.outputs)
        for branch in (then_block, else_block):
            self._check_list(operator, f"inputs of {branch.name!r}", in_types,
                             self._types(branch, branch.inputs))
            self._check_list(operator, f"outputs of {branch.name!r}", out_types,
                             self._types(branch, branch.outputs))
        self._enter(operator, depth)
        chosen = then_block if bool(args[0].reshape(-1)[0]) else else_block
        return self.run_block(chosen, args[1:], depth + 1)

    def _while_loop(self, block: Block, operator: Operator, args: list[np.ndarray],
                    depth: int) -> list[np.ndarray]:
        attribute = operator.attribute
        cond_block = self.resolve_block(attribute.cond_graph, operator.name)
        body_block = self.resolve_block(attribute.body_graph, operator.name)
        in_types = self._types(block, operator.inputs)
        self._check_list(operator, "outputs vs inputs", self._types(block, operator.outputs), in_types)
        self._check_list(operator, f"inputs of {cond_block.name!r}", in_types,
                         self._types(cond_block, cond_block.inputs))
        self._check_list(operator, f"inputs of {body_block.name!r}", in_types,
                         self._types(body_block, body_block.inputs))
        self._check_list(operator, f"outputs of {body_block.name!r}", in_types,
                         self._types(body_block, body_block.outputs))
        cond_out = self._types(cond_block, cond_block.outputs)
        if len(cond_out) != 1 or cond_out[0].dtype != DType.BOOL or cond_out[0].element_count != 1:
            raise TosaRuntimeError(operator.name, f"condition block {cond_block.name!r} must output "
                                   f"one single-element BOOL tensor, has {_describe_list(cond_out)}")
        self._enter(operator, depth)
        state = list(args)
        iterations = 0
        while bool(self.run_block(cond_block, state, depth + 1)[0].reshape(-1)[0]):
            if iterations >= self.limits.max_iterations:
                raise TosaRuntimeError(operator.name, f"loop still running after "
                                       f"{self.limits.max_iterations} iterations "
                                       "(raise max_iterations if this is intended)")
            state = self.run_block(body_block, state, depth + 1)
            iterations += 1
        return state

    # -- the specification's variable operators
    def _variable_tensor(self, block: Block, operator: Operator, names: Sequence[str]) -> Tensor:
        for name in names:
            tensor = block.tensors.get(name)
            if tensor is not None and tensor.variable:
                return tensor
        raise GraphValidationError(f"{operator.name}: names no variable tensor")

    def _variable_declare(self, block: Block, operator: Operator) -> None:
        tensor = self._variable_tensor(block, operator, [*operator.outputs, *operator.inputs])
        initial = None
        for name in operator.inputs:  # an explicit initial value operand, if any
            other = block.tensors.get(name)
            if other is not None and not other.variable and other.data is not None:
                initial = _constant(other, operator.name)
        self.variables.declare_tensor(tensor, where=operator.name, initial=initial, explicit=True)

    def _variable_read(self, block: Block, operator: Operator, values: dict[str, np.ndarray]) -> None:
        tensor = self._variable_tensor(block, operator, [*operator.inputs, *operator.outputs])
        targets = [n for n in operator.outputs if n != tensor.name]
        if len(targets) != 1:
            raise GraphValidationError(f"{operator.name}: VARIABLE_READ needs one output tensor")
        out_type = block.tensor(targets[0]).type
        values[targets[0]] = self.variables.read(tensor.variable_key, out_type, where=operator.name)

    def _variable_write(self, block: Block, operator: Operator, values: dict[str, np.ndarray]) -> None:
        tensor = self._variable_tensor(block, operator, [*operator.outputs, *operator.inputs])
        sources = [n for n in operator.inputs if n != tensor.name]
        if len(sources) != 1:
            raise GraphValidationError(f"{operator.name}: VARIABLE_WRITE needs one input tensor")
        value = self._get(block, values, sources[0], operator.name)
        in_type = block.tensor(sources[0]).type
        self.variables.write(tensor.variable_key, value, in_type, where=operator.name)


def _constant(tensor: Tensor, where: str) -> np.ndarray:
    """The data of a constant tensor, checked against the tensor's type."""
    if tensor.data is None:
        raise GraphValidationError(f"{where}: constant tensor {tensor.name!r} has no data")
    data = np.asarray(tensor.data)
    want = tensor.type
    if data.dtype != want.dtype.numpy_dtype:
        raise GraphValidationError(f"{where}: constant {tensor.name!r} holds {data.dtype.name}, "
                                   f"expected {describe_type(want)}")
    if tuple(data.shape) != want.shape:
        if data.size != want.element_count:
            raise GraphValidationError(f"{where}: constant {tensor.name!r} holds {data.size} "
                                       f"element(s), expected {describe_type(want)}")
        data = data.reshape(want.shape)
    return data


class KernelBugError(RuntimeError):
    """A kernel returned something other than its declared outputs: a bug in npu-sim (exit 1)."""

    def __init__(self, operator: str, condition: str):
        super().__init__(f"{operator}: kernel bug: {condition}")


def _check_results(operator: Operator, results: object, types: list[TensorType],
                   error: type[Exception]) -> None:
    """A kernel (or CUSTOM implementation) must return exactly the declared outputs."""
    if not isinstance(results, (list, tuple)) or len(results) != len(types):
        count = len(results) if isinstance(results, (list, tuple)) else type(results).__name__
        raise error(operator.name, f"implementation returned {count} output(s), "
                                   f"expected {len(types)}")
    for i, (array, t) in enumerate(zip(results, types)):
        if not isinstance(array, np.ndarray) or array.dtype != t.dtype.numpy_dtype \
                or tuple(array.shape) != t.shape:
            got = (f"{array.dtype.name} of shape {list(array.shape)}"
                   if isinstance(array, np.ndarray) else type(array).__name__)
            raise error(operator.name, f"output {i} is {got}, expected {describe_type(t)}")


def _describe_list(types: list[TensorType]) -> str:
    if not types:
        return "no tensors"
    return "[" + ", ".join(f"{t.dtype.name}{list(t.shape)}" for t in types) + "]"
