"""Test helpers for the conv/pooling/FFT kernel tests (tests/reference/test_{conv,pooling,fft}.py).

* :func:`oracle` runs one operator in Arm's reference model. INT48 outputs cannot
  come back through the Python binding (it returns empty arrays for them), so
  those graphs run in the ``tosa_reference_model`` executable instead;
  BF16/FP8 operands are passed as constants (the binding rejects ml_dtypes inputs).
* :func:`ours` runs our kernel on whole tensors; :func:`ours_tiled` runs it tile
  by tile through the kernel's input windows, exactly as the NPU will, and
  stitches the tiles together.
* :func:`random_ints` / :func:`random_floats` draw seeded values with edge values mixed in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from npu_sim.reference import KernelArgs, input_window, run_kernel
from npu_sim.reference.kernel_api import Region
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op, attribute_class
from tests import oracle as _oracle

Operand = _oracle.Operand
OracleError = _oracle.OracleError
_CONST_ONLY = (DType.BF16, DType.FP8E4M3, DType.FP8E5M2)
_REFERENCE_MODEL = Path(sys.executable).with_name("tosa_reference_model")


def operand(value: np.ndarray, dtype: DType, const: bool = False) -> Operand:
    return Operand(np.asarray(value, dtype=dtype.numpy_dtype), dtype, const)


def _binding_safe(operands: Sequence[Operand]) -> list[Operand]:
    return [Operand(o.value, o.dtype, o.const or o.dtype in _CONST_ONLY) for o in operands]


def oracle(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
           outputs: Sequence[TensorType]) -> list[np.ndarray]:
    """Outputs of the reference model (raises OracleError on ERROR/UNPREDICTABLE)."""
    operands = _binding_safe(operands)
    if any(t.dtype is DType.INT48 for t in outputs):
        return run_op_cli(op, operands, attribute, list(outputs))
    return _oracle.run_op(op, operands, attribute, list(outputs))


def run_op_cli(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
               outputs: Sequence[TensorType], precise: bool = False) -> list[np.ndarray]:
    """Run one operator in the ``tosa_reference_model`` executable (a subprocess).

    Outputs come back as the .npy files the model writes (INT48 as int64); with
    ``precise`` the model computes floating point in fp64 and returns fp64.
    """
    from serializer import tosa_serializer as ts

    attribute = attribute if attribute is not None else attribute_class(op)()
    with tempfile.TemporaryDirectory() as tmp:
        ser = ts.TosaSerializer(tmp)
        names, in_names, in_files = [], [], []
        for k, o in enumerate(operands):
            dtype = _oracle._SER_DTYPE[o.dtype]
            if o.const:
                tensor = ser.addConst(list(np.shape(o.value)), dtype, _oracle._ser_value(o.value, o.dtype))
            else:
                tensor = ser.addPlaceholder(list(np.shape(o.value)), dtype, None)
                path = os.path.join(tmp, f"in{k}.npy")
                np.save(path, np.asarray(o.value))
                in_names.append(tensor.name)
                in_files.append(path)
            names.append(tensor.name)
        out_names = [ser.addOutput(list(t.shape), _oracle._SER_DTYPE[t.dtype]).name for t in outputs]
        ser.addOperator(getattr(ts.TosaOp.Op(), op.name), names, out_names,
                        _oracle._ser_attribute(attribute, ser))
        graph = os.path.join(tmp, "graph.tosa")
        Path(graph).write_bytes(bytes(ser.serialize()))
        out_files = [os.path.join(tmp, f"out{k}.npy") for k in range(len(outputs))]
        desc = os.path.join(tmp, "desc.json")  # the executable insists on one
        Path(desc).write_text(json.dumps({
            "tosa_file": "graph.tosa", "ifm_name": in_names, "ifm_file": [Path(f).name for f in in_files],
            "ofm_name": out_names, "ofm_file": [Path(f).name for f in out_files]}))
        cmd = [str(_REFERENCE_MODEL), "--test_desc", desc, "--precise_mode", "1" if precise else "0"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0 or not all(os.path.exists(f) for f in out_files):
            raise OracleError(f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
        results = []
        for f, t in zip(out_files, outputs):
            value = np.load(f)
            dtype = np.float64 if precise else t.dtype.numpy_dtype
            results.append(value.astype(dtype).reshape(t.shape))
        return results


def oracle_fp64(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
                outputs: Sequence[TensorType]) -> list[np.ndarray]:
    """The reference model's precise (fp64) results: ``reference_fp64()`` of the spec."""
    return run_op_cli(op, _binding_safe(operands), attribute, outputs, precise=True)


