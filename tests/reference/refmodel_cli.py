"""Whole graphs through Arm's reference model command line, across several invocations.

The reference model keeps no state between runs. It can start a run from
variable values in .npy files (``--initialize_variable_tensor_from_numpy 1``
with ``variable_name``/``variable_file`` lists in the test descriptor,
matched to the *tensor* names of variable tensors), but its variable dump at
the end of a run only works in a form incompatible with that input form, and
``--dump_intermediates`` prints int8 values as characters. So to learn the
state after invocation k we add, with tosa-tools' own ``flatc`` and schema
(never our writer), one extra graph output per variable: an IDENTITY of the
value last written to it. Invocation k+1 then starts from those values.

Everything here runs the reference model in a subprocess (``tests.oracle.run_executable``,
which raises ``OracleError`` when a run fails), so a REQUIRE that aborts it cannot take the
test process down.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from tests.oracle import run_executable, to_storage
from tests.tosa.tosa_tools_io import flatc_binary, flatc_json


@dataclass
class StatefulGraph:
    """A graph augmented with one output per variable (its value after the run)."""

    binary: bytes
    inputs: list[str]
    outputs: list[str]                   # the original graph outputs
    state_outputs: dict[str, str]        # variable tensor name -> extra output name
    variable_names: dict[str, str]       # variable tensor name -> variable (symbol) name
    variable_types: dict[str, tuple[tuple[int, ...], DType]]


def with_state_outputs(binary: bytes) -> StatefulGraph:
    """Add an output per written variable of the main block (see module docstring)."""
    doc = json.loads(flatc_json(binary))
    main = doc["regions"][0]["blocks"][0]
    tensors = {t["name"]: t for t in main["tensors"]}
    variables = {t["name"]: t for t in main["tensors"] if t.get("variable")}
    last_source: dict[str, str] = {}
    for op in main["operators"]:
        for out in op.get("outputs", []):
            if out in variables:
                last_source[out] = op["inputs"][0]
    inputs, outputs = list(main.get("inputs", [])), list(main.get("outputs", []))
    state_outputs = {}
    for var, source in last_source.items():
        name = f"state_out_{var}"
        state_outputs[var] = name
        src = tensors[source]
        main["tensors"].append({"name": name, "shape": src.get("shape", []), "type": src["type"]})
        main["operators"].append({"op": "IDENTITY", "attribute_type": "IdentityAttribute",
                                  "attribute": {}, "inputs": [source], "outputs": [name]})
        main["outputs"].append(name)
    types = {v: (tuple(t.get("shape", [])), DType[t["type"]]) for v, t in variables.items()}
    return StatefulGraph(flatc_binary(json.dumps(doc)), inputs, outputs, state_outputs,
                         {v: (t.get("variable_name") or v) for v, t in variables.items()}, types)


def run_invocations(binary: bytes, invocations: list[list[np.ndarray]],
                    output_types: list[tuple[tuple[int, ...], DType]] | None = None,
                    timeout_s: float = 120.0,
                    ) -> tuple[list[list[np.ndarray]], list[dict[str, np.ndarray]]]:
    """Run a graph len(invocations) times, carrying its variables over.

    Returns the original outputs of every invocation (converted to our
    storage dtypes when ``output_types`` is given) and the state after each
    one (variable name -> value).
    """
    graph = with_state_outputs(binary)
    all_outputs: list[list[np.ndarray]] = []
    states: list[dict[str, np.ndarray]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "graph.tosa").write_bytes(graph.binary)
        state: dict[str, np.ndarray] | None = None
        out_names = graph.outputs + list(graph.state_outputs.values())
        for k, inputs in enumerate(invocations):
            desc = {"tosa_file": "graph.tosa", "ifm_name": graph.inputs, "ifm_file": [],
                    "ofm_name": out_names, "ofm_file": [f"out{k}_{i}.npy" for i in range(len(out_names))]}
            for i, array in enumerate(inputs):
                np.save(work / f"in{k}_{i}.npy", array)
                desc["ifm_file"].append(f"in{k}_{i}.npy")
            extra_args: tuple[str, ...] = ()
            if state is not None:
                desc["variable_name"] = list(state)
                desc["variable_file"] = []
                for j, value in enumerate(state.values()):
                    np.save(work / f"var{k}_{j}.npy", value)
                    desc["variable_file"].append(f"var{k}_{j}.npy")
                extra_args = ("--initialize_variable_tensor_from_numpy", "1")
            results = run_executable(work, desc, extra_args=extra_args, timeout_s=timeout_s)
            outs = results[:len(graph.outputs)]
            if output_types is not None:
                outs = [to_storage(a, TensorType(*t)) for a, t in zip(outs, output_types)]
            all_outputs.append(outs)
            new_state = dict(state) if state is not None else {}
            for var, array in zip(graph.state_outputs, results[len(graph.outputs):]):
                new_state[var] = to_storage(array, TensorType(*graph.variable_types[var]))
            if set(new_state) != set(graph.variable_types):
                raise ValueError("every variable must be written in the first invocation "
                                 "for the state to be carried over")
            state = new_state
            states.append({graph.variable_names[v]: a for v, a in state.items()})
    return all_outputs, states
