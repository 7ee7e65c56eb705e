"""The flatbuffer reader and writer against tosa-tools (serializers, tosa-opt, reference model)."""

from __future__ import annotations

import glob
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_sim.errors import NpuSimError, TosaFormatError, TosaVersionError, UnknownOperatorError, UnsupportedFeatureError
from npu_sim.tosa import DType, GraphBuilder, Op, make_attribute, validate
from npu_sim.tosa.flatbuffer_io import read_graph, read_tree, write_graph, write_tree
from npu_sim.tosa.ops import NanPropagationMode, RoundingMode
from tests.tosa import tosa_tools_io as tt

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

MLIR_VARIABLE = """
module {
  tosa.variable @stored_var = dense<-1> : tensor<1x4xi32>
  func.func @main(%arg0: tensor<1x4xi32>) -> tensor<1x4xi32> {
    %0 = tosa.variable_read @stored_var : tensor<1x4xi32>
    %1 = tosa.add %arg0, %0 : (tensor<1x4xi32>, tensor<1x4xi32>) -> tensor<1x4xi32>
    tosa.variable_write @stored_var, %1 : tensor<1x4xi32>
    return %1 : tensor<1x4xi32>
  }
}
"""

# COND_IF whose then-branch reads and writes a variable, then a WHILE_LOOP doubling the
# values until their sum reaches 100 (its condition block uses CONST_SHAPE + RESHAPE).
MLIR_CONTROL_FLOW = """
module {
  tosa.variable @acc = dense<0> : tensor<1x4xi32>
  func.func @main(%arg0: tensor<1x4xi32>, %arg1: tensor<1x4xi32>, %c: tensor<1xi1>) -> tensor<1x4xi32> {
    %0 = "tosa.cond_if"(%c, %arg0, %arg1) ({
    ^bb0(%a: tensor<1x4xi32>, %b: tensor<1x4xi32>):
      %1 = "tosa.add"(%a, %b) : (tensor<1x4xi32>, tensor<1x4xi32>) -> tensor<1x4xi32>
      %v = tosa.variable_read @acc : tensor<1x4xi32>
      %q = "tosa.add"(%1, %v) : (tensor<1x4xi32>, tensor<1x4xi32>) -> tensor<1x4xi32>
      tosa.variable_write @acc, %q : tensor<1x4xi32>
      "tosa.yield"(%q) : (tensor<1x4xi32>) -> ()
    }, {
    ^bb0(%a: tensor<1x4xi32>, %b: tensor<1x4xi32>):
      %1 = "tosa.sub"(%a, %b) : (tensor<1x4xi32>, tensor<1x4xi32>) -> tensor<1x4xi32>
      "tosa.yield"(%1) : (tensor<1x4xi32>) -> ()
    }) : (tensor<1xi1>, tensor<1x4xi32>, tensor<1x4xi32>) -> tensor<1x4xi32>
    %2 = "tosa.while_loop"(%0) ({
    ^bb0(%i: tensor<1x4xi32>):
      %t = "tosa.reduce_sum"(%i) <{axis = 1 : i32}> : (tensor<1x4xi32>) -> tensor<1x1xi32>
      %k = "tosa.const"() <{values = dense<100> : tensor<1x1xi32>}> : () -> tensor<1x1xi32>
      %g = "tosa.greater"(%k, %t) : (tensor<1x1xi32>, tensor<1x1xi32>) -> tensor<1x1xi1>
      %s = "tosa.const_shape"() <{values = dense<1> : tensor<1xindex>}> : () -> !tosa.shape<1>
      %g2 = "tosa.reshape"(%g, %s) : (tensor<1x1xi1>, !tosa.shape<1>) -> tensor<1xi1>
      "tosa.yield"(%g2) : (tensor<1xi1>) -> ()
    }, {
    ^bb0(%i: tensor<1x4xi32>):
      %n = "tosa.add"(%i, %i) : (tensor<1x4xi32>, tensor<1x4xi32>) -> tensor<1x4xi32>
      "tosa.yield"(%n) : (tensor<1x4xi32>) -> ()
    }) : (tensor<1x4xi32>) -> tensor<1x4xi32>
    return %2 : tensor<1x4xi32>
  }
}
"""


