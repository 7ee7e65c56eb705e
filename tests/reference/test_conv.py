"""CONV2D, CONV3D, DEPTHWISE_CONV2D, TRANSPOSE_CONV2D and MATMUL against Arm's reference model.

Integers must match bit for bit; floating point must pass the spec's dot-product
accuracy check against the model's fp64 (precise-mode) results. Tiled execution
must give the whole-tensor bits for every type. ERROR_IF/REQUIRE violations are
checked against the spec text, never fed to the in-process oracle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError
from npu_sim.reference.conv import CONV_TYPES, MATMUL_TYPES
from npu_sim.reference.numerics import round_to_float
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op, make_attribute
from tests.fp_compliance_dot import TEST_DATA_B, assert_dot_compliant, bound_operand, pro_fp_data
from tests.kernel_testing import assert_same_bits, ours_tiled, random_tiles, run_bound, run_ours
from tests.oracle import Operand, run_op
from tests.value_gen import fp_values, int_values

INT_CONV = [k for k in CONV_TYPES if k[0].is_integer]
FP_CONV = [k for k in CONV_TYPES if not k[0].is_integer]
INT_MATMUL = sorted((k for k in MATMUL_TYPES if k[0].is_integer), key=lambda k: k[0])
FP_MATMUL = sorted((k for k in MATMUL_TYPES if not k[0].is_integer), key=lambda k: (k[0], k[1]))
CONV_OPS = [Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.TRANSPOSE_CONV2D]


@dataclasses.dataclass
class Case:
    """One operator call: operands in spec order, attribute, output type, and what the spec check needs."""

    op: Op
    operands: list[Operand]
    attribute: Attribute
    output: TensorType
    ks: int                       # dot-product length (Appendix A)
    acc_t: DType
    local_bound: bool = False

    @property
    def outputs(self) -> list[TensorType]:
        return [self.output]


def _name(combo) -> str:
    return "-".join(t.name for t in combo)


# --------------------------------------------------------------------------- case generation
def _fit(rng: np.random.Generator, size: int, kernel: int, stride: int, dilation: int,
         max_pad: int = 2) -> tuple[int, int, int] | None:
    """(pad_before, pad_after, out_size) with the exact division the spec's idiv_check needs."""
    before = int(rng.integers(0, max_pad + 1))
    options = [after for after in range(0, max_pad + stride + 1)
               if (span := size - 1 + before + after - (kernel - 1) * dilation) >= 0 and span % stride == 0]
    if not options:
        return None
    after = int(rng.choice(options))
    return before, after, (size - 1 + before + after - (kernel - 1) * dilation) // stride + 1


def _values(rng: np.random.Generator, dtype: DType, shape, role: str) -> np.ndarray:
    if dtype.is_integer:
        lo = -7 if dtype is DType.INT4 else None             # int4_t is [-7, +7]
        return int_values(dtype, shape, rng, lo, edge_fraction=0.1)
    scale = {DType.FP8E4M3: 4.0, DType.FP8E5M2: 4.0}.get(dtype, 1.0)
    return fp_values(dtype, shape, rng, scale=scale, specials=[0.0, -0.0], special_fraction=0.05)


def _bias(rng: np.random.Generator, out_t: DType, count: int) -> np.ndarray:
    if out_t is DType.INT32:
        return int_values(DType.INT32, (count,), rng, -(1 << 20), 1 << 20, edge_fraction=0.1)
    if out_t is DType.INT48:
        return rng.integers(-(1 << 40), 1 << 40, size=count, dtype=np.int64)
    return _values(rng, out_t, (count,), "bias")


def _zero_points(rng: np.random.Generator, in_t: DType, weight_t: DType) -> list[Operand]:
    izp = int(rng.choice([-128, 127, *rng.integers(-128, 128, 2)])) if in_t is DType.INT8 else 0
    wzp = int(rng.choice([-128, 127, *rng.integers(-128, 128, 2)])) if weight_t is DType.INT8 else 0
    return [Operand([izp], in_t, True), Operand([wzp], weight_t, True)]


