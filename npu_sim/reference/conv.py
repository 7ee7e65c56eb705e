"""Dot-product tensor operators: CONV2D, CONV3D, DEPTHWISE_CONV2D, TRANSPOSE_CONV2D, MATMUL.

Written from the TOSA 1.0 pseudocode (pseudocode/operators/<OP>.tosac). Every
kernel is tile-able: it computes any output region from input windows (see
:mod:`npu_sim.reference.kernel_api`) and gives the very bits of the whole-tensor
call, because each output element is computed by the same sequence of
operations wherever the tile boundaries fall.

Integer accumulation is exact. Products are summed in float32 or float64 BLAS
(forward convolutions as one im2col GEMM, MATMUL as a batched GEMM) when a
bound (reduction length x largest operand magnitudes) proves every partial sum
is an integer the float type holds exactly; the summation order then cannot
matter, and the spec's ``apply_add_s`` REQUIRE (no partial sum may leave the
accumulator's range) cannot fail either. When the bound does not prove it, the
kernel sums in int64 in the spec's order and checks every partial sum
(:class:`~npu_sim.errors.TosaRuntimeError` when one overflows). The reference
model wraps instead; the spec makes such graphs unpredictable, so an error is
a compliant answer and never a silently wrong number.

Floating point follows the pseudocode order literally: for each kernel tap and
input channel (spec loop order), ``acc = acc + value * weight`` in the
accumulator type, each operation correctly rounded, vectorized over the output
positions. Multiplies in the padding area are skipped (the spec's
``tosa_extra_multiplies = false``), so a NaN or infinite weight never meets padding.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from npu_sim.reference.kernel_api import Binder, BoundKernel, InputWindow, KernelArgs, Region, full_region, register
from npu_sim.reference.kernel_util import checked_once, input_offset, output_region, require_shape_one
from npu_sim.reference.numerics import int_bounds, signed_range
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op

# --------------------------------------------------------------------------- type support
#: (in_t, weight_t, acc_t) -> out_t for the four convolutions (tosa.xml typesupport)
CONV_TYPES: dict[tuple[DType, DType, DType], DType] = {
    (DType.INT8, DType.INT8, DType.INT32): DType.INT32,
    (DType.INT8, DType.INT4, DType.INT32): DType.INT32,
    (DType.INT16, DType.INT8, DType.INT48): DType.INT48,
    (DType.FP8E4M3, DType.FP8E4M3, DType.FP16): DType.FP16,
    (DType.FP8E5M2, DType.FP8E5M2, DType.FP16): DType.FP16,
    (DType.FP16, DType.FP16, DType.FP16): DType.FP16,
    (DType.FP16, DType.FP16, DType.FP32): DType.FP16,
    (DType.BF16, DType.BF16, DType.FP32): DType.BF16,
    (DType.FP32, DType.FP32, DType.FP32): DType.FP32,
}

#: (in_t, out_t) of MATMUL; the accumulator is out_t
MATMUL_TYPES: frozenset[tuple[DType, DType]] = frozenset({
    (DType.INT8, DType.INT32), (DType.INT16, DType.INT48),
    (DType.FP8E4M3, DType.FP16), (DType.FP8E5M2, DType.FP16),
    (DType.FP16, DType.FP16), (DType.FP16, DType.FP32),
    (DType.BF16, DType.FP32), (DType.FP32, DType.FP32),
})

# Exact-integer capacity of float32 / float64 significands.
_F32_EXACT = 1 << 24
_F64_EXACT = 1 << 53
_I32_LIMIT = 1 << 31
# Elements per int64 temporary in the checked (overflow-proving) path.
_CHECKED_CHUNK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class DotTypes:
    """Element types of one dot-product operator instance."""

    in_t: DType
    weight_t: DType
    acc_t: DType
    out_t: DType

    @property
    def is_int(self) -> bool:
        return self.in_t.is_integer


def conv_types(args: KernelArgs) -> DotTypes:
    """Check the dtype combination and acc_type of a convolution against tosa.xml."""
    in_t, weight_t = args.input_types[0].dtype, args.input_types[1].dtype
    acc_t, out_t = DType(args.attribute.acc_type), args.output_types[0].dtype
    expected = CONV_TYPES.get((in_t, weight_t, acc_t))
    if expected is None:
        raise args.fail(f"unsupported type combination input {in_t.name}, weight {weight_t.name}, "
                        f"acc_type {acc_t.name}")
    args.require(out_t is expected, f"output type {out_t.name} must be {expected.name}")
    args.require(args.input_types[2].dtype is out_t, "bias type must equal the output type")
    args.require(args.input_types[3].dtype is in_t, "input_zp type must equal the input type")
    args.require(args.input_types[4].dtype is weight_t, "weight_zp type must equal the weight type")
    return DotTypes(in_t, weight_t, acc_t, out_t)


def matmul_types(args: KernelArgs) -> DotTypes:
    in_t, out_t = args.input_types[0].dtype, args.output_types[0].dtype
    args.require((in_t, out_t) in MATMUL_TYPES,
                 f"unsupported type combination input {in_t.name}, output {out_t.name}")
    args.require(all(t.dtype is in_t for t in args.input_types[1:4]),
                 "B, A_zp and B_zp must have the type of A")
    return DotTypes(in_t, in_t, out_t, out_t)


def zero_point(args: KernelArgs, index: int, name: str, allowed: bool) -> int:
    """The scalar zero point ``args.inputs[index]``; ERROR_IF non-zero where only int8 may have one.

    Only an int8 operand may have one (``allowed``), so a float zero point is zero: 0.
    """
    t = args.input_types[index]
    require_shape_one(args, index, name)
    raw = np.asarray(args.inputs[index]).reshape(-1)[0]
    value = int(raw) if t.dtype.is_integer else float(np.float64(raw))
    if not allowed or not t.dtype.is_integer:
        args.require(value == 0, f"{name} must be zero for {t.dtype.name} (zero point only for int8)")
    return int(value)


# --------------------------------------------------------------------------- geometry
def _cdiv(a: int, b: int) -> int:
    return -((-a) // b)


def _local(start: int, count: int, step: int, offset: int) -> slice:
    """Slice of ``count`` elements from full coordinate ``start`` in a window at ``offset``."""
    first = start - offset
    return slice(first, first + (count - 1) * step + 1, step)


class Axis(NamedTuple):
    """One spatial axis of a convolution: input size, kernel size and the tap mapping.

    Forward convolution: input index ``i = o * stride - pad + k * dilation``.
    Transposed convolution: output ``o = i * stride + pad + k`` (pad is out_pad_before).
    A NamedTuple: window functions build axes for every tile the scheduler tries,
    and a tuple is several times cheaper to make than a frozen dataclass.
    """

    in_size: int
    kernel: int
    stride: int
    pad: int
    dilation: int = 1
    transposed: bool = False

    def tap(self, k: int, o0: int, o1: int, window_offset: int) -> tuple[slice, slice] | None:
        """(output slice relative to o0, input slice local to the window) of tap ``k``.

        None when tap ``k`` touches no valid input for outputs [o0, o1).
        """
        s = self.stride
        if self.transposed:
            base = self.pad + k
            lo = max(0, _cdiv(o0 - base, s))
            hi = min(self.in_size, (o1 - 1 - base) // s + 1)
            if lo >= hi:
                return None
            count = hi - lo
            return _local(lo * s + base, count, s, o0), _local(lo, count, 1, window_offset)
        shift = k * self.dilation - self.pad
        lo = max(o0, _cdiv(-shift, s))
        hi = min(o1, (self.in_size - 1 - shift) // s + 1)
        if lo >= hi:
            return None
        count = hi - lo
        return _local(lo, count, 1, o0), _local(lo * s + shift, count, s, window_offset)

    def input_range(self, o0: int, o1: int) -> tuple[int, int]:
        """Inputs [lo, hi) that outputs [o0, o1) read (the window with its halo), clipped."""
        if self.transposed:
            lo = _cdiv(o0 - self.pad - (self.kernel - 1), self.stride)
            hi = (o1 - 1 - self.pad) // self.stride + 1
        else:
            lo = o0 * self.stride - self.pad
            hi = (o1 - 1) * self.stride - self.pad + (self.kernel - 1) * self.dilation + 1
        lo = min(max(lo, 0), self.in_size)
        return lo, min(max(hi, lo), self.in_size)


def _attr_list(args: KernelArgs, name: str, length: int) -> tuple[int, ...]:
    value = tuple(getattr(args.attribute, name))
    args.require(len(value) == length, f"{name} must have {length} values, got {len(value)}")
    return value


def _check_shape(args: KernelArgs, index: int, rank: int, what: str) -> tuple[int, ...]:
    shape = tuple(args.input_types[index].shape)
    args.require(len(shape) == rank, f"{what} must have rank {rank}, got shape {list(shape)}")
    return shape


def _conv_shapes(args: KernelArgs, rank: int) -> tuple[tuple[int, ...], ...]:
    """Input, weight, bias and output shapes of a convolution, with their rank ERROR_IFs."""
    in_shape = _check_shape(args, 0, rank, "input")
    w_shape = _check_shape(args, 1, rank, "weight")
    b_shape = _check_shape(args, 2, 1, "bias")
    out_shape = tuple(args.output_types[0].shape)
    args.require(len(out_shape) == rank, f"output must have rank {rank}")
    return in_shape, w_shape, b_shape, out_shape


def _forward_attributes(args: KernelArgs, spatial: int) -> tuple[tuple[int, ...], ...]:
    """pad, stride and dilation of a forward convolution, with their ERROR_IFs."""
    pad = _attr_list(args, "pad", 2 * spatial)
    stride = _attr_list(args, "stride", spatial)
    dilation = _attr_list(args, "dilation", spatial)
    args.require(all(p >= 0 for p in pad), "pad values must be >= 0")
    args.require(all(s >= 1 for s in stride), "stride values must be >= 1")
    args.require(all(d >= 1 for d in dilation), "dilation values must be >= 1")
    return pad, stride, dilation


def _forward_axes(args: KernelArgs, in_shape: Sequence[int], kernel: Sequence[int],
                  out_shape: Sequence[int], pad: Sequence[int], stride: Sequence[int],
                  dilation: Sequence[int]) -> tuple[Axis, ...]:
    """The spatial axes (input dimensions 1..), with the idiv_check and output size ERROR_IFs."""
    axes = []
    for d, k in enumerate(kernel):
        axis = Axis(in_shape[1 + d], k, stride[d], pad[2 * d], dilation[d])
        span = axis.in_size - 1 + pad[2 * d] + pad[2 * d + 1] - (axis.kernel - 1) * axis.dilation
        args.require(span % axis.stride == 0,
                     f"idiv_check: (I - 1 + pads - (K - 1) * dilation) = {span} on spatial axis {d} "
                     f"is not a multiple of stride {axis.stride}")
        args.require(out_shape[1 + d] == span // axis.stride + 1,
                     f"output size {out_shape[1 + d]} on spatial axis {d} must be {span // axis.stride + 1}")
        axes.append(axis)
    return tuple(axes)


# --------------------------------------------------------------------------- integer engine
def _compute_dtype(bound: int, acc_limit: int) -> np.dtype | None:
    """Float type that sums integer products exactly, or None when overflow is possible."""
    if bound >= acc_limit:
        return None
    if bound < _F32_EXACT:
        return np.dtype(np.float32)
    return np.dtype(np.float64) if bound < _F64_EXACT else np.dtype(np.int64)


def _max_abs(a: np.ndarray) -> int:
    return 0 if a.size == 0 else int(np.abs(a.astype(np.int64)).max())


def _max_abs_minus(values: np.ndarray, zp: int) -> int:
    """max |values - zp| without materializing the difference."""
    if values.size == 0:
        return 0
    return max(abs(int(values.min()) - zp), abs(int(values.max()) - zp))


def _storage_max_abs_minus(values: np.ndarray, zp: int) -> int | None:
    """An upper bound of max |values - zp| from the storage dtype alone (None if not an integer dtype)."""
    known = int_bounds(values.dtype)
    return None if known is None else max(abs(known[0] - zp), abs(known[1] - zp))


def _int_compute_dtype(reduction: int, x: np.ndarray, x_zp: int, w: np.ndarray, w_zp: int,
                       acc_t: DType) -> np.dtype | None:
    """``_compute_dtype`` of the bound reduction * max|x - x_zp| * max|w - w_zp|.

    When the storage dtypes alone bound it below float32's exact range (and the
    accumulator's), the exact magnitudes would choose float32 too: they are not scanned.
    """
    acc_limit = 1 << (acc_t.bits - 1)
    x_max, w_max = _storage_max_abs_minus(x, x_zp), _storage_max_abs_minus(w, w_zp)
    if x_max is not None and w_max is not None and reduction * x_max * w_max < min(_F32_EXACT, acc_limit):
        return np.dtype(np.float32)
    return _compute_dtype(reduction * _max_abs_minus(x, x_zp) * _max_abs_minus(w, w_zp), acc_limit)


def _weight_matrix(w: np.ndarray, weight_zp: int, ctype: np.dtype) -> np.ndarray:
    """Weights [OC, *K, IC] as the [K*IC, OC] right-hand side of im2col, zero point removed."""
    return (w.reshape(w.shape[0], -1).astype(ctype) - weight_zp).T.copy()


def _im2col_conv(x: np.ndarray, w_matrix: np.ndarray, input_zp: int, axes: Sequence[Axis],
                 spatial_region: Region, spatial_offsets: Sequence[int], ctype: np.dtype) -> np.ndarray:
    """Exact integer forward convolution as one GEMM per chunk of output rows (im2col).

    ``x`` is the input window [N, *S, IC] (spatial origin ``spatial_offsets``), ``w_matrix``
    the weights as :func:`_weight_matrix` gives them; the caller has proven every partial
    sum exact in ``ctype``, so the summation order does not matter. Padding is zeros after
    the zero-point subtraction.
    """
    n, oc = x.shape[0], w_matrix.shape[1]
    out_sizes = [o1 - o0 for o0, o1 in spatial_region]
    if _reads_no_padding_1x1(axes, spatial_region):
        columns = _pointwise_columns(x, axes, spatial_region, spatial_offsets, input_zp, ctype)
        return (columns @ w_matrix).reshape(n, *out_sizes, oc).astype(np.int64)
    acc = np.empty((n, *out_sizes, oc), dtype=np.int64)
    rows_per_chunk = max(1, (1 << 23) // max(1, w_matrix.shape[0] * n * math.prod(out_sizes[1:])))
    for r0 in range(0, out_sizes[0], rows_per_chunk):
        r1 = min(out_sizes[0], r0 + rows_per_chunk)
        region = ((spatial_region[0][0] + r0, spatial_region[0][0] + r1), *spatial_region[1:])
        block = _padded_block(x, axes, region, spatial_offsets, input_zp, ctype)
        columns = _tap_view(block, axes, region).reshape(-1, w_matrix.shape[0])
        acc[:, r0:r1] = (columns @ w_matrix).reshape(n, r1 - r0, *out_sizes[1:], oc)
    return acc


def _reads_no_padding_1x1(axes: Sequence[Axis], spatial_region: Region) -> bool:
    """1x1 kernel reading no padding: output o reads input o * stride, no im2col block needed."""
    return all(a.kernel == 1 and a.pad == 0 and o1 > o0 and (o1 - 1) * a.stride < a.in_size
               for a, (o0, o1) in zip(axes, spatial_region))


def _pointwise_columns(x: np.ndarray, axes: Sequence[Axis], spatial_region: Region,
                       spatial_offsets: Sequence[int], input_zp: int, ctype: np.dtype) -> np.ndarray:
    """[N * outputs, IC] operand of a 1x1 convolution reading no padding, zero point removed."""
    src = (slice(None),) + tuple(slice(o0 * a.stride - off, (o1 - 1) * a.stride + 1 - off, a.stride)
                                 for a, (o0, o1), off in zip(axes, spatial_region, spatial_offsets))
    columns = x[src].reshape(-1, x.shape[-1]).astype(ctype)
    if input_zp:
        columns -= input_zp
    return columns


def _padded_block(x: np.ndarray, axes: Sequence[Axis], region: Region, spatial_offsets: Sequence[int],
                  input_zp: int, ctype: np.dtype) -> np.ndarray:
    """The inputs outputs ``region`` read, zero point removed and zero-padded, in ``ctype``."""
    starts, spans = [], []
    for axis, (o0, o1) in zip(axes, region):
        start = o0 * axis.stride - axis.pad
        starts.append(start)
        spans.append((o1 - 1 - o0) * axis.stride + (axis.kernel - 1) * axis.dilation + 1)
    block = np.zeros((x.shape[0], *spans, x.shape[-1]), dtype=ctype)
    dst, src = [slice(None)], [slice(None)]
    for axis, start, span, offset in zip(axes, starts, spans, spatial_offsets):
        lo, hi = max(start, 0), min(start + span, axis.in_size)
        if lo >= hi:
            return block  # the chunk reads padding only
        dst.append(slice(lo - start, hi - start))
        src.append(slice(lo - offset, hi - offset))
    block[tuple(dst)] = x[tuple(src)]
    block[tuple(dst)] -= input_zp
    return block


def _tap_view(block: np.ndarray, axes: Sequence[Axis], region: Region) -> np.ndarray:
    """View [N, *O, *K, IC] of a padded block: output o, tap k reads o*stride + k*dilation."""
    strides = block.strides
    return np.lib.stride_tricks.as_strided(
        block,
        shape=(block.shape[0], *(o1 - o0 for o0, o1 in region), *(a.kernel for a in axes), block.shape[-1]),
        strides=(strides[0], *(strides[1 + d] * a.stride for d, a in enumerate(axes)),
                 *(strides[1 + d] * a.dilation for d, a in enumerate(axes)), strides[-1]),
        writeable=False)


class _IntAccumulator:
    """Exact integer dot products into ``acc`` (int64), REQUIRE-checked when needed.

    ``ctype`` is a type proven to hold every partial sum exactly (float32/float64
    for BLAS, or int64), or None: then each tap's products are summed in int64
    with every prefix sum checked against the accumulator range, in the spec's
    loop order.
    """

    def __init__(self, args: KernelArgs, shape: tuple[int, ...], ctype: np.dtype | None, acc_t: DType):
        self.args = args
        self.ctype = ctype
        self.lo, self.hi = acc_t.int_range
        self.acc = np.zeros(shape, dtype=ctype if ctype is not None else np.int64)

    def add_gemm(self, out_index: tuple, xs: np.ndarray, w: np.ndarray) -> None:
        """acc[out_index] += xs (..., K) @ w (K, OC), summing over K in order."""
        lead = xs.shape[:-1]
        k_len, oc = w.shape
        x2 = xs.reshape(-1, k_len)
        if self.ctype is not None:
            self.acc[out_index] += (x2 @ w).reshape(*lead, oc)
            return
        view = self.acc[out_index].reshape(-1, oc)
        chunk = max(1, _CHECKED_CHUNK_ELEMENTS // max(1, k_len * oc))
        for p0 in range(0, x2.shape[0], chunk):
            prods = x2[p0:p0 + chunk, :, None] * w[None, :, :]
            prefix = view[p0:p0 + chunk, None, :] + np.cumsum(prods, axis=1)
            self._check(prefix)
            view[p0:p0 + chunk] = prefix[:, -1, :]
        self.acc[out_index] = view.reshape(*lead, oc)

    def add_products(self, out_index: tuple, prods: np.ndarray) -> None:
        """acc[out_index] += prods (one product per output: depthwise taps)."""
        self.acc[out_index] += prods
        if self.ctype is None:
            self._check(self.acc[out_index])

    def _check(self, partial: np.ndarray) -> None:
        if partial.size and (partial.min() < self.lo or partial.max() > self.hi):
            raise self.args.fail(
                f"accumulator overflow: apply_add_s REQUIRE(partial sum in [{self.lo}, {self.hi}])")

    def result(self) -> np.ndarray:
        return self.acc.astype(np.int64)


def _int_output(args: KernelArgs, acc: np.ndarray, bias: np.ndarray, out_t: DType) -> np.ndarray:
    """out = static_cast<out_t>(acc) + bias, with apply_add_s's REQUIRE on the range."""
    out = acc + bias.astype(np.int64)
    lo, hi = signed_range(out_t)
    if out.size and (out.min() < lo or out.max() > hi):
        raise args.fail(f"bias addition overflows {out_t.name}: apply_add_s REQUIRE")
    return out.astype(out_t.numpy_dtype)