@pytest.fixture(scope="module")
def control_flow_file() -> bytes:
    return tt.tosa_opt_serialize(MLIR_CONTROL_FLOW)


def _conv_rescale_serializer(version=None):
    """int8 CONV2D (+ per-channel RESCALE) built with the Python serializer."""
    rng = np.random.default_rng(7)
    ser = tt.python_serializer(version)
    x = ser.addPlaceholder([1, 4, 4, 2], tt.PY_DTYPE.INT8, None)
    weight = rng.integers(-128, 128, (3, 1, 1, 2), dtype=np.int8)
    bias = np.array([100, -200, 300], dtype=np.int32)
    w = ser.addConst([3, 1, 1, 2], tt.PY_DTYPE.INT8, weight)
    b = ser.addConst([3], tt.PY_DTYPE.INT32, bias)
    izp = ser.addConst([1], tt.PY_DTYPE.INT8, np.array([3], np.int8))
    wzp = ser.addConst([1], tt.PY_DTYPE.INT8, np.array([0], np.int8))
    acc = ser.addIntermediate([1, 4, 4, 3], tt.PY_DTYPE.INT32)
    ser.addOperator(tt.PY_OP.CONV2D, [x.name, w.name, b.name, izp.name, wzp.name], [acc.name],
                    tt.py_attribute("Conv2dAttribute", [0, 0, 0, 0], [1, 1], [1, 1], False,
                                    tt.PY_DTYPE.INT32))
    mult = ser.addConst([3], tt.PY_DTYPE.INT32, np.array([1 << 30, 1 << 29, 3 << 28], np.int32))
    shift = ser.addConst([3], tt.PY_DTYPE.INT8, np.array([38, 37, 39], np.int8))
    rizp = ser.addConst([1], tt.PY_DTYPE.INT32, np.array([0], np.int32))
    rozp = ser.addConst([1], tt.PY_DTYPE.INT8, np.array([-5], np.int8))
    out = ser.addOutput([1, 4, 4, 3], tt.PY_DTYPE.INT8)
    ser.addOperator(tt.PY_OP.RESCALE, [acc.name, mult.name, shift.name, rizp.name, rozp.name],
                    [out.name], tt.py_attribute("RescaleAttribute", True, 3, True, False, False))
    return bytes(ser.serialize()), weight, bias


# --- reading what tosa-tools writes -------------------------------------------------
def test_reads_python_serializer_graph_field_by_field():
    data, weight, bias = _conv_rescale_serializer()
    g = read_graph(data)
    assert g.version == (1, 1, 0, True)
    assert [(r.name, [b.name for b in r.blocks]) for r in g.regions] == [("main", ["main"])]
    main = g.main
    assert main.inputs == ["input-0"] and main.outputs == ["result-0"]
    assert [o.op for o in main.operators] == [Op.CONST, Op.CONST, Op.CONST, Op.CONST, Op.CONV2D,
                                              Op.CONST, Op.CONST, Op.CONST, Op.CONST, Op.RESCALE]
    conv = main.operators[4]
    assert conv.inputs == ["input-0", "const-0", "const-1", "const-2", "const-3"]
    assert conv.outputs == ["layer-1"]
    assert conv.attribute == make_attribute(Op.CONV2D, pad=(0, 0, 0, 0), stride=(1, 1),
                                            dilation=(1, 1), local_bound=False,
                                            acc_type=DType.INT32)
    rescale = main.operators[9]
    assert rescale.attribute.scale32 is True and rescale.attribute.per_channel is True
    assert rescale.attribute.rounding_mode is RoundingMode.DOUBLE_ROUND
    assert main.tensors["input-0"].type == ((1, 4, 4, 2), DType.INT8)
    assert main.tensors["layer-1"].type == ((1, 4, 4, 3), DType.INT32)
    assert main.tensors["result-0"].data is None
    np.testing.assert_array_equal(main.tensors["const-0"].data, weight)
    assert main.tensors["const-0"].data.dtype == np.int8
    np.testing.assert_array_equal(main.tensors["const-1"].data, bias)
    np.testing.assert_array_equal(main.tensors["const-5"].data, [38, 37, 39])
    validate(g)


