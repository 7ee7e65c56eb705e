"""uint8 graph inputs and outputs: held as int8 storage (RESCALE's unsigned flags read and write
them), given and returned as uint8 arrays. A camera model exported with uint8 inputs and outputs
gives LiteRT's bits in exec, on a simulated NPU and through the CLI; an unsigned tensor an
operator would read as signed is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

import npu_sim
from npu_sim.cli import main
from npu_sim.errors import InputError, TosaFormatError
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.mlir_reader import read_mlir

MODEL = Path(__file__).resolve().parents[1] / "data" / "tflite" / "conv_uint8_io.tflite"


def _images(count: int) -> np.ndarray:
    return np.random.default_rng(3).integers(0, 256, size=(count, 1, 8, 8, 3)).astype(np.uint8)


def _litert(xs: np.ndarray) -> np.ndarray:
    interpreter = Interpreter(model_path=str(MODEL), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    given, taken = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    results = []
    for x in xs:
        interpreter.set_tensor(given["index"], x)
        interpreter.invoke()
        results.append(interpreter.get_tensor(taken["index"]))
    return np.stack(results)


def test_the_edges_are_uint8_held_as_int8():
    graph = load_graph(MODEL)
    assert graph.unsigned_io == {graph.main.inputs[0], graph.main.outputs[0]}
    assert graph.input_types[graph.main.inputs[0]].dtype is DType.INT8


@pytest.mark.parametrize("hw", [None, "ethos-u55-256", "ethos-u85-256"])
def test_uint8_in_uint8_out_as_litert(hw):
    graph = load_graph(MODEL)
    xs = _images(3)
    name = graph.main.inputs[0]
    if hw is None:
        ours = np.stack([next(iter(npu_sim.execute(graph, {name: x}).values())) for x in xs])
    else:
        (ours,) = npu_sim.simulate(graph, hw, {name: xs}, invocations=3).outputs.values()
    theirs = _litert(xs)
    assert ours.dtype == np.uint8
    np.testing.assert_array_equal(ours.reshape(theirs.shape), theirs)


def test_the_cli_reads_and_writes_uint8_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    xs = _images(2)
    np.save(tmp_path / "x.npy", xs)
    assert main(["run", str(MODEL), "--hw", "ethos-u85-256", "-i", str(tmp_path / "x.npy"), "-n", "2",
                 "-o", str(tmp_path / "out")]) == 0
    [written] = (tmp_path / "out" / "outputs").glob("*.npy")
    ours = np.load(written)
    assert ours.dtype == np.uint8
    np.testing.assert_array_equal(ours.reshape(2, 1, 8, 8, 4), _litert(xs))
    assert main(["run", str(MODEL), "--hw", "edge", "--random-inputs", "0", "-o", str(tmp_path / "random")]) == 0
    np.save(tmp_path / "wide.npy", xs.astype(np.uint16))
    capsys.readouterr()
    assert main(["run", str(MODEL), "--hw", "edge", "-i", str(tmp_path / "wide.npy"), "-n", "2",
                 "-o", str(tmp_path / "wide")]) == 2
    assert "expected INT8 (uint8)" in capsys.readouterr().err


def test_an_unsigned_array_is_refused_where_the_input_is_signed():
    graph = load_graph(Path(__file__).resolve().parents[2] / "examples" / "ds_cnn_kws_int8.tosa")
    name = graph.main.inputs[0]
    with pytest.raises(InputError, match="expected"):
        npu_sim.execute(graph, {name: np.zeros(graph.input_types[name].shape, np.uint8)})


UNSIGNED_ADD = """
func.func @main(%arg0: tensor<4xui8>, %arg1: tensor<4xi8>) -> tensor<4xi8> {
  %0 = tosa.add %arg0, %arg1 : (tensor<4xui8>, tensor<4xi8>) -> tensor<4xi8>
  return %0 : tensor<4xi8>
}
"""


def test_an_unsigned_tensor_read_as_signed_is_refused():
    with pytest.raises(TosaFormatError, match="ADD.* reads the unsigned tensor .* as signed"):
        read_mlir(UNSIGNED_ADD, "add.mlir")
