"""End to end: schedule -> verify -> simulate == reference executor, bit for bit."""

import numpy as np
import pytest

from npu_sim.errors import ScheduleError, UnsupportedFeatureError
from npu_sim.program import DmaCommand, MemorySpace
from npu_sim.simulator import simulate_program
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Operator, TensorType
from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.ops import Op, make_attribute
from scheduler.schedule import schedule
from tests.oracle import Operand, run_op
from tests.scheduler import graphs
from tests.scheduler.graphs import check_end_to_end, machine

GRAPHS = ["small_cnn", "layout_graph", "float_graph", "int_graph", "conv3d_graph"]
MACHINES = {"tiny": lambda: machine("tiny"), "edge": lambda: machine("edge"),
            "server": lambda: machine("server"), "tiny-2k": lambda: machine("tiny", tcm_bytes=2048)}


@pytest.mark.parametrize("machine_name", list(MACHINES))
@pytest.mark.parametrize("graph_name", GRAPHS)
def test_graphs_bit_exact(graph_name, machine_name):
    hw = MACHINES[machine_name]()
    program, result = check_end_to_end(getattr(graphs, graph_name)(), hw)
    stats = program.stats
    assert stats.tcm_lower_bound_bytes <= stats.tcm_compact_bytes <= stats.peak_tcm_bytes <= hw.tcm.size_bytes
    assert stats.tcm_compact_bytes <= 1.05 * stats.tcm_lower_bound_bytes
    assert result.counters.macs == stats.macs


def test_tiny_tcm_tiles_and_spills():
    program, _ = check_end_to_end(graphs.small_cnn(), machine("tiny", tcm_bytes=2048))
    ops = {o.op: o for o in program.stats.operations}
    assert ops["CONV2D+RESCALE+CLAMP"].tile_count > 4
    assert program.stats.spilled_values          # intermediates went to DDR
    assert any(a.kind == "spill" and a.memory is MemorySpace.DDR for a in program.allocations)


def test_working_set_that_fits_stays_in_tcm():
    program, result = check_end_to_end(graphs.small_cnn(), machine("edge"))
    stats = program.stats
    assert stats.spilled_values == ()
    assert stats.tcm_compact_bytes == stats.tcm_lower_bound_bytes
    moved = result.counters.ddr_read_bytes + result.counters.ddr_write_bytes
    assert moved == stats.compulsory_ddr_bytes       # inputs, weights, outputs: once each


def test_deterministic():
    g = graphs.int_graph()
    assert schedule(g, machine("edge")).listing() == schedule(g, machine("edge")).listing()


# --- variables and control flow --------------------------------------------------------------
def _accumulator(shape=(1, 4)):
    b = GraphBuilder()
    x = b.input("x", shape, DType.INT32)
    v = b.variable("state", shape, DType.INT32, np.arange(np.prod(shape), dtype=np.int32).reshape(shape))
    s = b.op(Op.ADD, [b.variable_read(v), x])
    b.variable_write(v, s)
    b.output(b.op(Op.MUL, [s, s, b.const(None, np.array([0], np.int8))]))
    return b.build()


@pytest.mark.parametrize("tcm_bytes", [None, 1024])
def test_variables_persist_across_invocations(tcm_bytes):
    program, result = check_end_to_end(_accumulator(), machine("tiny", tcm_bytes=tcm_bytes), invocations=3)
    assert result.variables["state"].tolist() == (np.arange(4) + sum(
        graphs.random_inputs(_accumulator(), seed=k)["x"] for k in range(3))).tolist()
    assert [a.kind for a in program.allocations if a.memory is MemorySpace.VARIABLE_SRAM] == ["variable"]


def test_variables_exceeding_the_variable_sram_are_named():
    with pytest.raises(ScheduleError, match=r"variables need 256 bytes of variable SRAM, only 64 available: "
                                            r"state \(256 bytes\)"):
        schedule(_accumulator((1, 64)), machine("tiny", var_bytes=64))