def conv_case(rng: np.random.Generator, op: Op, combo: tuple[DType, DType, DType],
              max_size: int = 8, max_channels: int = 5) -> Case:
    """A random legal call of one of the four convolutions with types ``combo``."""
    in_t, weight_t, acc_t = combo
    out_t = CONV_TYPES[combo]
    spatial = 3 if op is Op.CONV3D else 2
    while True:
        n = int(rng.integers(1, 3))
        sizes = [int(rng.integers(1, (4 if spatial == 3 else max_size) + 1)) for _ in range(spatial)]
        kernel = [int(rng.integers(1, 4)) for _ in range(spatial)]
        stride = [int(rng.integers(1, 4)) for _ in range(spatial)]
        ic = int(rng.integers(1, max_channels + 1))
        oc = int(rng.integers(1, max_channels + 1))
        if op is Op.TRANSPOSE_CONV2D:
            out_pad = [int(rng.integers(-k + 1, 3)) for k in kernel for _ in range(2)]
            out_sizes = [(s - 1) * st + out_pad[2 * d] + out_pad[2 * d + 1] + kernel[d]
                         for d, (s, st) in enumerate(zip(sizes, stride))]
            if min(out_sizes) < 1:
                continue
            attribute = make_attribute(op, out_pad=tuple(out_pad), stride=tuple(stride), acc_type=acc_t)
        else:
            dilation = [int(rng.integers(1, 3)) for _ in range(spatial)]
            fits = [_fit(rng, s, k, st, dl) for s, k, st, dl in zip(sizes, kernel, stride, dilation)]
            if any(f is None for f in fits):
                continue
            pad = tuple(v for f in fits for v in f[:2])
            out_sizes = [f[2] for f in fits]
            attribute = make_attribute(op, pad=pad, stride=tuple(stride), dilation=tuple(dilation),
                                       acc_type=acc_t, local_bound=bool(rng.integers(0, 2)))
        break
    x = _values(rng, in_t, (n, *sizes, ic), "input")
    if op is Op.DEPTHWISE_CONV2D:
        weight = _values(rng, weight_t, (*kernel, ic, oc), "weight")
        channels = ic * oc
        ks = kernel[0] * kernel[1]
    else:
        weight = _values(rng, weight_t, (oc, *kernel, ic), "weight")
        channels = oc
        ks = int(np.prod(kernel)) * ic
    bias_count = 1 if rng.random() < 0.25 else channels
    operands = [Operand(x, in_t), Operand(weight, weight_t, True),
                Operand(_bias(rng, out_t, bias_count), out_t, True), *_zero_points(rng, in_t, weight_t)]
    local = bool(getattr(attribute, "local_bound", False))
    return Case(op, operands, attribute, TensorType((n, *out_sizes, channels), out_t), ks, acc_t, local)


def matmul_case(rng: np.random.Generator, in_t: DType, out_t: DType, max_size: int = 9) -> Case:
    n, h, c, w = (int(rng.integers(1, max_size + 1)) for _ in range(4))
    n = min(n, 3)
    a = _values(rng, in_t, (n, h, c), "input")
    b = _values(rng, in_t, (n, c, w), "weight")
    zps = _zero_points(rng, in_t, in_t)
    operands = [Operand(a, in_t), Operand(b, in_t), *zps]
    return Case(Op.MATMUL, operands, make_attribute(Op.MATMUL), TensorType((n, h, w), out_t), c, out_t,
                local_bound=True)


def _fp_check(case: Case) -> None:
    """Our result against the spec's dot-product rule, with fp64 results from the model."""
    result = run_ours(case.op, case.operands, case.attribute, case.outputs)[0]
    assert_same_bits(run_bound(case.op, case.operands, case.attribute, case.outputs)[0], result, "bound")
    ref = run_op(case.op, case.operands, case.attribute, case.outputs, precise=True)[0]
    in_t = case.operands[0].dtype
    bound_ops = [Operand(bound_operand(case.operands[0].value, in_t, case.local_bound), in_t),
                 Operand(bound_operand(case.operands[1].value, in_t), case.operands[1].dtype,
                         case.operands[1].const)]
    has_bias = case.op is not Op.MATMUL
    if has_bias:
        bound_ops.append(Operand(bound_operand(case.operands[2].value, in_t), case.output.dtype, True))
    bound_ops += case.operands[len(bound_ops):]
    bnd = run_op(case.op, bound_ops, case.attribute, case.outputs, precise=True)[0]
    assert_dot_compliant(result, ref, bnd, case.output.dtype, case.acc_t, case.ks, has_bias)


# --------------------------------------------------------------------------- differential: integers
@pytest.mark.parametrize("op", CONV_OPS, ids=lambda o: o.name)
@pytest.mark.parametrize("combo", INT_CONV, ids=_name)
def test_integer_convolutions_match_reference_model(op: Op, combo) -> None:
    rng = np.random.default_rng([op.value, *combo])
    for _ in range(4):
        case = conv_case(rng, op, combo)
        expected = run_op(op, case.operands, case.attribute, case.outputs)[0]
        assert_same_bits(run_ours(op, case.operands, case.attribute, case.outputs)[0], expected, f"{case}")
        assert_same_bits(run_bound(op, case.operands, case.attribute, case.outputs)[0], expected, f"bound {case}")


@pytest.mark.parametrize("combo", INT_MATMUL, ids=_name)
def test_integer_matmul_matches_reference_model(combo) -> None:
    rng = np.random.default_rng([7, *combo])
    for _ in range(4):
        case = matmul_case(rng, *combo)
        expected = run_op(Op.MATMUL, case.operands, case.attribute, case.outputs)[0]
        assert_same_bits(run_ours(Op.MATMUL, case.operands, case.attribute, case.outputs)[0], expected)
        assert_same_bits(run_bound(Op.MATMUL, case.operands, case.attribute, case.outputs)[0], expected)


