import numpy as np

import npu_sim
from npu_sim.hw.config import load_hw_config
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.ir.npu_ops import OpKind, ValueKind
from scheduler.passes.folding import fold_constants
from scheduler.passes.lowering import lower
from scheduler.passes.staging import stage
from scheduler.schedule import lower_graph
from tests.scheduler.graphs import (
    _rescale,
    check_against_reference_model,
    check_end_to_end,
    conv_block,
    machine,
    random_inputs,
)


def _graph():
    b = GraphBuilder()
    x = b.input("x", (1, 6, 6, 4), DType.INT32)
    flat = b.const("flat", np.arange(24, dtype=np.int32))
    shaped = b.op(Op.RESHAPE, [flat, b.const_shape(None, [1, 1, 6, 4])], name="shaped")   # folds
    doubled = b.op(Op.ADD, [shaped, shaped], name="doubled")                              # folds
    zero = b.const("zero", np.zeros((1, 1, 6, 4), np.int32))
    bad = b.op(Op.INTDIV, [doubled, zero], name="bad")        # would raise: stays for run time
    y = b.op(Op.ADD, [x, doubled], name="y")
    z = b.op(Op.SUB, [x, bad], name="z")
    b.output(y, z)
    return b.build()


def test_constant_operations_fold_but_errors_wait_for_run_time():
    lowered = lower(_graph())
    assert fold_constants(lowered) == 2
    assert lowered.values["doubled"].kind is ValueKind.CONSTANT
    assert lowered.values["doubled"].data.reshape(-1).tolist() == [2 * v for v in range(24)]
    assert [o.op_label for o in lowered.main.ops] == ["INTDIV", "ADD", "SUB"]


def test_staging_of_re_read_inputs_and_constants():
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 4), DType.INT8)
    e = b.input("e", (1, 8, 8, 4), DType.INT32)
    y = _rescale(b, conv_block(b, x, 4, seed=3), out_dtype=DType.INT32, shift=30)   # the conv re-reads x
    big = b.const("big", np.arange(256, dtype=np.int32).reshape(1, 8, 8, 4))
    s1 = b.op(Op.MAXIMUM, [y, big], nan_mode="PROPAGATE")   # "big" has two readers: staged
    s2 = b.op(Op.MINIMUM, [e, big], nan_mode="PROPAGATE")   # "e" is read once, elementwise: streamed
    b.output(s1, s2)
    graph = b.build()
    lowered = lower(graph)
    stage(lowered, pooled_max_bytes=64)
    copies = [o for o in lowered.main.ops if o.kind is OpKind.COPY]
    assert [(c.sources[0], c.staged) for c in copies] == [("x", True), ("big", True)]
    reader = next(o for o in lowered.main.ops if o.op_label == "MINIMUM")
    assert reader.steps[0].operands == ("e", "big@tcm")
    # staged when it fits, streamed when it does not: the same bits either way
    for hw in (machine("edge"), machine("tiny", tcm_bytes=512)):
        check_end_to_end(graph, hw)


def _fp16_weights_graph():
    """A matrix product whose fp16 weights are cast to fp32 first (a converter's fp16 model)."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, 64), DType.FP32)
    w16 = b.const(None, (np.random.default_rng(0).standard_normal((1, 64, 256)) * 0.1).astype(np.float16))
    w = b.op(Op.CAST, [w16], (1, 64, 256), DType.FP32)
    zero = b.const(None, np.zeros((1,), np.float32))
    b.output(b.op(Op.MATMUL, [x, w, zero, zero], (1, 8, 256), DType.FP32, name="y"))
    return b.build()


def test_fp16_weights_move_as_fp16_and_are_cast_on_the_npu():
    lowered = lower(_fp16_weights_graph())
    assert fold_constants(lowered) == 0   # the widening CAST stays
    assert [op.op_label for op in lowered.main.ops] == ["CAST", "MATMUL"]
    program, result = check_end_to_end(_fp16_weights_graph(), machine("edge"))
    weights = 64 * 256 * 2
    assert weights <= result.trace.counters.ddr_read_bytes < weights + 8 * 64 * 4 + 4096   # fp16, not fp32


def test_a_graph_output_that_is_an_input_copied_is_written_though_the_input_is_staged(tmp_path):
    """The input is re-read (a convolution and the IDENTITY giving it back as an output): its
    renaming copy into the graph output is no staging copy, so the output's bytes are written
    (the plan verifier had found them never written on DDR-home presets)."""
    from npu_sim.hw.config import load_hw_config

    b = GraphBuilder()
    x = b.input("x", (1, 2, 2, 8), DType.INT8)
    b.output(conv_block(b, x, 8, kernel=1, pad=0))
    b.output(b.op(Op.IDENTITY, [x]))
    for preset in ("edge", "ethos-u85-256", "ethos-u55-256"):
        check_end_to_end(b.build(), load_hw_config(preset), invocations=2)
    check_against_reference_model(b.build(), tmp_path, ("edge", "ethos-u85-256", "ethos-u55-256"))


def _kws_convolutions():
    """Two 3x1 convolutions of 64 channels over a 49 x 80 int8 map (a Conv1D KWS net's first two)."""
    b = GraphBuilder()
    x = b.input("x", (1, 49, 1, 80), DType.INT8)
    b.output(conv_block(b, conv_block(b, x, 64, seed=1), 64, seed=2))
    return b.build()


def test_on_the_u85_a_graph_input_is_read_where_it_lives():
    """tcm.graph_inputs_in_place (the U85; Vela stages only an IFM some operation produces): no copy
    of the re-read input into the TCM. Its reader's tiles of it then count against the peak as the
    copy did, so they are as narrow as the constants' stripes within tcm.constant_stream_slack_fraction
    (Tiler.homed_inputs): the 3,920 B input loaded once, where the fastest plan's two buffers of
    overlapping rows would take 4,160 B (peak 7,296 B, 55,439 cycles). The U65 stages it."""
    graph = _kws_convolutions()
    hw = load_hw_config("ethos-u85-256")
    staged = hw.model_copy(update={"tcm": hw.tcm.model_copy(update={"graph_inputs_in_place": False})})
    for preset, copies in ((hw, []), (staged, ["stage x"]), (load_hw_config("ethos-u65-256"), ["stage x"])):
        lowered = lower_graph(graph, preset)
        assert [op.name for op in lowered.main.ops if op.kind is OpKind.COPY and op.staged] == copies
    summary = npu_sim.simulate(graph, hw, random_inputs(graph, seed=0)).summary
    assert (summary["peak_tcm_bytes"], summary["total_cycles"]) == (7056, 41824)
    assert [(t["kind"], t["size_bytes"]) for t in summary["tcm_peak"]["tensors"]] == [
        ("tile", 3920), ("activation", 3136)]
    summary = npu_sim.simulate(graph, staged, random_inputs(graph, seed=0)).summary
    assert (summary["peak_tcm_bytes"], summary["total_cycles"]) == (7056, 41824)
    assert [(t["name"], t["size_bytes"]) for t in summary["tcm_peak"]["tensors"]][0] == ("x@tcm", 3920)
