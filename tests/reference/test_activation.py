"""CLAMP, ERF, SIGMOID, TANH and TABLE against the TOSA reference model."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError
from npu_sim.reference.activation import erf64
from npu_sim.tosa.dtype import DType, encode
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import NanPropagationMode, Op, make_attribute
from tests.fp_compliance import assert_fp_compliant
from tests.kernel_testing import assert_both_refuse, assert_same_bits, check_tiling, run_bound, run_ours
from tests.oracle import Operand, run_op
from tests.value_gen import fp_values, int_values

I8, I16, I32 = DType.INT8, DType.INT16, DType.INT32
F16, BF16, F32 = DType.FP16, DType.BF16, DType.FP32
FP = (F16, BF16, F32)
SHAPE = (2, 5, 7, 3)
PROPAGATE, IGNORE = NanPropagationMode.PROPAGATE, NanPropagationMode.IGNORE


def _rng(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _bytes(value, dtype: DType, pad: bool = True) -> bytes:
    raw = encode(np.array([value], dtype=dtype.numpy_dtype), dtype)
    return raw + bytes(-len(raw) % 8) if pad else raw


def _clamp_attr(lo, hi, dtype: DType, mode=PROPAGATE, pad=True):
    return make_attribute(Op.CLAMP, min_val=_bytes(lo, dtype, pad), max_val=_bytes(hi, dtype, pad), nan_mode=mode)


def _exact(op, operands, attribute, out_type: TensorType):
    """Our kernel, plain and bound (as the executor runs it from the third call), against the model."""
    ref = run_op(op, operands, attribute, [out_type])[0]
    ours = run_ours(op, operands, attribute, [out_type])[0]
    assert_same_bits(ours, ref, op.name, nan_equal=True, ignore_zero_sign=True)
    bound = run_bound(op, operands, attribute, [out_type])[0]
    assert_same_bits(bound, ref, f"bound {op.name}", nan_equal=True, ignore_zero_sign=True)
    return ours


# --------------------------------------------------------------------------- CLAMP
@pytest.mark.parametrize("dtype", [I8, I16], ids=lambda t: t.name)
def test_clamp_integer(dtype):
    rng = _rng("clamp", dtype)
    x = int_values(dtype, SHAPE, rng)
    lo_t, hi_t = dtype.int_range
    for lo, hi in [(lo_t, hi_t), (-5, 17), (0, 0), (lo_t, lo_t), (hi_t - 1, hi_t)]:
        ours = _exact(Op.CLAMP, [Operand(x, dtype)], _clamp_attr(lo, hi, dtype), TensorType(SHAPE, dtype))
        assert ours.min() >= lo and ours.max() <= hi


@pytest.mark.parametrize("dtype", FP, ids=lambda t: t.name)
@pytest.mark.parametrize("mode", [PROPAGATE, IGNORE], ids=lambda m: m.name)
def test_clamp_float_nan_modes(dtype, mode):
    rng = _rng("clampf", dtype, mode)
    x = fp_values(dtype, SHAPE, rng)
    for lo, hi in [(-1.5, 6.0), (0.0, 0.0), (-np.inf, np.inf), (-np.inf, 0.25)]:
        ours = _exact(Op.CLAMP, [Operand(x, dtype)], _clamp_attr(lo, hi, dtype, mode), TensorType(SHAPE, dtype))
        nan_in = np.isnan(x.astype(np.float32))
        out = ours.astype(np.float64)
        if mode == PROPAGATE:
            assert np.all(np.isnan(out[nan_in]))
        else:
            assert np.all(out[nan_in] == lo)


def test_clamp_reads_unpadded_attribute_bytes():
    x = np.array([-100, 0, 100], np.int8)
    out = run_ours(Op.CLAMP, [Operand(x, I8)], _clamp_attr(-3, 7, I8, pad=False), [TensorType((3,), I8)])[0]
    assert out.tolist() == [-3, 0, 7]


def test_clamp_errors():
    x = np.zeros((3,), np.float32)
    t = TensorType((3,), F32)
    for attr, match in [(_clamp_attr(2.0, 1.0, F32), "max_val < min_val"),
                        (_clamp_attr(np.nan, 1.0, F32), "isNaN"),
                        (_clamp_attr(0.0, np.nan, F32), "isNaN"),
                        (make_attribute(Op.CLAMP, min_val=_bytes(0.0, F32), max_val=_bytes(1.0, F32)), "nan_mode"),
                        (make_attribute(Op.CLAMP, min_val=b"\0", max_val=_bytes(1.0, F32), nan_mode=PROPAGATE),
                         "min_val")]:
        with pytest.raises(TosaRuntimeError, match=match):
            run_ours(Op.CLAMP, [Operand(x, F32)], attr, [t])
    with pytest.raises(TosaRuntimeError, match="max_val < min_val"):
        run_ours(Op.CLAMP, [Operand(x.astype(np.int8), I8)], _clamp_attr(5, 4, I8), [TensorType((3,), I8)])
    with pytest.raises(TosaRuntimeError, match="not a supported"):
        run_ours(Op.CLAMP, [Operand(x.astype(np.int32), I32)], _clamp_attr(0, 4, I32), [TensorType((3,), I32)])


# --------------------------------------------------------------------------- ERF, SIGMOID, TANH
@pytest.mark.parametrize("dtype", FP, ids=lambda t: t.name)
@pytest.mark.parametrize("op", [Op.ERF, Op.SIGMOID, Op.TANH], ids=lambda o: o.name)
def test_fp_activations_within_bounds(op, dtype):
    rng = _rng(op, dtype)
    x = fp_values(dtype, (8, 40), rng, -4, 1.5)
    outs = [TensorType(x.shape, dtype)]
    ours = run_ours(op, [Operand(x, dtype)], None, outs)[0]
    ref = run_op(op, [Operand(x, dtype)], None, outs, precise=True)[0]
    assert_fp_compliant(ours, ref, dtype, op, inputs=[x])
    assert_same_bits(run_bound(op, [Operand(x, dtype)], None, outs)[0], ours, f"bound {op.name}")


def test_activation_special_values():
    x = np.array([-np.inf, np.inf, -0.0, 0.0, np.nan], np.float32)
    t = [TensorType((5,), F32)]
    sig = run_ours(Op.SIGMOID, [Operand(x, F32)], None, t)[0]
    np.testing.assert_array_equal(sig, [0.0, 1.0, 0.5, 0.5, np.nan])
    tanh = run_ours(Op.TANH, [Operand(x, F32)], None, t)[0]
    np.testing.assert_array_equal(tanh, [-1.0, 1.0, -0.0, 0.0, np.nan])
    assert np.signbit(tanh[2])
    erf = run_ours(Op.ERF, [Operand(x, F32)], None, t)[0]
    np.testing.assert_array_equal(erf, [-1.0, 1.0, -0.0, 0.0, np.nan])


def test_erf64_matches_math_erf():
    x = np.concatenate([np.linspace(-7, 7, 2801), 10.0 ** np.linspace(-300, 0.8, 400),
                        -(10.0 ** np.linspace(-20, 0.7, 200))])
    expected = np.array([math.erf(v) for v in x])
    got = erf64(x)
    rel = np.abs(got - expected) / np.maximum(np.abs(expected), 1e-300)
    assert rel.max() < 1e-14


# --------------------------------------------------------------------------- TABLE
def test_table_int8():
    rng = _rng("table8")
    x = int_values(I8, SHAPE, rng)
    lut = int_values(I8, (256,), rng)
    ours = _exact(Op.TABLE, [Operand(x, I8), Operand(lut, I8, const=True)], None, TensorType(SHAPE, I8))
    np.testing.assert_array_equal(ours, lut[x.astype(np.int64) + 128])


def _sigmoid_table() -> np.ndarray:
    """The spec's example: 513 entries over [-16, 16] in steps of 1/16, in 1/32768 units."""
    v = np.arange(-256, 257) / 16.0
    return np.clip(np.round(32768.0 / (1.0 + np.exp(-v))), -32768, 32767).astype(np.int16)


