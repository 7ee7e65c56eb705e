"""kernel_util: memoized static checks (checked_once) and as_output's output arrays."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.errors import TosaRuntimeError
from npu_sim.reference.kernel_api import KernelArgs
from npu_sim.reference.kernel_util import as_output, checked_once
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute


def _args(shape, dtype=DType.INT8, out_dtype=DType.INT8, out_region=None) -> KernelArgs:
    return KernelArgs(Op.ABS, make_attribute(Op.ABS), [np.zeros(shape, dtype.numpy_dtype)],
                      [TensorType(shape, dtype)], [TensorType(shape, out_dtype)], name="abs1",
                      out_region=out_region)


def test_checked_once_runs_a_check_once_per_signature_and_never_stores_failures():
    calls = []

    @checked_once
    def check(args: KernelArgs, limit: int) -> int:
        calls.append(args.input_types[0].shape)
        args.require(len(args.input_types[0].shape) <= limit, "rank too large")
        return len(args.input_types[0].shape)

    assert check(_args((2, 3)), 2) == 2 and check(_args((2, 3)), 2) == 2
    assert calls == [(2, 3)]
    assert check(_args((2, 3)), 3) == 2 and len(calls) == 2       # params are part of the key
    for _ in range(2):                                              # a failure is checked every time
        with pytest.raises(TosaRuntimeError, match=r"^abs1: rank too large"):
            check(_args((1, 1, 1)), 2)
    assert len(calls) == 4
    unhashable = _args((4,))
    unhashable.input_types = [TensorType([4], DType.INT8)]        # list shape: not memoized, still checked
    assert check(unhashable, 1) == 1 and check(unhashable, 1) == 1 and len(calls) == 6


def test_as_output_gives_fresh_c_arrays_of_the_storage_dtype_and_region_shape():
    args = _args((2, 3), out_dtype=DType.INT16)
    values = np.arange(6, dtype=np.int16)
    out = as_output(args, values)
    assert out.shape == (2, 3) and out.dtype == np.int16 and out.flags.c_contiguous
    assert not np.shares_memory(out, values)                       # same dtype: copied
    converted = as_output(args, np.arange(6, dtype=np.int64)[::-1].reshape(3, 2).T)
    assert converted.flags.c_contiguous and converted.dtype == np.int16
    assert converted.tolist() == [[5, 3, 1], [4, 2, 0]]
    assert as_output(args, np.int64(7)).tolist() == [[7] * 3] * 2  # broadcast
    tiled = _args((2, 3), out_dtype=DType.INT32, out_region=((1, 2), (0, 3)))
    assert as_output(tiled, np.array([[1, 2, 3]], np.int8)).shape == (1, 3)
    scalar = _args((), out_dtype=DType.INT32)
    assert as_output(scalar, np.int8(-3)).shape == ()
