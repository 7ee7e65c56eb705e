"""TOSA MLIR text read into the graph the flatbuffer reader builds: every example's ``.mlir``
(the converter's text) against its ``.tosa`` (what tosa-opt serialized from that text), and
the MLIR forms and mistakes a hand-written or other tool's file may hold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import npu_sim
from npu_sim.errors import TosaFormatError
from npu_sim.inputs import load_inputs
from npu_sim.reference.session import Session, execute
from npu_sim.tosa.loader import load_graph, parse_graph
from npu_sim.tosa.mlir_reader import read_mlir
from npu_sim.tosa.validation import validate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MLIR = sorted(EXAMPLES.glob("*.mlir"))
#: examples whose .tosa tosa-opt serialized from the very .mlir beside it
SERIALIZED_FROM_MLIR = ("ds_cnn_kws_int8", "lstm_stateful_int8")


@pytest.mark.parametrize("path", MLIR, ids=lambda p: p.stem)
def test_each_example_mlir_gives_the_outputs_of_its_flatbuffer(path):
    from_text = read_mlir(path.read_bytes(), path.name)
    validate(from_text)
    flat = load_graph(path.with_suffix(".tosa"))
    assert list(from_text.input_types.values()) == list(flat.input_types.values())
    assert list(from_text.output_types.values()) == list(flat.output_types.values())
    invocations = load_inputs(flat, [], invocations=3, random_seed=11).invocations
    a, b = Session(flat), Session(from_text)
    for inputs in invocations:   # three invocations: variables carry over the same way
        expected, got = a.invoke(inputs), b.invoke(list(inputs.values()))
        for x, y in zip(expected.values(), got.values()):
            assert x.dtype == y.dtype and np.array_equal(x, y)


@pytest.mark.parametrize("stem", SERIALIZED_FROM_MLIR)
def test_the_graph_is_the_one_tosa_opt_serialized(stem):
    from_text = read_mlir((EXAMPLES / f"{stem}.mlir").read_bytes())
    flat = load_graph(EXAMPLES / f"{stem}.tosa")
    assert list(from_text.main.tensors) == list(flat.main.tensors)   # names and order
    for t in flat.main.tensors.values():
        u = from_text.main.tensors[t.name]
        assert (u.shape, u.dtype, u.variable, u.variable_name) == (t.shape, t.dtype, t.variable, t.variable_name)
        assert (u.data is None and t.data is None) or np.array_equal(u.data, t.data)
    for op, other in zip(flat.main.operators, from_text.main.operators, strict=True):
        assert (op.op, op.inputs, op.outputs, op.attribute) == (other.op, other.inputs, other.outputs, other.attribute)
    r1 = npu_sim.simulate(flat, "edge", load_inputs(flat, [], random_seed=0).invocations[0])
    r2 = npu_sim.simulate(from_text, "edge", load_inputs(from_text, [], random_seed=0).invocations[0])
    assert r1.summary["total_cycles"] == r2.summary["total_cycles"]


def test_loading_by_content_not_extension(tmp_path):
    text = (EXAMPLES / "add_mul_fp32.mlir").read_bytes()
    (tmp_path / "graph.bin").write_bytes(text)
    assert [op.op.name for op in load_graph(tmp_path / "graph.bin").main.operators][-3:] == ["ADD", "MUL", "MAXIMUM"]


HEX = "0x" + np.arange(1, 7, dtype="<i4").tobytes().hex()
GENERIC_AND_FORMS = """
module {
  func.func @main(%arg0: tensor<2x3xi32>) -> (tensor<2x3xi32>, tensor<2x3xi32>) {
    %0 = "tosa.const"() <{values = dense<"HEX"> : tensor<2x3xi32>}> : () -> tensor<2x3xi32>
    %1 = "tosa.const"() <{values = dense<7> : tensor<2x3xi32>}> : () -> tensor<2x3xi32>
    %2 = "tosa.add"(%arg0, %0) : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
    %3 = builtin.unrealized_conversion_cast %2 : tensor<2x3xi32> to tensor<2x3xi32>
    %4 = tosa.sub %3, %1 : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32> loc("x.mlir":4:5)
    return %4, %arg0 : tensor<2x3xi32>, tensor<2x3xi32>  // the input itself as a second output
  }
}
"""


def test_generic_form_hex_and_splat_constants_casts_and_an_input_returned():
    graph = read_mlir(GENERIC_AND_FORMS.replace("HEX", HEX))
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = execute(graph, [x])
    assert list(out) == ["TosaOutput_0", "TosaOutput_1"]
    assert out["TosaOutput_0"].tolist() == (x + np.arange(1, 7).reshape(2, 3) - 7).tolist()
    assert np.array_equal(out["TosaOutput_1"], x)


@pytest.mark.parametrize("text, message", [
    ("module {", "unclosed module"),
    ("module { func.func @main() -> () { } }", "no return"),
    ("func.func @main(%a: tensor<2xi32>) -> tensor<2xi32> {\n %0 = tosa.add %a, %b : (tensor<2xi32>, tensor<2xi32>) "
     "-> tensor<2xi32>\n return %0 : tensor<2xi32>\n}", "undefined value %b"),
    ("func.func @main(%a: tensor<2xi32>) -> tensor<2xi32> {\n %0 = tosa.frobnicate %a : (tensor<2xi32>) -> "
     "tensor<2xi32>\n return %0 : tensor<2xi32>\n}", "unknown TOSA operator tosa.frobnicate"),
    ("func.func @main(%a: tensor<2xi32>) -> tensor<2xi32> {\n %0 = \"tfl.custom\"(%a) : (tensor<2xi32>) -> "
     "tensor<2xi32>\n return %0 : tensor<2xi32>\n}", "operator tfl.custom is not TOSA"),
    ("func.func @main(%a: tensor<2x!quant.uniform<i8:f32, 0.1>>) -> tensor<2xi32> {}", "quantized element type"),
    ("func.func @main(%a: tensor<2xi32>) -> tensor<2xi8> {\n %0 = builtin.unrealized_conversion_cast %a : "
     "tensor<2xi32> to tensor<2xi8>\n return %0 : tensor<2xi8>\n}", "between different types"),
    ("func.func @main(%a: tensor<*xi32>) -> tensor<2xi32> {}", "unranked"),
    ("func.func @f() -> () { return }\nfunc.func @g() -> () { return }", "a second function"),
])
def test_malformed_mlir_is_refused_with_line_and_column(text, message):
    with pytest.raises(TosaFormatError) as caught:
        parse_graph(text.encode(), "bad.mlir")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