@pytest.mark.parametrize("kind", ["random", "sigmoid"])
def test_table_int16_interpolation(kind):
    rng = _rng("table16", kind)
    x = int_values(I16, SHAPE, rng)
    x.reshape(-1)[:4] = [-32768, 32767, -32641, 32640]
    lut = int_values(I16, (513,), rng, -16000, 16000) if kind == "random" else _sigmoid_table()
    ours = _exact(Op.TABLE, [Operand(x, I16), Operand(lut, I16, const=True)], None, TensorType(SHAPE, I32))
    v = x.astype(np.int64) + 32768  # the 9.7 fixed-point reading, written out directly
    base, nxt, frac = lut[v >> 7].astype(np.int64), lut[(v >> 7) + 1].astype(np.int64), v & 127
    np.testing.assert_array_equal(ours, base * 128 + (nxt - base) * frac)


def test_table_slope_require_only_for_used_entries():
    lut = np.zeros(513, np.int16)
    lut[100] = -30000
    lut[101] = 30000  # slope 60000 between entries 100 and 101
    t = TensorType((2,), I32)
    safe = np.array([-32768, 32767], np.int16)  # indices 0 and 511
    out = run_ours(Op.TABLE, [Operand(safe, I16), Operand(lut, I16)], None, [t])[0]
    assert out.tolist() == [0, 0]
    used = np.array([100 * 128 - 32768 + 5, 0], np.int16)  # index 100
    assert_both_refuse(Op.TABLE, [Operand(used, I16), Operand(lut, I16, const=True)], None, [t], "slope")


def test_table_errors():
    x = np.zeros((2,), np.int8)
    with pytest.raises(TosaRuntimeError, match="length"):
        run_ours(Op.TABLE, [Operand(x, I8), Operand(np.zeros(255, np.int8), I8)], None, [TensorType((2,), I8)])
    with pytest.raises(TosaRuntimeError, match="length"):
        run_ours(Op.TABLE, [Operand(x.astype(np.int16), I16), Operand(np.zeros(512, np.int16), I16)], None,
                 [TensorType((2,), I32)])
    with pytest.raises(TosaRuntimeError, match="output type"):
        run_ours(Op.TABLE, [Operand(x.astype(np.int16), I16), Operand(np.zeros(513, np.int16), I16)], None,
                 [TensorType((2,), I16)])


# --------------------------------------------------------------------------- tiling
def test_tiled_execution_matches_whole_tensor():
    rng = _rng("tiling")
    x16 = int_values(I16, SHAPE, rng)
    x8 = int_values(I8, SHAPE, rng)
    xf = fp_values(BF16, SHAPE, rng)
    cases = [
        (Op.TABLE, [Operand(x16, I16), Operand(_sigmoid_table(), I16)], None, I32),
        (Op.TABLE, [Operand(x8, I8), Operand(int_values(I8, (256,), rng), I8)], None, I8),
        (Op.CLAMP, [Operand(x8, I8)], _clamp_attr(-20, 90, I8), I8),
        (Op.CLAMP, [Operand(xf, BF16)], _clamp_attr(-2.0, 3.0, BF16, IGNORE), BF16),
    ] + [(op, [Operand(xf, BF16)], None, BF16) for op in (Op.ERF, Op.SIGMOID, Op.TANH)]
    for op, operands, attr, out_dtype in cases:
        check_tiling(op, operands, attr, [TensorType(SHAPE, out_dtype)], rng)
