"""Helpers for kernel tests: run our kernel like the oracle, compare bits, check tiling.

``run_ours`` takes the same ``Operand`` list as ``tests.oracle.run_op`` so one
case feeds both. ``assert_same_bits`` compares storage bits exactly (optionally
any NaN matches any NaN, and +0 matches -0). Tiling: ``ours_tiled`` computes
the output tile by tile (each tile from its input windows only) and stitches it,
``check_tiling`` compares random output regions with the whole-tensor result.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError
from npu_sim.reference import KernelArgs, input_window, run_kernel
from npu_sim.reference.kernel_api import Region, bind_kernel
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op, attribute_class
from tests.oracle import Operand, OracleError, run_op

_ML_FLOATS = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def shape_operand(values: Sequence[int]) -> Operand:
    """A SHAPE operand (constant, as the reference model needs it)."""
    return Operand(np.asarray(values, dtype=np.int64), DType.SHAPE, const=True)


def make_args(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
              outputs: Sequence[TensorType]) -> KernelArgs:
    """Whole-tensor kernel arguments for ``operands`` (the default attribute if None)."""
    attribute = attribute if attribute is not None else attribute_class(op)()
    return KernelArgs(op=op, attribute=attribute, inputs=[o.value for o in operands],
                      input_types=[TensorType(tuple(np.shape(o.value)), o.dtype) for o in operands],
                      output_types=list(outputs), name=op.name)


def run_ours(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
             outputs: Sequence[TensorType]) -> list[np.ndarray]:
    """Our kernel on whole tensors; checks output dtypes and shapes."""
    results = run_kernel(make_args(op, operands, attribute, outputs))
    _check_outputs(results, outputs, [tuple(t.shape) for t in outputs])
    return results


def run_bound(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
              outputs: Sequence[TensorType], *, first: Sequence[Operand] | None = None) -> list[np.ndarray]:
    """Our kernel as the executor runs it from its third call on: bound
    (``kernel_api.bind_kernel``) after a successful call on ``first`` (default: ``operands``),
    the ``const`` operands fixed; numpy's floating-point warnings off, as in the executor."""
    first = operands if first is None else first
    args = make_args(op, first, attribute, outputs)
    run_kernel(args)
    bound = bind_kernel(args, [o.value if o.const else None for o in first])
    with np.errstate(all="ignore"):
        results = bound([o.value for o in operands])
    _check_outputs(results, outputs, [tuple(t.shape) for t in outputs])
    return results


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:
        return a.view(np.uint8)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def assert_same_bits(ours: np.ndarray, ref: np.ndarray, what: str = "", *, nan_equal: bool = False,
                     ignore_zero_sign: bool = False) -> None:
    """Equal dtype, shape and storage bits (NaN payloads included, unless ``nan_equal``:
    then any NaN matches any NaN; with ``ignore_zero_sign`` +0 matches -0)."""
    assert ours.dtype == ref.dtype and ours.shape == ref.shape, (what, ours.dtype, ref.dtype, ours.shape,
                                                                 ref.shape)
    same = _bits(ours) == _bits(ref)
    if (nan_equal or ignore_zero_sign) and (ours.dtype.kind == "f" or ours.dtype.name in _ML_FLOATS):
        with np.errstate(invalid="ignore"):  # NaN payloads (signalling NaNs) cast to NaN
            a, b = ours.astype(np.float64), ref.astype(np.float64)
        if nan_equal:
            same = same | (np.isnan(a) & np.isnan(b))
        if ignore_zero_sign:
            same = same | ((a == 0) & (b == 0))
    if not np.all(same):
        bad = np.argwhere(~same)[:8]
        rows = [f"  at {tuple(i)}: ours={ours[tuple(i)]!r} ref={ref[tuple(i)]!r}" for i in bad]
        raise AssertionError(f"{what}: {int((~same).sum())} element(s) differ\n" + "\n".join(rows))


# --------------------------------------------------------------------------- tiling
def random_region(shape: Sequence[int], rng: np.random.Generator) -> Region:
    """One random non-empty sub-region of ``shape``."""
    region = []
    for dim in shape:
        start = int(rng.integers(0, dim))
        stop = int(rng.integers(start + 1, dim + 1))
        region.append((start, stop))
    return tuple(region)


def random_tiles(shape: Sequence[int], rng: np.random.Generator, *, max_cuts: int = 3,
                 whole: Sequence[int] = ()) -> list[Region]:
    """A random grid of tiles covering ``shape`` (dimensions in ``whole`` are not cut)."""
    edges = []
    for d, size in enumerate(shape):
        if d in whole or size <= 1:
            edges.append([0, size])
            continue
        cuts = rng.choice(np.arange(1, size), size=min(size - 1, int(rng.integers(1, max_cuts + 1))),
                          replace=False)
        edges.append([0, *sorted(int(c) for c in cuts), size])
    per_dim = [list(zip(e[:-1], e[1:])) for e in edges]
    return [tuple(t) for t in itertools.product(*per_dim)]


