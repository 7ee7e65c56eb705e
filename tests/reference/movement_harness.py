"""Test helpers for the reduction, data-layout, scatter/gather and image kernel tests.

* :func:`oracle` runs one operator in Arm's reference model (``tests/oracle.py``);
  BF16/FP8 operands are passed as constants because the reference model's Python
  binding does not accept ml_dtypes arrays as runtime inputs.
* :func:`ours` runs our kernel on whole tensors; :func:`ours_tiled` runs it tile by
  tile through the kernel's input windows and stitches the output.
* :func:`random_values` draws seeded values with the edge values of each type mixed in;
  :func:`assert_same_bits` compares exactly (any NaN matches any NaN only if asked).
"""

from __future__ import annotations

import inspect
import itertools
import sys
from pathlib import Path
from typing import Sequence

import ml_dtypes
import numpy as np

from npu_sim.reference import KERNELS, KernelArgs, run_kernel  # noqa: F401 (registers kernels)
from npu_sim.reference.kernel_api import INPUT_WINDOWS, Region
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op
from tests import oracle as _oracle

OracleError = _oracle.OracleError
#: Operand: (value, dtype, const). SHAPE operands must be const for the reference model.
Operand = tuple[np.ndarray, DType, bool]

_ML_DTYPES = (DType.BF16, DType.FP8E4M3, DType.FP8E5M2)


def operand(value: np.ndarray, dtype: DType, const: bool = False) -> Operand:
    return (np.asarray(value, dtype=dtype.numpy_dtype), dtype, const)


def shape_operand(values: Sequence[int]) -> Operand:
    return (np.asarray(values, dtype=np.int64), DType.SHAPE, True)


def oracle(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
           outputs: Sequence[TensorType]) -> list[np.ndarray]:
    """Outputs of the reference model (raises OracleError on ERROR/UNPREDICTABLE)."""
    ops = [_oracle.Operand(v, d, const=c or d in _ML_DTYPES) for v, d, c in operands]
    return _oracle.run_op(op, ops, attribute, list(outputs))


def _types(operands: Sequence[Operand]) -> list[TensorType]:
    return [TensorType(tuple(np.shape(v)), d) for v, d, _ in operands]


def ours(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
         outputs: Sequence[TensorType]) -> list[np.ndarray]:
    """Whole-tensor outputs of our kernel."""
    from npu_sim.tosa.ops import attribute_class

    attribute = attribute if attribute is not None else attribute_class(op)()
    args = KernelArgs(op, attribute, [v for v, _, _ in operands], _types(operands),
                      list(outputs), name=op.name)
    results = run_kernel(args)
    for result, t in zip(results, outputs):
        assert result.dtype == t.dtype.numpy_dtype, (result.dtype, t.dtype)
        assert result.shape == tuple(t.shape), (result.shape, t.shape)
    return results


def random_tiles(shape: Sequence[int], rng: np.random.Generator,
                 whole: Sequence[int] = (), max_cuts: int = 3) -> list[Region]:
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


def ours_tiled(op: Op, operands: Sequence[Operand], attribute: Attribute,
               output: TensorType, tiles: Sequence[Region], precise: bool = False) -> np.ndarray:
    """Our output computed tile by tile, each tile seeing only its input windows.

    ``precise`` passes the operand values to window functions that accept
    ``const_inputs`` (the SHAPE operands); otherwise windows see only types.
    """
    types = _types(operands)
    window = INPUT_WINDOWS[op]
    takes_consts = "const_inputs" in inspect.signature(window).parameters
    out = np.zeros(tuple(output.shape), dtype=output.dtype.numpy_dtype)
    covered = np.zeros(tuple(output.shape), dtype=np.int32)
    for region in tiles:
        if precise and takes_consts:
            regions = window(attribute, types, [output], region,
                             const_inputs=[v for v, _, _ in operands])
        else:
            regions = window(attribute, types, [output], region)
        assert len(regions) == len(operands)
        windows, offsets = [], []
        for (value, _, _), reg, t in zip(operands, regions, types):
            assert len(reg) == len(t.shape)
            for (a, b), size in zip(reg, t.shape):
                assert 0 <= a <= b <= size, f"window {reg} outside {t.shape}"
            windows.append(np.asarray(value)[tuple(slice(a, b) for a, b in reg)].copy())
            offsets.append(tuple(a for a, _ in reg))
        args = KernelArgs(op, attribute, windows, types, [output], name=op.name,
                          out_region=region, input_offsets=offsets)
        (tile_out,) = run_kernel(args)
        assert tile_out.dtype == output.dtype.numpy_dtype
        assert tile_out.shape == tuple(b - a for a, b in region), (tile_out.shape, region)
        index = tuple(slice(a, b) for a, b in region)
        out[index] = tile_out
        covered[index] += 1
    assert np.all(covered == 1), "tiles must cover the output exactly once"
    return out


def window_volume(op: Op, operands: Sequence[Operand], attribute: Attribute,
                  output: TensorType, region: Region, precise: bool) -> int:
    """Number of elements of input 0 the window of ``region`` asks for."""
    window = INPUT_WINDOWS[op]
    types = _types(operands)
    if precise:
        regions = window(attribute, types, [output], region,
                         const_inputs=[v for v, _, _ in operands])
    else:
        regions = window(attribute, types, [output], region)
    return int(np.prod([b - a for a, b in regions[0]]))


