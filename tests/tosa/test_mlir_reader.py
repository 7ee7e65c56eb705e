"""TOSA MLIR text read into the graph the flatbuffer reader builds: every example's ``.mlir``
(the converter's text) against its ``.tosa`` (what tosa-opt serialized from that text), and
the MLIR forms and mistakes a hand-written or other tool's file may hold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import npu_sim
from npu_sim.errors import TosaFormatError, UnsupportedFeatureError
from npu_sim.inputs import load_inputs
from npu_sim.reference.session import Session, execute
from npu_sim.tosa.loader import load_graph, parse_graph, save_graph
from npu_sim.tosa.mlir_reader import read_mlir
from npu_sim.tosa.tflite.legalize import Legalizer
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


INT48_CONSTANTS = """
func.func @main() -> (tensor<4xi48>, tensor<3xi48>) {
  %0 = "tosa.const"() <{values = dense<"HEX"> : tensor<4xi48>}> : () -> tensor<4xi48>
  %1 = "tosa.const"() <{values = dense<"SPLAT"> : tensor<3xi48>}> : () -> tensor<3xi48>
  return %0, %1 : tensor<4xi48>, tensor<3xi48>
}
"""


def _i48_hex(values: list[int]) -> str:
    return "0x" + b"".join((v & ((1 << 48) - 1)).to_bytes(6, "little") for v in values).hex()


def test_int48_constants_in_hex_take_six_bytes_each():
    """MLIR packs an i48 in 6 bytes (a 16x8 model's biases): read sign-extended, splats too (they
    were refused: '768 bytes of data for 128 elements of INT48')."""
    values = [1, -1, (1 << 47) - 1, -(1 << 47)]
    text = INT48_CONSTANTS.replace("HEX", _i48_hex(values)).replace("SPLAT", _i48_hex([-300]))
    graph = read_mlir(text)
    constants = [graph.main.tensors[op.outputs[0]].data for op in graph.main.operators if op.op.name == "CONST"]
    assert [c.tolist() for c in constants] == [values, [-300, -300, -300]]
    with pytest.raises(TosaFormatError, match="7 bytes of data for 4 elements of INT48"):
        read_mlir(INT48_CONSTANTS.replace("HEX", "0x" + "00" * 7).replace("SPLAT", _i48_hex([0])))


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


# --- regions that read values of the enclosing blocks (as converters write them) -------------
CAPTURING = """
func.func @main(%x: tensor<4xi32>, %n: tensor<i32>, %flag: tensor<i1>) -> (tensor<4xi32>, tensor<4xi32>) {
  %one = "tosa.const"() <{values = dense<1> : tensor<i32>}> : () -> tensor<i32>
  %zero = "tosa.const"() <{values = dense<0> : tensor<i32>}> : () -> tensor<i32>
  %acc0 = "tosa.const"() <{values = dense<0> : tensor<4xi32>}> : () -> tensor<4xi32>
  %r:2 = tosa.while_loop (%i = %zero, %acc = %acc0) : (tensor<i32>, tensor<4xi32>) -> (tensor<i32>, tensor<4xi32>) {
    %c = tosa.greater %n, %i : (tensor<i32>, tensor<i32>) -> tensor<i1>
    tosa.yield %c : tensor<i1>
  } do {
  ^bb0(%i: tensor<i32>, %acc: tensor<4xi32>):
    %i2 = tosa.add %i, %one : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %a2 = tosa.add %acc, %x : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    tosa.yield %i2, %a2 : tensor<i32>, tensor<4xi32>
  }
  %s = tosa.cond_if %flag (%arg = %x) : tensor<i1> (tensor<4xi32>) -> tensor<4xi32> {
    %t = tosa.while_loop (%j = %zero) : (tensor<i32>) -> tensor<i32> {
      %d = tosa.greater %n, %j : (tensor<i32>, tensor<i32>) -> tensor<i1>
      tosa.yield %d : tensor<i1>
    } do {
    ^bb0(%j: tensor<i32>):
      %j2 = tosa.add %j, %one : (tensor<i32>, tensor<i32>) -> tensor<i32>
      tosa.yield %j2 : tensor<i32>
    }
    %u = tosa.sub %r#1, %arg : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    tosa.yield %u : tensor<4xi32>
  } else {
    tosa.yield %x : tensor<4xi32>
  }
  return %r#1, %s : tensor<4xi32>, tensor<4xi32>
}
"""


def test_values_a_region_reads_from_outside_are_passed_in(tmp_path):
    """%x and %n (inputs of the function) read by a WHILE_LOOP's body and condition become
    extra loop-carried values; %r#1 read in a COND_IF branch and %n two regions down (a loop
    inside the branch) extra inputs of the branch; constants get copies of their own."""
    from tests.oracle import run_graph_bytes

    graph = read_mlir(CAPTURING, "capturing.mlir")
    validate(graph)
    loop = next(op for op in graph.main.operators if op.op.name == "WHILE_LOOP")
    assert len(loop.inputs) == 4 and len(loop.outputs) == 4   # (i, acc) + captured %n, %x
    x, n = np.array([1, -2, 3, 4], np.int32), np.array(5, np.int32)
    for flag in (True, False):
        inputs = [x, n, np.array(flag)]
        ours = list(execute(graph, inputs).values())
        save_graph(graph, tmp_path / "capturing.tosa")
        theirs = run_graph_bytes((tmp_path / "capturing.tosa").read_bytes(), inputs, list(graph.output_types.values()))
        expected = [5 * x, 4 * x if flag else x]
        for a, b, c in zip(ours, theirs, expected):
            np.testing.assert_array_equal(a, c)
            np.testing.assert_array_equal(b, c)


def test_a_fused_lstm_in_mlir_legalizes_when_float_and_asks_for_the_tflite_when_integer(tmp_path):
    """Without the .tflite, a float LSTM needs nothing the MLIR lost; an integer one needs the
    quantization of its operands, which the converter's MLIR drops."""
    from npu_sim.tosa.tflite_import import tflite_to_mlir

    data = Path(__file__).resolve().parents[1] / "data" / "tflite"
    text = tflite_to_mlir((data / "lstm_fused_fp32.tflite").read_bytes(), "lstm.tflite", use_cache=False)
    graph = read_mlir(text, "lstm.mlir", Legalizer(None, "lstm.mlir"))
    validate(graph)
    assert sum(op.op.name == "SIGMOID" for op in graph.main.operators) == 3 * 4   # 3 gates, 4 steps
    text = tflite_to_mlir((data / "lstm_int8.tflite").read_bytes(), "lstm.tflite", use_cache=False)
    with pytest.raises(UnsupportedFeatureError, match="give npu-sim the .tflite model"):
        read_mlir(text, "lstm.mlir", Legalizer(None, "lstm.mlir"))


