"""Families of graphs that grow, for the scheduling-time scaling benchmark (bench_schedule_scaling.py).

Built with :class:`~npu_sim.tosa.builder.GraphBuilder`, seeded, no TensorFlow needed:

* :func:`unrolled_lstm`: an fp32 LSTM unrolled over ``steps`` time steps, as tf-keras
  ``LSTM(hidden, unroll=True)`` converts: per step a SLICE of the input sequence, the input
  and recurrent products (1x1 CONV2Ds), their sum with the bias, four gate SLICEs,
  SIGMOID x3 and TANH, ``c' = f*c + i*g``, ``h' = o*tanh(c')``; the weights are shared
  constants; a Dense head on the last ``h``. 23 operators per step.
* :func:`mobilenet_v2`: int8 inverted residual blocks (1x1 expansion, 3x3 depthwise, 1x1
  projection, each with its per-channel RESCALE and ReLU6 CLAMP, residual ADDs through
  int32), MobileNetV2's stage layout at width 0.35, on a ``resolution`` x ``resolution``
  image: the same operators at every resolution, more and larger tiles as it grows.
* :func:`resnet`: int8 bottleneck blocks (1x1, 3x3, 1x1 convolutions, a projection on the
  first block of a stage, 3x3 where it strides; residual ADDs) in four stages of ``blocks`` bottlenecks each
  (ResNet-50 is (3, 4, 6, 3)), widths 64-256-512-1024-2048 scaled by ``width``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.ops import Op

F32 = DType.FP32


# --- the unrolled LSTM --------------------------------------------------------------------

def _dense(b: GraphBuilder, x4: str, weights: str, zero: str) -> str:
    return b.op(Op.CONV2D, [x4, weights, zero, zero, zero], pad=(0, 0, 0, 0), stride=(1, 1),
                dilation=(1, 1), acc_type=F32)


def unrolled_lstm(steps: int, hidden: int = 32, features: int = 8, seed: int = 0) -> Graph:
    """An fp32 LSTM over ``steps`` time steps of ``features`` values (see the module doc)."""
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(hidden + features)
    b = GraphBuilder()
    x = b.input("x", (1, steps, features), F32)
    w_in = b.const("w_in", rng.uniform(-scale, scale, (4 * hidden, 1, 1, features)).astype(np.float32))
    w_rec = b.const("w_rec", rng.uniform(-scale, scale, (4 * hidden, 1, 1, hidden)).astype(np.float32))
    bias = b.const("bias", rng.uniform(-0.1, 0.1, (1, 4 * hidden)).astype(np.float32))
    zero = b.const("zero", np.zeros(1, np.float32))
    no_shift = b.const("no_shift", np.zeros(1, np.int8))
    h = b.const("h0", np.zeros((1, hidden), np.float32))
    c = b.const("c0", np.zeros((1, hidden), np.float32))
    shape4_h, shape4_x = b.const_shape(None, [1, 1, 1, hidden]), b.const_shape(None, [1, 1, 1, features])
    shape2, size = b.const_shape(None, [1, 4 * hidden]), b.const_shape(None, [1, hidden])
    step_size = b.const_shape(None, [1, 1, features])
    starts = [b.const_shape(None, [0, k * hidden]) for k in range(4)]
    for t in range(steps):
        x_t = b.op(Op.SLICE, [x, b.const_shape(None, [0, t, 0]), step_size])
        projected = b.op(Op.RESHAPE, [_dense(b, b.op(Op.RESHAPE, [x_t, shape4_x]), w_in, zero), shape2])
        recurrent = b.op(Op.RESHAPE, [_dense(b, b.op(Op.RESHAPE, [h, shape4_h]), w_rec, zero), shape2])
        z = b.op(Op.ADD, [b.op(Op.ADD, [projected, recurrent]), bias])
        i, f, g, o = (b.op(Op.SLICE, [z, start, size]) for start in starts)
        i, f, o = (b.op(Op.SIGMOID, [v]) for v in (i, f, o))
        g = b.op(Op.TANH, [g])
        c = b.op(Op.ADD, [b.op(Op.MUL, [f, c, no_shift]), b.op(Op.MUL, [i, g, no_shift])])
        h = b.op(Op.MUL, [o, b.op(Op.TANH, [c]), no_shift])
    head = b.const("head", rng.uniform(-scale, scale, (4, 1, 1, hidden)).astype(np.float32))
    y = b.op(Op.RESHAPE, [_dense(b, b.op(Op.RESHAPE, [h, shape4_h]), head, zero), b.const_shape(None, [1, 4])],
             name="y")
    b.output(y)
    return b.build()


# --- int8 convolution blocks --------------------------------------------------------------

class _Int8:
    """Seeded int8 layers: convolutions with their per-channel RESCALE (and ReLU6 CLAMP)."""

    def __init__(self, b: GraphBuilder, seed: int):
        self.b = b
        self.rng = np.random.default_rng(seed)

    def rescale(self, x: str, channels: int, out: DType = DType.INT8, shift: int = 38) -> str:
        b = self.b
        source = b.type_of(x).dtype
        return b.op(Op.RESCALE, [x, b.const(None, np.full((channels,), 1 << 30, np.int32), DType.INT32),
                                 b.const(None, np.full((channels,), shift, np.int8), DType.INT8),
                                 b.const(None, np.array([0]), source), b.const(None, np.array([0]), out)],
                    dtype=out, shape=b.type_of(x).shape, scale32=True, rounding_mode="SINGLE_ROUND",
                    per_channel=channels > 1)

    def conv(self, x: str, out_channels: int, kernel: int = 1, stride: int = 1, depthwise: bool = False,
             relu: bool = True) -> str:
        b = self.b
        channels = b.type_of(x).shape[3]
        if depthwise:
            weights = self.rng.integers(-8, 8, (kernel, kernel, channels, 1), dtype=np.int8)
            out_channels = channels
        else:
            weights = self.rng.integers(-8, 8, (out_channels, kernel, kernel, channels), dtype=np.int8)
        zp = b.const(None, np.array([0], np.int8))
        size = b.type_of(x).shape[1]
        total = max((-(-size // stride) - 1) * stride + kernel - size, 0)   # TFLite's SAME padding
        bias = b.const(None, self.rng.integers(-500, 500, out_channels, dtype=np.int32))
        acc = b.op(Op.DEPTHWISE_CONV2D if depthwise else Op.CONV2D, [x, b.const(None, weights), bias, zp, zp],
                   pad=(total // 2, total - total // 2) * 2, stride=(stride, stride),
                   dilation=(1, 1), acc_type=DType.INT32)
        y = self.rescale(acc, out_channels)
        if relu:
            y = b.op(Op.CLAMP, [y], min_val=np.int8(0).tobytes(), max_val=np.int8(96).tobytes(), nan_mode="PROPAGATE")
        return y

    def add(self, a: str, c: str) -> str:
        """``a + c`` of two int8 tensors, through int32 as TFLite's quantized ADD lowers."""
        channels = self.b.type_of(a).shape[3]
        total = self.b.op(Op.ADD, [self.rescale(a, 1, DType.INT32, 30), self.rescale(c, 1, DType.INT32, 30)])
        return self.rescale(total, channels, shift=31)

    def head(self, x: str, classes: int) -> str:
        """A global average (REDUCE_SUM over H and W, rescaled) and a 1x1 CONV2D classifier."""
        b = self.b
        pooled = self.rescale(b.op(Op.REDUCE_SUM, [b.op(Op.REDUCE_SUM, [self.rescale(x, 1, DType.INT32, 30)],
                                                          axis=1)], axis=2), 1, shift=40)
        return self.conv(pooled, classes, relu=False)