# --------------------------------------------------------------------------- values
def _float_edges(dtype: DType) -> np.ndarray:
    info = ml_dtypes.finfo(dtype.numpy_dtype)
    edges = [0.0, -0.0, 1.0, -1.0, float(info.max), -float(info.max),
             float(info.smallest_normal), -float(info.smallest_normal),
             float(info.smallest_subnormal), -float(info.smallest_subnormal), np.nan]
    if dtype is not DType.FP8E4M3:
        edges += [np.inf, -np.inf]
    return np.array(edges, dtype=np.float64)


def random_values(dtype: DType, shape: Sequence[int], rng: np.random.Generator,
                  edges: bool = True, scale: float = 4.0) -> np.ndarray:
    """Seeded values of ``dtype``: uniform integers / normal floats, edge values sprinkled."""
    shape = tuple(shape)
    count = int(np.prod(shape)) if shape else 1
    if dtype is DType.BOOL:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.is_integer:
        lo, hi = dtype.int_range
        values = rng.integers(lo, hi, size=count, endpoint=True, dtype=np.int64)
        edge = np.array([lo, hi, 0, -1, 1], dtype=np.int64)
    else:
        values = rng.normal(0.0, scale, size=count)
        edge = _float_edges(dtype)
    if edges and count:
        mask = rng.random(count) < 0.1
        values[mask] = rng.choice(edge, size=int(mask.sum()))
    with np.errstate(over="ignore", invalid="ignore"):
        return values.astype(dtype.numpy_dtype).reshape(shape)


def random_bits(dtype: DType, shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    """Arbitrary bit patterns of ``dtype`` (NaN payloads included) for data movement."""
    storage = dtype.numpy_dtype
    if dtype is DType.BOOL or dtype.is_integer:
        return random_values(dtype, shape, rng)
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * storage.itemsize, dtype=np.uint8)
    return raw.view(storage).reshape(tuple(shape))


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:
        return a.view(np.uint8)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def assert_same_bits(actual: np.ndarray, expected: np.ndarray, nan_equal: bool = False,
                     signed_zero_equal: bool = False) -> None:
    """Bit-for-bit equality (optionally any NaN == any NaN, and +0 == -0)."""
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    same = _bits(actual) == _bits(expected)
    if actual.dtype.kind == "V" or actual.dtype.kind == "f":
        a64 = actual.astype(np.float64)
        e64 = expected.astype(np.float64)
        if nan_equal:
            same |= np.isnan(a64) & np.isnan(e64)
        if signed_zero_equal:
            same |= (a64 == 0) & (e64 == 0)
    if not np.all(same):
        where = np.argwhere(~same)[:5]
        detail = [(tuple(i), actual[tuple(i)], expected[tuple(i)]) for i in where]
        raise AssertionError(f"{int((~same).sum())} elements differ, first: {detail}")


LAYOUT_DTYPES = (DType.BOOL, DType.INT8, DType.INT16, DType.INT32, DType.FP8E4M3,
                 DType.FP8E5M2, DType.FP16, DType.BF16, DType.FP32)


def oracle_cli(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
               outputs: Sequence[TensorType]) -> list[np.ndarray]:
    """Like :func:`oracle`, through the ``tosa_reference_model`` command and .npy files.

    Slower (a process per call); needed for INT4/INT48 tensors, which the Python
    binding cannot pass in or out. Raises OracleError if the model fails.
    """
    import os
    import subprocess
    import tempfile

    from npu_sim.tosa.ops import attribute_class

    ts = _oracle.ts
    attribute = attribute if attribute is not None else attribute_class(op)()
    exe = Path(sys.executable).with_name("tosa_reference_model")
    with tempfile.TemporaryDirectory() as tmp:
        ser = ts.TosaSerializer(tmp)
        names, ifm_names, ifm_files = [], [], []
        for i, (value, dtype, const) in enumerate(operands):
            shape = list(np.shape(value))
            if const or dtype in _ML_DTYPES:
                tensor = ser.addConst(shape, _oracle._SER_DTYPE[dtype], _oracle._ser_value(value, dtype))
            else:
                tensor = ser.addPlaceholder(shape, _oracle._SER_DTYPE[dtype], None)
                path = os.path.join(tmp, f"in{i}.npy")
                np.save(path, np.asarray(value, dtype=dtype.numpy_dtype))
                ifm_names.append(tensor.name)
                ifm_files.append(path)
            names.append(tensor.name)
        outs = [ser.addOutput(list(t.shape), _oracle._SER_DTYPE[t.dtype]) for t in outputs]
        ser.addOperator(getattr(ts.TosaOp.Op(), op.name), names, [o.name for o in outs],
                        _oracle._ser_attribute(attribute, ser))
        graph = os.path.join(tmp, "graph.tosa")
        with open(graph, "wb") as f:
            f.write(bytes(ser.serialize()))
        out_files = [os.path.join(tmp, f"out{i}.npy") for i in range(len(outs))]
        # Level limits (e.g. MAX_SCALE) are not the kernels' business: check none, like
        # the Python binding.
        command = [str(exe), "--tosa_level", "NONE", "--tosa_file", graph, "--flatbuffer_dir", tmp, "--output_dir", tmp,
                   "--ofm_name", ",".join(o.name for o in outs), "--ofm_file", ",".join(out_files)]
        if ifm_names:
            command += ["--ifm_name", ",".join(ifm_names), "--ifm_file", ",".join(ifm_files)]
        # PATH without gdb: the model otherwise attaches a debugger when it refuses a graph.
        env = dict(os.environ, PATH=str(exe.parent))
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
        if done.returncode != 0 or not all(os.path.exists(f) for f in out_files):
            raise OracleError(f"exit {done.returncode}: {(done.stdout + done.stderr)[-300:]}")
        return [np.load(f).astype(t.dtype.numpy_dtype).reshape(t.shape)
                for f, t in zip(out_files, outputs)]
