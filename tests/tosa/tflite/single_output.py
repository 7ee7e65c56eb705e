"""Runs the graph of a one-input, one-output .tflite as the front-door tests compare it: in the
reference executor or simulated on a preset, and in Arm's reference model (from the flatbuffer
``npu-sim convert`` would write)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

import npu_sim
from npu_sim.tosa.loader import load_graph, save_graph
from tests.oracle import run_graph_bytes

#: where the outputs are checked: the reference executor (None), then simulated on each preset
PRESETS = [None, "edge", "ethos-u55-256", "ethos-u85-256"]
#: the committed test models (tests/data/tflite, made by its make_*.py)
TFLITE_DATA = Path(__file__).resolve().parents[2] / "data" / "tflite"


def random_int_inputs(shape: tuple[int, ...], dtype: type, count: int, seed: int) -> list[np.ndarray]:
    """``count`` seeded inputs of ``shape`` over the whole range of the integer ``dtype``."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    return [rng.integers(info.min, info.max + 1, size=shape).astype(dtype) for _ in range(count)]


def npu_sim_outputs(graph: npu_sim.Graph, preset: str | None, xs: list[np.ndarray]) -> list[np.ndarray]:
    """The graph's output for each input: executed (``preset`` None) or simulated on ``preset``."""
    name = graph.main.inputs[0]
    results = []
    for x in xs:
        if preset is None:
            (got,) = npu_sim.execute(graph, {name: x}).values()
        else:
            (got,) = npu_sim.simulate(graph, preset, {name: x}).outputs.values()
        results.append(got)
    return results


def reference_model_output(graph: npu_sim.Graph, x: np.ndarray, work: Path) -> np.ndarray:
    """The output of Arm's reference model on the graph saved as a flatbuffer in ``work``."""
    save_graph(graph, work / "model.tosa")
    (theirs,) = run_graph_bytes((work / "model.tosa").read_bytes(), [x], list(graph.output_types.values()))
    return theirs


def assert_reference_model_agrees(graph: npu_sim.Graph, x: np.ndarray, work: Path) -> None:
    """npu-sim's reference executor and Arm's reference model give the same bits on ``x``."""
    (ours,) = npu_sim_outputs(graph, None, [x])
    np.testing.assert_array_equal(ours, reference_model_output(graph, x, work))


def litert_reference_output(model: Path, x: np.ndarray) -> np.ndarray:
    """The output of LiteRT's reference kernels (``BUILTIN_REF``) on ``x``."""
    interpreter = Interpreter(model_path=str(model), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def assert_litert_reference_agrees(model: Path, preset: str | None, xs: list[np.ndarray]) -> None:
    """npu-sim (executed or simulated on ``preset``) gives LiteRT's reference kernels' bits on
    each of ``xs``."""
    for ours, x in zip(npu_sim_outputs(load_graph(model), preset, xs), xs):
        theirs = litert_reference_output(model, x)
        np.testing.assert_array_equal(ours.reshape(theirs.shape), theirs)
