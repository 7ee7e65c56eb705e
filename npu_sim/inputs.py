"""Graph inputs for the command line: ``-i NAME=FILE.npy`` / ``-i FILE.npy``, ``-n N``, random data.

Shared by ``npu-sim exec`` and ``npu-sim run``. The rules (ARCHITECTURE.md):

* ``-i NAME=FILE.npy`` binds a file to the graph input NAME; ``-i FILE.npy``
  binds files to the graph's inputs in order (the k-th positional file to the
  k-th input). Binding an input twice, naming an unknown input or giving more
  files than inputs is an error.
* Without ``-n``, each file holds exactly the input's shape and storage dtype.
  Missing inputs are an error unless a random seed is given, in which case
  they get seeded random data of the right dtype and shape (GATHER indices
  in range: :func:`index_limits`).
* With ``-n N`` (N invocations), each file has a leading axis of length N and
  invocation k uses slice k; every input must be given.

Every refusal is an :class:`~npu_sim.errors.InputError` naming the input and
what was expected. bfloat16 / float8 arrays, which ``.npy`` stores as raw
``V2``/``V1`` records, are accepted as such and reinterpreted.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from npu_sim.errors import InputError
from npu_sim.paths import check_regular_file
from npu_sim.tosa.dtype import DType, outside_storage_range
from npu_sim.tosa.ir import Graph, Operator, TensorType
from npu_sim.tosa.ops import Op
from npu_sim.tosa.unsigned_io import UNSIGNED_VIEWS, as_storage

_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class InputSpec:
    """One ``-i`` argument: a file, bound to a named input or to the next one in order."""

    path: Path
    name: str | None = None


@dataclass
class InvocationInputs:
    """Inputs of every invocation, and where each input came from (for summaries)."""

    invocations: list[dict[str, np.ndarray]]
    sources: dict[str, str]


def describe(t: TensorType) -> str:
    return f"{t.dtype.name} ({t.dtype.numpy_dtype.name}) of shape {list(t.shape)}"


def parse_input_spec(text: str, input_names: list[str]) -> InputSpec:
    """``NAME=FILE`` when NAME is one of ``input_names`` (or the text has no path
    separator before the ``=``), else a positional ``FILE``."""
    if "=" in text:
        name, _, path = text.partition("=")
        if name in input_names or ("/" not in name and not name.endswith(".npy")):
            if not path:
                raise InputError(f"-i {text!r}: no file after '='")
            return InputSpec(Path(path), name)
    return InputSpec(Path(text))


def _tosa_named(spec: InputSpec, graph: Graph) -> InputSpec:
    """``spec`` by the input's TOSA name when it gives the name of the source model (a TFLite
    signature's, :attr:`Graph.original_names`)."""
    if spec.name is None or spec.name in graph.input_types:
        return spec
    known = {original: name for name, original in graph.original_names.items() if name in graph.input_types}
    return InputSpec(spec.path, known[spec.name]) if spec.name in known else spec


def bind_input_files(graph: Graph, specs: list[str]) -> dict[str, Path]:
    """Graph input name -> file, from the ``-i`` arguments."""
    names = list(graph.input_types)
    bound: dict[str, Path] = {}
    parsed = [_tosa_named(parse_input_spec(s, names + list(graph.original_names.values())), graph)
              for s in specs]
    for spec in parsed:
        if spec.name is None:
            continue
        if spec.name not in graph.input_types:
            raise InputError(f"-i {spec.name}=...: the graph has no input {spec.name!r} "
                             f"(its inputs are {', '.join(map(repr, names)) or 'none'})")
        if spec.name in bound:
            raise InputError(f"input {spec.name!r} given twice")
        bound[spec.name] = spec.path
    positional = [spec.path for spec in parsed if spec.name is None]
    if len(positional) > len(names):
        raise InputError(f"{len(positional)} positional input file(s) for "
                         f"{len(names)} graph input(s) ({', '.join(map(repr, names))})")
    for name, path in zip(names, positional):
        if name in bound:
            raise InputError(f"input {name!r} given twice (by name and by position)")
        bound[name] = path
    return bound


