"""ARGMAX, AVG_POOL2D and MAX_POOL2D against Arm's reference model.

Integer results and every MAX_POOL2D/ARGMAX result must match bit for bit (NaN
positions and zero signs included); floating-point AVG_POOL2D must pass the
dot-product accuracy rule against the model's fp64 results. Tiles must give the
whole-tensor bits.
"""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError
from npu_sim.reference.pooling import AVG_POOL_TYPES, MAX_TYPES
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, NanPropagationMode, Op, make_attribute
from tests.fp_compliance_dot import assert_dot_compliant, bound_operand
from tests.kernel_testing import assert_same_bits, ours_tiled, random_tiles, run_ours
from tests.oracle import Operand, run_op
from tests.value_gen import fp_values, int_values

AVG_COMBOS = [(t, acc) for t, accs in AVG_POOL_TYPES.items() for acc in accs]
MAX_DTYPES = sorted(MAX_TYPES)
MODES = [NanPropagationMode.PROPAGATE, NanPropagationMode.IGNORE]


def _name(value) -> str:
    return "-".join(t.name for t in value) if isinstance(value, tuple) else value.name


def _geometry(rng: np.random.Generator, max_size: int = 9):
    """Random (input shape, kernel, stride, pad, output shape) obeying the pooling ERROR_IFs."""
    while True:
        n, c = int(rng.integers(1, 3)), int(rng.integers(1, 5))
        sizes = [int(rng.integers(1, max_size + 1)) for _ in range(2)]
        kernel = [int(rng.integers(1, 5)) for _ in range(2)]
        stride = [int(rng.integers(1, 4)) for _ in range(2)]
        pad, out = [], []
        for size, k, s in zip(sizes, kernel, stride):
            before = int(rng.integers(0, k))
            options = [a for a in range(k) if (span := size + before + a - k) >= 0 and span % s == 0]
            if not options:
                break
            after = int(rng.choice(options))
            pad += [before, after]
            out.append((size + before + after - k) // s + 1)
        else:
            return (n, *sizes, c), tuple(kernel), tuple(stride), tuple(pad), (n, *out, c)


def _data(rng: np.random.Generator, dtype: DType, shape, nan_fraction: float = 0.0) -> np.ndarray:
    if dtype.is_integer:
        return int_values(dtype, shape, rng, edge_fraction=0.1)
    values = fp_values(dtype, shape, rng, scale=4.0 if dtype in (DType.FP8E4M3, DType.FP8E5M2) else 1.0,
                       specials=[0.0, -0.0], special_fraction=0.05)
    special = rng.random(values.shape)
    values[special < nan_fraction] = np.nan
    values[(special > 1 - nan_fraction / 2)] = np.inf if dtype is not DType.FP8E4M3 else np.nan
    return values


def _avg_case(rng: np.random.Generator, dtype: DType, acc_t: DType):
    in_shape, kernel, stride, pad, out_shape = _geometry(rng)
    x = _data(rng, dtype, in_shape)
    zps = [int(rng.choice([-128, 127, *rng.integers(-128, 128, 2)])) if dtype is DType.INT8 else 0
           for _ in range(2)]
    operands = [Operand(x, dtype), Operand([zps[0]], dtype, True), Operand([zps[1]], dtype, True)]
    attribute = make_attribute(Op.AVG_POOL2D, kernel=kernel, stride=stride, pad=pad, acc_type=acc_t)
    return operands, attribute, [TensorType(out_shape, dtype)]


def _max_case(rng: np.random.Generator, dtype: DType, mode: NanPropagationMode):
    in_shape, kernel, stride, pad, out_shape = _geometry(rng)
    x = _data(rng, dtype, in_shape, nan_fraction=0.1)
    attribute = make_attribute(Op.MAX_POOL2D, kernel=kernel, stride=stride, pad=pad, nan_mode=mode)
    return [Operand(x, dtype)], attribute, [TensorType(out_shape, dtype)]


def _argmax_case(rng: np.random.Generator, dtype: DType, mode: NanPropagationMode):
    rank = int(rng.integers(1, 5))
    shape = tuple(int(rng.integers(1, 6)) for _ in range(rank))
    axis = int(rng.integers(0, rank))
    x = _data(rng, dtype, shape, nan_fraction=0.1)
    if dtype.is_float and x.size:                 # ties and signed zeros
        flat = x.reshape(-1)
        flat[rng.random(flat.size) < 0.2] = 0.0
        flat[rng.random(flat.size) < 0.1] = -0.0
    out_shape = shape[:axis] + shape[axis + 1:]
    attribute = make_attribute(Op.ARGMAX, axis=axis, nan_mode=mode)
    return [Operand(x, dtype)], attribute, [TensorType(out_shape, DType.INT32)]


# --------------------------------------------------------------------------- AVG_POOL2D
@pytest.mark.parametrize("combo", AVG_COMBOS, ids=_name)
def test_avg_pool2d_matches_reference_model(combo) -> None:
    dtype, acc_t = combo
    rng = np.random.default_rng([21, *combo])
    for _ in range(3):
        operands, attribute, outputs = _avg_case(rng, dtype, acc_t)
        result = run_ours(Op.AVG_POOL2D, operands, attribute, outputs)[0]
        if dtype.is_integer:
            assert_same_bits(result, run_op(Op.AVG_POOL2D, operands, attribute, outputs)[0])
            continue
        ref = run_op(Op.AVG_POOL2D, operands, attribute, outputs, precise=True)[0]
        bound_ops = [Operand(bound_operand(operands[0].value, dtype), dtype), *operands[1:]]
        bnd = run_op(Op.AVG_POOL2D, bound_ops, attribute, outputs, precise=True)[0]
        assert_dot_compliant(result, ref, bnd, dtype, acc_t, attribute.kernel[0] * attribute.kernel[1], False)


def test_avg_pool2d_int8_rounding_and_padding_count() -> None:
    """Padding is not counted; the reciprocal scale rounds (x*multiplier + 2**(shift-1)) >> shift."""
    x = np.array([[10, 11], [-7, 120]], np.int8).reshape(1, 2, 2, 1)
    operands = [Operand(x, DType.INT8), Operand([-3], DType.INT8, True), Operand([5], DType.INT8, True)]
    attribute = make_attribute(Op.AVG_POOL2D, kernel=(2, 2), stride=(1, 1), pad=(1, 0, 1, 0),
                               acc_type=DType.INT32)
    outputs = [TensorType((1, 2, 2, 1), DType.INT8)]
    result = run_ours(Op.AVG_POOL2D, operands, attribute, outputs)[0]
    # (10+3)/1 = 13; (10+11+6)/2 = 13.5 -> 14; (10-7+6)/2 = 4.5 -> 5; (10+11-7+120+12)/4 = 36.5 -> 37
    assert result.reshape(-1).tolist() == [13 + 5, 14 + 5, 5 + 5, 37 + 5]
    assert_same_bits(result, run_op(Op.AVG_POOL2D, operands, attribute, outputs)[0])


def test_avg_pool2d_fp8_divides_by_the_exact_count() -> None:
    """The pseudocode casts the count to in_out_t (9 -> 8 in fp8e5m2); the precision rule and
    the reference model divide by 9."""
    x = np.full((1, 3, 3, 1), 1.5, np.float32).astype(DType.FP8E5M2.numpy_dtype)
    operands = [Operand(x, DType.FP8E5M2), Operand([0], DType.FP8E5M2, True), Operand([0], DType.FP8E5M2, True)]
    attribute = make_attribute(Op.AVG_POOL2D, kernel=(3, 3), stride=(1, 1), pad=(0, 0, 0, 0),
                               acc_type=DType.FP16)
    outputs = [TensorType((1, 1, 1, 1), DType.FP8E5M2)]
    result = run_ours(Op.AVG_POOL2D, operands, attribute, outputs)[0]
    assert float(result.item()) == 1.5
    assert_same_bits(result, run_op(Op.AVG_POOL2D, operands, attribute, outputs)[0])


# --------------------------------------------------------------------------- MAX_POOL2D and ARGMAX
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("dtype", MAX_DTYPES, ids=_name)
def test_max_pool2d_matches_reference_model(dtype: DType, mode: NanPropagationMode) -> None:
    rng = np.random.default_rng([31, dtype, mode])
    for _ in range(3):
        operands, attribute, outputs = _max_case(rng, dtype, mode)
        # Equal values, NaN where NaN, same zero signs (NaN payloads may differ).
        assert_same_bits(run_ours(Op.MAX_POOL2D, operands, attribute, outputs)[0],
                         run_op(Op.MAX_POOL2D, operands, attribute, outputs)[0], nan_equal=True)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("dtype", MAX_DTYPES, ids=_name)
def test_argmax_matches_reference_model(dtype: DType, mode: NanPropagationMode) -> None:
    rng = np.random.default_rng([41, dtype, mode])
    for _ in range(4):
        operands, attribute, outputs = _argmax_case(rng, dtype, mode)
        assert_same_bits(run_ours(Op.ARGMAX, operands, attribute, outputs)[0],
                         run_op(Op.ARGMAX, operands, attribute, outputs)[0])


@pytest.mark.parametrize("values, mode, expected", [
    ([np.nan, -np.inf, 1.0, np.nan], NanPropagationMode.PROPAGATE, 0),
    ([np.nan, -np.inf, -np.inf], NanPropagationMode.IGNORE, 1),
    ([np.nan, np.nan], NanPropagationMode.IGNORE, 0),
    ([-0.0, 0.0, -1.0], NanPropagationMode.PROPAGATE, 0),
    ([-np.inf, -np.inf, -65504.0], NanPropagationMode.PROPAGATE, 2),
])
def test_argmax_nan_and_tie_rules(values, mode, expected) -> None:
    x = np.array(values, np.float16)
    operands = [Operand(x, DType.FP16)]
    attribute = make_attribute(Op.ARGMAX, axis=0, nan_mode=mode)
    outputs = [TensorType((), DType.INT32)]
    result = run_ours(Op.ARGMAX, operands, attribute, outputs)[0]
    assert int(result) == expected
    assert_same_bits(result, run_op(Op.ARGMAX, operands, attribute, outputs)[0])


def test_max_pool2d_keeps_the_first_of_equal_zeros() -> None:
    """apply_max_s(acc, value) keeps acc on ties: -0 then +0 gives -0 (as the model does)."""
    x = np.array([-0.0, 0.0, 0.0, -0.0], np.float32).reshape(1, 2, 2, 1)
    operands = [Operand(x, DType.FP32)]
    attribute = make_attribute(Op.MAX_POOL2D, kernel=(1, 2), stride=(1, 1), pad=(0, 0, 0, 0),
                               nan_mode=NanPropagationMode.PROPAGATE)
    outputs = [TensorType((1, 2, 1, 1), DType.FP32)]
    result = run_ours(Op.MAX_POOL2D, operands, attribute, outputs)[0]
    assert np.signbit(result.reshape(-1)).tolist() == [True, False]
    assert_same_bits(result, run_op(Op.MAX_POOL2D, operands, attribute, outputs)[0])


# --------------------------------------------------------------------------- tiling
@pytest.mark.parametrize("dtype, acc_t", [(DType.INT8, DType.INT32), (DType.FP16, DType.FP16),
                                          (DType.BF16, DType.FP32), (DType.FP8E4M3, DType.FP16)], ids=_name)
def test_pool_tiles_give_the_whole_tensor_bits(dtype: DType, acc_t: DType) -> None:
    rng = np.random.default_rng([51, dtype])
    for _ in range(4):
        cases = [(Op.AVG_POOL2D, _avg_case(rng, dtype, acc_t)),
                 (Op.MAX_POOL2D, _max_case(rng, dtype, MODES[int(rng.integers(0, 2))])),
                 (Op.ARGMAX, _argmax_case(rng, dtype, MODES[int(rng.integers(0, 2))]))]
        for op, (operands, attribute, outputs) in cases:
            whole = run_ours(op, operands, attribute, outputs)[0]
            tiles = random_tiles(outputs[0].shape, rng)
            assert_same_bits(ours_tiled(op, operands, attribute, outputs, tiles)[0], whole, f"{op}")


# --------------------------------------------------------------------------- ERROR_IF
def _pool(op: Op, **fields) -> tuple[list[Operand], Attribute, list[TensorType]]:
    dtype = fields.pop("dtype", DType.INT8)
    zps = fields.pop("zps", (0, 0))
    out = fields.pop("out", (1, 4, 4, 2))
    attribute = dict(kernel=(3, 3), stride=(1, 1), pad=(1, 1, 1, 1))
    attribute.update(fields)
    operands = [Operand(np.zeros((1, 4, 4, 2)), dtype)]
    if op is Op.AVG_POOL2D:
        attribute.setdefault("acc_type", DType.INT32 if dtype.is_integer else DType.FP32)
        operands += [Operand([zps[0]], dtype, True), Operand([zps[1]], dtype, True)]
    else:
        attribute.setdefault("nan_mode", NanPropagationMode.PROPAGATE)
    return operands, make_attribute(op, **attribute), [TensorType(out, dtype)]


@pytest.mark.parametrize("op", [Op.AVG_POOL2D, Op.MAX_POOL2D], ids=lambda o: o.name)
@pytest.mark.parametrize("fields, message", [
    ({"kernel": (0, 3)}, "kernel size must be >= 1"),
    ({"stride": (1, 0)}, "stride must be >= 1"),
    ({"pad": (1, -1, 1, 1)}, "pad values must be >= 0"),
    ({"pad": (1, 1, 3, 1), "out": (1, 4, 6, 2)}, "pad_left/right must be < kernel_x"),
    ({"pad": (3, 1, 1, 1), "out": (1, 6, 4, 2)}, "pad_top/bottom must be < kernel_y"),
    ({"out": (1, 4, 5, 2)}, "output size 5"),
    ({"stride": (2, 1), "out": (1, 2, 4, 2)}, "idiv_check"),
])
def test_pool_error_ifs(op: Op, fields: dict, message: str) -> None:
    operands, attribute, outputs = _pool(op, **fields)
    with pytest.raises(TosaRuntimeError, match=message):
        run_ours(op, operands, attribute, outputs)


@pytest.mark.parametrize("dtype, zps", [(DType.INT16, (1, 0)), (DType.INT16, (0, -1)), (DType.FP16, (0, 1.0))],
                         ids=["int16-input", "int16-output", "fp16-output"])
def test_avg_pool2d_zero_points_only_for_int8(dtype: DType, zps) -> None:
    operands, attribute, outputs = _pool(Op.AVG_POOL2D, dtype=dtype, zps=zps)
    with pytest.raises(TosaRuntimeError, match="must be zero"):
        run_ours(Op.AVG_POOL2D, operands, attribute, outputs)


def test_avg_pool2d_acc_type_must_match() -> None:
    operands, attribute, outputs = _pool(Op.AVG_POOL2D, dtype=DType.BF16, acc_type=DType.FP16)
    with pytest.raises(TosaRuntimeError, match="acc_type FP16 not allowed"):
        run_ours(Op.AVG_POOL2D, operands, attribute, outputs)


def test_argmax_error_ifs() -> None:
    x = [Operand(np.zeros((2, 3)), DType.INT8)]
    with pytest.raises(TosaRuntimeError, match="axis 2 out of range"):
        run_ours(Op.ARGMAX, x, make_attribute(Op.ARGMAX, axis=2, nan_mode=1), [TensorType((2,), DType.INT32)])
    with pytest.raises(TosaRuntimeError, match="output shape"):
        run_ours(Op.ARGMAX, x, make_attribute(Op.ARGMAX, axis=1, nan_mode=1), [TensorType((3,), DType.INT32)])
    with pytest.raises(TosaRuntimeError, match="nan_mode must be"):
        run_ours(Op.ARGMAX, [Operand(np.zeros((2, 3)), DType.FP32)], make_attribute(Op.ARGMAX, axis=1),
             [TensorType((2,), DType.INT32)])
