"""Elementwise chains of a compute command folded into tables (npu_sim.hw.table_folding)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import npu_sim.simulator as simulator_module
from npu_sim.api import load_graph, load_hw_config
from npu_sim.errors import TosaRuntimeError
from npu_sim.hw.table_folding import fold_plan
from npu_sim.inputs import load_inputs
from npu_sim.program import KernelStep
from npu_sim.reference.kernel_api import KernelArgs, bind_kernel, run_kernel
from npu_sim.reference.unpredictable import allowing_unpredictable
from npu_sim.simulation import compile_graph
from npu_sim.simulator import simulate_program
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, RoundingMode, make_attribute

SHAPE = (1, 16)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TFLITE = Path(__file__).resolve().parents[1] / "data" / "tflite"


class _Memory:
    """An operand read from memory (a leaf of the chains): only its identity matters here."""

    def read(self) -> np.ndarray:  # pragma: no cover - never read by fold_plan
        raise AssertionError


def _const(values, dtype: DType) -> tuple[int, np.ndarray]:
    array = np.asarray(values, dtype=dtype.numpy_dtype)
    array.flags.writeable = False
    return 2, array


def _rescale(source, in_t: DType, out_t: DType, multiplier: int, shift: int, in_zp: int = 0,
             out_zp: int = 0, per_channel: bool = False):
    """A RESCALE step and its feeds (scales and zero points constant)."""
    channels = SHAPE[-1] if per_channel else 1
    attribute = make_attribute(Op.RESCALE, scale32=True, rounding_mode=RoundingMode.SINGLE_ROUND,
                               per_channel=per_channel, input_unsigned=False, output_unsigned=False)
    types = (TensorType(SHAPE, in_t), TensorType((channels,), DType.INT32), TensorType((channels,), DType.INT8),
             TensorType((1,), in_t), TensorType((1,), out_t))
    step = KernelStep(Op.RESCALE, attribute, (0,) * 5, types, (TensorType(SHAPE, out_t),))
    feeds = (source, _const([multiplier] * channels, DType.INT32), _const([shift] * channels, DType.INT8),
             _const([in_zp], in_t), _const([out_zp], out_t))
    return step, feeds


def _binary(op: Op, a, b, shift: int = 0):
    types = [TensorType(SHAPE, DType.INT32), TensorType(SHAPE, DType.INT32)]
    feeds = [a, b]
    if op is Op.MUL:
        types.append(TensorType((1,), DType.INT8))
        feeds.append(_const([shift], DType.INT8))
    attribute = make_attribute(op)
    return KernelStep(op, attribute, (0,) * len(types), tuple(types), (TensorType(SHAPE, DType.INT32),)), tuple(feeds)


def _run_steps(steps, feeds, leaves: dict[int, np.ndarray]) -> list[np.ndarray]:
    """Every step's result, by the kernels, from the values of the memory leaves (by identity)."""
    results: list[np.ndarray] = []
    for step, step_feeds in zip(steps, feeds):
        inputs = [leaves[id(source)] if kind == 0 else results[source] if kind == 1 else source
                  for kind, source in step_feeds]
        results.append(run_kernel(KernelArgs(step.op, step.attribute, inputs, list(step.input_types),
                                             list(step.output_types)))[0])
    return results


def _bound(steps, feeds, leaves: dict[int, np.ndarray]):
    """Each step bound after a first call, as a compute command binds them."""
    results, bound = [], []
    for step, step_feeds in zip(steps, feeds):
        inputs = [leaves[id(source)] if kind == 0 else results[source] if kind == 1 else source
                  for kind, source in step_feeds]
        args = KernelArgs(step.op, step.attribute, inputs, list(step.input_types), list(step.output_types))
        results.append(run_kernel(args)[0])
        bound.append(bind_kernel(args, [source if kind == 2 else None for kind, source in step_feeds]))
    return bound


def _run_plan(plan, leaves: dict[int, np.ndarray], count: int) -> list[np.ndarray | None]:
    results: list = [None] * count
    for index, run, step_feeds in plan:
        results[index] = run([leaves[id(source)] if kind == 0 else results[source][0] if kind == 1 else source
                              for kind, source in step_feeds])
    return [None if r is None else r[0] for r in results]


