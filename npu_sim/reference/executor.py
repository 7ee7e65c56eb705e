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

What depends only on the graph is worked out once (:class:`CompiledGraph`, kept per
graph by :mod:`npu_sim.reference.prepared`): each block's plan, constants, operators
of constant operands folded after their first run, and every other operator's kernel
bound after its second success (:func:`~npu_sim.reference.kernel_api.bind_kernel`: its
static ERROR_IFs done, its attribute-derived constants made), so an invocation is a
loop over bound steps; the checks that read data still run on every call.

Use :func:`execute` for one invocation, or ``Session`` for several with
variables persisting between them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

import npu_sim.reference  # noqa: F401  (registers every kernel)
from npu_sim.errors import GraphValidationError, InputError, TosaRuntimeError
from npu_sim.reference.custom import custom_implementation
from npu_sim.reference.kernel_api import BoundKernel, KernelArgs, bind_kernel, run_kernel
from npu_sim.run_limits import LoopGuard
from npu_sim.tosa.dtype import DType, outside_storage_range
from npu_sim.tosa.ir import Block, Graph, Operator, Tensor, TensorType
from npu_sim.tosa.ops import Op
from npu_sim.tosa.unsigned_io import as_storage

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
    unsigned = graph.unsigned_io
    return {name: check_input_array(name, as_storage(np.asarray(value), expected[name].dtype)
                                    if name in unsigned and isinstance(value, (np.ndarray, np.generic)) else value,
                                    expected[name]) for name, value in pairs}


# --- plans -------------------------------------------------------------------
#: A step's work: (runner, the block's live values by tensor name, nesting depth).
StepRun = Callable[["GraphRunner", dict[str, np.ndarray], int], None]


class _Step(NamedTuple):
    """One operator as the executor runs it, worked out once per block."""

    run: StepRun
    #: values no later operator reads: dropped after this step
    frees: tuple[str, ...]


@dataclass
class _BlockPlan:
    """Per-block facts computed once: the steps, constants and the variables the block declares."""

    steps: list[_Step]
    #: values every run of the block starts from: CONST/CONST_SHAPE outputs (checked),
    #: and the outputs of operators of constant operands once they have run (folded)
    seed: dict[str, np.ndarray]
    variable_tensors: list[Tensor]
    #: ``steps`` as a run walks them (see :meth:`running_steps`); None: to be worked out again
    running: list[_Step] | None = None

    def running_steps(self) -> list[_Step]:
        """The steps without the folded ones, each freeing only values outside the seed (the
        seed keeps constants alive anyway): recomputed after a step is bound or folded."""
        running = self.running
        if running is None:
            seed = self.seed
            running = self.running = [
                _Step(run, tuple(n for n in frees if n not in seed)) for run, frees in self.steps
                if run is not _folded or any(n not in seed for n in frees)]
        return running


class CompiledGraph:
    """What the executor works out once per graph and reuses for every invocation.

    A block's plan is made on the block's first run (so a problem with it is reported
    when, and only if, the block runs). An operator whose operands are all constants is
    folded after its first successful run: its outputs join the values every run starts
    from. Any other operator's kernel is bound to its attribute, operand types and
    constant operands after its second successful call
    (:func:`~npu_sim.reference.kernel_api.bind_kernel`), so an invocation becomes a
    loop over bound steps. Holds no variables and no limits: Sessions share it.
    """

    def __init__(self) -> None:
        self._plans: dict[int, _BlockPlan] = {}
        self._blocks: dict[str, Block] = {}

    def plan(self, block: Block) -> _BlockPlan:
        plan = self._plans.get(id(block))
        if plan is None:
            plan = self._plans[id(block)] = _make_plan(block)
        return plan

    def resolve_block(self, graph: Graph, name: str, where: str) -> Block:
        """A control-flow operator's block by name (or the only block of a region so named)."""
        block = self._blocks.get(name)
        if block is None:
            try:
                block = graph.block(name)
            except GraphValidationError as exc:
                raise GraphValidationError(f"{where}: {exc}") from None
            self._blocks[name] = block
        return block