def test_int8_extreme_values_and_zero_points_are_exact() -> None:
    """All operands at the int8 extremes with the widest zero points: |products| = 255 * 255."""
    x = np.full((1, 5, 5, 16), -128, np.int8)
    x[0, ::2, ::2] = 127
    w = np.full((3, 3, 3, 16), -128, np.int8)
    w[1] = 127
    attribute = make_attribute(Op.CONV2D, pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1),
                               acc_type=DType.INT32)
    bias = np.array([-(1 << 30), 0, (1 << 30)], np.int32)
    for izp, wzp in ((127, 127), (-128, -128), (127, -128)):
        operands = [Operand(x, DType.INT8), Operand(w, DType.INT8, True), Operand(bias, DType.INT32, True),
                    Operand([izp], DType.INT8, True), Operand([wzp], DType.INT8, True)]
        outputs = [TensorType((1, 5, 5, 3), DType.INT32)]
        assert_same_bits(run_ours(Op.CONV2D, operands, attribute, outputs)[0],
                         run_op(Op.CONV2D, operands, attribute, outputs)[0])


@pytest.mark.parametrize("in_t, bias_t, acc_t", [(DType.INT8, DType.INT32, DType.INT32),
                                                  (DType.INT16, DType.INT48, DType.INT48)], ids=["i8", "i16"])
@pytest.mark.parametrize("spatial", [(1, 1), (3, 2)], ids=["vector", "map"])
def test_a_bound_pointwise_convolution_gives_the_reference_bits(in_t, bias_t, acc_t, spatial) -> None:
    """A 1x1 stride-1 convolution (a fully connected layer, an LSTM gate) bound to its constants
    takes a single GEMM: the reference model's bits, whatever the zero points and the bias."""
    rng = np.random.default_rng([len(spatial), in_t.value])
    lo, hi = in_t.int_range
    attribute = make_attribute(Op.CONV2D, pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1), acc_type=acc_t)
    for izp, wzp, batch in ((0, 0, 1), (-128, 127, 2), (127, -128, 1)):
        izp = izp if in_t is DType.INT8 else 0
        x = rng.integers(lo, hi, (batch, *spatial, 16), endpoint=True).astype(in_t.numpy_dtype)
        w = rng.integers(-128, 127, (24, 1, 1, 16), endpoint=True).astype(np.int8)
        bias = rng.integers(-(1 << 20), 1 << 20, 24).astype(bias_t.numpy_dtype)
        operands = [Operand(x, in_t), Operand(w, DType.INT8, True), Operand(bias, bias_t, True),
                    Operand([izp], in_t, True), Operand([wzp], DType.INT8, True)]
        outputs = [TensorType((batch, *spatial, 24), acc_t)]
        expected = run_op(Op.CONV2D, operands, attribute, outputs)[0]
        assert_same_bits(run_bound(Op.CONV2D, operands, attribute, outputs)[0], expected, f"zp {izp}, {wzp}")


def test_a_bound_pointwise_convolution_whose_bias_may_overflow_still_checks_it() -> None:
    """A bias near the int32 limit: the results may leave int32, so the bound kernel checks them."""
    w = np.full((1, 1, 1, 16), 127, np.int8)
    bias = np.array([(1 << 31) - 1000], np.int32)
    attribute = make_attribute(Op.CONV2D, pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1), acc_type=DType.INT32)
    outputs = [TensorType((1, 1, 1, 1), DType.INT32)]

    def operands(x: int) -> list[Operand]:
        return [Operand(np.full((1, 1, 1, 16), x, np.int8), DType.INT8), Operand(w, DType.INT8, True),
                Operand(bias, DType.INT32, True), Operand([0], DType.INT8, True), Operand([0], DType.INT8, True)]

    assert run_bound(Op.CONV2D, operands(-3), attribute, outputs)[0].item() == (1 << 31) - 1000 - 3 * 127 * 16
    with pytest.raises(TosaRuntimeError, match="overflows INT32"):
        run_bound(Op.CONV2D, operands(1), attribute, outputs, first=operands(-3))


def test_int16_by_int8_uses_the_full_int48_accumulator() -> None:
    """Sums beyond the int32 range come out exactly in INT48 (outputs via the executable)."""
    x = np.full((1, 3, 3, 64), -32768, np.int16)
    w = np.full((2, 3, 3, 64), -128, np.int8)
    w[1] = 127
    operands = [Operand(x, DType.INT16), Operand(w, DType.INT8, True),
                Operand(np.array([(1 << 46), -(1 << 46)], np.int64), DType.INT48, True),
                Operand([0], DType.INT16, True), Operand([-128], DType.INT8, True)]
    attribute = make_attribute(Op.CONV2D, pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1),
                               acc_type=DType.INT48)
    outputs = [TensorType((1, 1, 1, 2), DType.INT48)]
    result = run_ours(Op.CONV2D, operands, attribute, outputs)[0]
    assert result[0, 0, 0, 1] == -(1 << 46) + (-32768) * 255 * 576
    assert_same_bits(result, run_op(Op.CONV2D, operands, attribute, outputs)[0])


