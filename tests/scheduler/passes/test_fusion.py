import numpy as np

from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.passes.fusion import ElementwiseRule, EpilogueRule, fuse
from tests.scheduler.graphs import conv_block, elementwise_tree, small_cnn


def _ops(block, group):
    return [block.operators[i].op for i in group]


def _conv_graph(extra_consumer=False, output_intermediate=False):
    b = GraphBuilder()
    x = b.input("x", (1, 5, 5, 2), DType.INT8)
    y = conv_block(b, x, 3, seed=0)
    b.output(y)
    block = b.main.block
    rescale = next(o for o in block.operators if o.op == Op.RESCALE)
    if extra_consumer:
        b.output(rescale.outputs[0])
    if output_intermediate:
        conv = next(o for o in block.operators if o.op == Op.CONV2D)
        b.output(conv.outputs[0])
    return b.build()


def test_conv_rescale_clamp_become_one_group():
    block = _conv_graph().main
    groups = [g for g in fuse(block) if len(g) > 1]
    assert [_ops(block, g) for g in groups] == [[Op.CONV2D, Op.RESCALE, Op.CLAMP]]


def test_every_operator_in_exactly_one_group_ordered_by_last():
    block = small_cnn().main
    groups = fuse(block)
    flat = sorted(i for g in groups for i in g)
    assert flat == list(range(len(block.operators)))
    assert [g[-1] for g in groups] == sorted(g[-1] for g in groups)


def test_residual_add_joins_the_epilogue():
    """With the RESCALE after it: the int32 sum never leaves the unit."""
    block = small_cnn().main
    chains = [_ops(block, g) for g in fuse(block) if len(g) > 1]
    assert [Op.CONV2D, Op.RESCALE, Op.RESCALE, Op.ADD, Op.RESCALE] in chains
    short = EpilogueRule(max_length=4)
    assert [Op.CONV2D, Op.RESCALE, Op.RESCALE, Op.ADD] in [_ops(block, g) for g in fuse(block, rules=(short,))]


def test_no_fusion_through_a_graph_output():
    block = _conv_graph(extra_consumer=True).main
    chains = [_ops(block, g) for g in fuse(block) if len(g) > 1]
    assert chains == [[Op.CONV2D, Op.RESCALE]]
    block = _conv_graph(output_intermediate=True).main
    assert [g for g in fuse(block, rules=(EpilogueRule(),)) if len(g) > 1] == []
    # the convolution's result leaves the unit; its RESCALE and CLAMP chain on the vector unit
    assert [_ops(block, g) for g in fuse(block) if len(g) > 1] == [[Op.RESCALE, Op.CLAMP]]


def test_rules_are_pluggable():
    block = _conv_graph().main
    assert all(len(g) == 1 for g in fuse(block, rules=()))
    short = EpilogueRule(max_length=2)
    assert [_ops(block, g) for g in fuse(block, rules=(short,)) if len(g) > 1] == [[Op.CONV2D, Op.RESCALE]]


def test_no_fusion_when_intermediate_has_two_readers():
    b = GraphBuilder()
    x = b.input("x", (1, 4, 4, 2), DType.INT8)
    w = b.const(None, np.ones((2, 1, 1, 2), np.int8))
    bias = b.const(None, np.zeros((2,), np.int32))
    zp = b.const(None, np.array([0], np.int8))
    acc = b.op(Op.CONV2D, [x, w, bias, zp, zp], pad=(0,) * 4, stride=(1, 1), dilation=(1, 1),
               acc_type=DType.INT32)
    s = b.op(Op.ADD, [acc, acc])
    b.output(s)
    block = b.build().main
    assert all(len(g) == 1 for g in fuse(block))


def _tree_graph(broadcast=False, shared=False):
    return elementwise_tree((1, 8), broadcast=broadcast, shared=shared).main


def test_elementwise_tree_becomes_one_vector_group():
    block = _tree_graph()
    assert [_ops(block, g) for g in fuse(block) if len(g) > 1] == [[Op.RESCALE, Op.RESCALE, Op.ADD, Op.MUL]]


def test_elementwise_tree_stops_at_broadcasts_and_shared_results():
    # the (1, 1) operand's rescale would be broadcast by the ADD: it stays a separate operation
    block = _tree_graph(broadcast=True)
    assert [_ops(block, g) for g in fuse(block) if len(g) > 1] == [[Op.RESCALE, Op.ADD, Op.MUL]]
    # MUL reads the first rescale's result besides the ADD: it must be stored
    block = _tree_graph(shared=True)
    assert [_ops(block, g) for g in fuse(block) if len(g) > 1] == [[Op.RESCALE, Op.ADD, Op.MUL]]


def test_elementwise_tree_length_is_bounded():
    block = _tree_graph()
    assert [_ops(block, g) for g in fuse(block, rules=(ElementwiseRule(max_length=2),)) if len(g) > 1] \
        == [[Op.RESCALE, Op.ADD]]