def _make_plan(block: Block) -> _BlockPlan:
    operators = block.operators
    last_use = {name: i for i, op in enumerate(operators) for name in op.inputs}
    keep = set(block.outputs)
    layout = _Layout.of(block)
    plan = _BlockPlan([], layout.seed_constants(block), _declared_variables(block))
    will_be_constant = set(plan.seed)
    for index, operator in enumerate(operators):
        if operator.op in (Op.CONST, Op.CONST_SHAPE) and all(n in plan.seed for n in operator.outputs):
            continue  # its outputs are in the seed
        frees = tuple(n for n in dict.fromkeys(operator.inputs) if last_use[n] == index and n not in keep)
        run, binding = _make_step(block, operator, plan.seed)
        if binding is not None:
            foldable = layout.foldable(block, operator, index, will_be_constant)
            _connect(plan, binding, frees, foldable)
            if foldable:
                will_be_constant.update(operator.outputs)
        plan.steps.append(_Step(run, frees))
    return plan


def _declared_variables(block: Block) -> list[Tensor]:
    """The variable tensors that declare themselves on block entry: all but those a VARIABLE
    operator of the block declares explicitly."""
    declared = {name for op in block.operators if op.op == Op.VARIABLE for name in [*op.inputs, *op.outputs]}
    return [t for t in block.tensors.values() if t.variable and t.name not in declared]


def _connect(plan: _BlockPlan, binding: _Binding, frees: tuple[str, ...], foldable: bool) -> None:
    """Let the binding of the step about to be appended replace it (bound or folded)."""
    position = len(plan.steps)
    binding.install = functools.partial(_install, plan, position, frees)
    if foldable:
        binding.fold = functools.partial(_fold, plan, position, frees, tuple(binding.operator.outputs))


class _Layout(NamedTuple):
    """Where each tensor of a block is produced and first read (by operator index)."""

    produced: dict[str, int]
    first_read: dict[str, int]

    @staticmethod
    def of(block: Block) -> _Layout:
        produced: dict[str, int] = {}
        first_read: dict[str, int] = {}
        for index, op in enumerate(block.operators):
            for name in op.outputs:
                produced[name] = produced.get(name, 0) + 1
            for name in op.inputs:
                first_read.setdefault(name, index)
        return _Layout(produced, first_read)

    def seedable(self, block: Block, name: str, index: int) -> bool:
        """Whether output ``name`` of operator ``index`` may be a value every block run starts
        from: no block input nor variable, produced once, read only after its operator (what
        validation guarantees; other graphs keep the step)."""
        tensor = block.tensors.get(name)
        return (tensor is not None and not tensor.variable and name not in block.inputs
                and self.produced[name] == 1 and self.first_read.get(name, index + 1) > index)

    def foldable(self, block: Block, operator: Operator, index: int, constants: set[str]) -> bool:
        """Whether operator ``index`` reads only ``constants`` and its outputs may be seeded."""
        return bool(operator.inputs) and constants.issuperset(operator.inputs) and \
            all(self.seedable(block, n, index) for n in operator.outputs)

    def seed_constants(self, block: Block) -> dict[str, np.ndarray]:
        """The checked data of the seedable CONST/CONST_SHAPE outputs."""
        seed: dict[str, np.ndarray] = {}
        for index, op in enumerate(block.operators):
            if op.op not in (Op.CONST, Op.CONST_SHAPE):
                continue
            constants = [_constant(block.tensor(n), op.name) for n in op.outputs]
            if all(self.seedable(block, n, index) for n in op.outputs):
                seed.update(zip(op.outputs, constants))
        return seed