def test_large_reduction_with_cancelling_terms_is_exact() -> None:
    """The magnitude bound exceeds int32 (checked int64 path) but no partial sum overflows."""
    ic = 40000
    x = np.where(np.arange(ic) % 2 == 0, -128, 127).astype(np.int8).reshape(1, 1, 1, ic)
    w = np.full((1, 1, 1, ic), -128, np.int8)
    operands = [Operand(x, DType.INT8), Operand(w, DType.INT8, True), Operand([5], DType.INT32, True),
                Operand([0], DType.INT8, True), Operand([127], DType.INT8, True)]
    attribute = make_attribute(Op.CONV2D, pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1),
                               acc_type=DType.INT32)
    outputs = [TensorType((1, 1, 1, 1), DType.INT32)]
    result = run_ours(Op.CONV2D, operands, attribute, outputs)[0]
    assert int(result.item()) == 5 + (ic // 2) * (-128 + 127) * (-255)
    assert_same_bits(result, run_op(Op.CONV2D, operands, attribute, outputs)[0])


@pytest.mark.parametrize("op", [*CONV_OPS, Op.MATMUL], ids=lambda o: o.name)
def test_checked_integer_path_matches_reference_model(op: Op, monkeypatch) -> None:
    """The int64 path that checks every partial sum (taken when no bound proves the sums
    small) gives the model's bits too: forced here for ordinary data."""
    import npu_sim.reference.conv as conv

    monkeypatch.setattr(conv, "_compute_dtype", lambda bound, limit: None)
    rng = np.random.default_rng([13, op.value])
    for combo in (INT_CONV if op is not Op.MATMUL else INT_MATMUL):
        case = conv_case(rng, op, combo) if op is not Op.MATMUL else matmul_case(rng, *combo)
        expected = run_op(op, case.operands, case.attribute, case.outputs)[0]
        assert_same_bits(run_ours(op, case.operands, case.attribute, case.outputs)[0], expected)


# --------------------------------------------------------------------------- REQUIRE: accumulator range
def test_accumulator_overflow_is_a_require_failure() -> None:
    """apply_add_s REQUIREs each partial sum in int32 (the reference model wraps instead)."""
    ic = 40000
    x = np.full((1, 1, 1, ic), -128, np.int8)
    operands = [Operand(x, DType.INT8), Operand(x, DType.INT8, True), Operand([0], DType.INT32, True),
                Operand([127], DType.INT8, True), Operand([127], DType.INT8, True)]
    attribute = make_attribute(Op.CONV2D, pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1),
                               acc_type=DType.INT32)
    with pytest.raises(TosaRuntimeError, match="accumulator overflow"):
        run_ours(Op.CONV2D, operands, attribute, [TensorType((1, 1, 1, 1), DType.INT32)])
    a = np.full((1, 1, ic), -128, np.int8)
    b = np.full((1, ic, 1), -128, np.int8)
    mm = [Operand(a, DType.INT8), Operand(b, DType.INT8), Operand([127], DType.INT8, True),
          Operand([127], DType.INT8, True)]
    with pytest.raises(TosaRuntimeError, match="accumulator overflow"):
        run_ours(Op.MATMUL, mm, None, [TensorType((1, 1, 1), DType.INT32)])


def test_partial_sum_overflow_is_detected_even_when_the_total_fits() -> None:
    """The spec checks every partial sum in loop order: the total fits, a partial sum does not."""
    half = 65800                       # 65800 * 255 * 128 > 2**31 - 1
    x = np.full((1, 1, 1, 2 * half), -128, np.int8)
    w = np.concatenate([np.full(half, -128), np.full(half, 127)]).astype(np.int8).reshape(1, 1, 1, -1)
    operands = [Operand(x, DType.INT8), Operand(w, DType.INT8, True), Operand([0], DType.INT32, True),
                Operand([127], DType.INT8, True), Operand([0], DType.INT8, True)]
    attribute = make_attribute(Op.CONV2D, pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1),
                               acc_type=DType.INT32)
    with pytest.raises(TosaRuntimeError, match="accumulator overflow"):
        run_ours(Op.CONV2D, operands, attribute, [TensorType((1, 1, 1, 1), DType.INT32)])


def test_bias_addition_overflow_is_a_require_failure() -> None:
    x = np.full((1, 1, 1, 1), 127, np.int8)
    operands = [Operand(x, DType.INT8), Operand(x, DType.INT8, True),
                Operand([(1 << 31) - 10], DType.INT32, True), Operand([0], DType.INT8, True),
                Operand([0], DType.INT8, True)]
    attribute = make_attribute(Op.CONV2D, pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1),
                               acc_type=DType.INT32)
    with pytest.raises(TosaRuntimeError, match="bias addition overflows"):
        run_ours(Op.CONV2D, operands, attribute, [TensorType((1, 1, 1, 1), DType.INT32)])


