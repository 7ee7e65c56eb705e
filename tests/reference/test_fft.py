"""FFT2D and RFFT2D against the reference model's fp64 results and the spec's accuracy rule.

The spec judges FFT outputs as dot products of the input with the DFT
coefficients (tensor_ops.adoc, FFT2D/RFFT2D "Precision Requirements"; KS from
Appendix A). The error bound needs the operation evaluated on absolute values
of input and coefficients, which the model cannot give in fp64, so
:func:`_bound` evaluates that sum here in fp64 from the spec's formula.
"""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute
from tests.fp_compliance import NORMAL_MIN
from tests.fp_compliance_dot import assert_dot_compliant
from tests.kernel_testing import assert_same_bits, ours_tiled, random_tiles, run_ours
from tests.oracle import Operand, run_op
from tests.value_gen import fp_values

SHAPES = [(1, 1, 1), (2, 1, 8), (1, 4, 1), (2, 8, 4), (1, 16, 16), (1, 32, 8), (3, 2, 2)]


def _angles(h: int, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Angle a[oy, ox, iy, ix] = 2*pi*(ay/H + ax/W) with ay = iy*oy % H, ax = ix*ox % W."""
    oy, ox, iy, ix = np.meshgrid(np.arange(h), np.arange(w), np.arange(h), np.arange(w), indexing="ij")
    ay, ax = (iy * oy) % h, (ix * ox) % w
    return 2 * np.pi * (ay / h + ax / w), ay, ax


def _magnitudes(planes: list[np.ndarray], local_bound: bool) -> list[np.ndarray]:
    """input_abs of the check: max(|x|, normal_min), or everywhere the largest one."""
    mags = [np.maximum(np.abs(p.astype(np.float64)), NORMAL_MIN[DType.FP32]) for p in planes]
    if not local_bound:
        top = max(float(m.max()) for m in mags)
        mags = [np.full_like(m, top) for m in mags]
    return mags


def _bound(planes: list[np.ndarray], rfft: bool, local_bound: bool) -> list[np.ndarray]:
    """reference_fp64 of the operation on absolute inputs and absolute coefficients."""
    _, h, w = planes[0].shape
    a, ay, ax = _angles(h, w)
    cos, sin = np.abs(np.cos(a)), np.abs(np.sin(a))
    mags = _magnitudes(planes, local_bound)
    if rfft:
        computed = ((h > 1) & (ay % max(h // 2, 1) > 0)) | ((w > 1) & (ax % max(w // 2, 1) > 0))
        sin = np.where(computed, sin, 0.0)
        cols = w // 2 + 1
        real = np.einsum("yxij,nij->nyx", cos, mags[0])[:, :, :cols]
        imag = np.einsum("yxij,nij->nyx", sin, mags[0])[:, :, :cols]
        return [real, imag]
    real = np.einsum("yxij,nij->nyx", cos, mags[0]) + np.einsum("yxij,nij->nyx", sin, mags[1])
    imag = np.einsum("yxij,nij->nyx", sin, mags[0]) + np.einsum("yxij,nij->nyx", cos, mags[1])
    return [real, imag]


def _inputs(rng: np.random.Generator, shape, count: int) -> list[np.ndarray]:
    scale = float(rng.choice([1e-3, 1.0, 1e4]))
    return [fp_values(DType.FP32, shape, rng, scale=scale, specials=[0.0, -0.0], special_fraction=0.05)
            for _ in range(count)]


@pytest.mark.parametrize("inverse", [False, True], ids=["forward", "inverse"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fft2d_meets_dot_product_accuracy(shape, inverse: bool) -> None:
    rng = np.random.default_rng([61, *shape, inverse])
    planes = _inputs(rng, shape, 2)
    local_bound = bool(rng.integers(0, 2))
    operands = [Operand(p, DType.FP32) for p in planes]
    attribute = make_attribute(Op.FFT2D, inverse=inverse, local_bound=local_bound)
    outputs = [TensorType(shape, DType.FP32)] * 2
    result = run_ours(Op.FFT2D, operands, attribute, outputs)
    refs = run_op(Op.FFT2D, operands, attribute, outputs, precise=True)
    for ours_plane, ref, bnd in zip(result, refs, _bound(planes, False, local_bound)):
        assert_dot_compliant(ours_plane, ref, bnd, DType.FP32, DType.FP32, 2 * shape[1] * shape[2], False)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_rfft2d_meets_dot_product_accuracy(shape) -> None:
    rng = np.random.default_rng([67, *shape])
    planes = _inputs(rng, shape, 1)
    n, h, w = shape
    attribute = make_attribute(Op.RFFT2D, local_bound=False)
    outputs = [TensorType((n, h, w // 2 + 1), DType.FP32)] * 2
    operands = [Operand(planes[0], DType.FP32)]
    result = run_ours(Op.RFFT2D, operands, attribute, outputs)
    refs = run_op(Op.RFFT2D, operands, attribute, outputs, precise=True)
    for ours_plane, ref, bnd in zip(result, refs, _bound(planes, True, False)):
        assert_dot_compliant(ours_plane, ref, bnd, DType.FP32, DType.FP32, h * w, False)
    # the skippable imaginary outputs are exactly zero
    for y in {0, h // 2}:
        for x in {0, w // 2}:
            assert np.all(result[1][:, y, x] == 0)


def test_fft2d_of_an_impulse_is_flat() -> None:
    """A unit impulse at the origin transforms to 1 + 0i everywhere (both directions), exactly."""
    real = np.zeros((1, 4, 8), np.float32)
    real[0, 0, 0] = 1.0
    operands = [Operand(real, DType.FP32), Operand(np.zeros_like(real), DType.FP32)]
    outputs = [TensorType((1, 4, 8), DType.FP32)] * 2
    for inverse in (False, True):
        attribute = make_attribute(Op.FFT2D, inverse=inverse)
        out_real, out_imag = run_ours(Op.FFT2D, operands, attribute, outputs)
        assert np.all(out_real == 1.0) and np.all(out_imag == 0.0)
        expected = run_op(Op.FFT2D, operands, attribute, outputs)
        assert np.array_equal(out_real, expected[0]) and np.array_equal(out_imag, expected[1])


@pytest.mark.parametrize("op", [Op.FFT2D, Op.RFFT2D], ids=lambda o: o.name)
def test_fft_tiles_give_the_whole_tensor_bits(op: Op) -> None:
    rng = np.random.default_rng([71, op])
    shape = (3, 8, 16)
    planes = _inputs(rng, shape, 2 if op is Op.FFT2D else 1)
    operands = [Operand(p, DType.FP32) for p in planes]
    attribute = make_attribute(op, inverse=True) if op is Op.FFT2D else make_attribute(op)
    out_shape = shape if op is Op.FFT2D else (3, 8, 9)
    outputs = [TensorType(out_shape, DType.FP32)] * 2
    whole = run_ours(op, operands, attribute, outputs)
    for _ in range(3):
        tiled = ours_tiled(op, operands, attribute, outputs, random_tiles(out_shape, rng))
        for a, b in zip(tiled, whole):
            assert_same_bits(a, b)


@pytest.mark.parametrize("shape, dtype, out_shape, message", [
    ((1, 3, 4), DType.FP32, (1, 3, 4), "H = 3 must be a power of two"),
    ((1, 4, 6), DType.FP32, (1, 4, 6), "W = 6 must be a power of two"),
    ((1, 4, 4), DType.FP16, (1, 4, 4), "must be FP32"),
    ((1, 4, 4), DType.FP32, (1, 4, 2), "output shape"),
])
def test_fft2d_error_ifs(shape, dtype: DType, out_shape, message: str) -> None:
    operands = [Operand(np.zeros(shape), dtype), Operand(np.zeros(shape), dtype)]
    with pytest.raises(TosaRuntimeError, match=message):
        run_ours(Op.FFT2D, operands, make_attribute(Op.FFT2D), [TensorType(out_shape, dtype)] * 2)


def test_fft2d_planes_must_have_one_shape() -> None:
    operands = [Operand(np.zeros((1, 4, 4)), DType.FP32), Operand(np.zeros((1, 4, 2)), DType.FP32)]
    with pytest.raises(TosaRuntimeError, match="same shape"):
        run_ours(Op.FFT2D, operands, make_attribute(Op.FFT2D), [TensorType((1, 4, 4), DType.FP32)] * 2)


def test_rfft2d_output_width_is_half_plus_one() -> None:
    operands = [Operand(np.zeros((1, 4, 8)), DType.FP32)]
    with pytest.raises(TosaRuntimeError, match="output shape"):
        run_ours(Op.RFFT2D, operands, make_attribute(Op.RFFT2D), [TensorType((1, 4, 4), DType.FP32)] * 2)
