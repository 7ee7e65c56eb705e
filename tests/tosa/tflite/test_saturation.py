"""TFLite's QUANTIZE saturates: the converted chain (MUL, CAST, ADD, CAST) is clamped before it narrows."""

import numpy as np

from npu_sim.reference.session import execute
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from npu_sim.tosa.tflite.saturation import saturate_quantizations


def _quantization(dtype: DType = DType.INT8):
    """float [1, 4] quantized with scale 0.1 and zero point -7, as the converter writes it."""
    b = GraphBuilder()
    x = b.input("x", (1, 4), DType.FP32)
    scaled = b.op(Op.MUL, [x, b.const(None, np.full((1, 1), 10.0, np.float32)), b.const(None, np.array([0], np.int8))])
    wide = b.op(Op.ADD, [b.op(Op.CAST, [scaled], dtype=DType.INT32), b.const(None, np.full((1, 1), -7, np.int32))])
    b.output(b.op(Op.CAST, [wide], dtype=dtype))
    return b.build()


def test_a_value_past_the_range_saturates_instead_of_wrapping():
    graph = _quantization()
    x = np.array([[-12.9, -13.0, 0.0, 14.0]], np.float32)   # -136 and -137 wrap to 120 and 119
    (wrapped,) = execute(graph, {"x": x}).values()
    assert wrapped.tolist() == [[120, 119, -7, -123]]
    assert saturate_quantizations(graph) == 1
    (saturated,) = execute(graph, {"x": x}).values()
    assert saturated.tolist() == [[-128, -128, -7, 127]]


def test_int16_too_and_nothing_else():
    graph = _quantization(DType.INT16)
    assert saturate_quantizations(graph) == 1
    (out,) = execute(graph, {"x": np.array([[4000.0, -4000.0, 1.0, 0.0]], np.float32)}).values()
    assert out.tolist() == [[32767, -32768, 3, -7]]
    b = GraphBuilder()   # an int32 to int8 CAST of integer data (TFLite's CAST wraps too): left alone
    x = b.input("x", (1, 4), DType.INT32)
    b.output(b.op(Op.CAST, [b.op(Op.ADD, [x, b.const(None, np.full((1, 1), 1, np.int32))])], dtype=DType.INT8))
    assert saturate_quantizations(b.build()) == 0
