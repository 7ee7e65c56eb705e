"""Build a one-step stateful fp32 LSTM in Python, as tf-keras -> TFLite -> TOSA lowers it.

``fp32_lstm_step(hidden, features)`` makes the graph the converter gives for
``LSTM(hidden, stateful=True)`` on one time step of ``features`` values followed by a
``Dense(outputs)``: two 1x1 CONV2Ds (input and recurrent products, 4 x hidden channels in
Keras gate order i, f, g, o), their sum plus the bias, four SLICEs, SIGMOID x3 and TANH,
``c' = f * c + i * g``, ``h' = o * tanh(c')``, the state in two fp32 variables. Weights
are seeded random values. Used by ``notebooks/lstm_streaming.ipynb`` to sweep the hidden
size and by the tests (any size, not only the committed examples).
"""

from __future__ import annotations

import numpy as np

from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.ops import Op

F32 = DType.FP32


def _dense(b: GraphBuilder, x4: str, weights: np.ndarray, rng: np.random.Generator) -> str:
    """A 1x1 CONV2D of a [1, 1, 1, K] value with ``weights`` [N, K]: [1, 1, 1, N]."""
    n, k = weights.shape
    w = b.const(None, weights.reshape(n, 1, 1, k).astype(np.float32))
    zero = b.const(None, np.zeros(1, np.float32))
    return b.op(Op.CONV2D, [x4, w, zero, zero, zero], pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1],
                acc_type=F32)


def fp32_lstm_step(hidden: int, features: int, outputs: int = 4, seed: int = 0) -> Graph:
    """The graph of one stateful LSTM step and a dense layer (see the module doc)."""
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(hidden + features)
    b = GraphBuilder()
    x = b.input("x", (1, 1, features), F32)
    h_var = b.variable("h", (1, hidden), F32, np.zeros((1, hidden)))
    c_var = b.variable("c", (1, hidden), F32, np.zeros((1, hidden)))
    shape4 = b.const_shape(None, [1, 1, 1, hidden])
    shape2 = b.const_shape(None, [1, 4 * hidden])
    h4 = b.op(Op.RESHAPE, [b.variable_read(h_var), shape4])
    recurrent = b.op(Op.RESHAPE, [_dense(b, h4, rng.uniform(-scale, scale, (4 * hidden, hidden)), rng), shape2])
    c_prev = b.variable_read(c_var)
    x4 = b.op(Op.RESHAPE, [x, b.const_shape(None, [1, 1, 1, features])])
    projected = b.op(Op.RESHAPE, [_dense(b, x4, rng.uniform(-scale, scale, (4 * hidden, features)), rng), shape2])
    bias = b.const(None, rng.uniform(-0.1, 0.1, (1, 4 * hidden)).astype(np.float32))
    z = b.op(Op.ADD, [b.op(Op.ADD, [projected, recurrent]), bias])
    size = b.const_shape(None, [1, hidden])
    i, f, g, o = (b.op(Op.SLICE, [z, b.const_shape(None, [0, k * hidden]), size]) for k in range(4))
    no_shift = b.const(None, np.zeros(1, np.int8))
    i, f, o = (b.op(Op.SIGMOID, [t]) for t in (i, f, o))
    g = b.op(Op.TANH, [g])
    c_next = b.op(Op.ADD, [b.op(Op.MUL, [f, c_prev, no_shift]), b.op(Op.MUL, [i, g, no_shift])])
    b.variable_write(c_var, c_next)
    h_next = b.op(Op.MUL, [o, b.op(Op.TANH, [c_next]), no_shift])
    y4 = _dense(b, b.op(Op.RESHAPE, [h_next, shape4]), rng.uniform(-scale, scale, (outputs, hidden)), rng)
    y = b.op(Op.RESHAPE, [y4, b.const_shape(None, [1, outputs])], name="y")
    b.variable_write(h_var, h_next)
    b.output(y)
    return b.build()