# --------------------------------------------------------------------------- float engine
def _fp_storage(acc_t: DType) -> np.dtype:
    return np.dtype(np.float16) if acc_t is DType.FP16 else np.dtype(np.float32)


def _fp_mul_add(view: np.ndarray, x: np.ndarray, w: np.ndarray, acc_t: DType) -> None:
    """view = view + x * w in acc_t, each operation correctly rounded (x, w float32, exact)."""
    with np.errstate(over="ignore", invalid="ignore"):
        prod = x * w
        if acc_t is DType.FP16:
            # products of fp16/fp8 values are exact in fp32; one rounding to fp16
            prod = prod.astype(np.float16)
        view += prod


def _fp_output(acc: np.ndarray, bias: np.ndarray, out_t: DType) -> np.ndarray:
    """out = static_cast<out_t>(acc); out = out + bias, in out_t arithmetic."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _fp_add_bias(acc, _fp_bias(bias, out_t), out_t)


def _fp_bias(bias: np.ndarray, out_t: DType) -> np.ndarray:
    """The bias in the type :func:`_fp_add_bias` adds it in."""
    return bias.astype(np.float32 if out_t is DType.BF16 else out_t.numpy_dtype)


def _fp_add_bias(acc: np.ndarray, bias: np.ndarray, out_t: DType) -> np.ndarray:
    """static_cast<out_t>(acc) + bias (from :func:`_fp_bias`): a new array; the caller
    switches floating-point warnings off."""
    storage = out_t.numpy_dtype
    out = acc if acc.dtype == storage else acc.astype(storage)
    if out_t is DType.BF16:
        # fp32 add then one rounding to bf16 is the correctly rounded bf16 sum
        return (out.astype(np.float32) + bias).astype(storage)
    return np.add(out, bias)


def _as_f32(a: np.ndarray) -> np.ndarray:
    """``a`` in fp32 (itself if it is already: callers only read it)."""
    a = np.asarray(a)
    return a if a.dtype == np.float32 else a.astype(np.float32)


# --------------------------------------------------------------------------- region helpers
def _bias_slice(args: KernelArgs, c0: int, c1: int) -> np.ndarray:
    """The bias of output channels [c0, c1); a [1] bias stays [1] (it broadcasts over them)."""
    bias = np.asarray(args.inputs[2]).reshape(-1)
    if args.input_types[2].shape[0] == 1:
        return bias[:1]
    b0 = input_offset(args, 2)[0]
    return bias[c0 - b0:c1 - b0]


# --------------------------------------------------------------------------- CONV2D / CONV3D / TRANSPOSE_CONV2D
@dataclass(frozen=True)
class _ConvGeometry:
    axes: tuple[Axis, ...]
    batch: int
    in_channels: int
    out_channels: int
    bias_channels: int


def _forward_geometry(args: KernelArgs, spatial: int) -> _ConvGeometry:
    """Validate CONV2D/CONV3D shapes and attributes (ERROR_IFs), return the axes."""
    in_shape, w_shape, b_shape, out_shape = _conv_shapes(args, spatial + 2)
    pad, stride, dilation = _forward_attributes(args, spatial)
    n, ic, oc = in_shape[0], in_shape[-1], w_shape[0]
    args.require(w_shape[-1] == ic, f"weight input channels {w_shape[-1]} != input channels {ic}")
    args.require(out_shape[0] == n, "output batch must equal input batch")
    args.require(out_shape[-1] == oc, f"output channels {out_shape[-1]} != weight output channels {oc}")
    axes = _forward_axes(args, in_shape, w_shape[1:-1], out_shape, pad, stride, dilation)
    bc = b_shape[0]
    args.require(bc == oc or bc == 1, f"bias size {bc} must be {oc} or 1")
    return _ConvGeometry(axes, n, ic, oc, bc)


def _transpose_geometry(args: KernelArgs) -> _ConvGeometry:
    """Validate TRANSPOSE_CONV2D shapes and attributes (ERROR_IFs)."""
    in_shape, w_shape, b_shape, out_shape = _conv_shapes(args, 4)
    out_pad = _attr_list(args, "out_pad", 4)
    stride = _attr_list(args, "stride", 2)
    kh, kw = w_shape[1], w_shape[2]
    args.require(out_pad[0] > -kh and out_pad[1] > -kh, "out_pad_top/bottom must be > -KH")
    args.require(out_pad[2] > -kw and out_pad[3] > -kw, "out_pad_left/right must be > -KW")
    args.require(all(s >= 1 for s in stride), "stride values must be >= 1")
    n, ic, oc = in_shape[0], in_shape[3], w_shape[0]
    args.require(w_shape[3] == ic, f"weight input channels {w_shape[3]} != input channels {ic}")
    args.require(out_shape[0] == n, "output batch must equal input batch")
    args.require(out_shape[3] == oc, f"output channels {out_shape[3]} != weight output channels {oc}")
    axes = []
    for d in range(2):
        axis = Axis(in_shape[1 + d], w_shape[1 + d], stride[d], out_pad[2 * d], transposed=True)
        expect = (axis.in_size - 1) * axis.stride + out_pad[2 * d] + out_pad[2 * d + 1] + axis.kernel
        args.require(out_shape[1 + d] == expect,
                     f"output size {out_shape[1 + d]} on spatial axis {d} must be {expect}")
        axes.append(axis)
    bc = b_shape[0]
    args.require(bc == oc or bc == 1, f"bias size {bc} must be {oc} or 1")
    return _ConvGeometry(tuple(axes), n, ic, oc, bc)


@checked_once
def _conv2d_static(args: KernelArgs) -> tuple[_ConvGeometry, DotTypes]:
    """CONV2D's ERROR_IFs on shapes, attributes and types (memoized per signature)."""
    return _forward_geometry(args, 2), conv_types(args)