def _two_leaf_chain(out_zp: int = 3):
    """(a, b int8 in memory) -> two RESCALEs to int32 -> ADD -> RESCALE to int8 -> RESCALE to int32."""
    a, b = _Memory(), _Memory()
    parts = [_rescale((0, a), DType.INT8, DType.INT32, 1 << 30, 20, in_zp=-5),
             _rescale((0, b), DType.INT8, DType.INT32, 3 << 28, 19, in_zp=7),
             _binary(Op.ADD, (1, 0), (1, 1)),
             _rescale((1, 2), DType.INT32, DType.INT8, 1 << 30, 33, out_zp=out_zp),
             _rescale((1, 3), DType.INT8, DType.INT32, 1 << 30, 25, in_zp=out_zp)]
    steps, feeds = [p[0] for p in parts], [p[1] for p in parts]
    return steps, feeds, a, b


def _leaf_values(a, b, rng) -> dict[int, np.ndarray]:
    return {id(a): rng.integers(-128, 128, SHAPE).astype(np.int8),
            id(b): rng.integers(-128, 128, SHAPE).astype(np.int8)}


def test_a_chain_over_two_int8_operands_becomes_one_lookup_with_the_kernels_bits():
    steps, feeds, a, b = _two_leaf_chain()
    rng = np.random.default_rng(0)
    plan = fold_plan(steps, _bound(steps, feeds, _leaf_values(a, b, rng)), feeds, (4,))
    assert plan is not None
    assert [(index, len(leaves)) for index, _, leaves in plan] == [(4, 2)]   # nothing else runs
    for _ in range(20):
        leaves = _leaf_values(a, b, rng)
        expected = _run_steps(steps, feeds, leaves)[4]
        got = _run_plan(plan, leaves, len(steps))[4]
        assert got is not None and got.dtype == expected.dtype and got.shape == expected.shape
        assert np.array_equal(got, expected)


def test_a_step_read_outside_the_chain_still_runs_and_keeps_its_bits():
    steps, feeds, a, b = _two_leaf_chain()
    rng = np.random.default_rng(1)
    plan = fold_plan(steps, _bound(steps, feeds, _leaf_values(a, b, rng)), feeds, (2, 4))
    assert plan is not None and [index for index, _, _ in plan] == [2, 4]
    leaves = _leaf_values(a, b, rng)
    expected, got = _run_steps(steps, feeds, leaves), _run_plan(plan, leaves, len(steps))
    assert all(np.array_equal(got[i], expected[i]) for i in (2, 4))


def test_a_chain_some_values_break_a_require_of_is_not_folded():
    """MUL with a shift REQUIREs its product in int32: some int8 pairs break it, so the
    command keeps its steps (and the kernel reports the data that do)."""
    a, b = _Memory(), _Memory()
    parts = [_rescale((0, a), DType.INT8, DType.INT32, 1 << 30, 20),
             _rescale((0, b), DType.INT8, DType.INT32, 1 << 30, 20),
             _binary(Op.MUL, (1, 0), (1, 1), shift=1),
             _rescale((1, 2), DType.INT32, DType.INT8, 1 << 30, 40)]
    steps, feeds = [p[0] for p in parts], [p[1] for p in parts]
    small = {id(a): np.ones(SHAPE, np.int8), id(b): np.ones(SHAPE, np.int8)}
    assert fold_plan(steps, _bound(steps, feeds, small), feeds, (3,)) is None


def test_per_channel_scales_and_wider_operands_from_memory_do_not_fold():
    a, wide = _Memory(), _Memory()
    per_channel = [_rescale((0, a), DType.INT8, DType.INT32, 1 << 30, 20, per_channel=True),
                   _rescale((1, 0), DType.INT32, DType.INT8, 1 << 30, 33)]
    wide_add = [_rescale((0, a), DType.INT8, DType.INT32, 1 << 30, 20),
                _binary(Op.ADD, (1, 0), (0, wide)),
                _rescale((1, 1), DType.INT32, DType.INT8, 1 << 30, 33)]
    rng = np.random.default_rng(2)
    for parts in (per_channel, wide_add):
        steps, feeds = [p[0] for p in parts], [p[1] for p in parts]
        leaves = {id(a): rng.integers(-128, 128, SHAPE).astype(np.int8),
                  id(wide): rng.integers(-1000, 1000, SHAPE).astype(np.int32)}
        assert fold_plan(steps, _bound(steps, feeds, leaves), feeds, (len(steps) - 1,)) is None


