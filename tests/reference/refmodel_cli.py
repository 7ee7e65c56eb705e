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

Everything here runs the reference model in a subprocess, so a REQUIRE that
aborts it cannot take the test process down.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tosa_reference_model

from npu_sim.tosa.dtype import DType

REF_MODEL = Path(sys.executable).parent / "tosa_reference_model"
TOOLS_BIN = Path(tosa_reference_model.__file__).resolve().parents[1] / "bin"
FLATC = TOOLS_BIN / "flatc"
SCHEMA = TOOLS_BIN / "tosa.fbs"


class ReferenceModelFailed(Exception):
    """The reference model did not produce a valid result."""


def tosa_to_json(binary: bytes) -> dict:
    """A .tosa flatbuffer as the JSON document flatc makes of it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "graph.tosa"
        path.write_bytes(binary)
        subprocess.run([str(FLATC), "--json", "--strict-json", "--defaults-json", "--raw-binary",
                        "-o", tmp, str(SCHEMA), "--", str(path)], check=True, capture_output=True)
        return json.loads((Path(tmp) / "graph.json").read_text())


def json_to_tosa(doc: dict) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "graph.json"
        path.write_text(json.dumps(doc))
        subprocess.run([str(FLATC), "--binary", "-o", tmp, str(SCHEMA), str(path)],
                       check=True, capture_output=True)
        return (Path(tmp) / "graph.tosa").read_bytes()


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
    doc = tosa_to_json(binary)
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
    return StatefulGraph(json_to_tosa(doc), inputs, outputs, state_outputs,
                         {v: (t.get("variable_name") or v) for v, t in variables.items()}, types)


def _as_storage(array: np.ndarray, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    array = np.asarray(array)
    storage = dtype.numpy_dtype
    if array.dtype != storage:
        if array.dtype.kind in "uV" and array.dtype.itemsize == storage.itemsize:
            array = array.view(storage)
        else:
            array = array.astype(storage)
    return array.reshape(shape)


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
            command = [str(REF_MODEL), "--test_desc", str(work / f"desc{k}.json")]
            if state is not None:
                desc["variable_name"] = list(state)
                desc["variable_file"] = []
                for j, (var, value) in enumerate(state.items()):
                    np.save(work / f"var{k}_{j}.npy", value)
                    desc["variable_file"].append(f"var{k}_{j}.npy")
                command += ["--initialize_variable_tensor_from_numpy", "1"]
            (work / f"desc{k}.json").write_text(json.dumps(desc))
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
            if proc.returncode != 0:
                raise ReferenceModelFailed(f"invocation {k}: exit {proc.returncode}: "
                                           f"{proc.stderr.strip()[-2000:]}")
            results = [np.load(work / f) for f in desc["ofm_file"]]
            outs = results[:len(graph.outputs)]
            if output_types is not None:
                outs = [_as_storage(a, *t) for a, t in zip(outs, output_types)]
            all_outputs.append(outs)
            new_state = dict(state) if state is not None else {}
            for var, array in zip(graph.state_outputs, results[len(graph.outputs):]):
                new_state[var] = _as_storage(array, *graph.variable_types[var])
            if set(new_state) != set(graph.variable_types):
                raise ReferenceModelFailed("every variable must be written in the first invocation "
                                           "for the state to be carried over")
            state = new_state
            states.append({graph.variable_names[v]: a for v, a in state.items()})
    return all_outputs, states