def _cond_graph():
    b = GraphBuilder()
    c = b.input("c", (1,), DType.BOOL)
    x = b.input("x", (4, 8), DType.INT32)
    k = b.const("k", np.arange(32, dtype=np.int32).reshape(4, 8))

    def then_fn(bb, a, kk):
        return [bb.op(Op.ADD, [a, kk]), a]

    def else_fn(bb, a, kk):
        return [kk, bb.op(Op.SUB, [a, kk])]
    r, s = b.cond_if(c, [x, k], then_fn, else_fn)
    b.output(b.op(Op.ADD, [r, s]), s)
    return b.build()


@pytest.mark.parametrize("tcm_bytes", [None, 512])
def test_cond_if_both_branches(tcm_bytes):
    g = _cond_graph()
    x = np.arange(32, dtype=np.int32).reshape(4, 8) * 3
    inputs = [{"c": np.array([True]), "x": x}, {"c": np.array([False]), "x": x}]
    check_end_to_end(g, machine("tiny", tcm_bytes=tcm_bytes), inputs=inputs)


def _loop_graph():
    b = GraphBuilder()
    x = b.input("x", (2, 8), DType.INT32)
    n = b.input("n", (1,), DType.INT32)

    def cond_fn(bb, i, acc, nn, step):
        return bb.op(Op.GREATER, [nn, i])

    def body_fn(bb, i, acc, nn, step):   # swaps nothing, carries nn and step through
        return [bb.op(Op.ADD, [i, bb.const(None, np.array([1], np.int32))]), bb.op(Op.ADD, [acc, step]), nn, step]
    i, acc, _, _ = b.while_loop([b.const(None, np.array([0], np.int32)), x, n, x], cond_fn, body_fn)
    b.output(acc, i)
    return b.build()


@pytest.mark.parametrize("hw", [machine("tiny"), machine("edge", tcm_bytes=1024, dma_engines=1)])
def test_while_loop(hw):
    x = np.arange(16, dtype=np.int32).reshape(2, 8)
    inputs = [{"x": x, "n": np.array([5], np.int32)}, {"x": x, "n": np.array([0], np.int32)}]
    _, result = check_end_to_end(_loop_graph(), hw, inputs=inputs)
    assert result.outputs[0][next(iter(result.outputs[0]))].tolist() == (x * 6).tolist()


# --- errors -----------------------------------------------------------------------------------
def test_tcm_too_small_names_the_operation_and_sizes():
    with pytest.raises(ScheduleError, match=r"CONV2D\(conv2d_\d+\)\+RESCALE.*: smallest tile \[1, 1, 1, 1\] "
                                            r"of output \[1, 16, 16, 8\] needs \d+ bytes of TCM, only \d+ of \d+"):
        schedule(graphs.small_cnn(), machine("tiny", tcm_bytes=256))


def test_the_cycle_collector_setting_is_restored():
    """The scheduler pauses the cycle collector while it runs (speed), and leaves it as it found it."""
    import gc
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            schedule(graphs.small_cnn(), machine("edge"))
            assert gc.isenabled() is enabled
            with pytest.raises(ScheduleError):
                schedule(graphs.small_cnn(), machine("tiny", tcm_bytes=256))
            assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


def test_unsupported_operator_is_refused():
    g = graphs.conv3d_graph()
    g.main.operators.insert(0, Operator(Op.ROW_GATHER, ["vol"], ["rows"]))
    with pytest.raises(UnsupportedFeatureError, match=r"ROW_GATHER\(rows\)"):
        schedule(g, machine("tiny"))


# --- against Arm's reference model --------------------------------------------------------------
def _one_op(op, operands, out_type, attribute):
    b = GraphBuilder()
    names = []
    for i, o in enumerate(operands):
        names.append(b.const(None, o.value, o.dtype) if o.const else b.input(f"in{i}", o.value.shape, o.dtype))
    y = b.op(op, names, out_type.shape, out_type.dtype, attribute=attribute)
    b.output(y)
    return b.build(), {f"in{i}": o.value for i, o in enumerate(operands) if not o.const}


