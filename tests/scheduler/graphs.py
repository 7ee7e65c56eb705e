"""Small graphs and machines for the scheduler tests (seeded, deterministic)."""

from __future__ import annotations

import numpy as np

from npu_sim.hw.config import deep_merge, hw_config_from_dict, load_hw_config
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.ops import Op


def machine(preset: str = "tiny", tcm_bytes: int | None = None, var_bytes: int | None = None,
            dma_engines: int | None = None):
    """A preset, optionally with another TCM / variable SRAM size or DMA engine count."""
    hw = load_hw_config(preset)
    data = hw.model_dump(mode="json")
    override: dict = {}
    if tcm_bytes is not None:
        override["tcm"] = {"size_bytes": tcm_bytes, "bank_count": 1}
    if var_bytes is not None:
        override["variable_sram"] = {"size_bytes": var_bytes}
    if dma_engines is not None:
        override["dma"] = {"engine_count": dma_engines}
    return hw_config_from_dict(deep_merge(data, override), f"{preset}-test") if override else hw


def _rescale(b, x, out_dtype=DType.INT8, channels=1, multiplier=1 << 30, shift=38, izp=0, ozp=0):
    in_dtype = b.type_of(x).dtype
    per_channel = channels > 1
    mult = b.const(None, np.full((channels,), multiplier, dtype=np.int32), DType.INT32)
    sh = b.const(None, np.full((channels,), shift, dtype=np.int8), DType.INT8)
    zi = b.const(None, np.array([izp]), in_dtype)
    zo = b.const(None, np.array([ozp]), out_dtype)
    return b.op(Op.RESCALE, [x, mult, sh, zi, zo], dtype=out_dtype, shape=b.type_of(x).shape,
                scale32=True, rounding_mode="SINGLE_ROUND", per_channel=per_channel)


def conv_block(b, x, out_channels, kernel=3, stride=1, pad=1, seed=0, depthwise=False, relu=True):
    """CONV2D (or DEPTHWISE_CONV2D) + RESCALE + CLAMP on an int8 NHWC tensor."""
    rng = np.random.default_rng(seed)
    n, h, w, c = b.type_of(x).shape
    if depthwise:
        weight = b.const(None, rng.integers(-8, 8, (kernel, kernel, c, 1), dtype=np.int8))
        out_channels = c
    else:
        weight = b.const(None, rng.integers(-8, 8, (out_channels, kernel, kernel, c), dtype=np.int8))
    bias = b.const(None, rng.integers(-500, 500, (out_channels,), dtype=np.int32))
    zp = b.const(None, np.array([0], dtype=np.int8))
    op = Op.DEPTHWISE_CONV2D if depthwise else Op.CONV2D
    acc = b.op(op, [x, weight, bias, zp, zp], pad=(pad,) * 4, stride=(stride, stride), dilation=(1, 1),
               acc_type=DType.INT32)
    y = _rescale(b, acc, channels=out_channels, multiplier=1 << 30, shift=36)
    if relu:
        y = b.op(Op.CLAMP, [y], min_val=np.int8(0).tobytes(), max_val=np.int8(127).tobytes(),
                 nan_mode="PROPAGATE")
    return y


def small_cnn(size: int = 16, channels: int = 8) -> Graph:
    """conv -> depthwise conv -> conv (1x1) + residual add -> max pool -> matmul head."""
    b = GraphBuilder()
    x = b.input("image", (1, size, size, 4), DType.INT8)
    y1 = conv_block(b, x, channels, seed=1)
    y2 = conv_block(b, y1, channels, seed=2, depthwise=True)
    y3 = conv_block(b, y2, channels, kernel=1, pad=0, seed=3, relu=False)
    s = b.op(Op.ADD, [_widen(b, y3), _widen(b, y1)])
    s8 = _rescale(b, s, channels=1, multiplier=1 << 30, shift=31)
    p = b.op(Op.MAX_POOL2D, [s8], kernel=(2, 2), stride=(2, 2), pad=(0, 0, 0, 0), nan_mode="PROPAGATE")
    b.output(p)
    return b.build()


def _widen(b, x):
    return _rescale(b, x, out_dtype=DType.INT32, shift=30)


def random_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for name, t in graph.input_types.items():
        dt = t.dtype.numpy_dtype
        if t.dtype.is_float:
            out[name] = rng.standard_normal(t.shape).astype(dt)
        elif t.dtype is DType.BOOL:
            out[name] = rng.integers(0, 2, t.shape).astype(bool)
        else:
            lo, hi = t.dtype.int_range
            out[name] = rng.integers(max(lo, -100), min(hi, 100) + 1, t.shape).astype(dt)
    return out


def _zp(b, dtype=DType.INT8):
    return b.const(None, np.array([0]), dtype)