# --------------------------------------------------------------------------- differential: floating point
@pytest.mark.parametrize("op", CONV_OPS, ids=lambda o: o.name)
@pytest.mark.parametrize("combo", FP_CONV, ids=_name)
def test_float_convolutions_meet_dot_product_accuracy(op: Op, combo) -> None:
    rng = np.random.default_rng([op.value, *combo])
    _fp_check(conv_case(rng, op, combo))


@pytest.mark.parametrize("combo", FP_MATMUL, ids=_name)
def test_float_matmul_meets_dot_product_accuracy(combo) -> None:
    rng = np.random.default_rng([11, *combo])
    _fp_check(matmul_case(rng, *combo))


def _appendix_a_conv2d(data_set: int, combo) -> Case:
    """CONV2D test data of the spec's Appendix A (N*OH*OW*OC = 1008 >= MIN_DOT_PRODUCTS)."""
    in_t, weight_t, acc_t = combo
    out_t = CONV_TYPES[combo]
    n, ih, iw, ic, oc, kh, kw = 1, 8, 8, 5, 7, 3, 3
    ks = kh * kw * ic
    b = TEST_DATA_B[(in_t, out_t)]
    iy, ix, c = np.meshgrid(np.arange(ih), np.arange(iw), np.arange(ic), indexing="ij")
    x = pro_fp_data(data_set, ks, 0, ((iy % kh) * kw + ix % kw) * ic + c, (iy * iw + ix) * ic + c, b)
    o, ky, kx, c = np.meshgrid(np.arange(oc), np.arange(kh), np.arange(kw), np.arange(ic), indexing="ij")
    w = pro_fp_data(data_set, ks, 1, (ky * kw + kx) * ic + c, ((o * kh + ky) * kw + kx) * ic + c, b)
    bias = pro_fp_data(data_set, ks, 2, np.zeros(oc), np.arange(oc), b)
    operands = [Operand(round_to_float(x, in_t).reshape(n, ih, iw, ic), in_t),
                Operand(round_to_float(w, weight_t), weight_t, True),
                Operand(round_to_float(bias, out_t), out_t, True),
                Operand([0], in_t, True), Operand([0], weight_t, True)]
    attribute = make_attribute(Op.CONV2D, pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1),
                               acc_type=acc_t, local_bound=False)
    return Case(Op.CONV2D, operands, attribute, TensorType((n, ih, iw, oc), out_t), ks, acc_t)


@pytest.mark.slow
@pytest.mark.parametrize("combo", [(DType.FP16, DType.FP16, DType.FP16), (DType.FP32, DType.FP32, DType.FP32),
                                   (DType.FP8E4M3, DType.FP8E4M3, DType.FP16)], ids=_name)
@pytest.mark.parametrize("data_set", range(6))
def test_conv2d_passes_the_spec_test_data_sets(data_set: int, combo) -> None:
    case = _appendix_a_conv2d(data_set, combo)
    result = run_ours(case.op, case.operands, case.attribute, case.outputs)[0]
    assert_same_bits(run_bound(case.op, case.operands, case.attribute, case.outputs)[0], result, "bound")
    ref = run_op(case.op, case.operands, case.attribute, case.outputs, precise=True)[0]
    in_t = case.operands[0].dtype
    bound_ops = [Operand(bound_operand(case.operands[0].value, in_t, False), in_t),
                 Operand(bound_operand(case.operands[1].value, in_t), in_t, True),
                 Operand(bound_operand(case.operands[2].value, in_t), case.output.dtype, True),
                 *case.operands[3:]]
    bnd = run_op(case.op, bound_ops, case.attribute, case.outputs, precise=True)[0]
    assert_dot_compliant(result, ref, bnd, case.output.dtype, case.acc_t, case.ks, True, data_set)


def test_fp16_accumulator_rounds_every_addition() -> None:
    """acc_type decides the arithmetic: 2048 + 1 + 1 is 2048 in fp16 and 2050 in fp32."""
    x = np.array([2048, 1, 1], np.float16).reshape(1, 1, 1, 3)
    w = np.ones((1, 1, 1, 3), np.float16)
    for acc_t, expected in ((DType.FP16, 2048.0), (DType.FP32, 2050.0)):
        operands = [Operand(x, DType.FP16), Operand(w, DType.FP16, True), Operand([0], DType.FP16, True),
                    Operand([0], DType.FP16, True), Operand([0], DType.FP16, True)]
        attribute = make_attribute(Op.CONV2D, pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1),
                                   acc_type=acc_t)
        outputs = [TensorType((1, 1, 1, 1), DType.FP16)]
        result = run_ours(Op.CONV2D, operands, attribute, outputs)[0]
        assert float(result.item()) == expected
        assert_same_bits(result, run_op(Op.CONV2D, operands, attribute, outputs)[0])