@pytest.mark.parametrize("case", ["conv", "depthwise", "transpose_conv"])
def test_tiled_convolutions_equal_the_reference_model(case):
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 11, 9, 6), dtype=np.int8)
    zp = np.array([0], np.int8)
    if case == "conv":
        op, w = Op.CONV2D, rng.integers(-128, 128, (7, 3, 3, 6), dtype=np.int8)
        attr = make_attribute(op, pad=(1, 1, 0, 1), stride=(2, 1), dilation=(1, 2), acc_type=DType.INT32)
        out = TensorType((1, 6, 6, 7), DType.INT32)
        bias = rng.integers(-1000, 1000, (7,), dtype=np.int32)
    elif case == "depthwise":
        op, w = Op.DEPTHWISE_CONV2D, rng.integers(-128, 128, (3, 3, 6, 2), dtype=np.int8)
        attr = make_attribute(op, pad=(1, 1, 1, 1), stride=(2, 2), dilation=(1, 1), acc_type=DType.INT32)
        out = TensorType((1, 6, 5, 12), DType.INT32)
        bias = rng.integers(-1000, 1000, (12,), dtype=np.int32)
    else:
        op, w = Op.TRANSPOSE_CONV2D, rng.integers(-128, 128, (5, 3, 3, 6), dtype=np.int8)
        attr = make_attribute(op, out_pad=(0, 1, 1, 0), stride=(2, 2), acc_type=DType.INT32)
        out = TensorType((1, 24, 20, 5), DType.INT32)
        bias = rng.integers(-1000, 1000, (5,), dtype=np.int32)
    operands = [Operand(x, DType.INT8), Operand(w, DType.INT8, const=True),
                Operand(bias, DType.INT32, const=True), Operand(zp, DType.INT8, const=True),
                Operand(zp, DType.INT8, const=True)]
    (expected,) = run_op(op, operands, attr, [out])
    graph, inputs = _one_op(op, operands, out, attr)
    hw = machine("tiny", tcm_bytes=1024)
    program = schedule(graph, hw)
    assert any(o.tile_count > 2 for o in program.stats.operations)
    (got,) = simulate_program(program, hw, [inputs]).outputs[0].values()
    assert np.array_equal(got, expected)


# --- real models ----------------------------------------------------------------------------------
def test_ds_cnn_with_a_tiny_tcm():
    program, _ = check_end_to_end(load_graph("examples/ds_cnn_kws_int8.tosa"), machine("tiny", tcm_bytes=8192))
    assert program.stats.spilled_values
    assert any(isinstance(c, DmaCommand) for c in program.walk())


def test_stateful_lstm_over_invocations():
    check_end_to_end(load_graph("examples/lstm_stateful_int8.tosa"), machine("edge", tcm_bytes=4096), invocations=2)


def _nested_graph():
    """A WHILE_LOOP whose body holds a COND_IF."""
    b = GraphBuilder()
    x = b.input("x", (3, 4), DType.INT32)
    n = b.input("n", (1,), DType.INT32)

    def body_fn(bb, i, acc, nn):
        one = bb.const(None, np.array([1], np.int32))
        even = bb.op(Op.EQUAL, [bb.op(Op.BITWISE_AND, [i, one]), bb.const(None, np.array([0], np.int32))])
        i2d = bb.op(Op.RESHAPE, [i, bb.const_shape(None, [1, 1])])
        (acc2,) = bb.cond_if(even, [acc, i2d], lambda b3, a, j: b3.op(Op.ADD, [a, j]),
                             lambda b3, a, j: b3.op(Op.SUB, [a, b3.op(Op.MUL, [j, j, b3.const(
                                 None, np.array([0], np.int8))])]))
        return [bb.op(Op.ADD, [i, one]), acc2, nn]
    _, acc, _ = b.while_loop([b.const(None, np.array([0], np.int32)), x, n],
                             lambda bb, i, acc, nn: bb.op(Op.GREATER, [nn, i]), body_fn)
    b.output(acc)
    return b.build()


