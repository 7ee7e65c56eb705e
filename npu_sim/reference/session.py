"""Repeated invocations of one graph, with TOSA variables persisting between them.

The semantics are those of the TOSA stateful-ops RFC and the specification's
VARIABLE / VARIABLE_READ / VARIABLE_WRITE pseudocode:

* a variable is allocated the first time it is declared, with its initial
  value if it has one (it is then *written*), else unwritten;
* every variable's ``seen`` flag is cleared at the start of each invocation;
  declaring it sets the flag, and declaring it explicitly (a ``VARIABLE``
  operator) while already seen is an error;
* reading a variable never written is an error (Arm's reference model reads
  zeros there; we follow the specification);
* writing requires the variable to be seen in this invocation;
* reads and writes must match the variable's shape and type exactly.

Every violation raises :class:`~npu_sim.errors.VariableError`. A failed
invocation leaves the variables as they were before it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from npu_sim.errors import InputError, VariableError
from npu_sim.reference.executor import (
    DEFAULT_MAX_ITERATIONS,
    DEFAULT_MAX_NESTING,
    ExecutionLimits,
    GraphRunner,
    Inputs,
    check_input_array,
    check_inputs,
    describe_type,
)
from npu_sim.reference.prepared import graph_variables, prepare
from npu_sim.tosa.ir import Graph, Tensor, TensorType
from npu_sim.tosa.user_outputs import as_user_outputs

__all__ = ["Session", "VariableSlot", "VariableStore", "graph_variables"]


@dataclass
class VariableSlot:
    """One allocated variable: its type, its value (``None`` until written) and ``seen``."""

    name: str
    type: TensorType
    value: np.ndarray | None = None
    seen: bool = False


@dataclass
class VariableStore:
    """The process-wide variable memory of the RFC, one per Session."""

    slots: dict[str, VariableSlot] = field(default_factory=dict)

    def begin_invocation(self) -> None:
        """Clear every ``seen`` flag (the start of ``tosa_execute_graph``)."""
        for slot in self.slots.values():
            slot.seen = False

    def snapshot(self) -> dict[str, tuple[np.ndarray | None, bool]]:
        """Cheap copy of the state (values are never mutated in place, only replaced)."""
        return {name: (slot.value, slot.seen) for name, slot in self.slots.items()}

    def restore(self, snapshot: dict[str, tuple[np.ndarray | None, bool]]) -> None:
        for name in list(self.slots):
            if name not in snapshot:
                del self.slots[name]
        for name, (value, seen) in snapshot.items():
            self.slots[name].value, self.slots[name].seen = value, seen

    def declare(self, name: str, var_type: TensorType, initial: np.ndarray | None, *,
                where: str, explicit: bool) -> None:
        """VARIABLE: allocate on first declaration; ``explicit`` re-declaration while seen fails.

        Implicit declarations (variable-flagged tensors entering their block)
        of an already seen variable are references to it.
        """
        slot = self.slots.get(name)
        if slot is None:
            slot = VariableSlot(name, var_type)
            if initial is not None:
                initial = np.asarray(initial)
                if initial.dtype != var_type.dtype.numpy_dtype or initial.size != var_type.element_count:
                    raise VariableError(where, f"initial value of variable {name!r} is "
                                        f"{initial.dtype.name} of shape {list(initial.shape)}, "
                                        f"expected {describe_type(var_type)}")
                slot.value = np.array(initial.reshape(var_type.shape), copy=True)
            self.slots[name] = slot
        else:
            if slot.seen and explicit:
                raise VariableError(where, f"variable {name!r} declared twice in one invocation")
            if slot.type != var_type:
                raise VariableError(where, f"variable {name!r} declared as {describe_type(var_type)}, "
                                    f"but it is {describe_type(slot.type)}")
        slot.seen = True

    def declare_tensor(self, tensor: Tensor, *, where: str, initial: np.ndarray | None = None,
                       explicit: bool = False) -> None:
        """Declare the variable of a variable-flagged tensor; its data is the initial value."""
        if initial is None and tensor.data is not None:
            data = np.asarray(tensor.data)
            if data.size or tensor.element_count == 0:
                initial = data
        self.declare(tensor.variable_key, tensor.type, initial, where=where, explicit=explicit)

    def _slot(self, name: str, where: str) -> VariableSlot:
        try:
            return self.slots[name]
        except KeyError:
            raise VariableError(where, f"variable {name!r} was never declared") from None

    def read(self, name: str, out_type: TensorType, *, where: str) -> np.ndarray:
        """VARIABLE_READ: the variable's current value."""
        slot = self._slot(name, where)
        if slot.value is None:
            raise VariableError(where, f"variable {name!r} is read but was never written "
                                "(it has no initial value)")
        if slot.type != out_type:
            raise VariableError(where, f"reads {describe_type(out_type)} from variable {name!r}, "
                                f"which is {describe_type(slot.type)}")
        return slot.value

    def write(self, name: str, value: np.ndarray, in_type: TensorType, *, where: str) -> None:
        """VARIABLE_WRITE: replace the variable's value."""
        slot = self._slot(name, where)
        if not slot.seen:
            raise VariableError(where, f"variable {name!r} is written before being declared "
                                "in this invocation")
        if slot.type != in_type:
            raise VariableError(where, f"writes {describe_type(in_type)} to variable {name!r}, "
                                f"which is {describe_type(slot.type)}")
        value = np.asarray(value)
        if value.dtype != slot.type.dtype.numpy_dtype or tuple(value.shape) != slot.type.shape:
            raise VariableError(where, f"writes {value.dtype.name} of shape {list(value.shape)} "
                                f"to variable {name!r}, which is {describe_type(slot.type)}")
        slot.value = np.array(value, copy=True)

    def read_tensor(self, tensor: Tensor, *, where: str) -> np.ndarray:
        return self.read(tensor.variable_key, tensor.type, where=where)

    def write_tensor(self, tensor: Tensor, value: np.ndarray, *, where: str) -> None:
        self.write(tensor.variable_key, value, tensor.type, where=where)