def _windows(args: KernelArgs, region: Region, known_consts: bool) -> list[Region]:
    """``input_window`` of ``region``; without ``known_consts`` windows see only the types."""
    if known_consts:
        return input_window(args, region)
    types_only = KernelArgs(args.op, args.attribute, [None] * len(args.inputs), args.input_types,
                            args.output_types, name=args.name)
    return input_window(types_only, region)


def run_tile(args: KernelArgs, region: Region, *, known_consts: bool = True) -> list[np.ndarray]:
    """Our kernel on one output region, given only the input windows it asks for."""
    windows = _windows(args, region, known_consts)
    assert len(windows) == len(args.inputs), (args.name, windows)
    inputs, offsets = [], []
    for array, window, t in zip(args.inputs, windows, args.input_types):
        assert len(window) == array.ndim, (args.name, window, array.shape)
        for (a, b), size in zip(window, t.shape):
            assert 0 <= a <= b <= size, f"{args.name}: window {window} outside {t.shape}"
        inputs.append(np.array(array[tuple(slice(a, b) for a, b in window)], copy=True))
        offsets.append(tuple(a for a, _ in window))
    tiled = KernelArgs(op=args.op, attribute=args.attribute, inputs=inputs, input_types=args.input_types,
                       output_types=args.output_types, name=args.name, out_region=tuple(region),
                       input_offsets=offsets)
    parts = run_kernel(tiled)
    _check_outputs(parts, args.output_types, [tuple(b - a for a, b in region)] * len(parts))
    return parts


def ours_tiled(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
               outputs: Sequence[TensorType], tiles: Sequence[Region], *,
               known_consts: bool = True) -> list[np.ndarray]:
    """Our outputs computed tile by tile with :func:`run_tile` and stitched together.

    ``known_consts`` gives the window functions the operand values (as for
    compile-time constants, e.g. SHAPE operands); otherwise they see only types.
    """
    args = make_args(op, operands, attribute, outputs)
    results = [np.zeros(tuple(t.shape), dtype=t.dtype.numpy_dtype) for t in outputs]
    covered = np.zeros(tuple(outputs[0].shape), dtype=np.int32)
    for region in tiles:
        index = tuple(slice(a, b) for a, b in region)
        for result, part in zip(results, run_tile(args, region, known_consts=known_consts)):
            result[index] = part
        covered[index] += 1
    assert np.all(covered == 1), "tiles must cover the output exactly once"
    return results


def check_tiling(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
                 outputs: Sequence[TensorType], rng: np.random.Generator, regions: int = 4) -> None:
    """Random out_regions computed from windows equal slices of the whole-tensor result."""
    args = make_args(op, operands, attribute, outputs)
    whole = run_kernel(args)
    for _ in range(regions):
        region = random_region(tuple(outputs[0].shape), rng)
        for part, full in zip(run_tile(args, region), whole):
            assert_same_bits(part, full[tuple(slice(a, b) for a, b in region)], f"{op.name} tile {region}",
                             nan_equal=True)


def window_volume(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
                  output: TensorType, region: Region, known_consts: bool) -> int:
    """Number of elements of input 0 that the window of ``region`` asks for."""
    windows = _windows(make_args(op, operands, attribute, [output]), region, known_consts)
    return int(np.prod([b - a for a, b in windows[0]]))


def _check_outputs(results: list[np.ndarray], outputs: Sequence[TensorType],
                   shapes: list[tuple[int, ...]]) -> None:
    """One result per output, each of its storage dtype and of the expected shape."""
    assert len(results) == len(outputs), (len(results), outputs)
    for array, t, shape in zip(results, outputs, shapes):
        assert array.dtype == t.dtype.numpy_dtype, (array.dtype, t)
        assert array.shape == shape, (array.shape, shape, t)


def assert_both_refuse(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
                       outputs: Sequence[TensorType], match: str) -> None:
    """We raise TosaRuntimeError (matching ``match``) and the model reports a non-VALID status.

    Only for REQUIRE/ERROR_IF cases the model reports through its status; some (e.g.
    integer division by zero) abort the process instead and must not come here.
    """
    with pytest.raises(TosaRuntimeError, match=match):
        run_ours(op, operands, attribute, outputs)
    with pytest.raises(OracleError):
        run_op(op, list(operands), attribute, list(outputs))