def test_nested_control_flow():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    inputs = [{"x": x, "n": np.array([k], np.int32)} for k in (0, 1, 5)]
    for hw in (machine("tiny"), machine("server", tcm_bytes=512, dma_engines=1)):
        check_end_to_end(_nested_graph(), hw, inputs=inputs)


def test_outputs_that_are_inputs_constants_or_copies():
    b = GraphBuilder()
    x = b.input("x", (2, 3), DType.INT8)
    y = b.input("y", (2, 3), DType.INT8)
    b.output(x, b.op(Op.IDENTITY, [y], name="y_copy"), b.const("c", np.ones((2, 3), np.int8)))
    program, _ = check_end_to_end(b.build(), machine("tiny"))
    assert program.outputs["x"] == program.inputs["x"]


@pytest.mark.parametrize("tcm_bytes", [256, 512, 4096])
def test_value_live_across_a_loop(tcm_bytes):
    """An intermediate computed before a WHILE_LOOP and read after it, in TCMs of several sizes."""
    b = GraphBuilder()
    x = b.input("x", (1, 64), DType.INT32)
    n = b.input("n", (1,), DType.INT32)
    y = b.op(Op.ADD, [x, x])

    def body_fn(bb, i, nn, v):
        return [bb.op(Op.ADD, [i, bb.const(None, np.array([1], np.int32))]), nn, bb.op(Op.ADD, [v, v])]
    _, _, v = b.while_loop([b.const(None, np.array([0], np.int32)), n, x],
                           lambda bb, i, nn, v: bb.op(Op.GREATER, [nn, i]), body_fn)
    b.output(b.op(Op.SUB, [y, v]))
    inputs = [{"x": np.arange(64, dtype=np.int32).reshape(1, 64), "n": np.array([3], np.int32)}]
    check_end_to_end(b.build(), machine("tiny", tcm_bytes=tcm_bytes), inputs=inputs)


def test_loop_state_stays_in_tcm():
    """The example loop's carried values, condition and fresh results live in TCM: DDR moves
    only the inputs, constants and outputs once, and the loop body has no DMA."""
    program, _ = check_end_to_end(load_graph("examples/while_loop_int32.tosa"), machine("edge"),
                                  inputs=[{"x": np.arange(4, dtype=np.int32), "n": np.array(k, np.int32)}
                                          for k in (0, 3)])
    stats = program.stats
    assert (stats.planned_ddr_read_bytes, stats.planned_ddr_write_bytes) == (48, 20)
    assert (stats.compulsory_ddr_read_bytes, stats.compulsory_ddr_write_bytes) == (48, 20)
    (loop,) = [c for c in program.commands if c.__class__.__name__ == "LoopCommand"]
    assert loop.condition.memory is MemorySpace.TCM
    assert not [c for c in (*loop.cond_commands, *loop.body_commands) if isinstance(c, DmaCommand)]
    assert not stats.spilled_values


def test_fused_elementwise_tree_tiles():
    """The vector chain RESCALE+RESCALE+ADD+MUL runs as one operation, in finer tiles in a small TCM."""
    counts = []
    for tcm_bytes in (None, 768):
        program, _ = check_end_to_end(graphs.elementwise_tree((6, 40)), machine("tiny", tcm_bytes=tcm_bytes))
        (op,) = [o for o in program.stats.operations if o.op == "RESCALE+RESCALE+ADD+MUL"]
        counts.append(op.tile_count)
    assert counts[1] > counts[0] >= 1 and counts[1] > 2


