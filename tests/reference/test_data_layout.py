"""Data layout kernels against the reference model (exact bits), tiling, ERROR_IFs."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute
from tests.kernel_testing import (
    assert_same_bits,
    ours_tiled,
    random_tiles,
    run_bound,
    run_ours,
    shape_operand,
    window_volume,
)
from tests.oracle import Operand, OracleError, run_op
from tests.value_gen import random_bits

LAYOUT_DTYPES = (DType.BOOL, DType.INT8, DType.INT16, DType.INT32, DType.FP8E4M3,
                 DType.FP8E5M2, DType.FP16, DType.BF16, DType.FP32)

CASES_PER_DTYPE = 3


def _shape(rng: np.random.Generator, min_rank: int = 1, max_rank: int = 6, max_dim: int = 5):
    rank = int(rng.integers(min_rank, max_rank + 1))
    return tuple(int(v) for v in rng.integers(1, max_dim + 1, size=rank))


# --------------------------------------------------------------------------- case builders
# Each builder returns (op, operands, attribute, output TensorType).
def concat_case(dtype, rng):
    shape = _shape(rng)
    axis = int(rng.integers(0, len(shape)))
    parts = []
    for _ in range(int(rng.integers(1, 4))):
        s = list(shape)
        s[axis] = int(rng.integers(1, 4))
        parts.append(Operand(random_bits(dtype, s, rng), dtype))
    out = list(shape)
    out[axis] = sum(p.value.shape[axis] for p in parts)
    return Op.CONCAT, parts, make_attribute(Op.CONCAT, axis=axis), TensorType(tuple(out), dtype)


def pad_case(dtype, rng):
    shape = _shape(rng, max_rank=5, max_dim=4)
    padding = [int(v) for v in rng.integers(0, 3, size=2 * len(shape))]
    out = tuple(s + padding[2 * d] + padding[2 * d + 1] for d, s in enumerate(shape))
    pad_const = random_bits(dtype, (1,), rng)
    operands = [Operand(random_bits(dtype, shape, rng), dtype), shape_operand(padding),
                Operand(pad_const, dtype, const=True)]
    return Op.PAD, operands, None, TensorType(out, dtype)


def reshape_case(dtype, rng):
    shape = _shape(rng)
    count = int(np.prod(shape))
    new = []
    rest = count
    for _ in range(int(rng.integers(0, 4))):
        divisors = [d for d in range(1, rest + 1) if rest % d == 0]
        d = int(rng.choice(divisors))
        new.append(d)
        rest //= d
    new.append(rest)
    operands = [Operand(random_bits(dtype, shape, rng), dtype), shape_operand(new)]
    return Op.RESHAPE, operands, None, TensorType(tuple(new), dtype)


def reverse_case(dtype, rng):
    shape = _shape(rng)
    axis = int(rng.integers(0, len(shape)))
    return (Op.REVERSE, [Operand(random_bits(dtype, shape, rng), dtype)],
            make_attribute(Op.REVERSE, axis=axis), TensorType(shape, dtype))


def slice_case(dtype, rng):
    shape = _shape(rng)
    start = [int(rng.integers(0, s)) for s in shape]
    size = [int(rng.integers(1, s - b + 1)) for s, b in zip(shape, start)]
    operands = [Operand(random_bits(dtype, shape, rng), dtype), shape_operand(start),
                shape_operand(size)]
    return Op.SLICE, operands, None, TensorType(tuple(size), dtype)


def tile_case(dtype, rng):
    shape = _shape(rng, max_rank=4, max_dim=4)
    multiples = [int(v) for v in rng.integers(1, 4, size=len(shape))]
    out = tuple(s * m for s, m in zip(shape, multiples))
    operands = [Operand(random_bits(dtype, shape, rng), dtype), shape_operand(multiples)]
    return Op.TILE, operands, None, TensorType(out, dtype)


def transpose_case(dtype, rng):
    shape = _shape(rng)
    perms = [int(p) for p in rng.permutation(len(shape))]
    out = tuple(shape[p] for p in perms)
    return (Op.TRANSPOSE, [Operand(random_bits(dtype, shape, rng), dtype)],
            make_attribute(Op.TRANSPOSE, perms=perms), TensorType(out, dtype))


def identity_case(dtype, rng):
    shape = _shape(rng, min_rank=0)
    if dtype is DType.INT48:
        value = rng.integers(-(1 << 47), 1 << 47, size=shape, dtype=np.int64)
    else:
        value = random_bits(dtype, shape, rng)
    return Op.IDENTITY, [Operand(value, dtype)], None, TensorType(shape, dtype)


BUILDERS = {
    Op.CONCAT: concat_case, Op.PAD: pad_case, Op.RESHAPE: reshape_case,
    Op.REVERSE: reverse_case, Op.SLICE: slice_case, Op.TILE: tile_case,
    Op.TRANSPOSE: transpose_case, Op.IDENTITY: identity_case,
}
IDENTITY_DTYPES = LAYOUT_DTYPES + (DType.INT4, DType.INT48)


def _seed(op: Op, dtype: DType, salt: int = 0) -> int:
    return int(op) * 1000 + int(dtype) * 10 + salt


# --------------------------------------------------------------------------- vs the oracle
@pytest.mark.parametrize("op,dtype", [(op, dt) for op in BUILDERS
                                      for dt in (IDENTITY_DTYPES if op == Op.IDENTITY else LAYOUT_DTYPES)],
                         ids=lambda v: v.name)
def test_matches_reference_model_bit_for_bit(op, dtype):
    rng = np.random.default_rng(_seed(op, dtype))
    for _ in range(CASES_PER_DTYPE):
        op_, operands, attribute, out_type = BUILDERS[op](dtype, rng)
        (expected,) = run_op(op_, operands, attribute, [out_type])  # INT4/INT48: the executable
        (actual,) = run_ours(op_, operands, attribute, [out_type])
        # Data movement copies bits (zero signs included). The reference model keeps
        # fp16/bf16/fp32 in wider types internally and canonicalises NaN payloads, so
        # there a NaN only has to stay a NaN; test_nan_payloads_survive checks ours.
        assert_same_bits(actual, expected, nan_equal=True)


@pytest.mark.parametrize("dtype", IDENTITY_DTYPES, ids=lambda v: v.name)
def test_bound_identity_matches_reference_model(dtype):
    """Bound after a first call (a WHILE loop's carries run it at every iteration)."""
    rng = np.random.default_rng(_seed(Op.IDENTITY, dtype, 7))
    op, operands, attribute, out_type = identity_case(dtype, rng)
    value = rng.integers(-(1 << 47), 1 << 47, size=out_type.shape, dtype=np.int64) if dtype is DType.INT48 \
        else random_bits(dtype, out_type.shape, rng)
    again = [Operand(value, dtype)]
    (expected,) = run_op(op, again, attribute, [out_type])
    (actual,) = run_bound(op, again, attribute, [out_type], first=operands)
    assert_same_bits(actual, expected, nan_equal=True)


@pytest.mark.parametrize("op", list(BUILDERS), ids=lambda v: v.name)
def test_nan_payloads_survive(op):
    rng = np.random.default_rng(_seed(op, DType.FP32, 5))
    bits = np.array([0x7FC00001, 0xFF800123, 0x7F800001, 0xFFFFFFFF], dtype=np.uint32)
    for dtype, payload in ((DType.FP32, bits.view(np.float32)),
                           (DType.FP16, np.array([0x7E01, 0xFC01], np.uint16).view(np.float16))):
        op_, operands, attribute, out_type = BUILDERS[op](dtype, rng)
        value = np.resize(payload, operands[0].value.shape).astype(dtype.numpy_dtype)
        operands = [Operand(value, dtype), *operands[1:]]
        if op_ == Op.CONCAT:
            operands = [Operand(np.resize(payload, o.value.shape), dtype) for o in operands]
        (actual,) = run_ours(op_, operands, attribute, [out_type])
        sources = np.concatenate([o.value.reshape(-1) for o in operands if o.dtype == dtype])
        assert set(np.unique(actual.view(f"u{actual.itemsize}"))) <= set(
            np.unique(sources.view(f"u{actual.itemsize}")))


def test_pad_right_padding_uses_pad_const():
    # The pseudocode's is_pad test reads `index[i] >= length(shape[i])` (never true); the
    # intent, and the reference model, pad after the input as well as before it.
    x = np.arange(1, 4, dtype=np.int8)
    operands = [Operand(x, DType.INT8), shape_operand([1, 2]), Operand([-7], DType.INT8, True)]
    (actual,) = run_ours(Op.PAD, operands, None, [TensorType((6,), DType.INT8)])
    assert actual.tolist() == [-7, 1, 2, 3, -7, -7]


# --------------------------------------------------------------------------- tiling
TILED_DTYPES = (DType.INT8, DType.BF16, DType.FP32)


@pytest.mark.parametrize("op", [op for op in BUILDERS], ids=lambda v: v.name)
def test_random_tilings_equal_whole_tensor(op):
    rng = np.random.default_rng(_seed(op, DType.UNKNOWN, 7))
    for dtype in TILED_DTYPES:
        for _ in range(3):
            op_, operands, attribute, out_type = BUILDERS[op](dtype, rng)
            (whole,) = run_ours(op_, operands, attribute, [out_type])
            for known_consts in (False, True):
                tiles = random_tiles(out_type.shape, rng)
                (tiled,) = ours_tiled(op_, operands, attribute, [out_type], tiles, known_consts=known_consts)
                assert_same_bits(tiled, whole)


def test_exact_windows_read_only_what_the_tile_needs():
    x = np.arange(8 * 6, dtype=np.int16).reshape(8, 6)
    out = TensorType((4, 2), DType.INT16)
    operands = [Operand(x, DType.INT16), shape_operand([2, 3]), shape_operand([4, 2])]
    attribute = make_attribute(Op.SLICE)
    # With the start values the window is the slice of the tile; without them it is whole.
    assert window_volume(Op.SLICE, operands, attribute, out, ((1, 3), (0, 2)), True) == 4
    assert window_volume(Op.SLICE, operands, attribute, out, ((1, 3), (0, 2)), False) == 48
    padded = TensorType((8, 9), DType.INT16)
    pad_ops = [Operand(x, DType.INT16), shape_operand([0, 0, 1, 2]), Operand([0], DType.INT16, True)]
    assert window_volume(Op.PAD, pad_ops, make_attribute(Op.PAD), padded, ((0, 4), (0, 3)), True) == 8
    # Unpadded dimension 0 is followed even without the padding values.
    assert window_volume(Op.PAD, pad_ops, make_attribute(Op.PAD), padded, ((0, 4), (0, 3)), False) == 24


def test_tile_window_within_one_copy():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    operands = [Operand(x, DType.INT32), shape_operand([2, 3])]
    out = TensorType((6, 12), DType.INT32)
    region = ((4, 6), (5, 7))  # rows 1..2, columns 1..2 of the second copies
    assert window_volume(Op.TILE, operands, make_attribute(Op.TILE), out, region, False) == 4
    (tiled,) = ours_tiled(Op.TILE, operands, make_attribute(Op.TILE), [out],
                          random_tiles(out.shape, np.random.default_rng(3), max_cuts=5))
    assert_same_bits(tiled, np.tile(x, (2, 3)))


# --------------------------------------------------------------------------- ERROR_IFs
def _raises(op, operands, attribute, out_type, text):
    with pytest.raises(TosaRuntimeError, match=text):
        run_ours(op, operands, attribute, [out_type])


I8 = DType.INT8


def _x(shape, dtype=I8):
    return Operand(np.zeros(shape, dtype=dtype.numpy_dtype), dtype)


@pytest.mark.parametrize("case", [
    # CONCAT
    (Op.CONCAT, [_x((2, 3)), _x((2, 3))], {"axis": 2}, ((4, 3), I8), "axis 2 out of range"),
    (Op.CONCAT, [_x((2, 3)), _x((2, 3))], {"axis": -1}, ((4, 3), I8), "out of range"),
    (Op.CONCAT, [_x((2, 3)), _x((2, 3, 1))], {"axis": 0}, ((4, 3), I8), "different ranks"),
    (Op.CONCAT, [_x((2, 3)), _x((2, 4))], {"axis": 0}, ((4, 3), I8), "differ in dimension 1"),
    (Op.CONCAT, [_x((2, 3)), _x((2, 3))], {"axis": 0}, ((5, 3), I8), "not the sum"),
    (Op.CONCAT, [_x((2, 3)), _x((2, 3), DType.INT16)], {"axis": 0}, ((4, 3), I8), "different element types"),
    # PAD
    (Op.PAD, [_x((2, 3)), shape_operand([0, -1, 0, 1]), Operand([0], I8, True)], {}, ((1, 4), I8), "negative padding"),
    (Op.PAD, [_x((2, 3)), shape_operand([0, 1, 0, 1]), Operand([0], I8, True)], {}, ((3, 5), I8), "not input plus padding"),
    (Op.PAD, [_x((2, 3)), shape_operand([0, 1]), Operand([0], I8, True)], {}, ((3, 3), I8), "padding has 2 values"),
    (Op.PAD, [_x((2, 3)), shape_operand([0, 0, 0, 0]), Operand([0], I8, True)], {}, ((2, 3, 1), I8), "rank"),
    # RESHAPE
    (Op.RESHAPE, [_x((2, 3)), shape_operand([4, 2])], {}, ((4, 2), I8), "element counts differ"),
    (Op.RESHAPE, [_x((2, 3)), shape_operand([3, -1])], {}, ((3, 2), I8), "differs from the output shape"),
    # REVERSE
    (Op.REVERSE, [_x((2, 3))], {"axis": 2}, ((2, 3), I8), "axis 2 out of range"),
    (Op.REVERSE, [_x((2, 3))], {"axis": 0}, ((3, 2), I8), "output shape"),
    # SLICE
    (Op.SLICE, [_x((4, 4)), shape_operand([-1, 0]), shape_operand([2, 2])], {}, ((2, 2), I8), "start\\[0\\] is negative"),
    (Op.SLICE, [_x((4, 4)), shape_operand([0, 0]), shape_operand([0, 2])], {}, ((0, 2), I8), "size\\[0\\] is not positive"),
    (Op.SLICE, [_x((4, 4)), shape_operand([3, 0]), shape_operand([2, 2])], {}, ((2, 2), I8), "exceeds input"),
    (Op.SLICE, [_x((4, 4)), shape_operand([0, 0]), shape_operand([2, 2])], {}, ((2, 3), I8), "differs from size"),
    (Op.SLICE, [_x((4, 4)), shape_operand([0]), shape_operand([2, 2])], {}, ((2, 2), I8), "start has 1 values"),
    # TILE
    (Op.TILE, [_x((2, 3)), shape_operand([2, 2])], {}, ((4, 5), I8), "not input times multiples"),
    (Op.TILE, [_x((2, 3)), shape_operand([2])], {}, ((4, 3), I8), "multiples has 1 values"),
    # TRANSPOSE
    (Op.TRANSPOSE, [_x((2, 3))], {"perms": [0, 0]}, ((2, 2), I8), "repeated"),
    (Op.TRANSPOSE, [_x((2, 3))], {"perms": [0, 2]}, ((2, 3), I8), "out of range"),
    (Op.TRANSPOSE, [_x((2, 3))], {"perms": [1]}, ((3, 2), I8), "perms has 1 entries"),
    (Op.TRANSPOSE, [_x((2, 3))], {"perms": [1, 0]}, ((2, 3), I8), "differs from input dimension"),
    # element types
    (Op.REVERSE, [_x((2, 3), DType.INT4)], {"axis": 0}, ((2, 3), DType.INT4), "unsupported element type INT4"),
    (Op.SLICE, [_x((2, 3), DType.INT48), shape_operand([0, 0]), shape_operand([1, 1])], {}, ((1, 1), DType.INT48), "unsupported"),
    (Op.IDENTITY, [_x((2, 3))], {}, ((2, 3), DType.INT16), "differs from input type"),
    (Op.IDENTITY, [_x((2, 3))], {}, ((3, 2), I8), "output shape differs"),
], ids=lambda c: f"{c[0].name}-{c[4]}")
def test_error_if(case):
    op, operands, fields, (out_shape, out_dtype), text = case
    _raises(op, operands, make_attribute(op, **fields), TensorType(out_shape, out_dtype), text)


def test_reference_model_refuses_the_same_shapes():
    """Some ERROR_IF cases above are refused by the reference model too (run in a
    subprocess: the model may abort on refused graphs)."""
    cases = [
        (Op.CONCAT, [_x((2, 3)), _x((2, 3))], {"axis": 0}, ((5, 3), I8)),
        (Op.PAD, [_x((2, 3)), shape_operand([0, 1, 0, 1]), Operand([0], I8, True)], {}, ((3, 5), I8)),
        (Op.SLICE, [_x((4, 4)), shape_operand([3, 0]), shape_operand([2, 2])], {}, ((2, 2), I8)),
        (Op.TILE, [_x((2, 3)), shape_operand([2, 2])], {}, ((4, 5), I8)),
        (Op.TRANSPOSE, [_x((2, 3))], {"perms": [1, 0]}, ((2, 3), I8)),
    ]
    for op, operands, fields, (shape, dtype) in cases:
        with pytest.raises(OracleError):
            run_op(op, operands, make_attribute(op, **fields), [TensorType(shape, dtype)], isolated=True)