def test_padding_multiplies_are_skipped() -> None:
    """Infinite weights that only meet padding do not reach the output (tosa_extra_multiplies false)."""
    w = np.full((1, 3, 3, 1), np.inf, np.float32)
    w[0, 1, 1, 0] = 2.0
    x = np.full((1, 1, 1, 1), 3.0, np.float32)
    operands = [Operand(x, DType.FP32), Operand(w, DType.FP32, True), Operand([1.0], DType.FP32, True),
                Operand([0], DType.FP32, True), Operand([0], DType.FP32, True)]
    attribute = make_attribute(Op.CONV2D, pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1),
                               acc_type=DType.FP32)
    outputs = [TensorType((1, 1, 1, 1), DType.FP32)]
    assert float(run_ours(Op.CONV2D, operands, attribute, outputs)[0].item()) == 7.0
    assert float(run_op(Op.CONV2D, operands, attribute, outputs, precise=True)[0].item()) == 7.0


# --------------------------------------------------------------------------- tiling
TILE_COMBOS = [
    (DType.INT8, DType.INT8, DType.INT32), (DType.INT16, DType.INT8, DType.INT48),
    (DType.FP16, DType.FP16, DType.FP16), (DType.BF16, DType.BF16, DType.FP32),
    (DType.FP32, DType.FP32, DType.FP32), (DType.FP8E5M2, DType.FP8E5M2, DType.FP16),
]


@pytest.mark.parametrize("op", CONV_OPS, ids=lambda o: o.name)
@pytest.mark.parametrize("combo", TILE_COMBOS, ids=_name)
def test_tiles_give_the_whole_tensor_bits(op: Op, combo) -> None:
    rng = np.random.default_rng([3, op.value, *combo])
    for _ in range(3):
        case = conv_case(rng, op, combo, max_size=10, max_channels=6)
        whole = run_ours(op, case.operands, case.attribute, case.outputs)[0]
        tiles = random_tiles(case.output.shape, rng, max_cuts=3)
        assert_same_bits(ours_tiled(op, case.operands, case.attribute, case.outputs, tiles)[0], whole)


@pytest.mark.parametrize("combo", [(DType.INT8, DType.INT32), (DType.INT16, DType.INT48),
                                   (DType.FP16, DType.FP16), (DType.BF16, DType.FP32)], ids=_name)
def test_matmul_tiles_give_the_whole_tensor_bits(combo) -> None:
    rng = np.random.default_rng([5, *combo])
    for _ in range(3):
        case = matmul_case(rng, *combo, max_size=12)
        whole = run_ours(Op.MATMUL, case.operands, case.attribute, case.outputs)[0]
        tiles = random_tiles(case.output.shape, rng)
        assert_same_bits(ours_tiled(Op.MATMUL, case.operands, case.attribute, case.outputs, tiles)[0], whole)


def test_single_element_tiles_at_padded_borders() -> None:
    """Every output its own tile: each window is clipped at the borders and padded by the kernel."""
    rng = np.random.default_rng(17)
    x = _values(rng, DType.FP16, (1, 5, 6, 3), "input")
    w = _values(rng, DType.FP16, (2, 3, 3, 3), "weight")
    operands = [Operand(x, DType.FP16), Operand(w, DType.FP16, True),
                Operand(_values(rng, DType.FP16, (2,), "bias"), DType.FP16, True),
                Operand([0], DType.FP16, True), Operand([0], DType.FP16, True)]
    attribute = make_attribute(Op.CONV2D, pad=(2, 2, 1, 2), stride=(1, 1), dilation=(2, 1),
                               acc_type=DType.FP16)
    outputs = [TensorType((1, 5, 7, 2), DType.FP16)]
    tiles = [((0, 1), (y, y + 1), (x_, x_ + 1), (c, c + 1)) for y in range(5) for x_ in range(7) for c in range(2)]
    assert_same_bits(ours_tiled(Op.CONV2D, operands, attribute, outputs, tiles)[0],
                     run_ours(Op.CONV2D, operands, attribute, outputs)[0])


@pytest.mark.parametrize("dtype, acc_t", [(DType.INT8, DType.INT32), (DType.FP32, DType.FP32)],
                         ids=["int8", "fp32"])