def _slices_graph():
    """SLICEs that alias: of an input (DDR), of an intermediate (TCM), of a slice, of a constant,
    and one that is a graph output (copied); plus a channel slice that stays a kernel."""
    b = GraphBuilder()
    x = b.input("x", (4, 6, 8), DType.INT32)

    def cut(t, start, size):
        return b.op(Op.SLICE, [t, b.const_shape(None, list(start)), b.const_shape(None, list(size))],
                    tuple(size), DType.INT32)
    rows = cut(x, (1, 0, 0), (2, 6, 8))                       # input bytes 192..575
    doubled = b.op(Op.ADD, [x, x])
    inner = cut(cut(doubled, (2, 0, 0), (2, 6, 8)), (1, 2, 0), (1, 3, 8))   # a slice of a slice
    k = b.const("k", np.arange(4 * 6 * 8, dtype=np.int32).reshape(4, 6, 8))
    kslice = cut(k, (3, 5, 0), (1, 1, 8))
    channels = cut(x, (0, 0, 2), (4, 6, 3))                   # strided: the SLICE kernel
    b.output(b.op(Op.ADD, [rows, rows]), b.op(Op.SUB, [inner, kslice]), cut(doubled, (0, 1, 0), (1, 2, 8)),
             channels)
    return b.build()


@pytest.mark.parametrize("tcm_bytes", [None, 1024])
def test_contiguous_slices_alias_their_source(tcm_bytes):
    program, _ = check_end_to_end(_slices_graph(), machine("tiny", tcm_bytes=tcm_bytes))
    slices = [c for c in program.walk() if getattr(c, "steps", None) and c.steps[0].op is Op.SLICE]
    assert {c.name.split("(")[0] for c in slices} == {"SLICE"} and len({c.name for c in slices}) == 1


@pytest.mark.parametrize("preset", ["tiny", "edge", "server"])
@pytest.mark.parametrize("example", ["ds_cnn_kws_int8", "lstm_stateful_int8", "cond_if_int32", "while_loop_int32",
                                     "conv_rescale_int8", "add_mul_fp32"])
def test_examples_on_the_npu_equal_the_reference_model(example, preset):
    """Fused vector trees, aliased SLICEs and control flow in TCM, against Arm's reference model."""
    from npu_sim.inputs import random_array
    from npu_sim.simulation import simulate
    from tests.oracle import run_graph_bytes
    path = f"examples/{example}.tosa"
    graph = load_graph(path)
    rng = np.random.default_rng(11)
    inputs = {name: random_array(t, rng) for name, t in graph.input_types.items()}
    if example == "while_loop_int32":
        inputs["n"] = np.array(3, np.int32)
    expected = run_graph_bytes(open(path, "rb").read(), list(inputs.values()), list(graph.output_types.values()))
    got = simulate(graph, preset, inputs).outputs
    for name, want in zip(graph.output_types, expected):
        assert np.array_equal(got[name], want), name


def test_scheduling_and_simulating_leave_no_reference_cycles():
    """Compiling and simulating leave no garbage that only Python's cycle collector could free
    (gc_paused would otherwise pay for traversing it after every run): what they no longer
    need is freed at once. The simulator keeps only simpy's own environment cycle (a few objects)."""
    import gc

    hw = machine("edge")
    graph = graphs.small_cnn()
    x = np.random.default_rng(0).integers(-128, 128, (1, 16, 16, 4)).astype(np.int8)
    simulate_program(schedule(graph, hw), hw, [{"image": x}])   # warm-up (lazy imports, caches)
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        program = schedule(graph, hw)
        assert gc.collect() == 0
        result = simulate_program(program, hw, [{"image": x}])
        assert result.trace.commands                          # the trace still has what it needs
        del result
        assert gc.collect() < 20
    finally:
        if was_enabled:
            gc.enable()


