"""Cascading: a consumer on another unit follows its producer's tiles and overlaps it."""

from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from tests.scheduler.graphs import _rescale, check_end_to_end, conv_block, machine


def _conv_then_reduce(size: int = 24, channels: int = 32):
    """CONV2D + RESCALE + CLAMP + RESCALE to int32 (the MAC array), then REDUCE_SUM over the
    rows and over the columns (the vector unit): a global average pool after the last conv."""
    b = GraphBuilder()
    x = b.input("x", (1, size, size, 16), DType.INT8)
    y = _rescale(b, conv_block(b, x, channels, seed=5), out_dtype=DType.INT32, channels=1, shift=30)
    b.output(b.op(Op.REDUCE_SUM, [b.op(Op.REDUCE_SUM, [y], axis=1)], axis=2))
    return b.build()


def _records(program, result, op_name: str):
    """The compute commands of the operation named ``op_name...``, in the order they ran."""
    ids = {c.id for c in program.walk() if getattr(c, "name", "").startswith(op_name)}
    return [r for r in result.trace.commands if r.id in ids and r.kind == "compute"]


def test_reduction_follows_the_convolutions_tiles_and_overlaps_it():
    program, result = check_end_to_end(_conv_then_reduce(), machine("edge"))
    convs = _records(program, result, "CONV2D")
    reduces = _records(program, result, "REDUCE_SUM")[:-1]   # the rows' reduction
    assert len(convs) >= 2 and len(reduces) >= 2
    # the first part of the reduction runs on the vector unit while the array still works
    assert reduces[0].start_cycle < convs[-1].end_cycle
    # the stream interleaves them: the buffers of both are live together, as they are in time
    order = [c.id for c in program.walk()]
    assert order.index(reduces[0].id) < order.index(convs[-1].id)
    assert reduces[0].unit == "vector" and convs[0].unit == "mac_array"


def _without_cascading(graph, hw):
    from scheduler.codegen import compiler
    original = compiler.follow_producers
    compiler.follow_producers = lambda *args: {}
    try:
        return check_end_to_end(graph, hw)
    finally:
        compiler.follow_producers = original


def test_cascading_shortens_the_run():
    graph, hw = _conv_then_reduce(), machine("edge")
    _, cascaded = check_end_to_end(graph, hw)
    _, alone = _without_cascading(graph, hw)
    assert cascaded.trace.invocations[0].cycles < alone.trace.invocations[0].cycles


def test_a_consumer_on_the_same_unit_is_left_alone():
    """conv -> depthwise conv: both on the MAC array, nothing to overlap."""
    b = GraphBuilder()
    x = b.input("x", (1, 24, 24, 16), DType.INT8)
    b.output(conv_block(b, conv_block(b, x, 32, seed=1), 32, depthwise=True, seed=2))
    graph, hw = b.build(), machine("edge")
    program, _ = check_end_to_end(graph, hw)
    alone, _ = _without_cascading(graph, hw)
    assert program.listing() == alone.listing()


def test_on_a_shared_compute_pipeline_nothing_cascades():
    """ethos-u55-256 runs one compute command at a time: a concatenation of a map and two
    convolutions of it waits for the last convolution's tiles (interleaving its first copies
    with them would overlap nothing and keep its result live beside their buffers)."""
    from npu_sim.hw.config import load_hw_config

    b = GraphBuilder()
    x = b.input("x", (1, 16, 16, 32), DType.INT8)
    a = conv_block(b, x, 32, kernel=1, pad=0, seed=1)
    b.output(b.op(Op.CONCAT, [x, a, conv_block(b, a, 32, kernel=3, pad=1, seed=2)], axis=3))
    graph = b.build()
    program, _ = check_end_to_end(graph, load_hw_config("ethos-u55-256"))
    names = [c.name for c in program.walk() if getattr(c, "unit", None) in ("mac_array", "vector")]
    assert names.count("CONV2D(conv2d_13)+RESCALE(rescale_18)+CLAMP(clamp_19)") > 1   # (in tiles)
    last_conv = max(k for k, n in enumerate(names) if n.startswith("CONV2D"))
    assert min(k for k, n in enumerate(names) if n.startswith("CONCAT")) > last_conv
