"""Compute units: kernel results checked against the command, CUSTOM operators end to end."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError, UnsupportedFeatureError
from npu_sim.hw.compute import KernelResultError
from npu_sim.program import ComputeCommand, DmaCommand, KernelStep, Program, View
from npu_sim.reference import kernel_api
from npu_sim.reference.custom import register_custom, unregister_custom
from npu_sim.reference.session import execute
from npu_sim.simulation import simulate
from npu_sim.simulator import simulate_program
from npu_sim.tosa.builder import GraphBuilder
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute
from npu_sim.tosa.schema_generated import RoundingMode
from tests.hw.hw_programs import DDR, TCM, make_hw


def _negate_program(out_view: View) -> Program:
    """``y = NEGATE(x)`` of a rank-0 int32, written to ``out_view``."""
    scalar = TensorType((), DType.INT32)
    zp = TensorType((1,), DType.INT32)
    x_ddr, x_tcm = View(DDR, 0, (), DType.INT32), View(TCM, 0, (), DType.INT32)
    zps = View(TCM, 16, (1,), DType.INT32)
    step = KernelStep(Op.NEGATE, make_attribute(Op.NEGATE), (x_tcm, zps, zps), (scalar, zp, zp), (scalar,),
                      name="neg")
    y_ddr = View(DDR, 64, out_view.shape, DType.INT32)
    commands = [DmaCommand(0, 0, x_ddr, x_tcm, name="load"),
                DmaCommand(1, 0, View(DDR, 32, (1,), DType.INT32), zps, name="load zp"),
                ComputeCommand(2, "vector", (step,), (out_view,), deps=(0, 1), name="negate"),
                DmaCommand(3, 1, out_view, y_ddr, deps=(2,), name="store")]
    return Program({DDR: 128, TCM: 64}, [], commands, inputs={"x": x_ddr, "zp": View(DDR, 32, (1,), DType.INT32)},
                   outputs={"y": y_ddr})


def _inputs() -> dict[str, np.ndarray]:
    return {"x": np.array(7, np.int32), "zp": np.array([0], np.int32)}


def test_a_rank0_result_is_written_to_a_rank0_view():
    result = simulate_program(_negate_program(View(TCM, 32, (), DType.INT32)), make_hw(), [_inputs()])
    assert result.outputs[0]["y"].shape == () and int(result.outputs[0]["y"]) == -7


def _rank0_chain():
    """A 16x8 hard sigmoid's rank-0 constant chain, as Arm's converter writes it: CAST int16 to
    int32, LOGICAL_LEFT_SHIFT, RESCALE back to int16 (from an input here, so it is not folded),
    then the wrapping CASTs to int8."""
    b = GraphBuilder()
    x = b.input("x", (), DType.INT16)
    wide = b.op(Op.CAST, [x], dtype=DType.INT32)
    shifted = b.op(Op.LOGICAL_LEFT_SHIFT, [wide, b.const(None, np.array(3, np.int32), shape=())])
    back = b.op(Op.RESCALE, [shifted, b.const(None, np.array([1 << 30], np.int32)),
                             b.const(None, np.array([31], np.int8)), b.const(None, np.array([0], np.int32)),
                             b.const(None, np.array([0], np.int16))], dtype=DType.INT16, scale32=True,
               rounding_mode=RoundingMode.SINGLE_ROUND)
    b.output(back)
    b.output(b.op(Op.CAST, [b.op(Op.CAST, [back], dtype=DType.INT32)], dtype=DType.INT8))
    return b.build()


def test_rank0_chains_run_bound_from_the_second_invocation_on():
    """Bound kernels run a command's steps from the second invocation on: a rank-0 CAST gave a
    numpy scalar there, which the simulator refused as a bug (every 16x8 hard sigmoid not fused
    into a convolution failed from ``-n 2``)."""
    graph = _rank0_chain()
    xs = np.array([7, -300, 32767, -32768], np.int16)
    result = simulate(graph, "edge", {"x": xs}, invocations=len(xs))
    for k, x in enumerate(xs):
        want = execute(graph, {"x": np.array(x)})
        for name, value in want.items():
            assert result.outputs[name][k].tobytes() == value.tobytes() and result.outputs[name][k].shape == ()


def test_a_kernel_result_of_another_shape_than_the_view_is_a_bug_naming_the_command(monkeypatch):
    real = kernel_api.KERNELS[Op.NEGATE]
    monkeypatch.setitem(kernel_api.KERNELS, Op.NEGATE, lambda args: [real(args)[0].reshape(1)])
    with pytest.raises(KernelResultError, match=r"^command 2 \(negate\): step 0 \(NEGATE: neg\): kernel output 0 "
                                                 r"is int32 of shape \[1\], expected int32 of shape \[\]"):
        simulate_program(_negate_program(View(TCM, 32, (), DType.INT32)), make_hw(), [_inputs()])
    assert KernelResultError.exit_code == 1


def test_a_kernel_result_of_another_dtype_is_refused(monkeypatch):
    real = kernel_api.KERNELS[Op.NEGATE]
    monkeypatch.setitem(kernel_api.KERNELS, Op.NEGATE, lambda args: [real(args)[0].astype(np.int64)])
    with pytest.raises(KernelResultError, match=r"output 0 is int64 of shape \[\], expected int32"):
        simulate_program(_negate_program(View(TCM, 32, (), DType.INT32)), make_hw(), [_inputs()])


def test_an_output_view_of_another_shape_than_the_step_is_refused():
    # the step declares a rank-0 result; the command writes it to a [1] view
    with pytest.raises(KernelResultError, match=r"command 2 \(negate\): step 0 .*output 0 is int32 of shape \[\], "
                                                 r"but the command writes it to tcm\[0x20\] 1 INT32"):
        simulate_program(_negate_program(View(TCM, 32, (1,), DType.INT32)), make_hw(), [_inputs()])


# --- CUSTOM operators through the scheduler and the simulator --------------------------------

def _custom_graph(name: str):
    b = GraphBuilder()
    x = b.input("x", (2, 40), DType.INT32)
    w = b.const(None, np.arange(40, dtype=np.int32).reshape(1, 40) - 20)
    s = b.op(Op.ADD, [x, w])
    attribute = make_attribute(Op.CUSTOM, domain_name="acme", operator_name=name, implementation_attrs=b"\x03")
    y = b.op(Op.CUSTOM, [s, w], shape=(2, 40), dtype=DType.INT32, attribute=attribute)
    z = b.op(Op.MUL, [y, y, b.const(None, np.array([0], np.int8), DType.INT8)])
    b.output(z)
    return b.build()


def _scale_then_add(args):
    factor = args.attribute.implementation_attrs[0]
    return [(args.inputs[0] * factor + args.inputs[1]).astype(np.int32)]


def test_custom_operator_runs_on_the_npu_and_matches_the_executor():
    register_custom("acme", "scale_add", _scale_then_add)
    try:
        graph = _custom_graph("scale_add")
        x = np.random.default_rng(3).integers(-1000, 1000, (2, 40)).astype(np.int32)
        expected = execute(graph, {"x": x})
        for preset in ("tiny", "edge"):
            result = simulate(graph, preset, {"x": x})
            np.testing.assert_array_equal(result.outputs[next(iter(expected))], next(iter(expected.values())))
            ops = {row["op"] for row in result.summary["ops"]}
            assert "CUSTOM" in ops
    finally:
        unregister_custom("acme", "scale_add")


def test_custom_operator_returning_the_wrong_shape_is_the_implementation_fault():
    register_custom("acme", "sloppy", lambda args: [args.inputs[0].reshape(-1)])
    try:
        with pytest.raises(TosaRuntimeError, match=r"CUSTOM implementation acme::sloppy output 0 is int32 of "
                                                   r"shape \[80\], expected int32 of shape \[2, 40\]"):
            simulate(_custom_graph("sloppy"), "tiny", {"x": np.zeros((2, 40), np.int32)})
    finally:
        unregister_custom("acme", "sloppy")


def test_unregistered_custom_operator_is_unsupported():
    with pytest.raises(UnsupportedFeatureError, match=r"CUSTOM operator 'acme'::'nothing'"):
        simulate(_custom_graph("nothing"), "tiny", {"x": np.zeros((2, 40), np.int32)})
