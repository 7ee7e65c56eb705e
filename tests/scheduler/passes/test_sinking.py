"""Sinking: a feature map's producer runs just before its first reader where that frees bytes."""

from npu_sim.hw.config import load_hw_config
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.passes.sinking import sunk_order
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
    assert _names(sunk_order(lowered.main, lowered.values)) == [
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
    assert _names(sunk_order(lowered.main, lowered.values)) == [
        "stage x(x@tcm)", "CONV2D(clamp_29)", "DEPTHWISE_CONV2D(clamp_39)", "CONV2D(rescale_53)", "CONV2D(clamp_9)",
        "CONV2D(add_59)"]


def test_sunk_order_is_bit_exact_on_an_ethos_u():
    hw = load_hw_config("ethos-u55-256")
    graph = _residual(lambda b, x: _widen(b, x))
    assert hw.stripes.enabled
    check_end_to_end(graph, hw)