def test_tiles_that_only_see_padding(dtype: DType, acc_t: DType) -> None:
    """Pads wider than the kernel: border tiles have empty input windows and give bias only."""
    rng = np.random.default_rng(19)
    x = _values(rng, dtype, (1, 3, 4, 2), "input")
    w = _values(rng, dtype, (2, 1, 1, 2), "weight")
    out_t = CONV_TYPES[(dtype, dtype, acc_t)]
    operands = [Operand(x, dtype), Operand(w, dtype, True), Operand(_bias(rng, out_t, 2), out_t, True),
                *_zero_points(rng, dtype, dtype)]
    attribute = make_attribute(Op.CONV2D, pad=(3, 3, 4, 3), stride=(2, 2), dilation=(1, 1), acc_type=acc_t)
    outputs = [TensorType((1, 5, 6, 2), out_t)]
    whole = run_ours(Op.CONV2D, operands, attribute, outputs)[0]
    if dtype.is_integer:
        assert_same_bits(whole, run_op(Op.CONV2D, operands, attribute, outputs)[0])
    assert_same_bits(whole[0, 0, :, 0], np.full(6, whole[0, 0, 0, 0]))      # row 0 reads only padding
    tiles = [((0, 1), (y, y + 1), (0, 6), (0, 2)) for y in range(5)]
    assert_same_bits(ours_tiled(Op.CONV2D, operands, attribute, outputs, tiles)[0], whole)


def test_conv2d_window_includes_the_halo() -> None:
    """The window of an output tile is its receptive field, clipped to the input."""
    from npu_sim.reference import KernelArgs, input_window

    attribute = make_attribute(Op.CONV2D, pad=(1, 1, 2, 0), stride=(2, 1), dilation=(1, 2),
                               acc_type=DType.INT32)
    types = [TensorType((1, 9, 9, 4), DType.INT8), TensorType((6, 3, 3, 4), DType.INT8),
             TensorType((6,), DType.INT32), TensorType((1,), DType.INT8), TensorType((1,), DType.INT8)]
    args = KernelArgs(Op.CONV2D, attribute, [], types, [TensorType((1, 5, 7, 6), DType.INT32)])
    windows = input_window(args, ((0, 1), (2, 4), (0, 3), (1, 4)))
    # rows: 2*2-1 .. 3*2-1+2 = 3..7; cols: 0-2 .. 2-2+4 = -2..4 -> 0..4
    assert windows[0] == ((0, 1), (3, 8), (0, 5), (0, 4))
    assert windows[1] == ((1, 4), (0, 3), (0, 3), (0, 4))
    assert windows[2] == ((1, 4),)


# --------------------------------------------------------------------------- ERROR_IF
def _int8_conv2d(**changes) -> tuple[list[Operand], Attribute, list[TensorType]]:
    x = np.zeros((1, 4, 4, 2), np.int8)
    w = np.zeros((3, 3, 3, 2), np.int8)
    fields = dict(pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1), acc_type=DType.INT32)
    fields.update({k: v for k, v in changes.items() if k in fields})
    operands = [Operand(x, DType.INT8), Operand(w, DType.INT8, True),
                Operand(np.zeros(changes.get("bias", 3), np.int32), DType.INT32, True),
                Operand([0], DType.INT8, True), Operand([0], DType.INT8, True)]
    out = TensorType(changes.get("out", (1, 4, 4, 3)), DType.INT32)
    return operands, make_attribute(Op.CONV2D, **fields), [out]


@pytest.mark.parametrize("changes, message", [
    ({"pad": (-1, 1, 1, 1)}, "pad values must be >= 0"),
    ({"stride": (0, 1)}, "stride values must be >= 1"),
    ({"dilation": (1, 0)}, "dilation values must be >= 1"),
    ({"out": (1, 5, 4, 3)}, "output size 5"),
    ({"stride": (2, 1), "out": (1, 2, 4, 3)}, "idiv_check"),
    ({"bias": 2}, "bias size 2"),
    ({"acc_type": DType.INT48}, "unsupported type combination"),
    ({"out": (1, 4, 4, 5)}, "output channels"),
])
def test_conv2d_error_ifs(changes: dict, message: str) -> None:
    operands, attribute, outputs = _int8_conv2d(**changes)
    with pytest.raises(TosaRuntimeError, match=message):
        run_ours(Op.CONV2D, operands, attribute, outputs)


@pytest.mark.parametrize("in_t, weight_t, acc_t, which", [
    (DType.INT16, DType.INT8, DType.INT48, 3),     # input_zp only for int8 input
    (DType.INT8, DType.INT4, DType.INT32, 4),      # weight_zp only for int8 weights
    (DType.FP16, DType.FP16, DType.FP32, 3),
    (DType.BF16, DType.BF16, DType.FP32, 4),
])
def test_zero_points_only_for_int8(in_t: DType, weight_t: DType, acc_t: DType, which: int) -> None:
    out_t = CONV_TYPES[(in_t, weight_t, acc_t)]
    operands = [Operand(np.zeros((1, 2, 2, 1)), in_t), Operand(np.zeros((1, 1, 1, 1)), weight_t, True),
                Operand(np.zeros(1), out_t, True), Operand([0], in_t, True), Operand([0], weight_t, True)]
    operands[which] = Operand([1], operands[which].dtype, True)
    attribute = make_attribute(Op.DEPTHWISE_CONV2D, pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1),
                               acc_type=acc_t)
    with pytest.raises(TosaRuntimeError, match="must be zero"):
        run_ours(Op.DEPTHWISE_CONV2D, operands, attribute, [TensorType((1, 2, 2, 1), out_t)])