@checked_once
def _conv3d_static(args: KernelArgs) -> tuple[_ConvGeometry, DotTypes]:
    return _forward_geometry(args, 3), conv_types(args)


@checked_once
def _transpose_conv2d_static(args: KernelArgs) -> tuple[_ConvGeometry, DotTypes]:
    return _transpose_geometry(args), conv_types(args)


def _conv_kernel(args: KernelArgs, geo: _ConvGeometry, types: DotTypes) -> list[np.ndarray]:
    """Shared body of CONV2D, CONV3D and TRANSPOSE_CONV2D (weights [OC, *K, IC])."""
    input_zp = zero_point(args, 3, "input_zp", types.in_t is DType.INT8)
    weight_zp = zero_point(args, 4, "weight_zp", types.weight_t is DType.INT8)
    region = output_region(args)
    (n0, n1), spatial_region, (c0, c1) = region[0], region[1:-1], region[-1]
    x_off, w_off = input_offset(args, 0), input_offset(args, 1)
    x = np.asarray(args.inputs[0])[n0 - x_off[0]:n1 - x_off[0]]
    w = np.asarray(args.inputs[1])[c0 - w_off[0]:c1 - w_off[0]]
    out_shape = (n1 - n0,) + tuple(b - a for a, b in spatial_region) + (c1 - c0,)
    bias = _bias_slice(args, c0, c1)
    if not types.is_int:
        taps = _conv_taps(geo.axes, spatial_region, x_off[1:-1])
        acc = _fp_conv(_as_f32(x), _as_f32(np.moveaxis(w, 0, -1)), taps, out_shape, types.acc_t)
        return [_fp_output(acc, bias, types.out_t)]
    reduction = math.prod(a.kernel for a in geo.axes) * geo.in_channels
    ctype = _int_compute_dtype(reduction, x, input_zp, w, weight_zp, types.acc_t)
    if ctype is not None and not geo.axes[0].transposed:
        acc = _im2col_conv(x, _weight_matrix(w, weight_zp, ctype), input_zp, geo.axes, spatial_region,
                           x_off[1:-1], ctype)
        return [_int_output(args, acc, bias, types.out_t)]
    w_taps = np.moveaxis(w, 0, -1)  # (taps..., IC, OC): one GEMM right-hand side per tap
    xv = x.astype(np.int64) - input_zp
    wv = w_taps.astype(np.int64) - weight_zp
    if ctype is not None:
        xv, wv = xv.astype(ctype), wv.astype(ctype)
    accumulator = _IntAccumulator(args, out_shape, ctype, types.acc_t)
    for k, out_index, in_index in _conv_taps(geo.axes, spatial_region, x_off[1:-1]):
        accumulator.add_gemm(out_index, xv[in_index], wv[k])
    return [_int_output(args, accumulator.result(), bias, types.out_t)]