def test_what_we_write_runs_in_the_reference_model_like_the_original():
    data, _, _ = _conv_rescale_serializer()
    x = np.random.default_rng(3).integers(-128, 128, (1, 4, 4, 2), dtype=np.int8)
    ours = write_graph(read_graph(data))
    expected = tt.run_reference(data, [x])
    got = tt.run_reference(ours, [x])
    assert len(got) == 1 and got[0].dtype == np.int8
    np.testing.assert_array_equal(got[0], expected[0])
    assert read_graph(ours) == read_graph(data)


CONSTANTS = {
    DType.BOOL: np.array([[True, False, True]]),
    DType.INT4: np.array([-8, -1, 0, 7, 5], dtype=np.int8),
    DType.INT8: np.array([-128, 0, 127], dtype=np.int8),
    DType.INT16: np.array([[-32768, 1], [2, 32767]], dtype=np.int16),
    DType.INT32: np.array([-(2 ** 31), 2 ** 31 - 1], dtype=np.int32),
    DType.INT48: np.array([-(2 ** 47), 2 ** 47 - 1, -1, 12345678901], dtype=np.int64),
    DType.FP16: np.array([1.5, -0.0, 65504], dtype=np.float16),
    DType.BF16: np.array([1.0, -3.5, 1e30], dtype=ml_dtypes.bfloat16),
    DType.FP32: np.array([[1.25, np.inf], [-2.0, 1e-30]], dtype=np.float32),
    DType.FP8E4M3: np.array([1.0, -448, 0.5], dtype=ml_dtypes.float8_e4m3fn),
    DType.FP8E5M2: np.array([1.0, -57344, 0.25], dtype=ml_dtypes.float8_e5m2),
}


def test_decodes_constant_data_of_every_element_type():
    ser = tt.python_serializer()
    names = {}
    for dtype, value in CONSTANTS.items():
        arg = value.view(np.uint8) if dtype is DType.FP8E5M2 else value
        names[dtype] = ser.addConst(list(value.shape), getattr(tt.PY_DTYPE, dtype.name), arg).name
    shape = ser.addConst([3], tt.PY_DTYPE.SHAPE, np.array([2, -1, 1 << 40], np.int64))
    data = bytes(ser.serialize())
    g = read_graph(data)
    for dtype, value in CONSTANTS.items():
        tensor = g.main.tensors[names[dtype]]
        assert tensor.dtype is dtype and tensor.shape == value.shape
        assert tensor.data.dtype == dtype.numpy_dtype
        assert tensor.data.tobytes() == value.astype(dtype.numpy_dtype).tobytes(), dtype
    shape_tensor = g.main.tensors[shape.name]  # a TosaShape entry of the block
    assert shape_tensor.type == ((3,), DType.SHAPE)
    np.testing.assert_array_equal(shape_tensor.data, [2, -1, 1 << 40])
    assert [o.op for o in g.main.operators][-1] is Op.CONST_SHAPE
    assert read_graph(write_graph(g)) == g
    # our bytes for each constant are the ones the serializer wrote
    tree, ours = read_tree(data), read_tree(write_graph(g))
    theirs = {t["name"]: t.get("data") for t in tree["regions"][0]["blocks"][0]["tensors"]}
    mine = {t["name"]: t.get("data") for t in ours["regions"][0]["blocks"][0]["tensors"]}
    assert mine == theirs
    assert ours["regions"][0]["blocks"][0]["shapes"] == tree["regions"][0]["blocks"][0]["shapes"]