#: MobileNetV2's stages: (expansion, output channels at width 1.0, blocks, first stride).
MOBILENET_V2_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1))


def _width(channels: float) -> int:
    return max(8, int(channels + 4) // 8 * 8)


def mobilenet_v2(resolution: int, width: float = 0.35, seed: int = 0) -> Graph:
    """int8 MobileNetV2 on a ``resolution`` x ``resolution`` x 3 image (see the module doc)."""
    b = GraphBuilder()
    layers = _Int8(b, seed)
    x = layers.conv(b.input("image", (1, resolution, resolution, 3), DType.INT8), _width(32 * width), 3, 2)
    for expansion, channels, blocks, first_stride in MOBILENET_V2_STAGES:
        for k in range(blocks):
            stride = first_stride if k == 0 else 1
            inside = b.type_of(x).shape[3]
            y = layers.conv(x, inside * expansion) if expansion > 1 else x
            y = layers.conv(y, 0, 3, stride, depthwise=True)
            y = layers.conv(y, _width(channels * width), relu=False)
            x = layers.add(x, y) if stride == 1 and b.type_of(x).shape == b.type_of(y).shape else y
    b.output(layers.head(layers.conv(x, _width(1280 * max(1.0, width))), 10))
    return b.build()


def resnet(blocks: Sequence[int] = (3, 4, 6, 3), resolution: int = 112, width: float = 0.25, seed: int = 0) -> Graph:
    """int8 ResNet of bottleneck blocks (ResNet-50: ``blocks`` (3, 4, 6, 3)); see the module doc."""
    b = GraphBuilder()
    layers = _Int8(b, seed)
    x = layers.conv(b.input("image", (1, resolution, resolution, 3), DType.INT8), _width(64 * width), 7, 2)
    for stage, count in enumerate(blocks):
        inner = _width(64 * width * 2 ** stage)
        for k in range(count):
            stride = 2 if k == 0 and stage > 0 else 1
            y = layers.conv(x, inner)
            y = layers.conv(y, inner, 3, stride)
            y = layers.conv(y, 4 * inner, relu=False)
            # the projection: 3x3 where it strides (TOSA wants the padded size a multiple of the stride)
            shortcut = layers.conv(x, 4 * inner, 1 + 2 * (stride > 1), stride, relu=False) if k == 0 else x
            x = layers.add(shortcut, y)
    b.output(layers.head(x, 10))
    return b.build()
