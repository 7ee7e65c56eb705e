"""Concatenation in place: a CONCAT's inputs computed into their slices of its result, and the
arena's graph inputs and outputs timed like feature maps (a Shared_Sram NPU)."""

from __future__ import annotations

from npu_sim.hw.config import load_hw_config
from npu_sim.program import ComputeCommand, DmaCommand, MemorySpace
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.codegen.concat_in_place import worth_it
from tests.scheduler.graphs import check_against_reference_model, check_end_to_end, conv_block

STEPS, UNITS = 6, 24


def _sequence(head: bool = True):
    """A recurrence of 1x1 convolutions whose step results (24 bytes each, 32 in the TCM) are read
    by the next step and gathered by a CONCAT, as TFLite's LSTM gathers its output sequence;
    ``head``: a dense layer reads the sequence, else it is the graph's output."""
    b = GraphBuilder()
    h = b.input("x", (1, 1, 1, UNITS), DType.INT8)
    steps = []
    for t in range(STEPS):
        h = conv_block(b, h, UNITS, kernel=1, pad=0, seed=t)
        steps.append(b.op(Op.RESHAPE, [h, b.const_shape(None, [1, 1, UNITS])]))
    sequence = b.op(Op.CONCAT, steps, axis=1, name="sequence")
    if head:
        flat = b.op(Op.RESHAPE, [sequence, b.const_shape(None, [1, 1, 1, STEPS * UNITS])])
        b.output(conv_block(b, flat, 8, kernel=1, pad=0, seed=99))
    else:
        b.output(sequence)
    return b.build()


def _writes(program, name_prefix: str):
    return [c for c in program.walk() if isinstance(c, ComputeCommand) and c.name.startswith(name_prefix)]


def _allocation(program, name: str):
    return next(a for a in program.allocations if a.name == name)


def test_each_step_writes_its_slice_of_the_sequence_and_no_concat_runs() -> None:
    for preset in ("ethos-u55-256", "ethos-u85-256", "edge"):
        program, _ = check_end_to_end(_sequence(), load_hw_config(preset))
        assert not [c for c in program.walk() if "CONCAT" in c.name], preset
        steps = [c for c in _writes(program, "CONV2D") if c.outputs[0].size_bytes == UNITS]
        assert len(steps) == STEPS, preset
        sequence = _allocation(program, "sequence")
        assert [c.outputs[0].offset_bytes - sequence.offset_bytes for c in steps] == \
            [UNITS * t for t in range(STEPS)], preset


def test_the_sequence_that_is_the_graph_output_is_written_in_the_arena() -> None:
    """On the U55 the graph output lives in the SRAM: the steps write it there, and it is live
    only from the first step on; on the U85 it lives in the DRAM, so the CONCAT stays."""
    program, _ = check_end_to_end(_sequence(head=False), load_hw_config("ethos-u55-256"))
    assert not [c for c in program.walk() if "CONCAT" in c.name]
    out = program.outputs["sequence"]
    steps = [c for c in _writes(program, "CONV2D")]
    assert [c.outputs[0].offset_bytes - out.offset_bytes for c in steps] == [UNITS * t for t in range(STEPS)]
    output = next(a for a in program.allocations if a.kind == "output")
    assert output.first_use == min(c.id for c in steps)
    assert output.last_use == max(c.id for c in program.walk())
    u85, _ = check_end_to_end(_sequence(head=False), load_hw_config("ethos-u85-256"))
    assert [c for c in u85.walk() if isinstance(c, ComputeCommand) and "CONCAT" in c.name]


def test_the_arena_input_dies_after_its_last_reader_and_the_output_is_computed_in_place() -> None:
    """A dense autoencoder's shape on the U55: the 64-byte input is read by the first layer only,
    the last layer writes the graph output (through a RESHAPE) where the host reads it: peak TCM
    is the input and the first layer's result, or the last layer's input and the output, as
    TFLite Micro's arena plans them (Vela: 768 bytes for the MLPerf Tiny autoencoder's 640-byte
    input and output, which we held both throughout)."""
    program, _ = check_end_to_end(_dense(), load_hw_config("ethos-u55-256"))
    assert not [c for c in program.walk() if isinstance(c, DmaCommand) and c.dst.memory is MemorySpace.TCM
                and c.src.memory is MemorySpace.TCM]   # (no copy into the output)
    inp = next(a for a in program.allocations if a.kind == "input")
    out = next(a for a in program.allocations if a.kind == "output")
    assert inp.first_use == 0 and inp.last_use < out.first_use
    assert out.last_use == max(c.id for c in program.walk())
    assert _writes(program, "CONV2D")[-1].outputs[0].offset_bytes == out.offset_bytes
    assert program.stats.peak_tcm_bytes == 640 + 128   # (the layers' zero points are command parameters)


def _dense():
    """Three dense layers, 640 -> 128 -> 128 -> 640, the last through a RESHAPE into the output."""
    b = GraphBuilder()
    x = b.input("x", (1, 1, 1, 640), DType.INT8)
    y = conv_block(b, x, 128, kernel=1, pad=0, seed=1)
    y = conv_block(b, y, 128, kernel=1, pad=0, seed=2)
    y = conv_block(b, y, 640, kernel=1, pad=0, seed=3)
    b.output(b.op(Op.RESHAPE, [y, b.const_shape(None, [1, 640])]))
    return b.build()


def test_worth_it_follows_vela_for_one_reader_and_else_the_peak() -> None:
    size = {"a": 64, "b": 64, "out": 128, "deep": 256}.__getitem__
    # one reader each (the CONCAT at 9): in place, as Vela folds the copies into the producers
    assert worth_it({"a": [1, 9, 1], "b": [8, 9, 1], "out": [9, 12, 1]}, ["a", "b"], "out", size, 13)
    # a skip connection read by its pooling too, a deep branch between: the result's bytes taken
    # from the skip's producer on would raise the peak during the deep part
    spans = {"a": [1, 9, 2], "deep": [2, 7, 1], "b": [8, 9, 1], "out": [9, 12, 1]}
    assert not worth_it(spans, ["a", "b"], "out", size, 13)
    # step results each read by the next step too, nothing else live: the peak falls
    steps = {f"h{t}": [t, 6, 2] for t in range(4)}
    assert worth_it({**steps, "out": [6, 8, 1]}, list(steps), "out", {"out": 128, **dict.fromkeys(steps, 32)}.get, 9)


def test_the_reference_model_agrees_with_the_sequence_written_in_place(tmp_path):
    for graph in (_sequence(True), _sequence(False), _dense()):
        check_against_reference_model(graph, tmp_path, ("ethos-u55-256", "ethos-u85-256", "edge"))
