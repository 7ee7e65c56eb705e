"""RESIZE against the reference model (integers exact, floats per the spec bound), tiling,
and every ERROR_IF of the pseudocode."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, ResizeMode, make_attribute
from tests.fp_compliance import abs_error_bound, assert_fp_compliant
from tests.kernel_testing import (
    assert_same_bits,
    ours_tiled,
    random_tiles,
    run_bound,
    run_ours,
    shape_operand,
    window_volume,
)
from tests.oracle import Operand, run_op
from tests.value_gen import random_values

NEAREST, BILINEAR = ResizeMode.NEAREST, ResizeMode.BILINEAR
OUT_TYPE = {(DType.INT8, BILINEAR): DType.INT32, (DType.INT8, NEAREST): DType.INT8,
            (DType.INT16, BILINEAR): DType.INT48, (DType.INT16, NEAREST): DType.INT16}


def _axis_params(in_size: int, rng: np.random.Generator, big_scale: bool = False):
    """(scale_n, scale_d, offset, border, out_size) satisfying every ERROR_IF."""
    while True:
        n = int(rng.integers(1, 2049)) if big_scale else int(rng.integers(1, 9))
        # d >= n / 256 keeps scale_n / scale_d within the 8K level's MAX_SCALE.
        d = int(rng.integers(-(-n // 256), min(16 * n, 2 * n + 8)))
        offset = int(rng.integers(-n, 16 * n))
        out_size = int(rng.integers(1, 13))
        border = (out_size - 1) * d - (in_size - 1) * n + offset
        if -16 * n <= border < n:
            return n, d, offset, border, out_size


def resize_case(dtype, mode, rng, big_scale=False, max_in=7, edges=True):
    n, c = (int(v) for v in rng.integers(1, 4, size=2))
    ih, iw = (int(v) for v in rng.integers(1, max_in + 1, size=2))
    yn, yd, yo, yb, oh = _axis_params(ih, rng, big_scale)
    xn, xd, xo, xb, ow = _axis_params(iw, rng, big_scale)
    x = random_values(dtype, (n, ih, iw, c), rng, edges=edges)
    operands = [Operand(x, dtype), shape_operand([yn, yd, xn, xd]), shape_operand([yo, xo]),
                shape_operand([yb, xb])]
    out_dtype = OUT_TYPE.get((dtype, mode), dtype)
    return operands, make_attribute(Op.RESIZE, mode=mode), TensorType((n, oh, ow, c), out_dtype)


def _fixed_case(x, dtype, mode, scale, offset, border, out_hw):
    n, _, _, c = x.shape
    operands = [Operand(x, dtype), shape_operand(scale), shape_operand(offset), shape_operand(border)]
    out_dtype = OUT_TYPE.get((dtype, mode), dtype)
    return operands, make_attribute(Op.RESIZE, mode=mode), TensorType((n, *out_hw, c), out_dtype)


# --------------------------------------------------------------------------- integers: exact
@pytest.mark.parametrize("dtype,mode", [(DType.INT8, NEAREST), (DType.INT8, BILINEAR),
                                        (DType.INT16, NEAREST)], ids=lambda v: v.name)
def test_integer_matches_reference_model(dtype, mode):
    rng = np.random.default_rng(int(dtype) * 10 + int(mode))
    for case in range(8):
        operands, attribute, out_type = resize_case(dtype, mode, rng, big_scale=case % 2 == 1)
        (expected,) = run_op(Op.RESIZE, operands, attribute, [out_type])
        (actual,) = run_ours(Op.RESIZE, operands, attribute, [out_type])
        assert_same_bits(actual, expected)
        (bound,) = run_bound(Op.RESIZE, operands, attribute, [out_type])  # sample positions worked out once
        assert_same_bits(bound, expected)


def test_int16_bilinear_int48_matches_reference_model():
    # INT48 outputs only come out of the command-line model (run_op uses it).
    rng = np.random.default_rng(48)
    cases = [resize_case(DType.INT16, BILINEAR, rng, big_scale=True) for _ in range(2)]
    extreme = np.array([[-32768, 32767], [32767, -32768]], np.int16).reshape(1, 2, 2, 1)
    # Corner samples (remainder 0) weigh a pixel by scale_y_n * scale_x_n = 2048 * 2047.
    cases.append(_fixed_case(extreme, DType.INT16, BILINEAR, [2048, 1024, 2047, 89], [0, 0],
                             [0, 0], (3, 24)))
    for operands, attribute, out_type in cases:
        (expected,) = run_op(Op.RESIZE, operands, attribute, [out_type])
        (actual,) = run_ours(Op.RESIZE, operands, attribute, [out_type])
        assert_same_bits(actual, expected)
    assert actual.max() == 32767 * 2048 * 2047  # beyond int32: the int48 range is needed


def test_power_of_two_half_pixel_upscale():
    # The spec's example: [OH, OW] = 2 * [IH, IW] samples from (-0.5, -0.5).
    x = np.array([[10, 20], [30, 40]], np.int8).reshape(1, 2, 2, 1)
    operands, attribute, out_type = _fixed_case(x, DType.INT8, BILINEAR, [4, 2, 4, 2], [-1, -1],
                                                [1, 1], (4, 4))
    (actual,) = run_ours(Op.RESIZE, operands, attribute, [out_type])
    # Scaled by scale_y_n * scale_x_n = 16; first row: 10 | 10*3/4+20/4 | ... | 20
    assert actual[0, 0, :, 0].tolist() == [160, 200, 280, 320]
    assert actual[0, :, 0, 0].tolist() == [160, 240, 400, 480]


# --------------------------------------------------------------------------- floating point
FP = (DType.FP16, DType.BF16, DType.FP32)


@pytest.mark.parametrize("dtype", FP, ids=lambda v: v.name)
def test_fp_nearest_picks_the_reference_models_pixels(dtype):
    rng = np.random.default_rng(60 + int(dtype))
    for case in range(6):
        # Large scale_n makes dy = ry / scale_n round in resize_t, which decides the pixel.
        operands, attribute, out_type = resize_case(dtype, NEAREST, rng, big_scale=case % 2 == 1)
        (expected,) = run_op(Op.RESIZE, operands, attribute, [out_type])
        (actual,) = run_ours(Op.RESIZE, operands, attribute, [out_type])
        assert_same_bits(actual, expected, nan_equal=True)


def test_bf16_nearest_rounds_dy_in_bf16():
    # ry / scale_n = 1023/2047 < 0.5 exactly, but rounds to 0.5 in bf16: pick the next pixel.
    x = np.arange(2, dtype=np.float32).astype(DType.BF16.numpy_dtype).reshape(1, 1, 2, 1)
    operands, attribute, out_type = _fixed_case(x, DType.BF16, NEAREST, [1, 1, 2047, 1023],
                                                [0, 1023], [0, -1], (1, 2))
    (actual,) = run_ours(Op.RESIZE, operands, attribute, [out_type])
    (expected,) = run_op(Op.RESIZE, operands, attribute, [out_type])
    assert actual[0, 0, :, 0].astype(np.float32).tolist() == [1.0, 1.0]
    assert_same_bits(actual, expected)


@pytest.mark.parametrize("dtype", FP, ids=lambda v: v.name)
def test_fp_bilinear_meets_spec_bound(dtype):
    rng = np.random.default_rng(70 + int(dtype))
    for case in range(3):
        operands, attribute, out_type = resize_case(dtype, BILINEAR, rng, big_scale=case == 2,
                                                    edges=False)
        x = operands[0].value
        (ref,) = run_op(Op.RESIZE, operands, attribute, [out_type], precise=True)
        max_input = float(np.max(np.abs(x.astype(np.float64))))
        err_bnd = max(float(abs_error_bound(np.array(max_input), 20.0, 0.0, 1, dtype)),
                      max_input * 0.006)
        (actual,) = run_ours(Op.RESIZE, operands, attribute, [out_type])
        assert_fp_compliant(actual, ref, dtype, err_bnd=np.full(ref.shape, err_bnd))


def test_fp_bilinear_interpolates():
    x = np.array([[0.0, 1.0], [2.0, 3.0]], np.float32).reshape(1, 2, 2, 1)
    operands, attribute, out_type = _fixed_case(x, DType.FP32, BILINEAR, [2, 1, 2, 1], [0, 0],
                                                [0, 0], (3, 3))
    (actual,) = run_ours(Op.RESIZE, operands, attribute, [out_type])
    assert actual[0, :, :, 0].tolist() == [[0.0, 0.5, 1.0], [1.0, 1.5, 2.0], [2.0, 2.5, 3.0]]


# --------------------------------------------------------------------------- tiling
@pytest.mark.parametrize("dtype,mode", [(DType.INT8, BILINEAR), (DType.INT16, NEAREST),
                                        (DType.BF16, BILINEAR), (DType.FP32, NEAREST)],
                         ids=lambda v: v.name)
def test_random_tilings_equal_whole_tensor(dtype, mode):
    rng = np.random.default_rng(80 + int(dtype) + int(mode))
    for case in range(4):
        operands, attribute, out_type = resize_case(dtype, mode, rng, big_scale=case % 2 == 1,
                                                    max_in=9)
        (whole,) = run_ours(Op.RESIZE, operands, attribute, [out_type])
        for known_consts in (False, True):
            tiles = random_tiles(out_type.shape, rng, max_cuts=4)
            (tiled,) = ours_tiled(Op.RESIZE, operands, attribute, [out_type], tiles, known_consts=known_consts)
            assert_same_bits(tiled, whole)


def test_window_follows_the_sampled_rows_when_scale_is_known():
    x = np.zeros((1, 8, 8, 1), np.int8)
    # 2x upscale, align corners: output row oy samples input rows oy // 2 and oy // 2 + 1.
    operands, attribute, out_type = _fixed_case(x, DType.INT8, BILINEAR, [2, 1, 2, 1], [0, 0],
                                                [0, 0], (15, 15))
    region = ((0, 1), (4, 6), (0, 15), (0, 1))
    assert window_volume(Op.RESIZE, operands, attribute, out_type, region, True) == 2 * 8
    assert window_volume(Op.RESIZE, operands, attribute, out_type, region, False) == 8 * 8


# --------------------------------------------------------------------------- ERROR_IF
def _error_case(scale=(2, 1, 2, 1), offset=(0, 0), border=(0, 0), in_hw=(3, 3), out_hw=(5, 5),
                dtype=DType.INT8, mode=NEAREST, out_dtype=None):
    x = np.zeros((1, *in_hw, 1), dtype=dtype.numpy_dtype)
    operands = [Operand(x, dtype), shape_operand(scale), shape_operand(offset), shape_operand(border)]
    out_dtype = out_dtype or OUT_TYPE.get((dtype, mode), dtype)
    return operands, make_attribute(Op.RESIZE, mode=mode), TensorType((1, *out_hw, 1), out_dtype)


@pytest.mark.parametrize("kwargs,text", [
    ({"in_hw": (16384, 1), "out_hw": (32767, 1), "scale": (2, 1, 1, 1)}, ">= 16384"),
    ({"scale": (0, 1, 2, 1)}, "must be positive"),
    ({"scale": (2, 1, 2, 0)}, "must be positive"),
    ({"scale": (4096, 2048, 2, 1)}, "scale_y_n > 2048"),
    ({"scale": (2, 32, 2, 1), "out_hw": (1, 5)}, "scale_y_d >= 16"),
    ({"offset": (-3, 0), "border": (-3, 0)}, "offset_y out of range"),
    ({"offset": (0, 32), "border": (0, 32)}, "offset_x out of range"),
    ({"border": (2, 0), "out_hw": (6, 5)}, "border_y out of range"),
    ({"border": (0, -33)}, "border_x out of range"),
    ({"scale": (2, 3, 2, 1)}, "not a multiple of scale_y_d"),
    ({"out_hw": (5, 4)}, "OW does not match"),
    ({"mode": BILINEAR, "out_dtype": DType.INT8}, "unsupported types INT8 -> INT8 for BILINEAR"),
    ({"dtype": DType.INT32}, "unsupported types INT32"),
    ({"dtype": DType.FP16, "out_dtype": DType.FP32}, "unsupported types FP16 -> FP32"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_error_if(kwargs, text):
    operands, attribute, out_type = _error_case(**kwargs)
    with pytest.raises(TosaRuntimeError, match=text):
        run_ours(Op.RESIZE, operands, attribute, [out_type])


def test_valid_limits_are_accepted():
    # The edges of each range are legal: offset = -scale_n, border = scale_n - 1.
    operands, attribute, out_type = _error_case(scale=(2, 1, 2, 1), offset=(-2, 0),
                                                border=(1, 0), in_hw=(3, 3), out_hw=(8, 5))
    (actual,) = run_ours(Op.RESIZE, operands, attribute, [out_type])
    (expected,) = run_op(Op.RESIZE, operands, attribute, [out_type])
    assert_same_bits(actual, expected)