def test_reads_compiled_serializer_graph_and_it_reads_ours():
    import tosa_serializer as cts

    ser = cts.TosaSerializer("", cts.ConstMode.EMBED)
    blk = ser.currRegion.currBasicBlock
    blk.addTensor("a", [2, 3], cts.DType.FP32)
    blk.addInput("a")
    ser.addConst([1, 3], cts.DType.FP32, np.array([[1, 2, 3]], np.float32), "c")
    blk.addTensor("m", [2, 3], cts.DType.FP32)
    attr = cts.TosaSerializerAttribute()
    attr.MaximumAttribute(cts.NanPropagationMode.IGNORE)
    ser.addOperator(cts.Op.MAXIMUM, ["a", "c"], ["m"], attr)
    blk.addOutput("m")
    data = bytes(ser.serialize())
    g = read_graph(data)
    assert g.software_version == "2026.8.0"
    (op_const, op_max) = g.main.operators
    assert op_const.op is Op.CONST and op_max.op is Op.MAXIMUM
    assert op_max.attribute.nan_mode is NanPropagationMode.IGNORE
    np.testing.assert_array_equal(g.main.tensors["c"].data, [[1, 2, 3]])
    validate(g)
    ours = write_graph(g)
    assert tt.compiled_serializer_reads(ours) == [("main", [("main", ["CONST", "MAXIMUM"])])]
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(tt.run_reference(ours, [a])[0], np.maximum(a, [[1, 2, 3]]))


def test_reads_tosa_opt_variables_as_variable_operators():
    data = tt.tosa_opt_serialize(MLIR_VARIABLE)
    g = read_graph(data)
    main = g.main
    var = main.tensors["Variable_0"]
    assert var.variable and var.variable_name == "stored_var" and var.variable_key == "stored_var"
    np.testing.assert_array_equal(var.data, [[-1, -1, -1, -1]])
    read, add, write = main.operators
    assert (read.op, read.inputs, read.outputs) == (Op.VARIABLE_READ, ["Variable_0"], ["layer_0"])
    assert add.op is Op.ADD
    assert (write.op, write.inputs, write.outputs) == (Op.VARIABLE_WRITE,
                                                       ["Variable_0", "TosaOutput_0"], [])
    assert list(g.variables()) == ["stored_var"]
    validate(g)
    ours = write_graph(g)
    x = np.array([[1, 2, 3, 4]], np.int32)
    np.testing.assert_array_equal(tt.run_reference(ours, [x])[0], x - 1)
    text = tt.tosa_opt_deserialize(ours)  # tosa-opt reads our encoding back as variables
    assert "tosa.variable @stored_var" in text
    assert "tosa.variable_read @stored_var" in text and "tosa.variable_write @stored_var" in text


def test_reads_the_specifications_variable_operators():
    ser = tt.python_serializer()
    x = ser.addPlaceholder([1, 4], tt.PY_DTYPE.INT32, None)
    ser.currRegion.currBasicBlock.addTensor("var0", [1, 4], tt.PY_DTYPE.INT32, [5, 6, 7, 8], None,
                                            False, True, "acc")
    ser.addOperator(tt.PY_OP.VARIABLE, [], ["var0"])
    r = ser.addIntermediate([1, 4], tt.PY_DTYPE.INT32)
    ser.addOperator(tt.PY_OP.VARIABLE_READ, ["var0"], [r.name])
    o = ser.addOutput([1, 4], tt.PY_DTYPE.INT32)
    ser.addOperator(tt.PY_OP.ADD, [x.name, r.name], [o.name])
    ser.addOperator(tt.PY_OP.VARIABLE_WRITE, [o.name], ["var0"])
    g = read_graph(bytes(ser.serialize()))
    assert [op.op for op in g.main.operators] == [Op.VARIABLE_READ, Op.ADD, Op.VARIABLE_WRITE]
    assert g.main.operators[2].inputs == ["var0", o.name]
    np.testing.assert_array_equal(g.variables()["acc"].data, [[5, 6, 7, 8]])
    validate(g)
    # written in tosa-opt's encoding, which the reference model runs
    x_value = np.array([[1, 1, 1, 1]], np.int32)
    np.testing.assert_array_equal(tt.run_reference(write_graph(g), [x_value])[0], [[6, 7, 8, 9]])


