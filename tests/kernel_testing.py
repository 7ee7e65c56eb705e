"""Helpers for kernel tests: run our kernel like the oracle, compare bits, check tiling.

``run_ours`` takes the same ``Operand`` list as ``tests.oracle.run_op`` so one
case feeds both. ``assert_same_bits`` compares integer/bool outputs exactly and
float outputs bit for bit except that any NaN matches any NaN.
``check_tiling`` computes random output regions through ``input_window`` +
sliced inputs + ``input_offsets`` and compares them with the whole-tensor result.
"""

from __future__ import annotations

from unittest import mock

import numpy as np

from npu_sim.reference import KernelArgs, input_window, run_kernel
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op, attribute_class
from tests import oracle
from tests.oracle import Operand

_UINT_VIEW = {DType.BF16: np.uint16, DType.FP8E4M3: np.uint8, DType.FP8E5M2: np.uint8}


def reference_input(value: np.ndarray, dtype: DType) -> np.ndarray:
    """The reference model's binding reads bf16/fp8 inputs only as raw unsigned words."""
    if dtype in _UINT_VIEW:
        return np.ascontiguousarray(value, dtype=dtype.numpy_dtype).view(_UINT_VIEW[dtype])
    return _ORIGINAL_INPUT(value, dtype)


_ORIGINAL_INPUT = oracle._to_reference_input


def run_reference(op: Op, operands: list[Operand], attribute: Attribute | None,
                  outputs: list[TensorType]) -> list[np.ndarray]:
    """``oracle.run_op``, also for runtime bf16/fp8 inputs (which it passes unconverted)."""
    with mock.patch.object(oracle, "_to_reference_input", reference_input):
        return oracle.run_op(op, operands, attribute, outputs)


def make_args(op: Op, operands: list[Operand], attribute: Attribute | None,
              outputs: list[TensorType]) -> KernelArgs:
    attribute = attribute if attribute is not None else attribute_class(op)()
    return KernelArgs(op=op, attribute=attribute,
                      inputs=[np.asarray(o.value, dtype=o.dtype.numpy_dtype) for o in operands],
                      input_types=[TensorType(tuple(np.shape(o.value)), o.dtype) for o in operands],
                      output_types=list(outputs), name=op.name)


def run_ours(op: Op, operands: list[Operand], attribute: Attribute | None,
             outputs: list[TensorType]) -> list[np.ndarray]:
    """Our kernel on whole tensors; checks output dtypes and shapes."""
    results = run_kernel(make_args(op, operands, attribute, outputs))
    assert len(results) == len(outputs)
    for array, t in zip(results, outputs):
        assert array.dtype == t.dtype.numpy_dtype, (array.dtype, t)
        assert array.shape == tuple(t.shape), (array.shape, t)
    return results


_ML_FLOATS = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:
        return a
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def assert_same_bits(ours: np.ndarray, ref: np.ndarray, what: str = "", *,
                     ignore_zero_sign: bool = False) -> None:
    """Exact equality (any NaN equals any NaN; optionally +0 equals -0)."""
    assert ours.dtype == ref.dtype and ours.shape == ref.shape, (what, ours.dtype, ref.dtype, ours.shape, ref.shape)
    same = _bits(ours) == _bits(ref)
    if ours.dtype.kind == "f" or ours.dtype.name in _ML_FLOATS:
        a, b = ours.astype(np.float64), ref.astype(np.float64)
        same = same | (np.isnan(a) & np.isnan(b))
        if ignore_zero_sign:
            same = same | ((a == 0) & (b == 0))
    if not np.all(same):
        bad = np.argwhere(~same)[:8]
        rows = [f"  at {tuple(i)}: ours={ours[tuple(i)]!r} ref={ref[tuple(i)]!r}" for i in bad]
        raise AssertionError(f"{what}: {int((~same).sum())} element(s) differ\n" + "\n".join(rows))


def random_region(shape: tuple[int, ...], rng: np.random.Generator) -> tuple[tuple[int, int], ...]:
    region = []
    for dim in shape:
        start = int(rng.integers(0, dim))
        stop = int(rng.integers(start + 1, dim + 1))
        region.append((start, stop))
    return tuple(region)


def check_tiling(op: Op, operands: list[Operand], attribute: Attribute | None,
                 outputs: list[TensorType], rng: np.random.Generator, regions: int = 4) -> None:
    """Random out_regions computed from windows equal slices of the whole-tensor result."""
    args = make_args(op, operands, attribute, outputs)
    whole = run_kernel(args)
    for _ in range(regions):
        region = random_region(tuple(outputs[0].shape), rng)
        windows = input_window(args, region)
        assert len(windows) == len(operands)
        inputs, offsets = [], []
        for array, window in zip(args.inputs, windows):
            assert len(window) == array.ndim, (op.name, window, array.shape)
            inputs.append(array[tuple(slice(a, b) for a, b in window)])
            offsets.append(tuple(a for a, _ in window))
        tiled = KernelArgs(op=op, attribute=args.attribute, inputs=inputs, input_types=args.input_types,
                           output_types=args.output_types, name=op.name, out_region=region,
                           input_offsets=offsets)
        parts = run_kernel(tiled)
        for part, full in zip(parts, whole):
            assert_same_bits(part, full[tuple(slice(a, b) for a, b in region)], f"{op.name} tile {region}")


def assert_both_refuse(op: Op, operands: list[Operand], attribute: Attribute | None,
                       outputs: list[TensorType], match: str) -> None:
    """We raise TosaRuntimeError (matching ``match``) and the model reports a non-VALID status.

    Only for REQUIRE/ERROR_IF cases the model reports through its status; some (e.g.
    integer division by zero) abort the process instead and must not come here.
    """
    import pytest

    from npu_sim.errors import TosaRuntimeError

    with pytest.raises(TosaRuntimeError, match=match):
        run_ours(op, operands, attribute, outputs)
    with pytest.raises(oracle.OracleError):
        run_reference(op, operands, attribute, outputs)
