"""CAST and RESCALE against the TOSA reference model, plus their ERROR_IFs and tiling."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError
from npu_sim.reference.type_conversion import CAST_TYPES
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, RoundingMode, make_attribute
from tests.fp_compliance import assert_fp_compliant
from tests.kernel_testing import assert_both_refuse, assert_same_bits, check_tiling, run_bound, run_ours
from tests.oracle import Operand, run_op
from tests.value_gen import fp_specials, fp_values, int_values

I8, I16, I32, I48, BOOL = DType.INT8, DType.INT16, DType.INT32, DType.INT48, DType.BOOL
SINGLE, INEXACT, DOUBLE = RoundingMode.SINGLE_ROUND, RoundingMode.INEXACT_ROUND, RoundingMode.DOUBLE_ROUND
SHAPE = (3, 4, 6)


def _rng(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


# --------------------------------------------------------------------------- CAST
def _cast_input(in_t: DType, out_t: DType, rng: np.random.Generator) -> np.ndarray:
    if in_t is BOOL:
        return rng.integers(0, 2, SHAPE).astype(bool)
    if in_t.is_integer:
        return int_values(in_t, SHAPE, rng)
    specials = fp_specials(in_t)
    if out_t.is_integer:
        # NaN -> int is unpredictable; ties check round-to-nearest-even; big values saturate
        specials = [v for v in specials if not np.isnan(v)] + [0.5, 1.5, 2.5, -0.5, -2.5, 126.5, 127.5,
                                                               -128.5, 32767.5, 3e9, -3e9]
    return fp_values(in_t, SHAPE, rng, -3, 10 if in_t is not DType.FP16 else 4.5, specials=specials)


CAST_PAIRS = sorted(CAST_TYPES, key=lambda p: (p[0].value, p[1].value))


@pytest.mark.parametrize("in_t,out_t", CAST_PAIRS, ids=lambda t: t.name)
def test_cast_matches_reference(in_t, out_t):
    rng = _rng("cast", in_t, out_t)
    x = _cast_input(in_t, out_t, rng)
    operands = [Operand(x, in_t)]
    outs = [TensorType(SHAPE, out_t)]
    ours = run_ours(Op.CAST, operands, None, outs)[0]
    if out_t.is_float:
        ref64 = run_op(Op.CAST, operands, None, outs, precise=True)[0]
        assert_fp_compliant(ours, ref64, out_t, Op.CAST, inputs=[x])
    # Every CAST we make is exactly defined (round to nearest even): same bits as the model.
    assert_same_bits(ours, run_op(Op.CAST, operands, None, outs)[0], f"CAST {in_t.name}->{out_t.name}",
                     nan_equal=True)


@pytest.mark.parametrize("in_t,out_t", CAST_PAIRS, ids=lambda t: t.name)
def test_bound_cast_matches_reference(in_t, out_t):
    """Bound (later invocations, a recurrent cell's every step): the reference model's bits."""
    rng = _rng("bound cast", in_t, out_t)
    first, x = (Operand(_cast_input(in_t, out_t, rng), in_t) for _ in range(2))
    outs = [TensorType(SHAPE, out_t)]
    ours = run_bound(Op.CAST, [x], None, outs, first=[first])[0]
    assert_same_bits(ours, run_op(Op.CAST, [x], None, outs)[0], f"CAST {in_t.name}->{out_t.name}",
                     nan_equal=True)


def test_cast_rounding_and_saturation_values():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1e10, -1e10, np.inf, -np.inf, 127.49], np.float32)
    out = run_ours(Op.CAST, [Operand(x, DType.FP32)], None, [TensorType((10,), I8)])[0]
    assert out.tolist() == [0, 2, 2, 0, -2, 127, -128, 127, -128, 127]
    big = np.array([65519, 65520, -70000, 2**24 + 1], np.int32)
    f16 = run_ours(Op.CAST, [Operand(big, I32)], None, [TensorType((4,), DType.FP16)])[0]
    assert f16.astype(np.float64).tolist() == [65504.0, np.inf, -np.inf, np.inf]
    bf = run_ours(Op.CAST, [Operand(big, I32)], None, [TensorType((4,), DType.BF16)])[0]
    assert bf.astype(np.float64).tolist() == [65536.0, 65536.0, -70144.0, 2**24]
    e4 = run_ours(Op.CAST, [Operand(np.array([448, 464, 480, -1e6], np.float32), DType.FP32)], None,
                  [TensorType((4,), DType.FP8E4M3)])[0].astype(np.float64)
    assert e4[0] == 448 and e4[1] == 448 and np.isnan(e4[2]) and np.isnan(e4[3])
    wrap = run_ours(Op.CAST, [Operand(np.array([300, -129, 128], np.int32), I32)], None, [TensorType((3,), I8)])[0]
    assert wrap.tolist() == [44, 127, -128]


def test_cast_unsupported_pair():
    with pytest.raises(TosaRuntimeError, match="not supported"):
        run_ours(Op.CAST, [Operand(np.zeros(2, np.float32), DType.FP32)], None, [TensorType((2,), BOOL)])
    with pytest.raises(TosaRuntimeError, match="not supported"):
        run_ours(Op.CAST, [Operand(np.zeros(2, np.int32), I32)], None, [TensorType((2,), I48)])


# --------------------------------------------------------------------------- RESCALE
def _value_range(in_t: DType, in_u: bool, in_zp: int) -> tuple[int, int]:
    lo, hi = (0, (1 << in_t.bits) - 1) if in_u else in_t.int_range
    return lo - in_zp, hi - in_zp


def _min_shift(in_t, in_u, in_zp, scale32) -> int:
    """Smallest shift satisfying apply_scale_32's value REQUIRE / apply_scale_16's result REQUIRE."""
    lo, hi = _value_range(in_t, in_u, in_zp)
    if scale32:
        s = 2
        while not (lo >= -(1 << (s - 1)) and hi < (1 << (s - 1))):
            s += 1
        return s
    magnitude = max(abs(lo), abs(hi)) * 32767
    s = 2
    while (magnitude + (1 << (s - 1))) >> s >= (1 << 31) - 1:
        s += 1
    return s


def _rescale_case(in_t, out_t, scale32, mode, per_channel, in_u, out_u, rng, shape=SHAPE):
    in_zp = 0
    if in_t is I8:
        in_zp = int(rng.integers(0, 256)) if in_u else int(rng.integers(-128, 128))
    elif in_t is I16 and in_u:
        in_zp = 32768
    out_zp = 0
    if out_t is I8:
        out_zp = int(rng.integers(0, 256)) if out_u else int(rng.integers(-128, 128))
    elif out_t is I16 and out_u:
        out_zp = 32768
    x = int_values(in_t, shape, rng) if in_t is not I48 else int_values(in_t, shape, rng, -(1 << 47), (1 << 47) - 1)
    nc = shape[-1] if per_channel else 1
    # Shifts around the one mapping the input range onto the output range (so outputs are
    # neither all zero nor all saturated), plus the legal extremes on channels 0 and 1.
    s_min = _min_shift(in_t, in_u, in_zp, scale32)
    target = (30 if scale32 else 14) + in_t.bits - out_t.bits
    shift = np.clip(target + rng.integers(-1, 4, nc), s_min, 62)
    mult_bits = 31 if scale32 else 15
    mult = rng.integers(1 << (mult_bits - 1), 1 << mult_bits, nc)  # normalized multipliers
    if per_channel:
        shift[0], shift[1] = s_min, 62
        mult[0] = (1 << mult_bits) - 1
        mult[2], mult[3] = 1 << (mult_bits - 1), 0
    mul_t = I32 if scale32 else I16
    # The model's python binding refuses runtime INT48 inputs: feed them as constants.
    operands = [Operand(x, in_t, const=in_t is I48), Operand(mult.astype(mul_t.numpy_dtype), mul_t, const=True),
                Operand(shift.astype(np.int8), I8, const=True),
                Operand(np.array([in_zp]).astype(np.int64).astype(in_t.numpy_dtype), in_t, const=True),
                Operand(np.array([out_zp]).astype(np.int64).astype(out_t.numpy_dtype), out_t, const=True)]
    attr = make_attribute(Op.RESCALE, scale32=scale32, rounding_mode=mode, per_channel=per_channel,
                          input_unsigned=in_u, output_unsigned=out_u)
    return operands, attr


def _rescale_configs():
    configs = []
    for in_t in (I8, I16, I32, I48):
        for out_t in (I8, I16, I32):
            for scale32 in ((False,) if in_t is I48 else (True, False)):
                modes = (SINGLE, DOUBLE) if scale32 else (SINGLE,)
                for mode in modes:
                    configs.append((in_t, out_t, scale32, mode, mode is SINGLE, False, False))
                    configs.append((in_t, out_t, scale32, mode, mode is not SINGLE, False, False))
    for in_t in (I8, I16):
        for out_t in (I8, I16):
            configs.append((in_t, out_t, True, SINGLE, False, True, False))
            configs.append((in_t, out_t, True, DOUBLE, True, False, True))
            configs.append((in_t, out_t, False, SINGLE, True, True, False))
    return configs


def _config_id(c):
    in_t, out_t, scale32, mode, per_channel, in_u, out_u = c
    return (f"{'u' if in_u else ''}{in_t.name}-{'u' if out_u else ''}{out_t.name}-"
            f"{'s32' if scale32 else 's16'}-{mode.name}{'-pc' if per_channel else ''}")


@pytest.mark.parametrize("config", _rescale_configs(), ids=_config_id)
def test_rescale_matches_reference(config):
    in_t, out_t, scale32, mode, per_channel, in_u, out_u = config
    rng = _rng("rescale", _config_id(config))
    operands, attr = _rescale_case(in_t, out_t, scale32, mode, per_channel, in_u, out_u, rng)
    outs = [TensorType(SHAPE, out_t)]
    ours = run_ours(Op.RESCALE, operands, attr, outs)[0]
    assert_same_bits(ours, run_op(Op.RESCALE, operands, attr, outs)[0], _config_id(config))


@pytest.mark.parametrize("config", _rescale_configs(), ids=_config_id)
def test_bound_rescale_matches_reference(config):
    """The bound form (a table for int8 inputs, the scaling worked out once for others)."""
    in_t, out_t, scale32, mode, per_channel, in_u, out_u = config
    rng = _rng("bound rescale", _config_id(config))
    operands, attr = _rescale_case(in_t, out_t, scale32, mode, per_channel, in_u, out_u, rng)
    outs = [TensorType(SHAPE, out_t)]
    ours = run_bound(Op.RESCALE, operands, attr, outs)[0]
    assert_same_bits(ours, run_op(Op.RESCALE, operands, attr, outs)[0], _config_id(config))


def test_bound_rescale_checks_what_the_data_decide():
    """scale16 from int48: the result range is the data's REQUIRE, also when bound."""
    scales = [Operand(np.array([1 << 14], np.int16), I16, const=True), Operand(np.array([2], np.int8), I8, const=True),
              Operand(np.array([0], np.int64), I48, const=True), Operand(np.array([0], np.int16), I16, const=True)]
    attr = make_attribute(Op.RESCALE, scale32=False, rounding_mode=SINGLE)
    outs = [TensorType((2,), I16)]
    fine = [Operand(np.array([3, -5], np.int64), I48), *scales]
    too_big = [Operand(np.array([1 << 46, -5], np.int64), I48), *scales]
    assert run_bound(Op.RESCALE, fine, attr, outs)[0].tolist() == [3 << 12, -5 << 12]
    with pytest.raises(TosaRuntimeError, match=r"apply_scale_16: REQUIRE\(result >= minimum<int32_t>"):
        run_bound(Op.RESCALE, too_big, attr, outs, first=fine)


def _inexact_bounds(operands, out_t: DType) -> tuple[np.ndarray, np.ndarray]:
    """RESCALE's INEXACT_ROUND precision rule (type_conversion.adoc), signed outputs."""
    x, mult, shift, in_zp, out_zp = (np.asarray(o.value).astype(np.float64) for o in operands)
    out_ref = (x - in_zp[0]) * mult * np.exp2(-shift)
    err = 0.5 + (3 * np.abs(out_ref) + np.abs(out_ref + out_zp[0])) * 2.0 ** (-23 - 1)
    lo, hi = out_t.int_range
    return (np.clip(np.ceil(out_ref - err + out_zp[0]), lo, hi),
            np.clip(np.floor(out_ref + err + out_zp[0]), lo, hi))


@pytest.mark.parametrize("in_t,out_t", [(I8, I8), (I16, I8), (I32, I16), (I32, I32), (I48, I16)],
                         ids=lambda t: t.name)
def test_rescale_inexact_round_within_bound(in_t, out_t):
    scale32 = in_t is not I48
    rng = _rng("inexact", in_t, out_t)
    operands, attr = _rescale_case(in_t, out_t, scale32, INEXACT, True, False, False, rng)
    outs = [TensorType(SHAPE, out_t)]
    ours = run_ours(Op.RESCALE, operands, attr, outs)[0].astype(np.float64)
    ref = run_op(Op.RESCALE, operands, attr, outs)[0].astype(np.float64)
    lo, hi = _inexact_bounds(operands, out_t)
    assert np.all((lo <= ours) & (ours <= hi))
    assert np.all((lo <= ref) & (ref <= hi))  # the bound is not vacuous: the model meets it too


def test_rescale_known_values():
    """Scale 1.0 (shift 30, multiplier 1<<30) and halving with the three rounding behaviours."""
    x = np.array([-5, -3, -1, 1, 3, 5, 127, -128], np.int8)
    ops = [Operand(x, I8), Operand(np.array([1 << 30], np.int32), I32), Operand(np.array([31], np.int8), I8),
           Operand(np.array([0], np.int8), I8), Operand(np.array([0], np.int8), I8)]
    attr = make_attribute(Op.RESCALE, scale32=True, rounding_mode=SINGLE)
    out = run_ours(Op.RESCALE, ops, attr, [TensorType((8,), I8)])[0]
    assert out.tolist() == [-2, -1, 0, 1, 2, 3, 64, -64]  # round half up: (x + 1) >> 1
    ops[2] = Operand(np.array([30], np.int8), I8)
    same = run_ours(Op.RESCALE, ops, attr, [TensorType((8,), I8)])[0]
    assert same.tolist() == x.tolist()


def test_rescale_double_round_known_values():
    """Scale 1/4 (shift 32): DOUBLE_ROUND rounds at bit 31 first, then again at bit 32."""
    x = np.array([1, -1, 3, -3, 2, -2], np.int32)
    outs = {}
    for mode in (SINGLE, DOUBLE):
        ops = [Operand(x, I32), Operand(np.array([1 << 30], np.int32), I32, const=True),
               Operand(np.array([32], np.int8), I8, const=True), Operand(np.array([0], np.int32), I32, const=True),
               Operand(np.array([0], np.int32), I32, const=True)]
        attr = make_attribute(Op.RESCALE, scale32=True, rounding_mode=mode)
        outs[mode] = run_ours(Op.RESCALE, ops, attr, [TensorType((6,), I32)])[0]
        assert_same_bits(outs[mode], run_op(Op.RESCALE, ops, attr, [TensorType((6,), I32)])[0], mode.name)
    assert outs[SINGLE].tolist() == [0, 0, 1, -1, 1, 0]
    assert outs[DOUBLE].tolist() == [1, 0, 1, -1, 1, -1]


def test_rescale_unsigned_output_wraps_into_storage():
    x = np.array([0, 100, 127, -128], np.int8)
    ops = [Operand(x, I8), Operand(np.array([1 << 30], np.int32), I32), Operand(np.array([30], np.int8), I8),
           Operand(np.array([-128], np.int8), I8), Operand(np.array([0], np.uint8).view(np.int8), I8)]
    attr = make_attribute(Op.RESCALE, scale32=True, rounding_mode=SINGLE, output_unsigned=True)
    out = run_ours(Op.RESCALE, ops, attr, [TensorType((4,), I8)])[0]
    assert out.view(np.uint8).tolist() == [128, 228, 255, 0]


def _rescale_raises(match, in_t=I8, out_t=I8, in_zp=0, out_zp=0, mult_t=None, shift=30, mult=1 << 30,
                    shape=(4,), nc=1, **attrs):
    attrs.setdefault("scale32", True)
    attrs.setdefault("rounding_mode", SINGLE)
    mult_t = mult_t or (I32 if attrs["scale32"] else I16)
    x = np.zeros(shape, in_t.numpy_dtype)
    ops = [Operand(x, in_t), Operand(np.full(nc, mult, mult_t.numpy_dtype), mult_t),
           Operand(np.full(nc, shift, np.int8), I8),
           Operand(np.array([in_zp]).astype(in_t.numpy_dtype), in_t),
           Operand(np.array([out_zp]).astype(out_t.numpy_dtype), out_t)]
    with pytest.raises(TosaRuntimeError, match=match):
        run_ours(Op.RESCALE, ops, make_attribute(Op.RESCALE, **attrs), [TensorType(shape, out_t)])


def test_rescale_error_ifs():
    _rescale_raises(r"!is_same<in_t,i8_t>\(\) && \(!is_same<in_t,i16_t>", in_t=I16, in_zp=3)
    _rescale_raises(r"!is_same<in_t,i8_t>\(\) && \(!is_same<in_t,i16_t>", in_t=I32, in_zp=3)
    _rescale_raises(r"!is_same<out_t,i8_t>\(\) && \(!is_same<out_t,i16_t>", out_t=I16, out_zp=1)
    _rescale_raises(r"input_zp != 32768", in_t=I16, in_zp=5, input_unsigned=True)
    _rescale_raises(r"output_zp != 32768", out_t=I16, out_zp=5, output_unsigned=True)
    _rescale_raises(r"scale32 && is_same<in_t,i48_t>", in_t=I48, shift=40)
    _rescale_raises(r"DOUBLE_ROUND", scale32=False, rounding_mode=DOUBLE, mult=1 << 14, shift=14)
    _rescale_raises(r"input_unsigned && output_unsigned", input_unsigned=True, output_unsigned=True)
    _rescale_raises(r"is_same<out_t,i32_t>\(\) && input_unsigned", out_t=I32, input_unsigned=True)
    _rescale_raises(r"is_same<in_t,i32_t>\(\) && output_unsigned", in_t=I32, output_unsigned=True)
    _rescale_raises(r"is_same<in_t,i48_t>\(\) && output_unsigned", in_t=I48, scale32=False, mult=1,
                    output_unsigned=True)
    _rescale_raises(r"is_same<in_t, i48_t> && input_unsigned", in_t=I48, out_t=I16, scale32=False, mult=1,
                    input_unsigned=True)
    _rescale_raises(r"is_same<in_t, i32_t> && input_unsigned", in_t=I32, out_t=I16, input_unsigned=True)
    _rescale_raises(r"per_channel && rank\(input\) < 1", shape=(), per_channel=True)
    _rescale_raises(r"multiplier shape", nc=3, per_channel=True)
    _rescale_raises(r"multiplier must be INT16", mult_t=I32, scale32=False, mult=1)
    _rescale_raises(r"rounding_mode must be", rounding_mode=RoundingMode.UNKNOWN)


def test_rescale_requires():
    ops = [Operand(np.array([100], np.int8), I8), Operand(np.array([1 << 30], np.int32), I32, const=True),
           Operand(np.array([3], np.int8), I8, const=True), Operand(np.array([0], np.int8), I8, const=True),
           Operand(np.array([0], np.int8), I8, const=True)]
    assert_both_refuse(Op.RESCALE, ops, make_attribute(Op.RESCALE, scale32=True, rounding_mode=SINGLE),
                       [TensorType((1,), I8)], r"value < \(1 << \(shift - 1\)\)")
    _rescale_raises(r"2 <= shift", shift=1)
    _rescale_raises(r"2 <= shift", shift=63)
    _rescale_raises(r"multiplier >= 0", mult=-1)
    _rescale_raises(r"value >= \(-1 << \(shift - 1\)\)", in_zp=100, shift=3)  # 0 - 100 needs shift >= 8
    x = np.array([(1 << 47) - 1], np.int64)
    ops = [Operand(x, I48), Operand(np.array([32767], np.int16), I16), Operand(np.array([2], np.int8), I8),
           Operand(np.array([0], np.int64), I48), Operand(np.array([0], np.int32), I32)]
    with pytest.raises(TosaRuntimeError, match=r"apply_scale_16: REQUIRE\(result"):
        run_ours(Op.RESCALE, ops, make_attribute(Op.RESCALE, scale32=False, rounding_mode=SINGLE),
                 [TensorType((1,), I32)])


# --------------------------------------------------------------------------- tiling
def test_tiled_execution_matches_whole_tensor():
    rng = _rng("tiling")
    for in_t, out_t, scale32, mode, per_channel, in_u, out_u in [
            (I8, I8, True, DOUBLE, True, False, False), (I32, I16, True, SINGLE, False, False, False),
            (I48, I8, False, SINGLE, True, False, False), (I16, I8, True, SINGLE, True, True, False)]:
        operands, attr = _rescale_case(in_t, out_t, scale32, mode, per_channel, in_u, out_u, rng)
        check_tiling(Op.RESCALE, operands, attr, [TensorType(SHAPE, out_t)], rng, regions=6)
    for in_t, out_t in [(DType.FP32, I8), (DType.BF16, DType.FP8E4M3), (I32, DType.FP16), (I16, BOOL)]:
        x = _cast_input(in_t, out_t, rng)
        check_tiling(Op.CAST, [Operand(x, in_t)], None, [TensorType(SHAPE, out_t)], rng)


# --------------------------------------------------------------------------- memoized checks, REQUIREs
def test_rescale_rechecks_zero_points_for_a_signature_that_passed():
    """The ERROR_IFs on types are checked once per signature; those on zero-point values every call."""
    for in_zp, match in [(0, None), (3, "input_unsigned == false"), (0, None), (3, "input_unsigned == false")]:
        if match is None:
            out = run_ours(Op.RESCALE, _i16_ops(in_zp), _i16_attr(), [TensorType((2,), I8)])[0]
            assert out.tolist() == [-1, 1]
        else:
            with pytest.raises(TosaRuntimeError, match=match):
                run_ours(Op.RESCALE, _i16_ops(in_zp), _i16_attr(), [TensorType((2,), I8)])
    for _ in range(2):  # a failed signature is checked again
        _rescale_raises(r"rounding_mode must be", rounding_mode=RoundingMode.UNKNOWN)


def _i16_ops(in_zp: int) -> list[Operand]:
    return [Operand(np.array([-256, 256], np.int16), I16), Operand(np.array([1 << 30], np.int32), I32),
            Operand(np.array([38], np.int8), I8), Operand(np.array([in_zp], np.int16), I16),
            Operand(np.array([0], np.int8), I8)]


def _i16_attr():
    return make_attribute(Op.RESCALE, scale32=True, rounding_mode=SINGLE)


@pytest.mark.parametrize("value,out_zp", [((1 << 31) - 1, 1), (-(1 << 31), -1)])
def test_rescale_output_zero_point_overflow_is_a_require_failure(value, out_zp):
    """apply_add_s REQUIREs result + output_zp in int32 (spec RESCALE pseudocode); only apply_scale_16
    can reach the int32 limits (scale 1: multiplier 1 << 14, shift 14)."""
    ops = [Operand(np.array([value, 0], np.int64), I48), Operand(np.array([1 << 14], np.int16), I16),
           Operand(np.array([14], np.int8), I8), Operand(np.array([0], np.int64), I48),
           Operand(np.array([out_zp], np.int8), I8)]
    attr = make_attribute(Op.RESCALE, scale32=False, rounding_mode=SINGLE)
    with pytest.raises(TosaRuntimeError, match=r"apply_add_s: REQUIRE"):
        run_ours(Op.RESCALE, ops, attr, [TensorType((2,), I8)])
    ops[4] = Operand(np.array([0], np.int8), I8)
    assert run_ours(Op.RESCALE, ops, attr, [TensorType((2,), I8)])[0].tolist() == [127 if value > 0 else -128, 0]