def _const_inputs(block: Block, operator: Operator, seed: dict[str, np.ndarray]) -> list[np.ndarray | None]:
    """Per input of ``operator``, its value when the graph fixes it (a constant), else None."""
    producers = {name for op in block.operators for name in op.outputs}
    values: list[np.ndarray | None] = []
    for name in operator.inputs:
        value = seed.get(name)
        tensor = block.tensors.get(name)
        if value is None and tensor is not None and tensor.data is not None and not tensor.variable \
                and name not in producers and name not in block.inputs:
            try:  # a constant tensor without a CONST operator
                value = _constant(tensor, operator.name)
            except GraphValidationError:
                value = None  # reported when the operator reads it
        values.append(value)
    return values


# --- steps ----------------------------------------------------------------------
#: How a step computes its results from its operands: (runner, operands, depth) -> results.
Compute = Callable[["GraphRunner", list[np.ndarray], int], list[np.ndarray]]
#: How a step gets its results: (runner, live values, depth) -> results.
Produce = Callable[["GraphRunner", dict[str, np.ndarray], int], list[np.ndarray]]


def _make_step(block: Block, operator: Operator, seed: dict[str, np.ndarray]) -> tuple[StepRun, _Binding | None]:
    """The step running ``operator``, and its kernel binding if its plain form may replace it."""
    op = operator.op
    if op in _VARIABLE_STEPS:
        bound_access = _bound_variable_access(block, operator)
        if bound_access is not None:
            return bound_access, None
        variable_step = _VARIABLE_STEPS[op]
        return (lambda runner, values, depth: variable_step(runner, block, operator, values)), None
    step = _StepParts(block, operator)
    if op in (Op.CONST, Op.CONST_SHAPE):
        constants = [_constant(block.tensor(n), step.where) for n in operator.outputs]
        return step.storing(lambda runner, values, depth: constants), None
    runner_method = _RUNNER_OPERATORS.get(op)
    if runner_method is not None:
        def compute(runner: GraphRunner, args: list[np.ndarray], depth: int) -> list[np.ndarray]:
            return runner_method(runner, block, operator, args, depth)

        return step.storing(step.fetching(compute)), None
    binding = _Binding(block, operator, seed, step.where)
    plain = not step.reads_variable and not step.writes_variable
    return step.storing(step.fetching(binding)), binding if plain else None


def _install(plan: _BlockPlan, position: int, frees: tuple[str, ...], run: StepRun) -> None:
    plan.steps[position] = _Step(run, frees)
    plan.running = None


def _fold(plan: _BlockPlan, position: int, frees: tuple[str, ...], outputs: tuple[str, ...],
          results: list[np.ndarray]) -> None:
    """An operator of constant operands has run: its outputs are constants from now on."""
    plan.seed.update(zip(outputs, results))
    plan.steps[position] = _Step(_folded, frees)
    plan.running = None


def _folded(runner: GraphRunner, values: dict[str, np.ndarray], depth: int) -> None:
    """The step of a folded operator: its outputs are in the block's seed."""


class _StepParts:
    """What the parts of an operator's step share: its names and whether it touches variables."""

    def __init__(self, block: Block, operator: Operator) -> None:
        self.block = block
        self.inputs, self.outputs = tuple(operator.inputs), tuple(operator.outputs)
        self.where = operator.name
        tensors = block.tensors
        self.reads_variable = any(tensors[n].variable for n in self.inputs if n in tensors)
        self.writes_variable = any(tensors[n].variable for n in self.outputs if n in tensors)

    def fetching(self, compute: Compute) -> Produce:
        """``compute`` fed with the operator's operands read from the live values."""
        block, names, where = self.block, self.inputs, self.where
        if self.reads_variable:
            def read_each(runner: GraphRunner, values: dict[str, np.ndarray], depth: int) -> list[np.ndarray]:
                return compute(runner, [runner.get(block, values, n, where) for n in names], depth)

            return read_each

        def read(runner: GraphRunner, values: dict[str, np.ndarray], depth: int) -> list[np.ndarray]:
            try:
                args = [values[n] for n in names]
            except KeyError:  # a constant without a CONST operator, or an error to report
                args = [runner.get(block, values, n, where) for n in names]
            return compute(runner, args, depth)

        return read

    def storing(self, produce: Produce) -> StepRun:
        """A step storing what ``produce(runner, values, depth)`` returns as the operator's outputs."""
        block, outputs, where = self.block, self.outputs, self.where
        if self.writes_variable:
            def put_each(runner: GraphRunner, values: dict[str, np.ndarray], depth: int) -> None:
                for name, value in zip(outputs, produce(runner, values, depth)):
                    runner.put(block, values, name, value, where)

            return put_each

        def store(runner: GraphRunner, values: dict[str, np.ndarray], depth: int) -> None:
            values.update(zip(outputs, produce(runner, values, depth)))

        return store