def test_operations_reading_a_slice_of_a_graph_input_read_the_ddr():
    """A convolution over a SLICE of a graph input (an LSTM's time step) reads a feature map whose home
    is the DDR (``reads_ddr_home``: Vela's NPU reads it there at every use, tcm.in_place_ddr_feature_maps);
    one over the whole input (loaded, or staged, before it) does not."""
    from tests.scheduler.graphs import conv_block
    b = GraphBuilder()
    x = b.input("x", (1, 2, 1, 16), DType.INT8)
    step = b.op(Op.SLICE, [x, b.const_shape(None, [0, 1, 0, 0]), b.const_shape(None, [1, 1, 1, 16])],
                (1, 1, 1, 16), DType.INT8)
    b.output(conv_block(b, step, 16, kernel=1, pad=0, seed=1), conv_block(b, x, 16, kernel=1, pad=0, seed=2))
    program, _ = check_end_to_end(b.build(), machine("ethos-u85-256"))
    convs = {c.name: c.reads_ddr_home for c in program.walk() if getattr(c, "steps", None)
             and c.steps[0].op is Op.CONV2D}
    assert sorted(convs.values()) == [False, True], convs


def test_a_slice_by_an_operator_of_its_own_is_an_intermediate_in_the_sram():
    """A time step sliced by an operator of its own (a Keras unrolled GRU's UNPACK, here a SLICE with
    its .tflite location) is an operation whose result Vela places in the SRAM: its reader waits the
    SRAM's latency, not the DRAM's (a GRU(16)'s input product: 1,171 cycles in Vela 5.2, bound by its
    DRAM reads of weights and scales). Only a fused operator's own slices (no location) read the DDR."""
    from tests.scheduler.graphs import conv_block
    cycles = {}
    for location in ("", "model/gru/unstack"):
        b = GraphBuilder()
        x = b.input("x", (1, 2, 1, 16), DType.INT8)
        step = b.op(Op.SLICE, [x, b.const_shape(None, [0, 1, 0, 0]), b.const_shape(None, [1, 1, 1, 16])],
                    (1, 1, 1, 16), DType.INT8, location=location)
        b.output(conv_block(b, step, 16, kernel=1, pad=0, seed=1))
        program, result = check_end_to_end(b.build(), machine("ethos-u85-256"))
        (conv,) = [c for c in program.walk() if getattr(c, "steps", None) and c.steps[0].op is Op.CONV2D]
        (record,) = [r for r in result.trace.commands if r.id == conv.id]
        cycles[location] = (conv.reads_ddr_home, record.end_cycle - record.start_cycle)
    hw = machine("ethos-u85-256")
    assert cycles[""][0] and not cycles["model/gru/unstack"][0]
    assert cycles[""][1] - cycles["model/gru/unstack"][1] == hw.ddr.read_latency_cycles - hw.tcm.read_latency_cycles


def test_a_fused_lstms_state_is_read_and_written_in_the_ddr():
    """On a preset keeping an LSTM's state in the DDR (``tcm.ddr_recurrent_state``: Vela's persistent
    state tensors), the operations reading a fused TFLite LSTM's h and c carry ``reads_ddr_state``
    (the recurrent products among the convolutions, not the step input's) and those writing them
    ``writes_ddr_state``; bit for bit as before. A converted Keras LSTM (gates split from one
    product) keeps its state as an intermediate."""
    from pathlib import Path
    data = Path(__file__).resolve().parents[1] / "data" / "tflite" / "lstm_int8.tflite"
    program, _ = check_end_to_end(load_graph(data), machine("ethos-u85-256"))
    computes = [c for c in program.walk() if getattr(c, "steps", None)]
    convs = [c for c in computes if c.steps[0].op is Op.CONV2D]
    readers = [c for c in convs if c.reads_ddr_state]
    assert readers and len(readers) < len(convs) and not any(c.reads_ddr_home for c in readers)
    assert any(c.writes_ddr_state for c in computes)
    keras = load_graph(Path(__file__).resolve().parents[2] / "examples" / "lstm_step64_int8.tosa")
    keras_program = schedule(keras, machine("ethos-u85-256"))
    assert not any(getattr(c, "reads_ddr_state", False) or getattr(c, "writes_ddr_state", False)
                   for c in keras_program.walk())