Tap = tuple[tuple[int, ...], tuple[slice, ...], tuple[slice, ...]]


def _conv_taps(axes: Sequence[Axis], spatial_region: Region, spatial_offsets: Sequence[int]) -> list[Tap]:
    """(kernel position, output index, input index) of every tap reading some valid input,
    for outputs ``spatial_region`` of an input window at ``spatial_offsets``."""
    taps = []
    for k in itertools.product(*(range(a.kernel) for a in axes)):
        pieces = [axis.tap(kd, o0, o1, offset)
                  for axis, kd, (o0, o1), offset in zip(axes, k, spatial_region, spatial_offsets)]
        found = [p for p in pieces if p is not None]
        if len(found) == len(pieces):
            out_index = (slice(None),) + tuple(p[0] for p in found) + (slice(None),)
            in_index = (slice(None),) + tuple(p[1] for p in found) + (slice(None),)
            taps.append((k, out_index, in_index))
    return taps


#: Largest products block (elements) a floating-point tap computes at once.
_FP_PRODUCTS_ELEMENTS = 1 << 16
#: Outputs (times output channels) from which adding whole rows of products channel by
#: channel beats np.add.accumulate (whose loop runs along the channels, element by element):
#: measured on [1, K] x [K, N] products, accumulate wins up to N = 128 for every K.
_FP_ROW_LOOP_ELEMENTS = 256
#: Largest rows of products (elements: taps * input channels * outputs) made at once.
_FP_ROWS_ELEMENTS = 1 << 20