def layout_graph() -> Graph:
    """Data layout and gather/scatter on int8: PAD, SLICE, CONCAT, TRANSPOSE, REVERSE, TILE,
    RESHAPE (aliased and copied), GATHER, SCATTER, IDENTITY."""
    b = GraphBuilder()
    x = b.input("x", (1, 6, 10, 8), DType.INT8)
    p = b.op(Op.PAD, [x, b.const_shape(None, [0, 0, 1, 2, 2, 1, 0, 0]), b.const(None, np.array([-3], np.int8))])
    s = b.op(Op.SLICE, [p, b.const_shape(None, [0, 1, 2, 0]), b.const_shape(None, [1, 6, 10, 8])])
    c = b.op(Op.CONCAT, [s, x], axis=3)                                       # [1, 6, 10, 16]
    t = b.op(Op.TRANSPOSE, [c], perms=(0, 2, 1, 3))                           # [1, 10, 6, 16]
    r = b.op(Op.REVERSE, [t], axis=1)
    tl = b.op(Op.TILE, [r, b.const_shape(None, [1, 1, 2, 1])])               # [1, 10, 12, 16]
    v = b.op(Op.RESHAPE, [tl, b.const_shape(None, [10, 12, 16])])            # aliased: values [N, K, C]
    idx = b.const("idx", np.array([[3, 0, 11, 5]] * 10, dtype=np.int32))
    g = b.op(Op.GATHER, [v, idx])                                            # [10, 4, 16]
    sc = b.op(Op.SCATTER, [v, idx, g])
    out = b.op(Op.RESHAPE, [sc, b.const_shape(None, [1, 10, 12, 16])], name="layout_out")
    ident = b.op(Op.IDENTITY, [g], name="gathered")
    b.output(out, ident)
    return b.build()