def _args(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
          outputs: Sequence[TensorType]) -> KernelArgs:
    attribute = attribute if attribute is not None else attribute_class(op)()
    return KernelArgs(op, attribute, [np.asarray(o.value) for o in operands],
                      [TensorType(tuple(np.shape(o.value)), o.dtype) for o in operands],
                      list(outputs), name=op.name)


def ours(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
         outputs: Sequence[TensorType]) -> list[np.ndarray]:
    """Whole-tensor outputs of our kernel (checked for storage dtype and shape)."""
    results = run_kernel(_args(op, operands, attribute, outputs))
    assert len(results) == len(outputs)
    for result, t in zip(results, outputs):
        assert result.dtype == t.dtype.numpy_dtype, (result.dtype, t.dtype)
        assert result.shape == tuple(t.shape), (result.shape, t.shape)
    return results


def ours_tiled(op: Op, operands: Sequence[Operand], attribute: Attribute | None,
               outputs: Sequence[TensorType], tiles: Sequence[Region]) -> list[np.ndarray]:
    """Outputs assembled tile by tile, each tile computed from its input windows only."""
    whole = _args(op, operands, attribute, outputs)
    results = [np.zeros(t.shape, dtype=t.dtype.numpy_dtype) for t in outputs]
    covered = np.zeros(outputs[0].shape, dtype=np.int32)
    for region in tiles:
        windows = input_window(whole, region)
        inputs = [np.ascontiguousarray(v[tuple(slice(a, b) for a, b in w)])
                  for v, w in zip(whole.inputs, windows)]
        args = KernelArgs(op, whole.attribute, inputs, whole.input_types, whole.output_types,
                          name=op.name, out_region=tuple(region),
                          input_offsets=[tuple(a for a, _ in w) for w in windows])
        tile_out = run_kernel(args)
        index = tuple(slice(a, b) for a, b in region)
        for result, tile in zip(results, tile_out):
            assert tile.shape == tuple(b - a for a, b in region), (tile.shape, region)
            result[index] = tile
        covered[index] += 1
    assert np.all(covered == 1), "tiles must cover the output exactly once"
    return results


def random_tiles(shape: Sequence[int], rng: np.random.Generator, max_cuts: int = 3,
                 whole: Sequence[int] = ()) -> list[Region]:
    """A random grid of tiles covering ``shape`` (axes in ``whole`` are not cut)."""
    edges = []
    for d, size in enumerate(shape):
        cuts = set()
        if d not in whole and size > 1:
            cuts = set(rng.integers(1, size, size=int(rng.integers(0, max_cuts + 1))).tolist())
        edges.append([0, *sorted(cuts), size])
    grid = [list(zip(e[:-1], e[1:])) for e in edges]
    tiles: list[Region] = [()]
    for axis in grid:
        tiles = [t + (r,) for t in tiles for r in axis]
    return tiles


def random_ints(rng: np.random.Generator, dtype: DType, shape: Sequence[int],
                edge_fraction: float = 0.1, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    """Uniform integers of ``dtype`` with its min/max (and 0, -1) mixed in."""
    tmin, tmax = dtype.int_range
    lo = tmin if lo is None else lo
    hi = tmax if hi is None else hi
    values = rng.integers(lo, hi + 1, size=tuple(shape), dtype=np.int64)
    edges = np.array([v for v in (tmin, tmax, 0, -1) if lo <= v <= hi] or [lo], dtype=np.int64)
    mask = rng.random(values.shape) < edge_fraction
    values[mask] = rng.choice(edges, size=int(mask.sum()))
    return values.astype(dtype.numpy_dtype)


def random_floats(rng: np.random.Generator, dtype: DType, shape: Sequence[int],
                  scale: float = 1.0, zero_fraction: float = 0.05) -> np.ndarray:
    """Normal(0, scale) values rounded to ``dtype``, with some exact zeros of either sign."""
    values = rng.standard_normal(tuple(shape)) * scale
    mask = rng.random(values.shape) < zero_fraction
    values[mask] = np.where(rng.random(int(mask.sum())) < 0.5, 0.0, -0.0)
    return values.astype(np.float32).astype(dtype.numpy_dtype)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Exact equality of storage bits (NaN payloads included)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


__all__ = ["Operand", "OracleError", "operand", "oracle", "oracle_fp64", "ours", "ours_tiled",
           "random_floats", "random_ints", "random_tiles", "run_op_cli", "same_bits"]