def test_reads_tosa_opt_control_flow_regions(control_flow_file):
    g = read_graph(control_flow_file)
    assert g.version == (1, 1, 0, True)
    region_names = [r.name for r in g.regions]
    assert region_names[0] == "main" and len(region_names) == 5
    for region in g.regions[1:]:  # one region per branch, its block named <region>_bb0
        assert [b.name for b in region.blocks] == [region.name + "_bb0"]
    cond_if, loop = g.main.operators
    assert cond_if.op is Op.COND_IF and cond_if.inputs == ["TosaInput_2", "TosaInput_0",
                                                           "TosaInput_1"]
    then_block = g.block(cond_if.attribute.then_graph)  # the attribute names the region
    assert then_block.name == cond_if.attribute.then_graph + "_bb0"
    assert [o.op for o in then_block.operators] == [Op.ADD, Op.VARIABLE_READ, Op.ADD,
                                                    Op.VARIABLE_WRITE]
    # the variable: declared in main, copied only into the block that accesses it
    assert g.main.tensors["Variable_0"].variable
    else_block = g.block(cond_if.attribute.else_graph)
    assert "Variable_0" in then_block.tensors and "Variable_0" not in else_block.tensors
    cond_block = g.block(loop.attribute.cond_graph)
    shape = cond_block.tensors[cond_block.operators[3].outputs[0]]
    assert cond_block.operators[3].op is Op.CONST_SHAPE and shape.type == ((1,), DType.SHAPE)
    np.testing.assert_array_equal(shape.data, [1])
    assert cond_block.tensors[cond_block.outputs[0]].type == ((1,), DType.BOOL)
    validate(g)


def test_our_control_flow_file_runs_in_the_reference_model(control_flow_file):
    g = read_graph(control_flow_file)
    ours = write_graph(g)
    assert read_graph(ours) == g
    a, b = np.array([[1, 2, 3, 4]], np.int32), np.array([[1, 1, 1, 1]], np.int32)
    # then: a + b + acc(0) = [2,3,4,5] -> doubled until the sum reaches 100
    np.testing.assert_array_equal(tt.run_reference(ours, [a, b, np.array([True])])[0],
                                  [[16, 24, 32, 40]])
    # else: a - b = [0,1,2,3] -> doubled until the sum reaches 100
    np.testing.assert_array_equal(tt.run_reference(ours, [a, b, np.array([False])])[0],
                                  [[0, 32, 64, 96]])


# --- versions -------------------------------------------------------------------------
def test_tosa_1_0_files_read_and_keep_their_version():
    data, _, _ = _conv_rescale_serializer(version=(1, 0, 0, False))
    g = read_graph(data)
    assert g.version == (1, 0, 0, False)
    ours = write_graph(g)
    assert read_tree(ours)["version"] == {"_major": 1, "_minor": 0, "_patch": 0, "_draft": False}
    x = np.zeros((1, 4, 4, 2), np.int8)
    np.testing.assert_array_equal(tt.run_reference(ours, [x])[0], tt.run_reference(data, [x])[0])


def test_new_graphs_are_written_as_tosa_1_0_and_run():
    b = GraphBuilder()
    x = b.input("x", (2, 3), DType.INT32)
    c = b.const("c", np.array([[1, 2, 3]], np.int32))
    b.output(b.op(Op.ADD, [x, c]))
    data = write_graph(b.build())
    assert read_graph(data).version == (1, 0, 0, False)
    x_value = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_array_equal(tt.run_reference(data, [x_value])[0], x_value + [[1, 2, 3]])


@pytest.mark.parametrize("version", [(2, 0, 0, False), (0, 80, 0, False), (3, 1, 0, True)])
def test_rejects_other_major_versions(version):
    data, _, _ = _conv_rescale_serializer(version=version)
    with pytest.raises(TosaVersionError, match=f"TOSA {version[0]}.{version[1]}"):
        read_graph(data)