def test_the_rules_follow_the_hardware():
    """An Ethos-U preset's output pipeline rescales and clamps (no residual ADD), the U65's vector
    unit chains nothing (the U55's chains a residual add's rescales) and it has no LSTM or GRU
    datapath; edge keeps every rule as it is."""
    from npu_sim.hw.config import load_hw_config
    from scheduler.passes.fusion import DEFAULT_RULES, CellRule, rules_for

    block = small_cnn().main
    ethos = rules_for(DEFAULT_RULES, load_hw_config("ethos-u65-256"))
    assert not any(isinstance(r, CellRule) for r in ethos)
    chains = [_ops(block, g) for g in fuse(block, rules=ethos) if len(g) > 1]
    assert chains and all(ops[0] in (Op.CONV2D, Op.DEPTHWISE_CONV2D) and set(ops[1:]) <= {Op.RESCALE, Op.CLAMP}
                          and len(ops) <= 3 for ops in chains)
    u55 = [_ops(block, g) for g in fuse(block, rules=rules_for(DEFAULT_RULES, load_hw_config("ethos-u55-256")))]
    assert [Op.RESCALE, Op.RESCALE, Op.ADD, Op.RESCALE] in u55   # (both widenings: the epilogue narrows only)
    edge = rules_for(DEFAULT_RULES, load_hw_config("edge"))
    assert edge == tuple(r for r in DEFAULT_RULES if r.name not in ("reduction_prologue", "rescale_fold",
                                                                     "source_operator", "source_mean",
                                                                     "source_softmax", "source_activation",
                                                                     "source_squared_difference",
                                                                     "lookup_chain"))
    assert "source_operator" in [r.name for r in ethos]
    assert [Op.CONV2D, Op.RESCALE, Op.RESCALE, Op.ADD, Op.RESCALE] in [_ops(block, g) for g in fuse(block, rules=edge)]


def _global_pool():
    """RESCALE int8 -> int32 (zero point -3), then sums over H and over W: a global pool as the
    TFLite converter writes MEAN."""
    from npu_sim.tosa.builder import GraphBuilder
    from tests.scheduler.graphs import _rescale

    b = GraphBuilder()
    x = b.input("x", (1, 5, 6, 40), DType.INT8)
    wide = _rescale(b, x, out_dtype=DType.INT32, multiplier=1 << 30, shift=30, izp=-3)
    b.output(b.op(Op.REDUCE_SUM, [b.op(Op.REDUCE_SUM, [wide], axis=1)], axis=2))
    return b.build()


def test_a_widening_rescale_joins_its_sum_where_the_npu_lowers_sums():
    """On the U85 (sums over H/W lowered to transposes) the RESCALE and the first REDUCE_SUM are
    one vector operation, bit-exact with the graph; edge keeps them apart."""
    from npu_sim.hw.config import load_hw_config
    from scheduler.passes.fusion import DEFAULT_RULES, rules_for
    from tests.scheduler.graphs import check_end_to_end, machine

    graph = _global_pool()
    u85 = rules_for(DEFAULT_RULES, load_hw_config("ethos-u85-256"))
    assert [Op.RESCALE, Op.REDUCE_SUM] in [_ops(graph.main, g) for g in fuse(graph.main, rules=u85)]
    edge = rules_for(DEFAULT_RULES, load_hw_config("edge"))
    assert all(len(g) == 1 for g in fuse(graph.main, rules=edge))
    program, _ = check_end_to_end(graph, machine("ethos-u85-256"))
    names = [c.name for c in program.walk() if getattr(c, "steps", None)]
    assert any(name.startswith("RESCALE") and "REDUCE_SUM" in name for name in names)


def test_an_ethos_u_epilogue_narrows_once_and_a_transpose_convolution_has_none():
    """The output unit rescales a convolution's sums once: the RESCALE widening them again for a
    residual ADD is an operation of its own (edge keeps it in the epilogue); an Ethos-U writes a
    TRANSPOSE_CONV2D's int32 sums and rescales them apart."""
    from npu_sim.hw.config import load_hw_config
    from scheduler.passes.fusion import DEFAULT_RULES, EpilogueRule, rules_for

    block = small_cnn().main
    u85 = [_ops(block, g) for g in fuse(block, rules=rules_for(DEFAULT_RULES, load_hw_config("ethos-u85-256")))]
    assert [Op.CONV2D, Op.RESCALE] in u85 and [Op.CONV2D, Op.RESCALE, Op.RESCALE] not in u85
    (ethos,) = [r for r in rules_for(DEFAULT_RULES, load_hw_config("ethos-u85-256")) if isinstance(r, EpilogueRule)]
    (edge,) = [r for r in rules_for(DEFAULT_RULES, load_hw_config("edge")) if isinstance(r, EpilogueRule)]
    assert Op.TRANSPOSE_CONV2D not in ethos.anchors and Op.TRANSPOSE_CONV2D in edge.anchors
    assert not ethos.widens and edge.widens
