"""Graphs prepared for the reference executor, remembered while they stay unchanged.

``npu_sim.execute(graph, inputs)`` makes a fresh Session per call, and a Session
starts with work that depends only on the graph: validation, the variables it
declares, block plans and bound kernels (:class:`~npu_sim.reference.executor.CompiledGraph`).
:func:`prepare` does that work once per graph and hands the result to every later
Session of the same graph, as long as the graph is unchanged.

"Unchanged" is checked on every call against a key of everything the executor
reads: the regions, blocks and operators (by identity, with their names, operand
lists and attributes), and every tensor's name, type, flags and data (identity,
dtype, shape and a CRC of its bytes, so an in-place edit of a constant counts).
The cache keeps the objects the key names alive (identities cannot be reused),
but not the graph itself: an entry is dropped when its graph is garbage.
"""

from __future__ import annotations

import weakref
import zlib
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from npu_sim.errors import GraphValidationError
from npu_sim.reference.executor import CompiledGraph, describe_type
from npu_sim.tosa.ir import Block, Graph, TensorType, assignments


def graph_variables(graph: Graph) -> dict[str, TensorType]:
    """Every variable a graph declares (name -> type), in order of appearance."""
    found: dict[str, TensorType] = {}
    for block in graph.blocks():
        for tensor in block.tensors.values():
            if not tensor.variable:
                continue
            key = tensor.variable_key
            if key in found and found[key] != tensor.type:
                raise GraphValidationError(
                    f"variable {key!r} is {describe_type(tensor.type)} in block {block.name!r} "
                    f"but {describe_type(found[key])} elsewhere")
            found.setdefault(key, tensor.type)
    return found


@dataclass
class PreparedGraph:
    """What every Session of one (unchanged) graph shares."""

    compiled: CompiledGraph
    variable_types: dict[str, TensorType]
    #: whether :func:`npu_sim.tosa.validation.validate` has passed on the graph
    validated: bool
    key: tuple[object, ...]
    #: the objects ``key`` names by identity, kept alive so no identity is reused
    referents: list[object]


_PREPARED: dict[int, PreparedGraph] = {}


def prepare(graph: Graph, *, validate: bool) -> PreparedGraph:
    """The prepared form of ``graph``; ``validate`` validates it first (once per graph state).

    Raises what validation and :func:`graph_variables` raise, every time (failures are
    not remembered).
    """
    key, referents = graph_key(graph)
    entry = _PREPARED.get(id(graph))
    if entry is not None and entry.key == key:
        if validate and not entry.validated:
            _validate(graph)
            entry.validated = True
        return entry
    if validate:
        _validate(graph)
    entry = PreparedGraph(CompiledGraph(), graph_variables(graph), validate, key, referents)
    if id(graph) not in _PREPARED:
        weakref.finalize(graph, _PREPARED.pop, id(graph), None)
    _PREPARED[id(graph)] = entry
    return entry


def _validate(graph: Graph) -> None:
    from npu_sim.tosa.validation import validate

    validate(graph)


def graph_key(graph: Graph) -> tuple[tuple[object, ...], list[object]]:
    """(key, referents): equal keys of one graph object mean the executor would see the same
    graph; ``referents`` are the objects the key names by identity."""
    key: list[object] = [graph.version]
    referents: list[object] = []
    for region in graph.regions:
        key.append((id(region), region.name, len(region.blocks)))
        referents.append(region)
        for block in region.blocks:
            _block_key(block, key, referents)
    return tuple(key), referents


_INPUTS, _OUTPUTS = attrgetter("inputs"), attrgetter("outputs")
_DATA, _SHAPE, _DTYPE, _BUFFER = (attrgetter(n) for n in ("data", "shape", "dtype", "data"))


def _block_key(block: Block, key: list[object], referents: list[object]) -> None:
    # map() over attrgetters keeps the per-object work in C: this runs on every execute()
    operators = block.operators
    tensors = list(block.tensors.values())
    data = list(map(_DATA, tensors))
    constants = [d for d in data if d is not None]
    # (fields of tensors and operators change only by assignment, which they count)
    key += [(id(block), block.name, tuple(block.inputs), tuple(block.outputs)),
            tuple(map(id, operators)), tuple(map(assignments, operators)), tuple(map(tuple, map(_INPUTS, operators))),
            tuple(map(tuple, map(_OUTPUTS, operators))), tuple(block.tensors), tuple(map(id, tensors)),
            tuple(map(assignments, tensors)), tuple(map(id, data)), _data_key(constants)]
    referents.append(block)
    referents += operators
    referents += tensors
    referents += constants


def _data_key(constants: list[np.ndarray]) -> tuple[object, ...]:
    """dtypes, shapes and CRCs of the bytes of constant data (an in-place edit changes a CRC);
    read-only arrays (the loader's) cannot be edited in place, so their identity suffices."""
    try:
        return (tuple(map(_DTYPE, constants)), tuple(map(_SHAPE, constants)),
                tuple([zlib.crc32(d.data) if d.flags.writeable else None for d in constants]))
    except (AttributeError, TypeError, ValueError, BufferError):  # not C-contiguous arrays
        arrays = [np.asarray(d) for d in constants]
        raw = [np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in arrays]
        return (tuple(a.dtype for a in arrays), tuple(a.shape for a in arrays),
                tuple(zlib.crc32(r.data) for r in raw))