def test_rejects_a_file_without_version():
    tree = read_tree(_conv_rescale_serializer()[0])
    del tree["version"]
    with pytest.raises(TosaFormatError, match="no TOSA version"):
        read_graph(write_tree(tree))


# --- malformed files ------------------------------------------------------------------
def test_empty_file():
    with pytest.raises(TosaFormatError, match="empty"):
        read_graph(b"")


def test_wrong_file_identifier():
    data = bytearray(_conv_rescale_serializer()[0])
    data[4:8] = b"TFL3"
    with pytest.raises(TosaFormatError, match="identifier"):
        read_graph(bytes(data))


@pytest.mark.parametrize("size", [3, 8, 12, 40, 200, 0.5, 0.9, -1])
def test_truncated_file(size):
    data = _conv_rescale_serializer()[0]
    cut = int(len(data) * size) if isinstance(size, float) else size if size > 0 else len(data) - 1
    with pytest.raises(TosaFormatError):
        read_graph(data[:cut])


def test_random_bytes():
    rng = np.random.default_rng(11)
    for _ in range(50):
        data = rng.integers(0, 256, int(rng.integers(0, 400)), dtype=np.uint8).tobytes()
        with pytest.raises(TosaFormatError):
            read_graph(data)
        with pytest.raises(TosaFormatError):  # even with the right identifier
            read_graph(data[:4] + b"TOSA" + data[8:])


def _tree_with(change) -> bytes:
    tree = read_tree(_conv_rescale_serializer()[0])
    change(tree["regions"][0]["blocks"][0])
    return write_tree(tree)


def test_unknown_operator_code():
    data = _tree_with(lambda b: b["operators"][4].update(op=250))
    with pytest.raises(UnknownOperatorError, match="250"):
        read_graph(data)


def test_unknown_element_type():
    data = _tree_with(lambda b: b["tensors"][0].update(type=99))
    with pytest.raises(TosaFormatError, match="element type code 99"):
        read_graph(data)


def test_attribute_of_another_operator():
    data = _tree_with(lambda b: b["operators"][4].update(attribute_type=15, attribute={}))
    with pytest.raises(TosaFormatError, match="AddAttribute"):
        read_graph(data)


def test_constant_data_too_short():
    data = _tree_with(lambda b: b["tensors"][1].update(data=b"\x01\x02"))
    with pytest.raises(TosaFormatError, match="needs 6 bytes"):
        read_graph(data)


def test_external_data_of_large_models_is_refused():
    data = _tree_with(lambda b: b["tensors"][1].update(offset=4096, size=6))
    with pytest.raises(UnsupportedFeatureError, match="outside the flatbuffer"):
        read_graph(data)


def test_reading_tolerates_the_padding_tosa_opt_adds_to_constant_data(control_flow_file):
    # tosa-opt pads constant data to 8 bytes (a 4-byte int32 [1,1] constant holds 8)
    tree = read_tree(control_flow_file)
    cond_block = tree["regions"][3]["blocks"][0]
    name = next(o["outputs"][0] for o in cond_block["operators"] if o["op"] == Op.CONST)
    const = next(t for t in cond_block["tensors"] if t["name"] == name)
    assert len(const["data"]) == 8
    g = read_graph(control_flow_file)
    np.testing.assert_array_equal(g.regions[3].blocks[0].tensors[const["name"]].data, [[100]])


# --- fuzzing: nothing but NpuSimError escapes ---------------------------------------------
def _only_npusim_errors(data: bytes) -> None:
    try:
        read_graph(data)
    except NpuSimError:
        pass


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=600))
def test_fuzz_random_bytes(data):
    _only_npusim_errors(data)
    _only_npusim_errors(data[:4] + b"TOSA" + data[8:])


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_fuzz_bit_flips_and_truncations(control_flow_file, data):
    buf = bytearray(control_flow_file)
    for _ in range(data.draw(st.integers(1, 8))):
        position = data.draw(st.integers(0, len(buf) - 1))
        buf[position] ^= 1 << data.draw(st.integers(0, 7))
    cut = data.draw(st.integers(0, len(buf)))
    _only_npusim_errors(bytes(buf[:cut]) if data.draw(st.booleans()) else bytes(buf))