def float_graph() -> Graph:
    """fp32 elementwise, transcendental, reductions, pooling, resize, matmul, FFT and casts."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 4), DType.FP32)
    y = b.input("y", (1, 8, 8, 4), DType.FP32)
    a = b.op(Op.ADD, [x, y])
    m = b.op(Op.MUL, [a, y, b.const(None, np.array([0], np.int8))])
    sg = b.op(Op.SIGMOID, [m])
    th = b.op(Op.TANH, [a])
    e = b.op(Op.EXP, [b.op(Op.CLAMP, [x], min_val=np.float32(-4).tobytes(), max_val=np.float32(4).tobytes(),
                                       nan_mode="PROPAGATE")])
    mx = b.op(Op.MAXIMUM, [sg, th], nan_mode="PROPAGATE")
    sel = b.op(Op.SELECT, [b.op(Op.GREATER, [x, y]), mx, e])
    rs = b.op(Op.REDUCE_SUM, [sel], axis=2)                                  # [1, 8, 1, 4]
    am = b.op(Op.ARGMAX, [sel], axis=3, nan_mode="PROPAGATE")                # [1, 8, 8]
    ap = b.op(Op.AVG_POOL2D, [sel, _zp(b, DType.FP32), _zp(b, DType.FP32)], kernel=(3, 3), stride=(1, 1),
              pad=(1, 1, 1, 1), acc_type=DType.FP32)
    rz = b.op(Op.RESIZE, [ap, b.const_shape(None, [2, 1, 2, 1]), b.const_shape(None, [0, 0]),
                          b.const_shape(None, [0, 0])], dtype=DType.FP32, mode="BILINEAR")  # [1, 15, 15, 4]
    mm_a = b.op(Op.RESHAPE, [ap, b.const_shape(None, [1, 64, 4])])
    w = b.const("w", np.random.default_rng(5).standard_normal((1, 4, 6)).astype(np.float32))
    mm = b.op(Op.MATMUL, [mm_a, w, _zp(b, DType.FP32), _zp(b, DType.FP32)], dtype=DType.FP32)  # [1, 64, 6]
    re, im = b.op(Op.FFT2D, [b.op(Op.RESHAPE, [th, b.const_shape(None, [4, 8, 8])]),
                             b.op(Op.RESHAPE, [sg, b.const_shape(None, [4, 8, 8])])],
                  outputs=[((4, 8, 8), DType.FP32), ((4, 8, 8), DType.FP32)], inverse=False)
    rre, rim = b.op(Op.RFFT2D, [b.op(Op.RESHAPE, [e, b.const_shape(None, [4, 8, 8])])],
                    outputs=[((4, 8, 5), DType.FP32), ((4, 8, 5), DType.FP32)])
    ci = b.op(Op.CAST, [rs], dtype=DType.INT16)
    b.output(rs, am, rz, mm, re, im, rre, rim, ci)
    return b.build()


def int_graph() -> Graph:
    """int8 matmul and transpose conv with epilogues, TABLE, int16 pooling, shifts and logic."""
    rng = np.random.default_rng(7)
    b = GraphBuilder()
    x = b.input("x", (1, 6, 6, 8), DType.INT8)
    a = b.input("a", (2, 9, 16), DType.INT8)
    w = b.const(None, rng.integers(-20, 20, (2, 16, 12), dtype=np.int8))
    mm = b.op(Op.MATMUL, [a, w, _zp(b), _zp(b)])                              # int32 [2, 9, 12]
    mm8 = _rescale(b, mm, shift=35)
    tw = b.const(None, rng.integers(-8, 8, (4, 3, 3, 8), dtype=np.int8))
    tb = b.const(None, rng.integers(-100, 100, (4,), dtype=np.int32))
    tc = b.op(Op.TRANSPOSE_CONV2D, [x, tw, tb, _zp(b), _zp(b)], out_pad=(0, 0, 0, 0), stride=(2, 2),
              acc_type=DType.INT32)                                         # [1, 13, 13, 4]
    tc8 = _rescale(b, tc, channels=4, shift=34)
    table = b.const(None, rng.integers(-128, 128, (256,), dtype=np.int8))
    tb8 = b.op(Op.TABLE, [tc8, table])
    mp = b.op(Op.MAX_POOL2D, [tb8], kernel=(2, 2), stride=(2, 2), pad=(0, 1, 0, 1), nan_mode="PROPAGATE")
    wide = _rescale(b, mp, out_dtype=DType.INT32, shift=30)
    sh = b.op(Op.LOGICAL_LEFT_SHIFT, [wide, b.const(None, np.array([[[[3]]]], dtype=np.int32))])
    ng = b.op(Op.NEGATE, [sh, _zp(b, DType.INT32), _zp(b, DType.INT32)])
    bx = b.op(Op.BITWISE_XOR, [ng, b.const(None, np.array([[[[0x5A5A]]]], dtype=np.int32))])
    rm = b.op(Op.REDUCE_MAX, [bx], axis=1)
    b.output(mm8, rm)
    return b.build()


def elementwise_tree(shape=(1, 8), broadcast=False, shared=False) -> Graph:
    """MUL(ADD(RESCALE(a), RESCALE(c)), d) -> output: an LSTM gate's arithmetic (int8 -> int32).

    ``broadcast``: ``c`` is (1, 1), broadcast by the ADD; ``shared``: the MUL reads
    RESCALE(a) instead of ``d`` (a result with two readers)."""
    b = GraphBuilder()
    a = b.input("a", shape, DType.INT8)
    c = b.input("c", (1,) * len(shape) if broadcast else shape, DType.INT8)
    ra = _rescale(b, a, out_dtype=DType.INT32, shift=30)
    rc = _rescale(b, c, out_dtype=DType.INT32, shift=31)
    s = b.op(Op.ADD, [ra, rc], shape, DType.INT32)
    d = ra if shared else b.input("d", shape, DType.INT32)
    b.output(b.op(Op.MUL, [s, d, b.const(None, np.array([3], np.int8))], shape, DType.INT32))
    return b.build()


def conv3d_graph() -> Graph:
    rng = np.random.default_rng(11)
    b = GraphBuilder()
    x = b.input("vol", (1, 4, 6, 6, 3), DType.INT8)
    w = b.const(None, rng.integers(-8, 8, (5, 2, 3, 3, 3), dtype=np.int8))
    bias = b.const(None, rng.integers(-50, 50, (5,), dtype=np.int32))
    c = b.op(Op.CONV3D, [x, w, bias, _zp(b), _zp(b)], pad=(0, 1, 1, 1, 1, 1), stride=(1, 1, 1),
             dilation=(1, 1, 1), acc_type=DType.INT32)
    b.output(_rescale(b, c, channels=5, shift=33))
    return b.build()


def check_end_to_end(graph: Graph, hw, invocations: int = 1, seed: int = 0, inputs=None,
                     **schedule_options):
    """Schedule, verify the plan, simulate and compare with the reference executor bit for bit.

    Returns (program, simulation result). Variables persist across invocations on both sides.
    ``schedule_options`` go to :func:`scheduler.schedule.schedule`.
    """
    from npu_sim.reference.session import Session
    from npu_sim.simulator import simulate_program
    from scheduler.schedule import schedule
    from scheduler.verify import verify_program

    program = schedule(graph, hw, **schedule_options)
    verify_program(program)
    if inputs is None:
        inputs = [random_inputs(graph, seed=seed + k) for k in range(invocations)]
    session = Session(graph)
    expected = [session.invoke(x) for x in inputs]
    result = simulate_program(program, hw, inputs)
    for k, (want, got) in enumerate(zip(expected, result.outputs)):
        assert set(want) == set(got)
        for name in want:
            assert got[name].dtype == want[name].dtype, (k, name)
            assert np.array_equal(got[name], want[name], equal_nan=want[name].dtype.kind == "f"), (k, name)
    return program, result


def check_against_reference_model(graph, tmp_path, presets) -> None:
    """The simulated NPU's outputs on ``presets`` equal Arm's TOSA reference model's (the graph
    saved and run by tosa-tools), bit for bit, for one int8 input."""
    import npu_sim
    from npu_sim.tosa.loader import save_graph
    from tests.oracle import run_graph_bytes

    save_graph(graph, tmp_path / "model.tosa")
    (name, t), = graph.input_types.items()
    x = np.random.default_rng(9).integers(-128, 128, size=t.shape).astype(np.int8)
    want = run_graph_bytes((tmp_path / "model.tosa").read_bytes(), [x], list(graph.output_types.values()))
    for preset in presets:
        outputs = npu_sim.simulate(graph, preset, {name: x}).outputs
        for got, expected in zip(outputs.values(), want):
            np.testing.assert_array_equal(got.reshape(expected.shape), expected, err_msg=preset)
