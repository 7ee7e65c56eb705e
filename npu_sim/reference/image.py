"""RESIZE (TOSA 1.0 spec, chapter "Image Operators"), NEAREST and BILINEAR.

The sample position of output (oy, ox) is ``y = oy * scale_y_d + offset_y`` in units of
``1 / scale_y_n`` input pixels (x likewise): integer part ``iy = floor(y / scale_y_n)``,
remainder ``ry``. Integer inputs interpolate in fixed point, weights ``scale_n - r`` and
``r``, so int8 BILINEAR gives int32 and int16 BILINEAR int48 results scaled by
``scale_y_n * scale_x_n``. Floating-point inputs compute ``dy = ry / scale_y_n`` and the
interpolation in the type itself (``resize_t`` = ``in_t``), one rounding per operation in
the pseudocode's order, so NEAREST picks exactly the pseudocode's pixel.

scale ``[y_n, y_d, x_n, x_d]``, offset ``[y, x]`` and border ``[y, x]`` are SHAPE operands.
Input window: N and C follow the output region; H and W are the rows/columns the output
region samples when the SHAPE values are passed as ``const_inputs``, else whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from npu_sim.reference.kernel_api import KernelArgs, Region, full_region, register
from npu_sim.reference.kernel_util import constant_plan, output_region, read_window, shape_values
from npu_sim.reference.numerics import round_to_float
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op, ResizeMode

#: (in_t, mode) -> out_t (tosa.xml, TOSA 1.0: PRO-INT, PRO-FP, EXT-INT16, EXT-BF16).
SUPPORTED: dict[tuple[DType, ResizeMode], DType] = {
    (DType.INT8, ResizeMode.BILINEAR): DType.INT32,
    (DType.INT8, ResizeMode.NEAREST): DType.INT8,
    (DType.INT16, ResizeMode.BILINEAR): DType.INT48,
    (DType.INT16, ResizeMode.NEAREST): DType.INT16,
    **{(t, m): t for t in (DType.FP16, DType.BF16, DType.FP32)
       for m in (ResizeMode.BILINEAR, ResizeMode.NEAREST)},
}
_MAX_SIZE = 16384


@dataclass(frozen=True)
class ResizeParams:
    """scale, offset and border of one axis (y or x)."""

    scale_n: int
    scale_d: int
    offset: int
    border: int


def _axis_samples(p: ResizeParams, start: int, stop: int, in_size: int) -> tuple[np.ndarray, ...]:
    """(i0, i1, r) of output positions [start, stop): the two input neighbours and remainder."""
    pos = np.arange(start, stop, dtype=np.int64) * p.scale_d + p.offset
    whole = pos // p.scale_n  # idiv_floor
    remainder = pos - whole * p.scale_n
    return np.maximum(whole, 0), np.minimum(whole + 1, in_size - 1), remainder


def resize_input_range(p: ResizeParams, start: int, stop: int, in_size: int) -> tuple[int, int]:
    """Input rows (or columns) that output positions [start, stop) read."""
    if stop <= start:
        return 0, 0
    first, _, _ = _axis_samples(p, start, start + 1, in_size)
    _, last, _ = _axis_samples(p, stop - 1, stop, in_size)
    lo = min(max(int(first[0]), 0), in_size)
    hi = min(max(int(last[0]) + 1, lo), in_size)
    return (lo, hi) if hi > lo else (0, 0)


def _params_from(values: Sequence[np.ndarray]) -> tuple[ResizeParams, ResizeParams]:
    scale = [int(v) for v in np.asarray(values[0]).reshape(-1)]
    offset = [int(v) for v in np.asarray(values[1]).reshape(-1)]
    border = [int(v) for v in np.asarray(values[2]).reshape(-1)]
    return (ResizeParams(scale[0], scale[1], offset[0], border[0]),
            ResizeParams(scale[2], scale[3], offset[1], border[1]))


def _resize_window(attribute: Attribute, input_types: Sequence[TensorType],
                   output_types: Sequence[TensorType], out_region: Region,
                   const_inputs: Sequence[np.ndarray | None] | None = None) -> list[Region]:
    n, in_h, in_w, _ = input_types[0].shape
    (n0, n1), (oy0, oy1), (ox0, ox1), (c0, c1) = out_region
    rows, cols = (0, in_h), (0, in_w)
    known = [v for v in const_inputs[1:4] if v is not None] if const_inputs is not None else []
    if len(known) == 3:
        py, px = _params_from(known)
        if py.scale_n > 0 and py.scale_d > 0 and px.scale_n > 0 and px.scale_d > 0:
            rows = resize_input_range(py, oy0, oy1, in_h)
            cols = resize_input_range(px, ox0, ox1, in_w)
    return [((n0, n1), rows, cols, (c0, c1))] + [full_region(t.shape) for t in input_types[1:]]


def _check(args: KernelArgs, py: ResizeParams, px: ResizeParams) -> tuple[DType, DType]:
    in_t, out_t = args.input_types[0], args.output_types[0]
    mode = args.attribute.mode
    args.require(len(in_t.shape) == 4 and len(out_t.shape) == 4, "input and output must have rank 4")
    key = (in_t.dtype, mode)
    args.require(key in SUPPORTED and SUPPORTED[key] == out_t.dtype,
                 f"unsupported types {in_t.dtype.name} -> {out_t.dtype.name} for {mode.name}")
    n, ih, iw, c = in_t.shape
    on, oh, ow, oc = out_t.shape
    args.require(on == n and oc == c, "output batch/channels differ from the input")
    args.require(max(oh, ow, ih, iw) < _MAX_SIZE, f"a height or width is >= {_MAX_SIZE}")
    for axis, p, in_size, out_size, in_name, out_name in (("y", py, ih, oh, "IH", "OH"),
                                                          ("x", px, iw, ow, "IW", "OW")):
        args.require(p.scale_n > 0 and p.scale_d > 0, f"scale_{axis} values must be positive")
        args.require(p.scale_n <= (1 << 11), f"scale_{axis}_n > 2048")
        args.require(p.scale_d < 16 * p.scale_n, f"scale_{axis}_d >= 16 * scale_{axis}_n")
        args.require(-p.scale_n <= p.offset < 16 * p.scale_n, f"offset_{axis} out of range")
        args.require(-16 * p.scale_n <= p.border < p.scale_n, f"border_{axis} out of range")
        span = (in_size - 1) * p.scale_n - p.offset + p.border
        args.require(span % p.scale_d == 0,
                     f"({in_name} - 1) * scale_{axis}_n - offset_{axis} + border_{axis} "
                     f"is not a multiple of scale_{axis}_d")
        args.require(out_size == span // p.scale_d + 1,
                     f"{out_name} does not match the scale, offset and border")
    return in_t.dtype, out_t.dtype


def _rounder(dtype: DType) -> Callable[[np.ndarray], np.ndarray]:
    """Rounding to ``resize_t``, applied after each operation computed in fp32: fp32 has
    more than twice the precision of fp16/bf16, so each result is correctly rounded."""
    storage = dtype.numpy_dtype

    def rnd(v: np.ndarray) -> np.ndarray:
        return np.asarray(v, dtype=np.float32).astype(storage).astype(np.float32)

    return rnd


@dataclass(frozen=True)
class _ResizePlan:
    """What a RESIZE works out before reading its input: types, the window it reads and,
    per output row and column, the input neighbours (window coordinates) and remainder."""

    in_dtype: DType
    out_dtype: DType
    mode: ResizeMode
    py: ResizeParams
    px: ResizeParams
    window: Region
    iy0: np.ndarray
    iy1: np.ndarray
    ry: np.ndarray
    ix0: np.ndarray
    ix1: np.ndarray
    rx: np.ndarray


def _resize_plan(args: KernelArgs) -> _ResizePlan:
    scale = shape_values(args, 1, "scale", 4)
    offset = shape_values(args, 2, "offset", 2)
    border = shape_values(args, 3, "border", 2)
    py = ResizeParams(scale[0], scale[1], offset[0], border[0])
    px = ResizeParams(scale[2], scale[3], offset[1], border[1])
    in_dtype, out_dtype = _check(args, py, px)
    _, ih, iw, _ = args.input_types[0].shape
    (n0, n1), (oy0, oy1), (ox0, ox1), (c0, c1) = output_region(args)
    rows = resize_input_range(py, oy0, oy1, ih)
    cols = resize_input_range(px, ox0, ox1, iw)
    iy0, iy1, ry = _axis_samples(py, oy0, oy1, ih)
    ix0, ix1, rx = _axis_samples(px, ox0, ox1, iw)
    return _ResizePlan(in_dtype, out_dtype, args.attribute.mode, py, px, ((n0, n1), rows, cols, (c0, c1)),
                       iy0 - rows[0], iy1 - rows[0], ry, ix0 - cols[0], ix1 - cols[0], rx)


@register(Op.RESIZE, window=_resize_window)
def resize(args: KernelArgs) -> list[np.ndarray]:
    """RESIZE of an NHWC tensor by scale/offset/border (SHAPE operands) in ``mode``."""
    plan = constant_plan(args, _resize_plan, (1, 2, 3))
    window = read_window(args, 0, plan.window)
    if plan.in_dtype.is_integer:
        return [_resize_int(plan, window)]
    return [_resize_float(plan, window)]


def _pixels(window: np.ndarray, ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
    return window[:, ys[:, None], xs[None, :], :]


def _resize_int(p: _ResizePlan, window: np.ndarray) -> np.ndarray:
    if p.mode == ResizeMode.NEAREST:
        ys = np.where(2 * p.ry >= p.py.scale_n, p.iy1, p.iy0)
        xs = np.where(2 * p.rx >= p.px.scale_n, p.ix1, p.ix0)
        return np.array(_pixels(window, ys, xs), dtype=p.out_dtype.numpy_dtype)
    wy1 = p.ry[None, :, None, None]
    wx1 = p.rx[None, None, :, None]
    wy0, wx0 = p.py.scale_n - wy1, p.px.scale_n - wx1
    acc = (_pixels(window, p.iy0, p.ix0).astype(np.int64) * wy0 * wx0
           + _pixels(window, p.iy0, p.ix1).astype(np.int64) * wy0 * wx1
           + _pixels(window, p.iy1, p.ix0).astype(np.int64) * wy1 * wx0
           + _pixels(window, p.iy1, p.ix1).astype(np.int64) * wy1 * wx1)
    return acc.astype(p.out_dtype.numpy_dtype)


def _resize_float(p: _ResizePlan, window: np.ndarray) -> np.ndarray:
    rnd = _rounder(p.in_dtype)
    with np.errstate(all="ignore"):
        dy = rnd(p.ry.astype(np.float32) / np.float32(p.py.scale_n))
        dx = rnd(p.rx.astype(np.float32) / np.float32(p.px.scale_n))
        if p.mode == ResizeMode.NEAREST:
            ys = np.where(dy >= 0.5, p.iy1, p.iy0)
            xs = np.where(dx >= 0.5, p.ix1, p.ix0)
            return np.array(_pixels(window, ys, xs), dtype=p.out_dtype.numpy_dtype)
        dy = dy[None, :, None, None]
        dx = dx[None, None, :, None]
        one_dy, one_dx = rnd(1.0 - dy), rnd(1.0 - dx)

        def term(ys: np.ndarray, xs: np.ndarray, wy: np.ndarray, wx: np.ndarray) -> np.ndarray:
            return rnd(rnd(_pixels(window, ys, xs).astype(np.float32) * wy) * wx)

        acc = term(p.iy0, p.ix0, one_dy, one_dx)
        acc = rnd(acc + term(p.iy0, p.ix1, one_dy, dx))
        acc = rnd(acc + term(p.iy1, p.ix0, dy, one_dx))
        acc = rnd(acc + term(p.iy1, p.ix1, dy, dx))
    return round_to_float(acc, p.out_dtype)


__all__ = ["ResizeParams", "SUPPORTED", "resize", "resize_input_range"]