def _unary(op: Op, source, in_t: DType, out_t: DType, constant=None, **attributes):
    """A CAST (no constant) or a SUB, MUL, MAXIMUM, MINIMUM of ``source`` and a one-element
    constant of shape [1, 1] (broadcast, as a converter's zero points and scales are)."""
    if constant is None:
        types: tuple = (TensorType(SHAPE, in_t),)
        feeds: tuple = (source,)
    else:
        types = (TensorType(SHAPE, in_t), TensorType((1, 1), in_t))
        feeds = (source, _const([[constant]], in_t))
        if op is Op.MUL:
            types += (TensorType((1,), DType.INT8),)
            feeds += (_const([0], DType.INT8),)
    attribute = make_attribute(op, **attributes)
    return KernelStep(op, attribute, (0,) * len(types), types, (TensorType(SHAPE, out_t),)), feeds


def test_a_dequantize_to_float_and_a_saturating_narrowing_fold_with_the_kernels_bits():
    """int8 -> CAST to fp32 -> SUB zero point -> MUL scale (a dequantize: a table of floats),
    and int8 -> RESCALE to int32 -> MAXIMUM, MINIMUM (broadcast constants) -> CAST to int8."""
    a = _Memory()
    parts = [_unary(Op.CAST, (0, a), DType.INT8, DType.FP32),
             _unary(Op.SUB, (1, 0), DType.FP32, DType.FP32, constant=-3.0),
             _unary(Op.MUL, (1, 1), DType.FP32, DType.FP32, constant=0.0078125 * 3),
             _rescale((0, a), DType.INT8, DType.INT32, 1 << 30, 28, in_zp=-3),
             _unary(Op.MAXIMUM, (1, 3), DType.INT32, DType.INT32, constant=-100),
             _unary(Op.MINIMUM, (1, 4), DType.INT32, DType.INT32, constant=150),
             _unary(Op.CAST, (1, 5), DType.INT32, DType.INT8)]
    steps, feeds = [p[0] for p in parts], [p[1] for p in parts]
    rng = np.random.default_rng(4)

    def leaves() -> dict[int, np.ndarray]:
        return {id(a): rng.integers(-128, 128, SHAPE).astype(np.int8)}

    plan = fold_plan(steps, _bound(steps, feeds, leaves()), feeds, (2, 6))
    assert plan is not None
    assert [(index, len(step_feeds)) for index, _, step_feeds in plan] == [(2, 1), (6, 1)]   # two lookups
    for _ in range(20):
        values = leaves()
        expected, got = _run_steps(steps, feeds, values), _run_plan(plan, values, len(steps))
        for i in (2, 6):
            assert got[i] is not None and got[i].dtype == expected[i].dtype
            assert np.array_equal(got[i].view(np.uint8), expected[i].view(np.uint8))   # the bits, -0.0 too


def test_steps_of_one_element_constants_only_run_as_they_are():
    """MAXIMUM of two broadcast constants, then CAST: no operand to look them up by."""
    one = (1, 1)
    attribute = make_attribute(Op.MAXIMUM)
    maximum = KernelStep(Op.MAXIMUM, attribute, (0, 0), (TensorType(one, DType.INT32), TensorType(one, DType.INT32)),
                         (TensorType(one, DType.INT32),))
    cast = KernelStep(Op.CAST, make_attribute(Op.CAST), (0,), (TensorType(one, DType.INT32),),
                      (TensorType(one, DType.INT8),))
    steps, feeds = [maximum, cast], [(_const([[5]], DType.INT32), _const([[7]], DType.INT32)), ((1, 0),)]
    assert fold_plan(steps, _bound(steps, feeds, {}), feeds, (1,)) is None


def test_a_constant_that_differs_from_element_to_element_does_not_fold():
    a = _Memory()
    bias = np.arange(SHAPE[-1], dtype=np.int32).reshape(SHAPE)
    bias.flags.writeable = False
    add = _binary(Op.ADD, (1, 0), (2, bias))
    parts = [_rescale((0, a), DType.INT8, DType.INT32, 1 << 30, 20), add,
             _rescale((1, 1), DType.INT32, DType.INT8, 1 << 30, 33)]
    steps, feeds = [p[0] for p in parts], [p[1] for p in parts]
    leaves = {id(a): np.random.default_rng(5).integers(-128, 128, SHAPE).astype(np.int8)}
    plan = fold_plan(steps, _bound(steps, feeds, leaves), feeds, (2,))
    assert plan is None or 1 in [index for index, _, _ in plan]   # the ADD still runs