def test_int8_zero_points_are_allowed_for_matmul() -> None:
    """The 1.0.1 MATMUL pseudocode's ERROR_IF lacks a '!': int8 zero points are valid (as in the model)."""
    rng = np.random.default_rng(2)
    a, b = _values(rng, DType.INT8, (1, 3, 4), "input"), _values(rng, DType.INT8, (1, 4, 2), "weight")
    operands = [Operand(a, DType.INT8), Operand(b, DType.INT8), Operand([-7], DType.INT8, True),
                Operand([100], DType.INT8, True)]
    outputs = [TensorType((1, 3, 2), DType.INT32)]
    result = run_ours(Op.MATMUL, operands, None, outputs)[0]
    expected = (a.astype(np.int64) + 7) @ (b.astype(np.int64) - 100)
    assert np.array_equal(result, expected)
    assert_same_bits(result, run_op(Op.MATMUL, operands, None, outputs)[0])
    int16 = [Operand(a, DType.INT16), Operand(b, DType.INT16), Operand([1], DType.INT16, True),
             Operand([0], DType.INT16, True)]
    with pytest.raises(TosaRuntimeError, match="A_zp must be zero"):
        run_ours(Op.MATMUL, int16, None, [TensorType((1, 3, 2), DType.INT48)])


def _transpose(out_pad, out_shape) -> Callable[[], list[np.ndarray]]:
    operands = [Operand(np.zeros((1, 2, 2, 1)), DType.FP32), Operand(np.zeros((1, 2, 3, 1)), DType.FP32, True),
                Operand([0.0], DType.FP32, True), Operand([0], DType.FP32, True), Operand([0], DType.FP32, True)]
    attribute = make_attribute(Op.TRANSPOSE_CONV2D, out_pad=out_pad, stride=(2, 2), acc_type=DType.FP32)
    return lambda: run_ours(Op.TRANSPOSE_CONV2D, operands, attribute, [TensorType(out_shape, DType.FP32)])


def test_transpose_conv2d_error_ifs() -> None:
    assert _transpose((-1, 0, -2, 0), (1, 3, 3, 1))()[0].shape == (1, 3, 3, 1)   # legal negative pads
    with pytest.raises(TosaRuntimeError, match="out_pad_top/bottom must be > -KH"):
        _transpose((-2, 0, 0, 0), (1, 2, 5, 1))()
    with pytest.raises(TosaRuntimeError, match="out_pad_left/right must be > -KW"):
        _transpose((0, 0, 0, -3), (1, 4, 2, 1))()
    with pytest.raises(TosaRuntimeError, match="output size 5"):
        _transpose((0, 0, 0, 0), (1, 5, 5, 1))()


def test_matmul_shape_and_type_errors() -> None:
    a = Operand(np.zeros((1, 2, 3)), DType.FP32)
    zp = Operand([0], DType.FP32, True)
    with pytest.raises(TosaRuntimeError, match="does not match A shape"):
        run_ours(Op.MATMUL, [a, Operand(np.zeros((1, 4, 2)), DType.FP32), zp, zp], None,
             [TensorType((1, 2, 2), DType.FP32)])
    with pytest.raises(TosaRuntimeError, match="unsupported type combination"):
        run_ours(Op.MATMUL, [a, Operand(np.zeros((1, 3, 2)), DType.FP32), zp, zp], None,
             [TensorType((1, 2, 2), DType.FP16)])


def test_pointwise_conv2d_reading_padding_matches_reference_and_tiles() -> None:
    """1x1 kernels skip im2col unless a tile reads padding: strided, with pads after the input."""
    rng = np.random.default_rng(23)
    combo = (DType.INT8, DType.INT8, DType.INT32)
    x = _values(rng, DType.INT8, (2, 5, 4, 3), "input")
    w = _values(rng, DType.INT8, (4, 1, 1, 3), "weight")
    operands = [Operand(x, DType.INT8), Operand(w, DType.INT8, True),
                Operand(_bias(rng, DType.INT32, 4), DType.INT32, True), *_zero_points(rng, *combo[:2])]
    # rows read 0, 2, 4, 6 (6 is padding); columns 0..4 (4 is padding)
    attribute = make_attribute(Op.CONV2D, pad=(0, 2, 0, 1), stride=(2, 1), dilation=(1, 1), acc_type=DType.INT32)
    outputs = [TensorType((2, 4, 5, 4), DType.INT32)]
    whole = run_ours(Op.CONV2D, operands, attribute, outputs)[0]
    assert_same_bits(whole, run_op(Op.CONV2D, operands, attribute, outputs)[0])
    tiles = [((0, 2), (0, 3), (0, 4), (0, 4)), ((0, 2), (3, 4), (0, 4), (0, 4)), ((0, 2), (0, 4), (4, 5), (0, 4))]
    assert_same_bits(ours_tiled(Op.CONV2D, operands, attribute, outputs, tiles)[0], whole)
