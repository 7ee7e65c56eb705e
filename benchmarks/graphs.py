"""Graphs the benchmarks measure: the example models and a conv-heavy int8 CNN.

:func:`conv_cnn_int8` builds, with :class:`~npu_sim.tosa.builder.GraphBuilder`, a
small int8 image CNN of the kind TFLite's full-integer quantization produces:

    input int8 [1, H, W, C] (scale 1/32, zero point -1)
    -> 3x3 conv C->2C           + RESCALE + CLAMP (ReLU6)   stride 1
    -> 3x3 conv 2C->2C          + RESCALE + CLAMP (ReLU6)   stride 1
    -> 3x3 conv 2C->4C          + RESCALE + CLAMP (ReLU6)   stride 2 (SAME padding)
    -> 3x3 conv 4C->4C          + RESCALE + CLAMP (ReLU6)   stride 1
    -> 1x1 conv 4C->2C          + RESCALE (no activation; output scale 16/255, zero point 0)

Quantization is what a converter would write: float weights drawn with He
initialisation, quantized per output channel symmetrically (int8 in [-127, 127],
zero point 0); int32 biases at scale ``input_scale * weight_scale[c]``; every
activation at scale 8/255 with zero point -128 (range [0, 8]), ReLU6 being a
CLAMP to [q(0), q(6)] = [-128, 63]; RESCALE multipliers and shifts from
``input_scale * weight_scale[c] / output_scale`` (scale32, DOUBLE_ROUND,
per channel). The default 1x56x56x32 input gives 353 M MACs.

:func:`benchmark_graphs` lists every graph by name with a loader; the
``.tosa`` of a built graph comes from :func:`tosa_file` (written with our own
flatbuffer writer, for tools that read files: tosa_reference_model, vela).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from npu_sim.inputs import random_array
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.ops import Op

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

#: example models the quality and speed benchmarks measure (the int8 networks first)
EXAMPLE_NAMES = ("ds_cnn_kws_int8", "lstm_stateful_int8", "conv_rescale_int8", "add_mul_fp32",
                 "cond_if_int32", "while_loop_int32", "variable_counter_int32")

INPUT_SCALE, INPUT_ZP = 1 / 32, -1
ACT_SCALE, ACT_ZP = 8 / 255, -128        # activations after ReLU6: range [0, 8]
OUT_SCALE, OUT_ZP = 16 / 255, 0          # the last layer (no activation): range [-8, 8]
RELU6_MAX = round(6 / ACT_SCALE) + ACT_ZP  # 63


def quantize_multiplier(real: float) -> tuple[int, int]:
    """``(multiplier, shift)`` with ``multiplier * 2**-shift == real`` to 31 bits (scale32)."""
    if not 0 < real < 1 << 30:
        raise ValueError(f"scale {real} cannot be a RESCALE multiplier")
    mantissa, exponent = math.frexp(real)          # real = mantissa * 2**exponent, 0.5 <= m < 1
    multiplier = round(mantissa * (1 << 31))
    if multiplier == 1 << 31:                      # rounding reached 1.0
        multiplier //= 2
        exponent += 1
    shift = 31 - exponent
    if not 2 <= shift <= 62:
        raise ValueError(f"scale {real} needs shift {shift}, outside RESCALE's 2..62")
    return multiplier, shift


def _conv_layer(b: GraphBuilder, x: str, in_scale: float, in_zp: int, out_channels: int, *,
                kernel: int, stride: int, relu6: bool, rng: np.random.Generator, name: str) -> str:
    """CONV2D (int8, per-channel weights) + RESCALE to int8 [+ CLAMP as ReLU6]."""
    out_scale, out_zp = (ACT_SCALE, ACT_ZP) if relu6 else (OUT_SCALE, OUT_ZP)
    _, height, width, in_channels = b.type_of(x).shape
    fan_in = kernel * kernel * in_channels
    weights = rng.normal(0.0, math.sqrt(2.0 / fan_in), size=(out_channels, kernel, kernel, in_channels))
    weight_scale = np.abs(weights).reshape(out_channels, -1).max(axis=1) / 127.0
    q_weights = np.clip(np.round(weights / weight_scale[:, None, None, None]), -127, 127).astype(np.int8)
    bias = rng.normal(0.0, 0.1, size=out_channels)
    q_bias = np.round(bias / (in_scale * weight_scale)).astype(np.int32)
    if stride == 1:
        pad = (kernel // 2,) * 4
    else:  # TFLite SAME: the extra row/column of padding goes at the bottom/right
        pad_h = max((math.ceil(height / stride) - 1) * stride + kernel - height, 0)
        pad_w = max((math.ceil(width / stride) - 1) * stride + kernel - width, 0)
        pad = (pad_h // 2, pad_h - pad_h // 2, pad_w // 2, pad_w - pad_w // 2)
    acc = b.op(Op.CONV2D, [x, b.const(f"{name}_weights", q_weights), b.const(f"{name}_bias", q_bias),
                           b.const(f"{name}_input_zp", np.array([in_zp], np.int8)),
                           b.const(f"{name}_weight_zp", np.array([0], np.int8))],
               pad=pad, stride=(stride, stride), dilation=(1, 1), acc_type=DType.INT32,
               name=f"{name}_acc")
    pairs = [quantize_multiplier(in_scale * s / out_scale) for s in weight_scale]
    multiplier = np.array([m for m, _ in pairs], np.int32)
    shift = np.array([s for _, s in pairs], np.int8)
    y = b.op(Op.RESCALE, [acc, b.const(f"{name}_multiplier", multiplier),
                          b.const(f"{name}_shift", shift),
                          b.const(f"{name}_rescale_input_zp", np.array([0], np.int32)),
                          b.const(f"{name}_rescale_output_zp", np.array([out_zp], np.int8))],
             shape=b.type_of(acc).shape, dtype=DType.INT8, scale32=True, rounding_mode="DOUBLE_ROUND",
             per_channel=True, input_unsigned=False, output_unsigned=False,
             name=f"{name}_out" if not relu6 else f"{name}_rescaled")
    if relu6:
        y = b.op(Op.CLAMP, [y], min_val=np.int8(ACT_ZP).tobytes(), max_val=np.int8(RELU6_MAX).tobytes(),
                 nan_mode="PROPAGATE", name=f"{name}_out")
    return y


def conv_cnn_int8(height: int = 56, width: int = 56, channels: int = 32, seed: int = 0) -> Graph:
    """The conv-heavy int8 CNN of the module doc (input ``[1, height, width, channels]``)."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    x = b.input("image", (1, height, width, channels), DType.INT8)
    layers = ((2 * channels, 3, 1, True), (2 * channels, 3, 1, True), (4 * channels, 3, 2, True),
              (4 * channels, 3, 1, True), (2 * channels, 1, 1, False))
    scale, zp = INPUT_SCALE, INPUT_ZP
    for index, (out_channels, kernel, stride, relu6) in enumerate(layers, start=1):
        x = _conv_layer(b, x, scale, zp, out_channels, kernel=kernel, stride=stride, relu6=relu6,
                        rng=rng, name=f"conv{index}")
        scale, zp = ACT_SCALE, ACT_ZP
    b.output(x)
    return b.build()