def _fp_conv(xv: np.ndarray, wv: np.ndarray, taps: Sequence[Tap], out_shape: tuple[int, ...],
             acc_t: DType) -> np.ndarray:
    """The floating-point convolution sum: for each tap, then each input channel in order,
    acc = acc + x * w, each operation rounded (``xv`` [N, *S, IC], ``wv`` [*K, IC, OC] in fp32).

    Computed from many products at a time; if a NaN comes out, which NaN it is depends on
    the order numpy's loops meet NaNs, so the sum is then done again one input channel at a
    time, as the pseudocode reads (and as it always was done).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return _fp_conv_quietly(xv, wv, taps, out_shape, acc_t)


def _fp_conv_quietly(xv: np.ndarray, wv: np.ndarray, taps: Sequence[Tap], out_shape: tuple[int, ...],
                     acc_t: DType) -> np.ndarray:
    """:func:`_fp_conv` for callers that have switched numpy's floating-point warnings off."""
    acc = _fp_conv_batched(xv, wv, taps, out_shape, acc_t)
    if not np.isnan(acc).any():
        return acc
    acc = np.zeros(out_shape, dtype=_fp_storage(acc_t))
    for k, out_index, in_index in taps:
        view, xs, w_tap = acc[out_index], xv[in_index], wv[k]
        for ic in range(w_tap.shape[0]):
            _fp_mul_add(view, xs[..., ic:ic + 1], w_tap[ic], acc_t)
    return acc


def _fp_conv_batched(xv: np.ndarray, wv: np.ndarray, taps: Sequence[Tap], out_shape: tuple[int, ...],
                     acc_t: DType) -> np.ndarray:
    """:func:`_fp_conv`'s sum, the same operations in the same order, batched (any NaN in
    it may differ from the pseudocode's)."""
    storage = _fp_storage(acc_t)
    outputs = math.prod(out_shape)
    if len(taps) == 1 and outputs < _FP_ROW_LOOP_ELEMENTS:  # e.g. a fully connected layer
        k, out_index, in_index = taps[0]
        total = _fp_tap_sum(storage.type(0), xv[in_index], wv[k], acc_t)
        if total is not None and total.shape == out_shape:
            return total
    if len(taps) * wv.shape[-2] * outputs <= _FP_ROWS_ELEMENTS:
        return _fp_conv_rows(xv, wv, taps, out_shape, acc_t)
    acc = np.zeros(out_shape, dtype=storage)
    for k, out_index, in_index in taps:
        view, xs, w_tap = acc[out_index], xv[in_index], wv[k]
        for ic in range(w_tap.shape[0]):
            _fp_mul_add(view, xs[..., ic:ic + 1], w_tap[ic], acc_t)
    return acc


def _fp_tap_sum(start: np.floating, xs: np.ndarray, w_tap: np.ndarray, acc_t: DType) -> np.ndarray | None:
    """start + x[..., 0] * w[0] + x[..., 1] * w[1] + ..., in that order with each operation
    rounded, from all the tap's products at once (a new array); None if they are too many."""
    if xs.size * w_tap.shape[-1] > _FP_PRODUCTS_ELEMENTS:
        return None
    products = xs[..., :, None] * w_tap  # each product rounded as alone
    if acc_t is DType.FP16:
        products = products.astype(np.float16)
    np.add(start, products[..., 0, :], out=products[..., 0, :])
    return np.add.accumulate(products, axis=-2)[..., -1, :]  # sequential: ((v + p0) + p1) + ...


