"""A lookup as a convolution's activation: on the Ethos-U presets a TABLE alone reading a
convolution's scaled result joins its epilogue (``mac_array.epilogue_ops``), as Vela packs a LUT
activation into the operation before it; the U55/U65 output stage then writes the result at the
LUT activation's rate (``mac_array.lut_epilogue_cycles_per_element``)."""

from __future__ import annotations

import numpy as np
import pytest

import npu_sim
from npu_sim.hw.config import load_hw_config
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op
from scheduler.passes.fusion import DEFAULT_RULES, fuse, rules_for
from tests.scheduler.graphs import check_against_reference_model, conv_block


def _conv_lookup(shared: bool = False):
    """A 1x1 convolution of a 16x16x8 input into 32 channels, its scaled result looked up in an
    int8 table (a hard-swish's); ``shared``: the scaled result is an output too (two readers)."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 16, 8), DType.INT8)
    y = conv_block(b, x, 32, kernel=1, pad=0, seed=4, relu=False)
    table = b.const(None, np.clip(np.arange(-128, 128) * 3 // 4, -128, 127).astype(np.int8), DType.INT8)
    b.output(b.op(Op.TABLE, [y, table]))
    if shared:
        b.output(y)
    return b.build()


def _groups(graph, preset):
    block = graph.main
    groups = [[block.operators[i].op.name for i in g]
              for g in fuse(block, rules=rules_for(DEFAULT_RULES, load_hw_config(preset)))]
    return [g for g in groups if g != ["CONST"]]


@pytest.mark.parametrize("preset", ["ethos-u55-256", "ethos-u65-256", "ethos-u85-256"])
def test_a_lookup_alone_reading_a_convolution_is_its_activation(preset):
    assert _groups(_conv_lookup(), preset) == [["CONV2D", "RESCALE", "TABLE"]]
    # a second reader keeps the scaled result: the lookup is an operation of its own (regor's
    # CanPack: single-reader paths only); a generic preset keeps lookups on its LUT unit
    assert ["TABLE"] in _groups(_conv_lookup(shared=True), preset)
    assert ["TABLE"] in _groups(_conv_lookup(), "edge")


def test_the_u55_output_stage_writes_a_looked_up_result_at_the_lut_rate():
    """ethos-u55-256: 8,192 results at 1 cycle each (Vela's LUT activation rate, 4x the output
    stage's 0.25) bound the operation: the first block's 62 cycles of MACs, then the epilogue's
    8,192 + 1 (its second stage), then the table's load (256 B at 1 B/cycle; the flash's 64-cycle
    latency and the bytes at its 1 B/cycle: 320 cycles), where the convolution alone takes 1,070.
    On the U85 the lookup drains at the output rate: only its table's load, 256 cycles, is added."""
    from npu_sim.hw.compute_units import mac_array
    from scheduler.cost_model import _kernel_step

    steps = [_kernel_step(op_step, None) for op_step in _steps(_conv_lookup().main)]
    u55, u85 = load_hw_config("ethos-u55-256"), load_hw_config("ethos-u85-256")
    assert (mac_array.body_cycles(u55, steps), mac_array.body_cycles(u55, steps[:-1])) == (62 + 8193 + 320, 1070)
    assert mac_array.body_cycles(u85, steps) - mac_array.body_cycles(u85, steps[:-1]) == 256


def _steps(block):
    from scheduler.ir.npu_ops import Step

    return [Step(o.op, o.attribute, tuple(o.inputs), tuple(block.tensor(n).type for n in o.inputs),
                 tuple(block.tensor(n).type for n in o.outputs), name=o.outputs[0])
            for o in block.operators if o.op in (Op.CONV2D, Op.RESCALE, Op.TABLE)]


def test_the_fused_lookup_gives_the_reference_models_bits(tmp_path):
    check_against_reference_model(_conv_lookup(), tmp_path, ["ethos-u55-256", "ethos-u85-256"])
    run = npu_sim.simulate(_conv_lookup(), "ethos-u55-256", {"x": np.zeros((1, 16, 16, 8), np.int8)})
    assert run.summary["busy_cycles"]["lut"] == 0 and run.summary["busy_cycles"]["mac_array"] >= 8192
