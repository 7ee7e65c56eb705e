"""Sinking weighs only the constants a moved operation brings into the TCM: weights it reads
where they live (the U55's matrix-vector products) hold no TCM beside its new neighbours."""

import numpy as np

from npu_sim.hw.config import load_hw_config
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.passes.sinking import feature_map_peak_bytes, sink_feature_maps
from scheduler.schedule import lower_graph
from tests.scheduler.graphs import check_end_to_end


def _recurrence(steps: int):
    """An unrolled recurrence on the U55 whose input projections (a 1x1 CONV2D of one output
    position: 16 inputs, 64 int32 outputs, a 1 KiB weight read in place) are each split into two
    gates by a RESHAPE and two SLICEs (copies that only rename its bytes), every gate read at its
    step."""
    b = GraphBuilder()
    rng = np.random.default_rng(0)
    shift = b.const(None, np.array([0], dtype=np.int8))
    zp = b.const(None, np.array([0], dtype=np.int8))
    xs = [b.input(f"x{t}", (1, 1, 1, 16), DType.INT8) for t in range(steps)]
    h = b.input("h", (1, 1, 1, 32), DType.INT32)
    projections, copies = [], []
    for x in xs:
        weight = b.const(None, rng.integers(-8, 8, (64, 1, 1, 16), dtype=np.int8))
        bias = b.const(None, rng.integers(-500, 500, (64,), dtype=np.int32))
        projections.append(b.op(Op.CONV2D, [x, weight, bias, zp, zp], pad=(0,) * 4, stride=(1, 1),
                                dilation=(1, 1), acc_type=DType.INT32))
    for projection in projections:
        gates = b.op(Op.RESHAPE, [projection, b.const_shape(None, [1, 1, 2, 32])])
        first, second = (b.op(Op.SLICE, [gates, b.const_shape(None, [0, 0, k, 0]), b.const_shape(None, [1, 1, 1, 32])])
                         for k in (0, 1))
        copies += [gates, first, second]
        h = b.op(Op.SUB, [b.op(Op.SUB, [b.op(Op.MUL, [h, h, shift]), first]), second])
    b.output(h)
    return b.build(), projections, copies


def _projections_first(steps: int):
    """:func:`_recurrence` lowered for the U55 without sinking, the projections and their copies
    placed first (a list schedule's order of a Keras unrolled GRU)."""
    graph, projections, copies = _recurrence(steps)
    hw = load_hw_config("ethos-u55-256")
    unsunk = hw.model_copy(update={"stripes": hw.stripes.model_copy(update={"enabled": False})})
    lowered = lower_graph(graph, unsunk)
    early = [op for op in lowered.main.ops if op.outputs[0] in projections or op.outputs[0] in copies]
    lowered.main.ops = early + [op for op in lowered.main.ops if op not in early]
    return lowered, projections


def test_projections_whose_weights_stay_in_flash_move_with_their_gate_copies():
    """Four 256-byte projections waiting together: 1,152 bytes of feature maps at the peak
    against 512 with each projection and its RESHAPE and SLICEs just before its step (the MUL and
    the two SUBs, one operation on the vector unit). The saving (640) is below a projection's
    constants (1,281 bytes: weight, bias, zero point), which had kept every projection first; the
    U55 reads them in place, so they add nothing beside the new neighbours and the move is taken
    (a Keras unrolled GRU's 96-byte gate projections, 18 live at once: 2.2x Vela's SRAM)."""
    lowered, projections = _projections_first(4)
    conv = next(op for op in lowered.main.ops if op.outputs[0] == projections[0])
    assert conv.weights_in_place
    assert feature_map_peak_bytes(lowered.main.ops, lowered.values) == 1152
    sink_feature_maps(lowered, 2048)
    order = lowered.main.ops
    assert feature_map_peak_bytes(order, lowered.values) == 512
    labels = [op.name.split("(")[0] for op in order]
    for projection in projections:
        at = next(i for i, op in enumerate(order) if op.outputs[0] == projection)
        assert labels[at + 1:at + 5] == ["RESHAPE", "SLICE", "SLICE", "MUL"]


def test_the_sunk_recurrence_is_bit_exact_on_the_u55():
    check_end_to_end(_recurrence(4)[0], load_hw_config("ethos-u55-256"))