# --- the example models -----------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(glob.glob(str(EXAMPLES / "*.tosa"))),
                         ids=lambda p: Path(p).name)
def test_examples_round_trip_and_run_alike(path):
    data = Path(path).read_bytes()
    g = read_graph(data)
    validate(g)
    ours = write_graph(g)
    assert read_graph(ours) == g
    rng = np.random.default_rng(5)
    inputs = []
    for t in g.input_types.values():
        if t.dtype is DType.BOOL:
            inputs.append(rng.integers(0, 2, t.shape).astype(bool))
        elif t.dtype.is_integer:
            inputs.append(rng.integers(-20, 20, t.shape).astype(t.dtype.numpy_dtype))
        else:
            inputs.append(rng.standard_normal(t.shape).astype(t.dtype.numpy_dtype))
    for want, got in zip(tt.run_reference(data, inputs), tt.run_reference(ours, inputs)):
        np.testing.assert_array_equal(got, want)


def test_reads_branch_blocks_in_the_main_region_as_the_readme_lays_them_out():
    ser = tt.python_serializer()  # addBasicBlock puts blocks in the current (main) region
    cond = ser.addPlaceholder([1], tt.PY_DTYPE.BOOL, None)
    x = ser.addPlaceholder([4], tt.PY_DTYPE.INT32, None)
    out = ser.addOutput([4], tt.PY_DTYPE.INT32)
    ser.addOperator(tt.PY_OP.COND_IF, [cond.name, x.name], [out.name],
                    tt.py_attribute("CondIfAttribute", "then_blk", "else_blk"))
    for name, op in (("then_blk", tt.PY_OP.ADD), ("else_blk", tt.PY_OP.SUB)):
        ser.addBasicBlock(name)
        blk = ser.currRegion.currBasicBlock
        blk.addTensor(f"{name}_in", [4], tt.PY_DTYPE.INT32)
        blk.addInput(f"{name}_in")
        blk.addTensor(f"{name}_out", [4], tt.PY_DTYPE.INT32)
        blk.addOperator(op, [f"{name}_in", f"{name}_in"], [f"{name}_out"])
        blk.addOutput(f"{name}_out")
    g = read_graph(bytes(ser.serialize()))
    assert [(r.name, [b.name for b in r.blocks]) for r in g.regions] == \
        [("main", ["main", "then_blk", "else_blk"])]
    assert g.block("then_blk").operators[0].op is Op.ADD
    validate(g)
    ours = write_graph(g)  # written with a region per branch: what tosa-tools 2026.8 runs
    x_value = np.array([1, 2, 3, 4], np.int32)
    np.testing.assert_array_equal(tt.run_reference(ours, [np.array([True]), x_value])[0],
                                  2 * x_value)
    np.testing.assert_array_equal(tt.run_reference(ours, [np.array([False]), x_value])[0],
                                  [0, 0, 0, 0])


# --- tables sharing a vtable --------------------------------------------------------------
def _two_op_tree(first: tuple[Op, str, dict], second: tuple[Op, str, dict]) -> dict:
    from npu_sim.tosa.fb_schema import union_tag
    operators = [{"op": int(op), "attribute_type": union_tag("Attribute", table), "attribute": attr,
                  "inputs": ["a"], "outputs": [f"out{i}"]}
                 for i, (op, table, attr) in enumerate((first, second))]
    return {"version": {"_major": 1, "_minor": 0, "_patch": 0, "_draft": False},
            "regions": [{"name": "main", "blocks": [{"name": "main", "operators": operators}]}]}