def random_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs in the graph's input order (npu_sim.inputs.random_array, as ``--random-inputs``)."""
    rng = np.random.default_rng(seed)
    return {name: random_array(t, rng) for name, t in graph.input_types.items()}


@dataclass(frozen=True)
class BenchGraph:
    """A named benchmark graph: ``load()`` gives the Graph, ``path`` its .tosa if it has one."""

    name: str
    load: Callable[[], Graph]
    path: Path | None = None


def _example(name: str) -> BenchGraph:
    path = EXAMPLES / f"{name}.tosa"

    def load() -> Graph:
        from npu_sim.api import load_graph

        return load_graph(path)

    return BenchGraph(name, load, path)


#: the conv-heavy CNN's name in tables and result files
CONV_CNN = "conv_cnn_int8_56x56x32"


def benchmark_graphs(names: list[str] | None = None) -> list[BenchGraph]:
    """Every benchmark graph (or those in ``names``), examples first, then the conv CNN."""
    graphs = [_example(n) for n in EXAMPLE_NAMES] + [BenchGraph(CONV_CNN, conv_cnn_int8)]
    if names is None:
        return graphs
    by_name = {g.name: g for g in graphs}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown graph(s) {', '.join(unknown)} (known: {', '.join(by_name)})")
    return [by_name[n] for n in names]


def tosa_file(bench: BenchGraph, directory: Path, graph: Graph | None = None) -> Path:
    """The graph's .tosa: the example file itself, or ``graph`` written into ``directory``."""
    if bench.path is not None:
        return bench.path
    from npu_sim.tosa.loader import save_graph

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{bench.name}.tosa"
    save_graph(graph if graph is not None else bench.load(), path)
    return path