@pytest.mark.parametrize("operand, variant", [(1, "CIFG"), (9, "peephole connections"), (16, "projection"),
                                              (20, "layer normalisation")])
def test_lstm_variants_npu_sim_does_not_legalize_are_refused_by_name(operand, variant):
    """The fused LSTM's operands in the converter's MLIR, one made absent (CIFG) or present
    (peephole, projection, layer norm): refused in one line naming the variant."""
    from npu_sim.tosa.tflite_import import tflite_to_mlir

    data = Path(__file__).resolve().parents[1] / "data" / "tflite"
    text = tflite_to_mlir((data / "lstm_fused_fp32.tflite").read_bytes(), "lstm.tflite", use_cache=False)
    line = next(ln for ln in text.splitlines() if "tfl.unidirectional_sequence_lstm" in ln)
    head, rest = line.split('"tfl.unidirectional_sequence_lstm"(', 1)
    operands, tail = rest.split(")", 1)
    names = [o.strip() for o in operands.split(",")]
    no_value = names[9]   # an omitted operand: %N = "tfl.no_value"
    names[operand] = no_value if operand == 1 else names[12]   # (a bias vector stands in)
    patched = f'{head}"tfl.unidirectional_sequence_lstm"({", ".join(names)}){tail}'
    with pytest.raises(UnsupportedFeatureError) as caught:
        read_mlir(text.replace(line, patched), "lstm.mlir", Legalizer(None, "lstm.mlir"))
    assert f"an LSTM with {variant}" in str(caught.value) and "\n" not in str(caught.value)