class _Binding:
    """An operator's kernel: run in full until it has succeeded twice, then bound
    (:func:`~npu_sim.reference.kernel_api.bind_kernel`), so a graph run once pays nothing
    for binding. ``install``, if set, takes the step that calls the bound kernel directly;
    ``fold``, if set (all operands constant), takes the results of the first success."""

    def __init__(self, block: Block, operator: Operator, constants: dict[str, np.ndarray], name: str) -> None:
        self.block = block
        self.operator = operator
        self.name = name
        self.input_types = [block.tensor(n).type for n in operator.inputs]
        self.output_types = [block.tensor(n).type for n in operator.outputs]
        #: the block's constant values so far (read when binding: folding adds to them)
        self.constants = constants
        self.successes = 0
        self.bound: BoundKernel | None = None
        self.install: Callable[[StepRun], None] | None = None
        self.fold: Callable[[list[np.ndarray]], None] | None = None

    def __call__(self, runner: GraphRunner, args: list[np.ndarray], depth: int) -> list[np.ndarray]:
        bound = self.bound
        if bound is not None:
            return bound(args)
        operator = self.operator
        kernel_args = KernelArgs(op=operator.op, attribute=operator.attribute, inputs=args,
                                 input_types=self.input_types, output_types=self.output_types,
                                 name=self.name)
        results = run_kernel(kernel_args)
        _check_results(operator, results, self.output_types, KernelBugError)
        self.successes += 1
        if self.fold is not None:
            self.fold(results)
        elif self.successes == 2:
            self.bound = bind_kernel(kernel_args, _const_inputs(self.block, operator, self.constants))
            if self.install is not None:
                self.install(_bound_step(self.block, operator, self.bound))
        return results


def _bound_step(block: Block, operator: Operator, bound: BoundKernel) -> StepRun:
    """The step of a bound operator whose operands and results are plain values (no variables)."""
    names, outputs, where = tuple(operator.inputs), tuple(operator.outputs), operator.name

    def run(runner: GraphRunner, values: dict[str, np.ndarray], depth: int) -> None:
        try:
            args = [values[n] for n in names]
        except KeyError:  # a constant without a CONST operator, or an error to report
            args = [runner.get(block, values, n, where) for n in names]
        values.update(zip(outputs, bound(args)))

    if len(outputs) != 1:
        return run
    output = outputs[0]

    def run_one(runner: GraphRunner, values: dict[str, np.ndarray], depth: int) -> None:
        try:
            args = [values[n] for n in names]
        except KeyError:
            args = [runner.get(block, values, n, where) for n in names]
        values[output] = bound(args)[0]

    return run_one