def _vtables(data: bytes) -> dict[str, set[int]]:
    """Table type -> positions of the vtables its tables use (the reader's own bookkeeping)."""
    from npu_sim.tosa.flatbuffer_io import _Reader
    reader = _Reader(data)
    reader.table(reader.indirect(0, "root"), "TosaGraph")
    found: dict[str, set[int]] = {}
    for vtable, table in reader.layouts:
        found.setdefault(table, set()).add(vtable)
    return found


def test_tables_of_different_types_sharing_a_vtable_keep_their_own_fields():
    # both attributes are two strings in slots 0 and 1: flatbuffers writes one vtable for them
    data = write_tree(_two_op_tree(
        (Op.COND_IF, "CondIfAttribute", {"then_graph": "t", "else_graph": "e"}),
        (Op.WHILE_LOOP, "WhileLoopAttribute", {"cond_graph": "c", "body_graph": "b"})))
    vtables = _vtables(data)
    assert vtables["CondIfAttribute"] == vtables["WhileLoopAttribute"]
    ops = read_tree(data)["regions"][0]["blocks"][0]["operators"]
    assert [op["attribute"] for op in ops] == [{"then_graph": "t", "else_graph": "e"},
                                               {"cond_graph": "c", "body_graph": "b"}]


def test_a_field_outside_its_table_is_reported_for_every_table_of_a_shared_vtable():
    tree = _two_op_tree((Op.CONST, "ConstAttribute", {}), (Op.CONST, "ConstAttribute", {}))
    data = bytearray(write_tree(tree))
    (vtable,) = _vtables(bytes(data))["TosaOperator"]  # both operators use one vtable
    assert read_tree(bytes(data))["regions"][0]["blocks"][0]["operators"][1]["outputs"] == ["out1"]
    data[vtable + 2:vtable + 4] = (4).to_bytes(2, "little")  # the table size: no room for fields
    with pytest.raises(TosaFormatError, match=r"^corrupt or truncated TOSA flatbuffer: "
                                              r"TosaOperator\.op lies outside its table$"):
        read_tree(bytes(data))


def test_inline_fields_are_read_in_one_go_and_overlapping_ones_one_by_one():
    import struct

    from npu_sim.tosa.flatbuffer_io import _FieldPlan, _inline_unpacker

    def plan(letter: str, size: int) -> _FieldPlan:
        return _FieldPlan("f", 0, 0, size, "T.f", letter=letter)

    data = struct.pack("<4xiH2xIq", -7, 513, 99, -(1 << 40))   # table at 0: fields at 4, 8, 12, 16
    fields = [(12, plan("I", 4)), (4, plan("i", 4)), (16, plan("q", 8)), (8, plan("H", 2))]  # slot order
    unpack, index = _inline_unpacker(fields)
    values = unpack(data, 0)
    assert [values[i] for i in index] == [99, -7, -(1 << 40), 513]
    # a crafted vtable can point two fields into the same bytes: read each on its own
    overlapping = [(4, plan("i", 4)), (6, plan("H", 2)), (4, plan("I", 4))]
    unpack, index = _inline_unpacker(overlapping)
    values = unpack(b"\0" * 2 + data, 2)
    assert [values[i] for i in index] == [-7, struct.unpack_from("<H", data, 6)[0], 2 ** 32 - 7]


@pytest.mark.parametrize("shape", [[0] * 100, [0, -3], [0, 2**40, 2**40]])
def test_an_empty_constant_of_an_impossible_shape_is_a_format_error(shape):
    """Found by fuzzing: a zero-element CONST with more dimensions than numpy allows, a negative
    or a huge one names the constant instead of failing inside numpy."""
    from npu_sim.tosa.serial_tree import graph_from_tree
    tree = read_tree((Path(__file__).resolve().parents[2] / "examples" / "conv_rescale_int8.tosa").read_bytes())
    block = tree["regions"][0]["blocks"][0]
    weights = next(t for t in block["tensors"] if t["name"] == "weights")
    weights["shape"], weights["data"] = shape, b""
    with pytest.raises(TosaFormatError, match=r"block 'main': constant 'weights' of shape .* cannot be built"):
        graph_from_tree(tree)