LOCATED = '''module {
  func.func @main(%arg0: tensor<1x4xi32>) -> tensor<1x4xi32> {
    %0 = "tosa.const"() <{values = dense<1> : tensor<1x4xi32>}> : () -> tensor<1x4xi32> loc(#loc1)
    %1 = tosa.add %arg0, %0 : (tensor<1x4xi32>, tensor<1x4xi32>) -> tensor<1x4xi32> loc(#loc3)
    %2 = tosa.sub %1, %0 : (tensor<1x4xi32>, tensor<1x4xi32>) -> tensor<1x4xi32> loc("inline/sub"("m.tflite":0:0))
    %3 = tosa.maximum %2, %0 : (tensor<1x4xi32>, tensor<1x4xi32>) -> tensor<1x4xi32> loc(#loc4)
    return %3 : tensor<1x4xi32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc("m.tflite":0:0)
#loc1 = loc(unknown)
#loc2 = loc("model/add"(#loc))
#loc3 = loc(#loc2)
#loc4 = loc(fused[#loc2, "model/max"(#loc)])
'''


def test_operators_keep_the_source_location_the_converter_gives_them():
    """``loc(...)`` after an operation names its source operator, through ``#loc`` aliases (defined
    after the module), inline, or the first of a fused location; file positions and ``unknown``
    name nothing."""
    graph = read_mlir(LOCATED, "m.mlir")
    assert [(op.op.name, op.location) for op in graph.main.operators] == [
        ("CONST", ""), ("ADD", "model/add"), ("SUB", "inline/sub"), ("MAXIMUM", "model/add")]
    x = np.arange(4, dtype=np.int32).reshape(1, 4)
    assert np.array_equal(next(iter(execute(graph, [x]).values())), np.maximum(x, 1))


def test_a_tflite_model_reads_with_the_tflite_operator_of_each_tosa_operator():
    """A .tflite's operators carry the TFLite tensor their operator wrote (the converter's debug
    locations): the RESCALEs of a quantized ADD share the ADD's."""
    graph = load_graph(Path(__file__).resolve().parents[1] / "data" / "tflite" / "lstm_stateful_int8.tflite")
    by_location: dict[str, list[str]] = {}
    for op in graph.main.operators:
        by_location.setdefault(op.location, []).append(op.op.name)
    adds = {loc: [o for o in ops if o != "CONST"] for loc, ops in by_location.items() if "ADD" in ops and loc}
    assert len(adds) == 12 and all(ops.count("ADD") == 1 and ops.count("RESCALE") >= 3 for ops in adds.values())
    assert "lstm_stateful/lstm/lstm_cell/add_7" in adds


def test_a_location_cut_short_is_refused_with_line_and_column():
    text = LOCATED.replace('loc("inline/sub"("m.tflite":0:0))\n', 'loc("inline/sub"("m.tflite":0:0)\n')
    with pytest.raises(TosaFormatError, match=r"m.mlir:\d+:\d+: .*unclosed"):
        read_mlir(text, "m.mlir")


def test_location_aliases_naming_each_other_name_nothing_and_do_not_hang():
    text = LOCATED.replace('loc("inline/sub"("m.tflite":0:0))\n', 'loc(#loc5)\n') + \
        "#loc5 = loc(#loc6)\n#loc6 = loc(#loc5)\n"
    assert [op.location for op in read_mlir(text, "m.mlir").main.operators][2] == ""