def load_npy(name: str, path: Path, expected: TensorType, leading: int | None, unsigned: bool = False) -> np.ndarray:
    """Read ``path`` for input ``name``; check dtype and shape (``(leading, *shape)`` with ``-n``).
    ``unsigned``: the input is a uint8 (uint16) edge of the graph: such a file is read as its
    storage bits (see :mod:`npu_sim.tosa.unsigned_io`)."""
    want_shape = expected.shape if leading is None else (leading, *expected.shape)
    shown = UNSIGNED_VIEWS[expected.dtype].name if unsigned and expected.dtype in UNSIGNED_VIEWS \
        else expected.dtype.numpy_dtype.name
    want = f"{expected.dtype.name} ({shown}) of shape {list(want_shape)}"
    if os.path.lexists(path):   # never open a FIFO or a device (np.load would block on it)
        check_regular_file(path, f"input {name!r}: file")
    try:
        # mapped, so that a huge file of the wrong shape is refused without reading it
        array = np.load(path, allow_pickle=False, mmap_mode="r")
        if isinstance(array, np.ndarray):
            array = np.array(array)
    except FileNotFoundError:
        raise InputError(f"input {name!r}: no such file {str(path)!r}") from None
    except (OSError, ValueError, EOFError) as exc:   # EOFError: a truncated or empty file
        raise InputError(f"input {name!r}: {str(path)!r} is not a readable .npy file "
                         f"({' '.join(str(exc).split())})") from None
    if not isinstance(array, np.ndarray):
        raise InputError(f"input {name!r}: {str(path)!r} holds several arrays, expected one .npy array")
    array = as_storage(array, expected.dtype) if unsigned else _reinterpret(array, expected.dtype)
    if array.dtype != expected.dtype.numpy_dtype or tuple(array.shape) != tuple(want_shape):
        hint = "" if leading is None else f" (with -n {leading}, a leading axis of {leading})"
        raise InputError(f"input {name!r}: {str(path)!r} holds {array.dtype.name} of shape "
                         f"{list(array.shape)}, expected {want}{hint}")
    bounds = outside_storage_range(array, expected.dtype)
    if bounds is not None:
        raise InputError(f"input {name!r}: {str(path)!r} has values outside the "
                         f"{expected.dtype.name} range [{bounds[0]}, {bounds[1]}]")
    return array


def _reinterpret(array: np.ndarray, dtype: DType) -> np.ndarray:
    """``.npy`` cannot name ml_dtypes types: accept their raw records of the right width."""
    storage = dtype.numpy_dtype
    if dtype in (DType.BF16, DType.FP8E4M3, DType.FP8E5M2) and array.dtype.kind in "Vu" \
            and array.dtype.itemsize == storage.itemsize:
        return array.view(storage)
    return array


#: The most dimensions a numpy array may have.
_MOST_DIMENSIONS = 64

#: Random integers of wider types stay small, so that sums in the graph do not overflow.
_WIDE_INT_RANGE = (-(1 << 15), (1 << 15) - 1)


def random_array(t: TensorType, rng: np.random.Generator, *, index_limit: int | None = None) -> np.ndarray:
    """Seeded random data of type ``t``.

    INT4/INT8/INT16 (quantized activations) cover their full range; wider
    integers lie in [-2**15, 2**15) so that additions in the graph do not
    overflow (an ERROR in TOSA); SHAPE values in [0, 16]; floats are
    standard-normal. ``index_limit``: the data are indices, in [0, index_limit)
    (see :func:`index_limits`).
    """
    if any(d < 0 for d in t.shape) or len(t.shape) > _MOST_DIMENSIONS:
        raise InputError(f"cannot make random data of shape {list(t.shape)} (give the input as a file)")
    storage = t.dtype.numpy_dtype
    if t.dtype is DType.BOOL:
        return rng.integers(0, 2, size=t.shape).astype(np.bool_)
    if t.dtype.is_integer:
        if index_limit is not None:
            lo, hi = 0, max(index_limit - 1, 0)
        elif t.dtype is DType.SHAPE:
            lo, hi = 0, 16
        elif t.dtype.bits <= 16:
            lo, hi = t.dtype.int_range
        else:
            lo, hi = _WIDE_INT_RANGE
        return rng.integers(lo, hi, size=t.shape, dtype=np.int64, endpoint=True).astype(storage)
    if t.dtype.is_float:
        return rng.standard_normal(size=t.shape).astype(np.float32).astype(storage)
    raise InputError(f"cannot make random data of type {t.dtype.name}")


#: Operators that pass their input's values through unchanged (only moved or reshaped).
_VALUE_PRESERVING = (Op.IDENTITY, Op.RESHAPE, Op.TRANSPOSE)