def _fp_conv_rows(xv: np.ndarray, wv: np.ndarray, taps: Sequence[Tap], out_shape: tuple[int, ...],
                  acc_t: DType) -> np.ndarray:
    """The sum from one row of products per (tap, input channel) over the whole output, added
    in order. Where a tap reads padding the spec adds nothing: its row holds -0.0 there,
    the one value whose addition changes no sum (x + -0.0 == x, signs of zero and NaNs too)."""
    channels, out_channels = wv.shape[-2:]
    rows = np.full((len(taps), channels, *out_shape), -0.0, dtype=_fp_storage(acc_t))
    for t, (k, out_index, in_index) in enumerate(taps):
        xs = xv[in_index]  # [N, *region, IC]
        target = rows[t][(slice(None), *out_index)]  # [IC, N, *region, OC]
        weights = wv[k].reshape(channels, *(1,) * (xs.ndim - 1), out_channels)
        np.multiply(np.moveaxis(xs, -1, 0)[..., None], weights, out=target)  # rounded once (fp16: once)
    flat = rows.reshape(len(taps) * channels, *out_shape)
    if not len(flat):
        return np.zeros(out_shape, dtype=rows.dtype)  # no tap reads the input
    acc = np.add(flat.dtype.type(0), flat[0])
    for row in flat[1:]:
        acc += row
    return acc


StaticConv = Callable[[KernelArgs], tuple[_ConvGeometry, DotTypes]]


def _bind_conv(static_checks: StaticConv) -> Binder:
    """Binder of a forward convolution with constant weights, bias and zero points: the
    weights in the layout the computation wants, the taps and the compute type worked out once."""

    def bind(args: KernelArgs, const_inputs: Sequence[np.ndarray | None]) -> BoundKernel | None:
        constants = [value for value in const_inputs[1:5] if value is not None]
        geo, types = static_checks(args)
        if len(constants) != 4 or geo.axes[0].transposed:
            return None
        static = args.static()
        fixed = dataclasses.replace(static, inputs=[args.inputs[0], *constants])
        input_zp = zero_point(fixed, 3, "input_zp", types.in_t is DType.INT8)
        weight_zp = zero_point(fixed, 4, "weight_zp", types.weight_t is DType.INT8)
        bias = _bias_slice(fixed, 0, geo.out_channels)
        out_shape = static.output_types[0].shape
        spatial_region = full_region(out_shape[1:-1])
        offsets = (0,) * len(spatial_region)
        if not types.is_int:
            taps = _conv_taps(geo.axes, spatial_region, offsets)
            wv = np.ascontiguousarray(_as_f32(np.moveaxis(np.asarray(constants[0]), 0, -1)))
            bias_out, acc_t, out_t = _fp_bias(bias, types.out_t), types.acc_t, types.out_t
            return lambda inputs: [_fp_add_bias(_fp_conv_quietly(_as_f32(inputs[0]), wv, taps, out_shape, acc_t),
                                                bias_out, out_t)]
        # exact magnitudes of the constant weights, the input's from its storage type
        x_max = _storage_max_abs_minus(np.empty(0, types.in_t.numpy_dtype), input_zp)
        reduction = math.prod(a.kernel for a in geo.axes) * geo.in_channels
        acc_bound = None if x_max is None else \
            reduction * x_max * _max_abs_minus(np.asarray(constants[0]), weight_zp)
        ctype = None if acc_bound is None else _compute_dtype(acc_bound, 1 << (types.acc_t.bits - 1))
        if ctype is None or acc_bound is None:
            return None  # the data decide how to sum: the plain kernel does
        w_matrix = _weight_matrix(np.asarray(constants[0]), weight_zp, ctype)
        pointwise = _bind_pointwise(geo.axes, out_shape, static.input_types[0].shape, w_matrix, input_zp, bias,
                                    acc_bound, types.out_t, ctype)
        if pointwise is not None:
            return pointwise

        def run(inputs: list[np.ndarray]) -> list[np.ndarray]:
            acc = _im2col_conv(np.asarray(inputs[0]), w_matrix, input_zp, geo.axes, spatial_region, offsets, ctype)
            return [_int_output(static, acc, bias, types.out_t)]

        return run

    return bind


def _bind_pointwise(axes: Sequence[Axis], out_shape: Sequence[int], in_shape: Sequence[int], w_matrix: np.ndarray,
                    input_zp: int, bias: np.ndarray, acc_bound: int, out_t: DType,
                    ctype: np.dtype) -> BoundKernel | None:
    """A 1x1, stride 1, unpadded integer convolution (a matrix-vector product, as a fully connected
    layer or an LSTM gate is): one GEMM of the input as it lies, the bias added in int64.

    None unless the accumulator bound ``acc_bound`` (from the storage ranges and the exact weights)
    plus the largest bias keeps every result within ``out_t``: then ``_int_output``'s REQUIRE cannot
    fail, and the result is that of the general bound kernel in fewer numpy calls."""
    if any(a.kernel != 1 or a.stride != 1 or a.pad != 0 for a in axes) or \
            tuple(out_shape[:-1]) != tuple(in_shape[:-1]):
        return None
    bias64 = bias.astype(np.int64)
    lo, hi = signed_range(out_t)
    bias_lo, bias_hi = (int(bias64.min()), int(bias64.max())) if bias64.size else (0, 0)
    if not (lo <= bias_lo - acc_bound and bias_hi + acc_bound <= hi):
        return None
    return PointwiseRun(in_shape[-1], w_matrix, input_zp, bias64, ctype, out_t.numpy_dtype, tuple(out_shape))