class GraphRunner:
    """Runs the blocks of one graph against one variable store."""

    def __init__(self, graph: Graph, variables: VariableStore,
                 limits: ExecutionLimits = ExecutionLimits(), compiled: CompiledGraph | None = None):
        self.graph = graph
        self.variables = variables
        self.limits = limits
        self.compiled = compiled if compiled is not None else CompiledGraph()

    # -- entry point
    def run_main(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        main = self.graph.main
        # Floating-point overflow and invalid results are values in TOSA (inf, NaN), not
        # warnings; bound kernels rely on numpy's reporting being off while they run.
        with np.errstate(all="ignore"):
            outputs = self.run_block(main, [inputs[name] for name in main.inputs], depth=0)
        # Fresh C-ordered copies: callers may mutate them without touching inputs or
        # variables, and .npy files of them are plain row-major.
        return {name: np.array(value, copy=True, order="C") for name, value in zip(main.outputs, outputs)}

    def run_block(self, block: Block, args: Sequence[np.ndarray], depth: int) -> list[np.ndarray]:
        """Bind ``args`` to ``block.inputs``, run its operators, return its outputs."""
        if len(args) != len(block.inputs):
            raise GraphValidationError(f"block {block.name!r} takes {len(block.inputs)} input(s), "
                                       f"given {len(args)}")
        plan = self.compiled.plan(block)
        for tensor in plan.variable_tensors:
            self.variables.declare_tensor(tensor, where=f"block {block.name!r}")
        values = plan.seed.copy()
        values.update(zip(block.inputs, args))
        pop = values.pop
        for run, frees in plan.running_steps():
            run(self, values, depth)
            if frees:
                for name in frees:
                    pop(name, None)
        return [self.get(block, values, name, "block output") for name in block.outputs]

    def resolve_block(self, name: str, where: str) -> Block:
        return self.compiled.resolve_block(self.graph, name, where)

    # -- values
    def get(self, block: Block, values: dict[str, np.ndarray], name: str, use: str) -> np.ndarray:
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

    def put(self, block: Block, values: dict[str, np.ndarray], name: str,
            value: np.ndarray, where: str) -> None:
        tensor = block.tensors.get(name)
        if tensor is not None and tensor.variable:
            self.variables.write_tensor(tensor, value, where=where)
        else:
            values[name] = value

    def _types(self, block: Block, names: Sequence[str]) -> list[TensorType]:
        return [block.tensor(n).type for n in names]

    # -- operators the executor runs itself
    def identity(self, block: Block, operator: Operator, args: list[np.ndarray]) -> list[np.ndarray]:
        if len(args) != 1 or len(operator.outputs) != 1:
            raise GraphValidationError(f"{operator.name}: IDENTITY takes one input and one output")
        in_type = block.tensor(operator.inputs[0]).type
        out_type = block.tensor(operator.outputs[0]).type
        if in_type != out_type:
            raise TosaRuntimeError(operator.name, f"input {describe_type(in_type)} differs from "
                                                  f"output {describe_type(out_type)}")
        return args

    def custom(self, block: Block, operator: Operator, args: list[np.ndarray]) -> list[np.ndarray]:
        """CUSTOM: the implementation registered for the operator's (domain, name) now."""
        output_types = self._types(block, operator.outputs)
        kernel_args = KernelArgs(op=operator.op, attribute=operator.attribute, inputs=args,
                                 input_types=self._types(block, operator.inputs),
                                 output_types=output_types, name=operator.name)
        attribute = operator.attribute
        results = custom_implementation(attribute.domain_name, attribute.operator_name)(kernel_args)
        _check_results(operator, results, output_types, TosaRuntimeError)
        return results

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

    def cond_if(self, block: Block, operator: Operator, args: list[np.ndarray],
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

    def while_loop(self, block: Block, operator: Operator, args: list[np.ndarray],
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
        guard = LoopGuard(f"WHILE_LOOP {operator.name!r}", _written_bytes(cond_block) + _written_bytes(body_block))
        while bool(self.run_block(cond_block, state, depth + 1)[0].reshape(-1)[0]):
            if guard.iterations >= self.limits.max_iterations:
                raise TosaRuntimeError(operator.name, f"loop still running after "
                                       f"{self.limits.max_iterations} iterations "
                                       "(raise max_iterations if this is intended)")
            state = self.run_block(body_block, state, depth + 1)
            guard.step()
        return state

    # -- the specification's variable operators
    def _variable_tensor(self, block: Block, operator: Operator, names: Sequence[str]) -> Tensor:
        for name in names:
            tensor = block.tensors.get(name)
            if tensor is not None and tensor.variable:
                return tensor
        raise GraphValidationError(f"{operator.name}: names no variable tensor")

    def variable_declare(self, block: Block, operator: Operator, values: dict[str, np.ndarray]) -> None:
        tensor = self._variable_tensor(block, operator, [*operator.outputs, *operator.inputs])
        initial = None
        for name in operator.inputs:  # an explicit initial value operand, if any
            other = block.tensors.get(name)
            if other is not None and not other.variable and other.data is not None:
                initial = _constant(other, operator.name)
        self.variables.declare_tensor(tensor, where=operator.name, initial=initial, explicit=True)

    def variable_read(self, block: Block, operator: Operator, values: dict[str, np.ndarray]) -> None:
        tensor = self._variable_tensor(block, operator, [*operator.inputs, *operator.outputs])
        targets = [n for n in operator.outputs if n != tensor.name]
        if len(targets) != 1:
            raise GraphValidationError(f"{operator.name}: VARIABLE_READ needs one output tensor")
        out_type = block.tensor(targets[0]).type
        values[targets[0]] = self.variables.read(tensor.variable_key, out_type, where=operator.name)

    def variable_write(self, block: Block, operator: Operator, values: dict[str, np.ndarray]) -> None:
        tensor = self._variable_tensor(block, operator, [*operator.outputs, *operator.inputs])
        sources = [n for n in operator.inputs if n != tensor.name]
        if len(sources) != 1:
            raise GraphValidationError(f"{operator.name}: VARIABLE_WRITE needs one input tensor")
        value = self.get(block, values, sources[0], operator.name)
        in_type = block.tensor(sources[0]).type
        self.variables.write(tensor.variable_key, value, in_type, where=operator.name)


#: Operators the runner runs itself, as Compute functions of (runner, block, operator, operands, depth).
_RUNNER_OPERATORS: dict[Op, Callable[[GraphRunner, Block, Operator, list[np.ndarray], int], list[np.ndarray]]] = {
    Op.IDENTITY: lambda runner, block, operator, args, depth: runner.identity(block, operator, args),
    Op.CUSTOM: lambda runner, block, operator, args, depth: runner.custom(block, operator, args),
    Op.COND_IF: GraphRunner.cond_if,
    Op.WHILE_LOOP: GraphRunner.while_loop,
}
#: The specification's variable operators: (runner, block, operator, live values) -> None.
_VARIABLE_STEPS: dict[Op, Callable[[GraphRunner, Block, Operator, dict[str, np.ndarray]], None]] = {
    Op.VARIABLE: GraphRunner.variable_declare,
    Op.VARIABLE_READ: GraphRunner.variable_read,
    Op.VARIABLE_WRITE: GraphRunner.variable_write,
}


def _bound_variable_access(block: Block, operator: Operator) -> StepRun | None:
    """A well-formed VARIABLE_READ / VARIABLE_WRITE with its tensors and types resolved once
    (None for anything else: the general step reports what is wrong, when it runs)."""
    if operator.op not in (Op.VARIABLE_READ, Op.VARIABLE_WRITE):
        return None
    variables = [n for n in operator.inputs if n in block.tensors and block.tensors[n].variable]
    others = [n for n in (*operator.inputs, *operator.outputs) if n not in variables]
    if len(variables) != 1 or len(others) != 1 or others[0] not in block.tensors:
        return None
    key, other, where = block.tensors[variables[0]].variable_key, others[0], operator.name
    other_type = block.tensors[other].type
    if operator.op is Op.VARIABLE_READ:
        if other not in operator.outputs:
            return None

        def read(runner: GraphRunner, values: dict[str, np.ndarray], depth: int) -> None:
            values[other] = runner.variables.read(key, other_type, where=where)
        return read
    if other not in operator.inputs:
        return None

    def write(runner: GraphRunner, values: dict[str, np.ndarray], depth: int) -> None:
        value = values[other] if other in values else runner.get(block, values, other, where)
        runner.variables.write(key, value, other_type, where=where)
    return write


def _written_bytes(block: Block) -> int:
    """Bytes one run of ``block`` writes: the outputs of its operators (a loop's work per iteration)."""
    return sum(block.tensors[name].type.size_bytes for operator in block.operators
               for name in operator.outputs if name in block.tensors)


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
