"""Sinking: a feature map's producer runs just before its first reader where that frees bytes."""

import numpy as np

from npu_sim.hw.config import load_hw_config
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.passes import sinking
from scheduler.passes.sinking import feature_map_peak_bytes, sink_feature_maps, sunk_order
from scheduler.schedule import lower_graph
from tests.scheduler.graphs import _widen, check_end_to_end, conv_block


def _residual(skip_of):
    """A 3-layer branch and a skip path added at the end; ``skip_of(b, x)`` makes the skip."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 8), DType.INT8)
    skip = skip_of(b, x)
    y = conv_block(b, x, 8, seed=1)
    y = conv_block(b, y, 8, depthwise=True, seed=2)
    y = conv_block(b, y, 8, kernel=1, pad=0, seed=3, relu=False)
    b.output(b.op(Op.ADD, [_widen(b, y), _widen(b, skip) if b.type_of(skip).dtype is DType.INT8 else skip]))
    return b.build()


def _names(ops):
    return [op.name.split("(")[0] + "(" + op.outputs[0] + ")" if op.outputs else op.name for op in ops]


def test_the_int32_skip_runs_just_before_the_add_that_reads_it():
    lowered = lower_graph(_residual(lambda b, x: _widen(b, x)), load_hw_config("tiny"))   # (tiny: no sinking)
    assert _names(lowered.main.ops) == ["stage x(x@tcm)", "RESCALE(rescale_4)", "CONV2D(clamp_14)",
                                        "DEPTHWISE_CONV2D(clamp_24)", "CONV2D(add_39)"]
    # its 2,048 int32 bytes wait two operations for the ADD; x stays live for the first conv anyway
    assert _names(sunk_order(lowered.main, lowered.values, 2048)) == [
        "stage x(x@tcm)", "CONV2D(clamp_14)", "DEPTHWISE_CONV2D(clamp_24)", "RESCALE(rescale_4)", "CONV2D(add_39)"]


def test_a_fused_skip_path_waits_for_its_reader():
    """The skip is a 3x3 conv to 32 channels then a 1x1 conv to 8, fused into the final ADD's
    operation: the 2,048-byte 32-channel map moves to just before it (x stays live for the branch's
    first conv anyway); the other operations keep their order."""
    def skip(b, x):
        return conv_block(b, conv_block(b, x, 32, seed=5), 8, kernel=1, pad=0, seed=6)

    lowered = lower_graph(_residual(skip), load_hw_config("tiny"))
    assert _names(lowered.main.ops) == ["stage x(x@tcm)", "CONV2D(clamp_9)", "CONV2D(clamp_29)",
                                        "DEPTHWISE_CONV2D(clamp_39)", "CONV2D(rescale_53)", "CONV2D(add_59)"]
    assert _names(sunk_order(lowered.main, lowered.values, 2048)) == [
        "stage x(x@tcm)", "CONV2D(clamp_29)", "DEPTHWISE_CONV2D(clamp_39)", "CONV2D(rescale_53)", "CONV2D(clamp_9)",
        "CONV2D(add_59)"]


def test_sunk_order_is_bit_exact_on_an_ethos_u():
    hw = load_hw_config("ethos-u55-256")
    graph = _residual(lambda b, x: _widen(b, x))
    assert hw.stripes.enabled
    check_end_to_end(graph, hw)



def test_vectors_computed_early_wait_for_their_readers():
    """An unrolled recurrence's input projections are ready at the start but each is read only
    at its step; computed first, all of them stay live together (the keyword LSTM on the U55: 23
    KB of its TCM). Each moves to just before its step: vectors, not maps of rows, move too."""
    b = GraphBuilder()
    xs = [b.input(f"x{t}", (1, 1, 1, 64), DType.INT32) for t in range(3)]
    h = b.input("h", (1, 1, 1, 64), DType.INT32)
    shift = b.const(None, np.array([0], dtype=np.int8))
    projections = [b.op(Op.MUL, [x, x, shift]) for x in xs]
    for projection in projections:
        h = b.op(Op.SUB, [b.op(Op.MUL, [h, h, shift]), projection])
    b.output(h)
    hw = load_hw_config("ethos-u85-256")   # (one elementwise operator per operation)
    unsunk = hw.model_copy(update={"stripes": hw.stripes.model_copy(update={"enabled": False})})
    lowered = lower_graph(b.build(), unsunk)
    first = [op for op in lowered.main.ops if op.outputs[0] in projections]
    lowered.main.ops = first + [op for op in lowered.main.ops if op not in first]   # projections first
    assert _names(sunk_order(lowered.main, lowered.values, 2048)) == [
        "MUL(mul_4)", "MUL(mul_1)", "SUB(sub_5)", "MUL(mul_6)", "MUL(mul_2)", "SUB(sub_7)", "MUL(mul_8)", "MUL(mul_3)",
        "SUB(sub_9)"]


def _gated_steps(steps: int):
    """An unrolled recurrence whose input projections (1 KiB each, from a 1 KiB weight of its
    own) are split into two gates by a RESHAPE and two SLICEs (copies that only rename its
    bytes), each gate read at its step; the projections are placed first."""
    b = GraphBuilder()
    shift = b.const(None, np.array([0], dtype=np.int8))
    xs = [b.input(f"x{t}", (1, 1, 1, 256), DType.INT32) for t in range(steps)]
    h = b.input("h", (1, 1, 1, 128), DType.INT32)
    projections = [b.op(Op.MUL, [x, b.const(None, np.full((1, 1, 1, 256), t + 1, dtype=np.int32)), shift])
                   for t, x in enumerate(xs)]
    for projection in projections:
        gates = b.op(Op.RESHAPE, [projection, b.const_shape(None, [1, 1, 2, 128])])
        first, second = (b.op(Op.SLICE, [gates, b.const_shape(None, [0, 0, k, 0]), b.const_shape(None, [1, 1, 1, 128])])
                         for k in (0, 1))
        h = b.op(Op.SUB, [b.op(Op.SUB, [b.op(Op.MUL, [h, h, shift]), first]), second])
    b.output(h)
    hw = load_hw_config("ethos-u85-256")
    unsunk = hw.model_copy(update={"stripes": hw.stripes.model_copy(update={"enabled": False})})
    lowered = lower_graph(b.build(), unsunk)
    first_ops = [op for op in lowered.main.ops if op.outputs[0] in projections]
    lowered.main.ops = first_ops + [op for op in lowered.main.ops if op not in first_ops]
    return lowered, projections


def test_a_projection_moves_with_the_copies_that_split_it_into_gates():
    """Four 1 KiB projections waiting together against one at a time: 5 KiB of feature maps
    at the peak become 2 KiB, a saving above what a moved operation's constants (its 1 KiB
    weight) may add beside its new neighbours, so each projection, its RESHAPE and its first
    gate's SLICE run just before that gate's reader; the second SLICE waits for its own."""
    lowered, projections = _gated_steps(4)
    order = sunk_order(lowered.main, lowered.values, 2048)
    assert sorted(map(id, order)) == sorted(map(id, lowered.main.ops))
    labels = [op.name.split("(")[0] for op in order]
    for projection in projections:
        at = next(i for i, op in enumerate(order) if op.outputs[0] == projection)
        assert labels[at + 1:at + 3] == ["RESHAPE", "SLICE"]
        assert order[at + 2].sources[0] == order[at + 1].outputs[0] and order[at + 1].sources[0] == projection
    assert feature_map_peak_bytes(lowered.main.ops, lowered.values) == 5120
    assert feature_map_peak_bytes(order, lowered.values) == 2048



def test_a_producer_follows_its_sunk_reader_in_a_later_round(monkeypatch):
    """Each step's input is widened twice (int8 -> int16 -> int32) right away, the two casts next
    to each other: the first cast's reader is the operation after it, so only the second moves in
    the first round; once it has, the first cast's result waits too, and a second round moves it
    after it (a fused TFLite LSTM's input projections and their casts, on the U85: 2.8 KB of
    feature maps live at once instead of 1.3)."""
    b = GraphBuilder()
    xs = [b.input(f"x{t}", (1, 1, 1, 64), DType.INT8) for t in range(3)]
    h = b.input("h", (1, 1, 1, 64), DType.INT32)
    shift = b.const(None, np.array([0], dtype=np.int8))
    casts = [b.op(Op.CAST, [x], dtype=DType.INT16) for x in xs]
    wides = [b.op(Op.CAST, [c], dtype=DType.INT32) for c in casts]
    for wide in wides:
        h = b.op(Op.SUB, [b.op(Op.MUL, [h, h, shift]), wide])
    b.output(h)
    hw = load_hw_config("ethos-u85-256")
    unsunk = hw.model_copy(update={"stripes": hw.stripes.model_copy(update={"enabled": False})})
    early = [name for pair in zip(casts, wides) for name in pair]

    def lowered_early():
        lowered = lower_graph(b.build(), unsunk)
        first = sorted([op for op in lowered.main.ops if op.outputs[0] in early],
                       key=lambda op: early.index(op.outputs[0]))
        lowered.main.ops = first + [op for op in lowered.main.ops if op not in first]   # casts first, in pairs
        return lowered

    lowered = lowered_early()
    sink_feature_maps(lowered, 2048)
    names = _names(lowered.main.ops)
    for cast, wide in zip(casts, wides):   # each pair just before its step (a MUL and the SUB reading it)
        at = names.index(f"CAST({cast})")
        assert names[at + 1] == f"CAST({wide})" and names[at + 2].split("(")[0] in ("MUL", "SUB")
    monkeypatch.setattr(sinking, "MAX_ROUNDS", 1)
    once = lowered_early()
    sink_feature_maps(once, 2048)
    assert _names(once.main.ops)[:3] == [f"CAST({c})" for c in casts]   # one round moves the second casts only
    assert feature_map_peak_bytes(lowered.main.ops, lowered.values) < feature_map_peak_bytes(once.main.ops, once.values)