def _quantize_chain(x):
    """fp32 ``x`` in memory -> MUL by a scale -> CAST to int32 -> ADD a zero point -> MAXIMUM,
    MINIMUM -> CAST to int8: a float state's saturating quantize, as a converter writes it."""
    parts = [_unary(Op.MUL, (0, x), DType.FP32, DType.FP32, constant=1 / 0.0234),
             _unary(Op.CAST, (1, 0), DType.FP32, DType.INT32),
             _unary(Op.ADD, (1, 1), DType.INT32, DType.INT32, constant=-3),
             _unary(Op.MAXIMUM, (1, 2), DType.INT32, DType.INT32, constant=-128),
             _unary(Op.MINIMUM, (1, 3), DType.INT32, DType.INT32, constant=127),
             _unary(Op.CAST, (1, 4), DType.INT32, DType.INT8)]
    return [p[0] for p in parts], [p[1] for p in parts]


def test_a_quantize_of_floats_from_memory_is_remembered_per_value_with_the_kernels_bits():
    """Too many float values for a table: one entry remembers each value's result (a stream
    feeds it few: an earlier dequantize's), and values it has not seen run the kernels."""
    x = _Memory()
    steps, feeds = _quantize_chain(x)
    rng = np.random.default_rng(6)
    dequantized = ((np.arange(-128, 128) + 3) * 0.0234).astype(np.float32)
    odd = np.array([np.nan, np.inf, -0.0, 0.0, 1e30, -1e5, 0.0117, -0.0117], np.float32)

    def values(pool: np.ndarray) -> dict[int, np.ndarray]:
        return {id(x): rng.choice(pool, size=SHAPE).astype(np.float32)}

    plan = fold_plan(steps, _bound(steps, feeds, values(dequantized)), feeds, (5,))
    assert plan is not None and [(index, len(step_feeds)) for index, _, step_feeds in plan] == [(5, 1)]
    for k in range(200):
        leaves = values(dequantized if k % 10 else odd)
        expected = _run_steps(steps, feeds, leaves)[5]
        got = _run_plan(plan, leaves, len(steps))[5]
        assert got is not None and got.dtype == expected.dtype and np.array_equal(got, expected), k
    breaking = {id(x): np.full(SHAPE, -np.inf, np.float32)}   # saturates to int32's least: the ADD overflows
    with pytest.raises(TosaRuntimeError, match="apply_add_s"):
        _run_plan(plan, breaking, len(steps))


def test_a_short_chain_over_floats_from_memory_runs_as_it_is():
    x = _Memory()
    steps, feeds = _quantize_chain(x)
    steps, feeds = steps[:2], feeds[:2]   # MUL, CAST: a lookup would not be cheaper
    leaves = {id(x): np.ones(SHAPE, np.float32)}
    assert fold_plan(steps, _bound(steps, feeds, leaves), feeds, (1,)) is None


def test_nothing_folds_in_a_run_going_on_past_requires():
    steps, feeds, a, b = _two_leaf_chain()
    bound = _bound(steps, feeds, _leaf_values(a, b, np.random.default_rng(3)))
    with allowing_unpredictable():
        assert fold_plan(steps, bound, feeds, (4,)) is None


@pytest.mark.parametrize("path", [EXAMPLES / "lstm_stateful_int8.tosa", EXAMPLES / "lstm_step64_int8.tosa",
                                  TFLITE / "lstm_stateful_loop_int8.tflite"], ids=lambda p: p.stem)
def test_a_long_stream_gives_the_same_bits_and_cycles_folded(path, monkeypatch):
    """(The WHILE loop's cell folds its dequantizes of the state it carries on into tables of floats.)"""
    graph, hw = load_graph(path), load_hw_config("edge")
    program = compile_graph(graph, hw, resident_constants=True)
    inputs = load_inputs(graph, [], invocations=8, random_seed=5).invocations
    monkeypatch.setattr(simulator_module, "FOLD_MIN_INVOCATIONS", 1 << 30)
    plain = simulate_program(program, hw, inputs)
    monkeypatch.setattr(simulator_module, "FOLD_MIN_INVOCATIONS", 2)
    folded = simulate_program(program, hw, inputs)
    assert folded.per_invocation_cycles == plain.per_invocation_cycles
    for got, expected in zip(folded.outputs, plain.outputs):
        assert all(np.array_equal(got[k], expected[k]) for k in expected)
    assert all(np.array_equal(folded.variables[k], plain.variables[k]) for k in plain.variables)