class Session:
    """A graph ready to be invoked repeatedly; its variables persist between invocations.

    The graph is validated first (:func:`npu_sim.tosa.validation.validate`): one built in
    Python, or read without validation, gets a :class:`GraphValidationError`, not a crash.
    ``validate=False`` skips that for a graph :func:`npu_sim.tosa.loader.load_graph` just
    validated (as ``load_graph(..., validate=False)`` skips it there).

    What depends only on the graph (validation, plans, bound kernels) is worked out once
    per graph and shared by its Sessions (:mod:`npu_sim.reference.prepared`); the graph
    must not change while a Session runs it.

    >>> s = Session(graph)
    >>> out1 = s.invoke({"x": x1}); out2 = s.invoke({"x": x2})   # state carried over
    >>> s.export_state()                                          # {"var": array, ...}
    """

    def __init__(self, graph: Graph, *, max_iterations: int = DEFAULT_MAX_ITERATIONS,
                 max_nesting: int = DEFAULT_MAX_NESTING, validate: bool = True):
        prepared = prepare(graph, validate=validate)
        self.graph = graph
        self.limits = ExecutionLimits(max_iterations=max_iterations, max_nesting=max_nesting)
        self.variables = VariableStore()
        self.variable_types = dict(prepared.variable_types)
        self.invocations = 0
        #: wall-clock seconds of each invocation, in order
        self.invocation_seconds: list[float] = []
        self._runner = GraphRunner(graph, self.variables, self.limits, prepared.compiled)

    @property
    def input_types(self) -> dict[str, TensorType]:
        return self.graph.input_types

    @property
    def output_types(self) -> dict[str, TensorType]:
        return self.graph.output_types

    def invoke(self, inputs: Inputs | None = None) -> dict[str, np.ndarray]:
        """Run the graph once; returns its outputs by name (arrays of the storage dtypes)."""
        checked = check_inputs(self.graph, inputs)
        before = self.variables.snapshot()
        start = time.perf_counter()
        self.variables.begin_invocation()
        try:
            outputs = self._runner.run_main(checked)
        except BaseException:
            self.variables.restore(before)
            raise
        self.invocation_seconds.append(time.perf_counter() - start)
        self.invocations += 1
        return dict(as_user_outputs(self.graph, outputs))

    def export_state(self) -> dict[str, np.ndarray]:
        """Copies of every written variable, by variable name."""
        return {name: np.array(slot.value, copy=True)
                for name, slot in self.variables.slots.items() if slot.value is not None}

    def import_state(self, state: Mapping[str, np.ndarray]) -> None:
        """Set variables (by name) to the given values, as if written.

        Each name must be a variable of the graph and each array of its exact
        dtype and shape (:class:`~npu_sim.errors.InputError` otherwise).
        Variables not mentioned keep their current state.
        """
        checked = {}
        for name, value in state.items():
            if name not in self.variable_types:
                known = ", ".join(map(repr, self.variable_types)) or "(none)"
                raise InputError(f"unknown variable {name!r}; the graph's variables are {known}")
            checked[name] = check_input_array(name, value, self.variable_types[name],
                                              what="variable")
        for name, value in checked.items():
            slot = self.variables.slots.get(name)
            if slot is None:
                slot = self.variables.slots[name] = VariableSlot(name, self.variable_types[name])
            slot.value = np.array(value, copy=True)


def execute(graph: Graph, inputs: Inputs | None = None, *,
            max_iterations: int = DEFAULT_MAX_ITERATIONS,
            max_nesting: int = DEFAULT_MAX_NESTING) -> dict[str, np.ndarray]:
    """Run ``graph`` once on ``inputs`` (by name, or a list in input order).

    Returns the graph outputs by name, as arrays of their storage dtypes.
    Equivalent to ``Session(graph).invoke(inputs)``: variables start from
    their initial values and are discarded afterwards.
    """
    session = Session(graph, max_iterations=max_iterations, max_nesting=max_nesting)
    return session.invoke(inputs)