def index_limits(graph: Graph) -> dict[str, int]:
    """Graph inputs that are GATHER indices (directly or through a reshape, transpose or
    identity) -> the number of rows they may index (the smallest, if several GATHERs read them).

    Random token ids must lie in range, or GATHER's REQUIRE fails: an embedding model
    could not be run with ``--random-inputs`` at all.
    """
    block = graph.main
    readers: dict[str, list[Operator]] = {}
    for op in block.operators:
        for name in op.inputs:
            readers.setdefault(name, []).append(op)
    limits: dict[str, int] = {}
    for source in block.inputs:
        if not block.tensor(source).type.dtype.is_integer:
            continue
        pending, seen = [source], {source}
        while pending:
            for op in readers.get(pending.pop(), []):
                if op.op is Op.GATHER and op.inputs[1:2] and op.inputs[1] in seen:
                    rows = block.tensor(op.inputs[0]).type.shape
                    if len(rows) == 3:
                        limits[source] = min(limits.get(source, rows[1]), rows[1])
                elif op.op in _VALUE_PRESERVING and op.inputs[0] in seen and op.outputs[0] not in seen:
                    seen.add(op.outputs[0])
                    pending.append(op.outputs[0])
    return limits


def load_inputs(graph: Graph, specs: list[str], *, invocations: int | None = None,
                random_seed: int | None = None) -> InvocationInputs:
    """The inputs of each invocation, from ``-i`` arguments, ``-n`` and ``--random-inputs``.

    ``invocations=None`` means a single invocation without the leading axis.
    """
    _check_counts(invocations, random_seed)
    types = graph.input_types
    files = bind_input_files(graph, specs)
    sources = {name: str(path) for name, path in files.items()}
    arrays = {name: load_npy(name, files[name], t, invocations, name in graph.unsigned_io)
              for name, t in types.items() if name in files}
    missing = [name for name in types if name not in arrays]
    if missing and random_seed is None:
        first = missing[0]
        leading = "" if invocations is None else f" with a leading axis of {invocations} (-n)"
        raise InputError(f"missing input {first!r}: expected {describe(types[first])}{leading} "
                         f"(give -i {first}=FILE.npy, or --random-inputs SEED)")
    if missing and random_seed is not None:
        arrays.update(_random_inputs(graph, missing, random_seed, invocations))
        sources.update({name: f"random (seed {random_seed})" for name in missing})
    if invocations is None:
        return InvocationInputs([arrays], sources)
    per = [{name: arrays[name][k] for name in types} for k in range(invocations)]
    return InvocationInputs(per, sources)


def _check_counts(invocations: int | None, random_seed: int | None) -> None:
    if invocations is not None and invocations < 1:
        raise InputError(f"-n must be at least 1, got {invocations}")
    if random_seed is not None and not 0 <= random_seed < 1 << 64:
        raise InputError(f"--random-inputs: the seed must be an integer from 0 to 2**64-1, got {random_seed}")


def _random_inputs(graph: Graph, missing: list[str], seed: int,
                   invocations: int | None) -> dict[str, np.ndarray]:
    """Seeded random data for the ``missing`` inputs: one draw per invocation (stacked along a
    leading axis with ``-n``), every input drawn in graph order, so a seed always gives the
    same data and invocation 0 of ``-n N`` is the data of a single invocation."""
    rng = np.random.default_rng(seed)
    limits = index_limits(graph)
    draws: dict[str, list[np.ndarray]] = {name: [] for name in missing}
    for _ in range(1 if invocations is None else invocations):
        for name, t in graph.input_types.items():
            value = random_array(t, rng, index_limit=limits.get(name))
            if name in draws:
                draws[name].append(value)
    if invocations is None:
        return {name: values[0] for name, values in draws.items()}
    return {name: np.stack(values) for name, values in draws.items()}


def safe_file_stem(name: str) -> str:
    """A tensor name as a file stem: characters outside ``[A-Za-z0-9_.-]`` become ``_``."""
    return _UNSAFE_CHARS.sub("_", name) or "_"


def output_file_names(names: list[str]) -> dict[str, str]:
    """Tensor name -> ``<stem>.npy``; stems that collide get ``_1``, ``_2``... suffixes."""
    used: set[str] = set()
    result = {}
    for name in names:
        stem = safe_file_stem(name)
        candidate, k = stem, 1
        while candidate.lower() in used:
            candidate, k = f"{stem}_{k}", k + 1
        used.add(candidate.lower())
        result[name] = f"{candidate}.npy"
    return result