class PointwiseRun:
    """A bound pointwise convolution's kernel (``[input, ...] -> [result]``); :meth:`int64` gives
    its values before the cast to the output type (which they fit: see :func:`_bind_pointwise`),
    for a long stream's plan to hand to the RESCALE after it (:mod:`npu_sim.hw.int_pipelines`)."""

    __slots__ = ("ic", "w_matrix", "input_zp", "bias64", "ctype", "storage", "shape")

    def __init__(self, ic: int, w_matrix: np.ndarray, input_zp: int, bias64: np.ndarray, ctype: np.dtype,
                 storage: np.dtype, shape: tuple[int, ...]):
        self.ic, self.w_matrix, self.input_zp, self.bias64 = ic, w_matrix, input_zp, bias64
        self.ctype, self.storage, self.shape = ctype, storage, shape

    def int64(self, inputs: list[np.ndarray]) -> np.ndarray:
        """The results as int64, shaped (positions, output channels)."""
        columns = inputs[0].reshape(-1, self.ic).astype(self.ctype)
        if self.input_zp:
            columns -= self.input_zp
        out = (columns @ self.w_matrix).astype(np.int64)
        out += self.bias64
        return out

    def __call__(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [self.int64(inputs).astype(self.storage).reshape(self.shape)]


def _conv_window(spatial: int, transposed: bool = False) -> InputWindow:
    """Input windows of CONV2D/CONV3D/TRANSPOSE_CONV2D for an output region."""

    def window(attribute: Attribute, input_types: Sequence[TensorType],
               output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
        in_shape, w_shape, b_shape = (tuple(t.shape) for t in input_types[:3])
        (n0, n1), spatial_region, (c0, c1) = out_region[0], out_region[1:-1], out_region[-1]
        x_region = [(n0, n1)]
        for d, (o0, o1) in enumerate(spatial_region):
            if transposed:
                axis = Axis(in_shape[1 + d], w_shape[1 + d], attribute.stride[d],
                            attribute.out_pad[2 * d], transposed=True)
            else:
                axis = Axis(in_shape[1 + d], w_shape[1 + d], attribute.stride[d],
                            attribute.pad[2 * d], attribute.dilation[d])
            x_region.append(axis.input_range(o0, o1))
        x_region.append((0, in_shape[-1]))
        w_region = [(c0, c1)] + [(0, s) for s in w_shape[1:]]
        b_region = [(0, 1)] if b_shape[0] == 1 else [(c0, c1)]
        return [tuple(x_region), tuple(w_region), tuple(b_region), ((0, 1),), ((0, 1),)]

    return window


@register(Op.CONV2D, window=_conv_window(2), bind=_bind_conv(_conv2d_static))
def conv2d(args: KernelArgs) -> list[np.ndarray]:
    """CONV2D: input [N,IH,IW,IC], weight [OC,KH,KW,IC], bias [BC] -> [N,OH,OW,OC]."""
    return _conv_kernel(args, *_conv2d_static(args))


@register(Op.CONV3D, window=_conv_window(3), bind=_bind_conv(_conv3d_static))
def conv3d(args: KernelArgs) -> list[np.ndarray]:
    """CONV3D: input [N,ID,IH,IW,IC], weight [OC,KD,KH,KW,IC] -> [N,OD,OH,OW,OC]."""
    return _conv_kernel(args, *_conv3d_static(args))


@register(Op.TRANSPOSE_CONV2D, window=_conv_window(2, transposed=True))
def transpose_conv2d(args: KernelArgs) -> list[np.ndarray]:
    """TRANSPOSE_CONV2D: input [N,IH,IW,IC], weight [OC,KH,KW,IC] -> [N,OH,OW,OC]."""
    return _conv_kernel(args, *_transpose_conv2d_static(args))


# --------------------------------------------------------------------------- DEPTHWISE_CONV2D
def _depthwise_geometry(args: KernelArgs) -> tuple[tuple[Axis, Axis], int, int]:
    in_shape, w_shape, b_shape, out_shape = _conv_shapes(args, 4)
    pad, stride, dilation = _forward_attributes(args, 2)
    c, m = in_shape[3], w_shape[3]
    args.require(w_shape[2] == c, f"weight channels {w_shape[2]} != input channels {c}")
    args.require(out_shape[0] == in_shape[0], "output batch must equal input batch")
    args.require(out_shape[3] == c * m, f"output channels {out_shape[3]} must be C*M = {c * m}")
    rows, cols = _forward_axes(args, in_shape, w_shape[:2], out_shape, pad, stride, dilation)
    args.require(b_shape[0] in (c * m, 1), f"bias size {b_shape[0]} must be C*M = {c * m} or 1")
    return (rows, cols), c, m


def _depthwise_window(attribute: Attribute, input_types: Sequence[TensorType],
                      output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    in_shape, w_shape, b_shape = (tuple(t.shape) for t in input_types[:3])
    m = w_shape[3]
    (n0, n1), (y0, y1), (x0, x1), (c0, c1) = out_region
    ch = (c0 // m, (c1 - 1) // m + 1)
    rows = Axis(in_shape[1], w_shape[0], attribute.stride[0], attribute.pad[0], attribute.dilation[0])
    cols = Axis(in_shape[2], w_shape[1], attribute.stride[1], attribute.pad[2], attribute.dilation[1])
    x_region = ((n0, n1), rows.input_range(y0, y1), cols.input_range(x0, x1), ch)
    w_region = ((0, w_shape[0]), (0, w_shape[1]), ch, (0, m))
    b_region = ((0, 1),) if b_shape[0] == 1 else ((c0, c1),)
    return [x_region, w_region, b_region, ((0, 1),), ((0, 1),)]


@checked_once
def _depthwise_static(args: KernelArgs) -> tuple[tuple[tuple[Axis, Axis], int, int], DotTypes]:
    """DEPTHWISE_CONV2D's ERROR_IFs on shapes, attributes and types (memoized per signature)."""
    return _depthwise_geometry(args), conv_types(args)


@register(Op.DEPTHWISE_CONV2D, window=_depthwise_window)
def depthwise_conv2d(args: KernelArgs) -> list[np.ndarray]:
    """DEPTHWISE_CONV2D: input [N,IH,IW,C], weight [KH,KW,C,M] -> [N,OH,OW,C*M]."""
    ((rows, cols), _, m), types = _depthwise_static(args)
    input_zp = zero_point(args, 3, "input_zp", types.in_t is DType.INT8)
    weight_zp = zero_point(args, 4, "weight_zp", types.weight_t is DType.INT8)
    (n0, n1), (y0, y1), (x0, x1), (c0, c1) = output_region(args)
    ch0, ch1 = c0 // m, (c1 - 1) // m + 1          # input channels covering [c0, c1)
    x_off, w_off = input_offset(args, 0), input_offset(args, 1)
    x = np.asarray(args.inputs[0])[n0 - x_off[0]:n1 - x_off[0], :, :, ch0 - x_off[3]:ch1 - x_off[3]]
    w = np.asarray(args.inputs[1])[:, :, ch0 - w_off[2]:ch1 - w_off[2], :]
    acc_shape = (n1 - n0, y1 - y0, x1 - x0, ch1 - ch0, m)
    keep = slice(c0 - ch0 * m, c1 - ch0 * m)        # the region's channels within [ch0*M, ch1*M)
    bias = _bias_slice(args, c0, c1)

    def taps() -> Iterator[tuple[tuple[int, int], tuple[slice, slice, slice], tuple[slice, slice, slice]]]:
        for ky, kx in itertools.product(range(rows.kernel), range(cols.kernel)):
            ty = rows.tap(ky, y0, y1, x_off[1])
            tx = cols.tap(kx, x0, x1, x_off[2])
            if ty is not None and tx is not None:
                yield (ky, kx), (slice(None), ty[0], tx[0]), (slice(None), ty[1], tx[1])

    if types.is_int:
        taps_count, acc_limit = rows.kernel * cols.kernel, 1 << (types.acc_t.bits - 1)
        x_max, w_max = _storage_max_abs_minus(x, input_zp), _storage_max_abs_minus(w, weight_zp)
        if x_max is None or w_max is None or taps_count * x_max * w_max >= min(acc_limit, _I32_LIMIT):
            x_max, w_max = _max_abs_minus(x, input_zp), _max_abs_minus(w, weight_zp)  # exact magnitudes
        bound = taps_count * x_max * w_max  # bounds every product and partial sum
        proven = bound < acc_limit
        # int32 holds every partial sum when the bound says so (half the memory traffic of int64)
        work: np.dtype[Any] = np.dtype(np.int32) if proven and bound < _I32_LIMIT else np.dtype(np.int64)
        xv = x.astype(work) - input_zp
        wv = w.astype(work) - weight_zp
        accumulator = _IntAccumulator(args, acc_shape, work if proven else None, types.acc_t)
        for k, out_index, in_index in taps():
            accumulator.add_products(out_index, xv[in_index][..., None] * wv[k])
        acc = accumulator.result().reshape(acc_shape[:3] + (-1,))[..., keep]
        return [_int_output(args, acc, bias, types.out_t)]

    xv, wv = _as_f32(x), _as_f32(w)
    acc = np.zeros(acc_shape, dtype=_fp_storage(types.acc_t))
    for k, out_index, in_index in taps():
        _fp_mul_add(acc[out_index], xv[in_index][..., None], wv[k], types.acc_t)
    acc = acc.reshape(acc_shape[:3] + (-1,))[..., keep]
    return [_fp_output(acc, bias, types.out_t)]


# --------------------------------------------------------------------------- MATMUL
def _matmul_window(attribute: Attribute, input_types: Sequence[TensorType],
                   output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    (n0, n1), (h0, h1), (w0, w1) = out_region
    c = input_types[0].shape[2]
    return [((n0, n1), (h0, h1), (0, c)), ((n0, n1), (0, c), (w0, w1)), ((0, 1),), ((0, 1),)]


@checked_once
def _matmul_static(args: KernelArgs) -> tuple[DotTypes, tuple[int, ...]]:
    """MATMUL's ERROR_IFs on types and shapes (memoized per signature); returns A's shape too."""
    types = matmul_types(args)
    a_shape = _check_shape(args, 0, 3, "A")
    b_shape = _check_shape(args, 1, 3, "B")
    out_shape = tuple(args.output_types[0].shape)
    args.require(b_shape[0] == a_shape[0] and b_shape[1] == a_shape[2],
                 f"B shape {list(b_shape)} does not match A shape {list(a_shape)}")
    args.require(out_shape == (a_shape[0], a_shape[1], b_shape[2]),
                 f"output shape {list(out_shape)} must be {[a_shape[0], a_shape[1], b_shape[2]]}")
    return types, a_shape


def _bind_matmul(args: KernelArgs, const_inputs: Sequence[np.ndarray | None]) -> BoundKernel | None:
    """Integer MATMUL with constant zero points: the compute type from the operands' storage
    ranges, proven once (every sum exact), so a call is the product alone."""
    types, a_shape = _matmul_static(args)
    zps = [value for value in const_inputs[2:4] if value is not None]
    if not types.is_int or len(zps) != 2:
        return None
    fixed = dataclasses.replace(args.static(), inputs=[args.inputs[0], args.inputs[1], *zps])
    a_zp = zero_point(fixed, 2, "A_zp", types.in_t is DType.INT8)
    b_zp = zero_point(fixed, 3, "B_zp", types.in_t is DType.INT8)
    storage = types.in_t.numpy_dtype
    a_max = _storage_max_abs_minus(np.empty(0, storage), a_zp)
    b_max = _storage_max_abs_minus(np.empty(0, storage), b_zp)
    if a_max is None or b_max is None:
        return None
    ctype = _compute_dtype(a_shape[2] * a_max * b_max, 1 << (types.acc_t.bits - 1))
    if ctype is None or ctype == np.int64:
        return None  # the data decide how to sum: the plain kernel does
    out = types.out_t.numpy_dtype

    def run(inputs: list[np.ndarray]) -> list[np.ndarray]:
        a = np.asarray(inputs[0]).astype(ctype)
        b = np.asarray(inputs[1]).astype(ctype)
        if a_zp:
            a -= a_zp
        if b_zp:
            b -= b_zp
        return [np.matmul(a, b).astype(np.int64).astype(out)]

    return run


@register(Op.MATMUL, window=_matmul_window, bind=_bind_matmul)
def matmul(args: KernelArgs) -> list[np.ndarray]:
    """MATMUL: A [N,H,C] x B [N,C,W] -> [N,H,W], accumulating in the output type."""
    types, a_shape = _matmul_static(args)
    # The 1.0.1 pseudocode reads `is_same<in_t,i8_t> && (A_zp != 0 || B_zp != 0)`; the argument
    # table ("Must be zero for non-int8 types") and every other operator mean the negation.
    a_zp = zero_point(args, 2, "A_zp", types.in_t is DType.INT8)
    b_zp = zero_point(args, 3, "B_zp", types.in_t is DType.INT8)
    (n0, n1), (h0, h1), (w0, w1) = output_region(args)
    a_off, b_off = input_offset(args, 0), input_offset(args, 1)
    a = np.asarray(args.inputs[0])[n0 - a_off[0]:n1 - a_off[0], h0 - a_off[1]:h1 - a_off[1], :]
    b = np.asarray(args.inputs[1])[n0 - b_off[0]:n1 - b_off[0], :, w0 - b_off[2]:w1 - b_off[2]]
    c = a_shape[2]
    if types.is_int:
        av = a.astype(np.int64) - a_zp
        bv = b.astype(np.int64) - b_zp
        bound = c * _max_abs(av) * _max_abs(bv)
        ctype = _compute_dtype(bound, 1 << (types.acc_t.bits - 1))
        if ctype is not None:
            acc = np.matmul(av.astype(ctype), bv.astype(ctype)).astype(np.int64)
        else:
            accumulator = _IntAccumulator(args, (n1 - n0, h1 - h0, w1 - w0), None, types.acc_t)
            for n in range(n1 - n0):
                accumulator.add_gemm((n,), av[n], bv[n])
            acc = accumulator.result()
        return [acc.astype(types.out_t.numpy_dtype)]
    av, bv = _as_f32(a), _as_f32(b)
    acc = np.zeros((n1 - n0, h1 - h0, w1 - w0), dtype=_fp_storage(types.acc_t))
    for k in range(c):
        _fp_mul_add(acc, av[:, :, k:k + 1], bv[:, k:k + 1, :], types.acc_t)
    return [acc.astype(types.out_t.numpy_dtype)]


__all__ = ["CONV_TYPES", "MATMUL_TYPES", "Axis", "DotTypes", "conv2d", "conv3d",
           "depthwise_conv2d", "matmul", "transpose_conv2d"]
