"""Unsigned graph inputs and outputs: ``uint8`` (or ``uint16``) data at the graph's edge.

TOSA 1.0 has no unsigned types: a model whose inputs or outputs are unsigned (a camera model
exported with ``uint8`` inputs and outputs) holds them in the signed type of the same width,
and a RESCALE with ``input_unsigned`` reads them (``output_unsigned`` writes them) as unsigned.
Arm's converter writes such a model's boundary tensors as ``tensor<...xui8>``; the MLIR reader
keeps them in INT8 storage and records their names in :attr:`Graph.unsigned_io`. A user gives
and gets them as unsigned arrays, the same bits: an input ``uint8`` array is viewed as the
``int8`` storage (the storage type itself is accepted too), an output is viewed back as
``uint8``.

An unsigned tensor anywhere else than a RESCALE's data operand with the matching flag (or an
IDENTITY between two such) would be read as signed by every other operator: it is refused. A
graph saved as a .tosa flatbuffer or JSON keeps the RESCALEs' flags but not the unsigned edges
(TOSA has no unsigned type): read back, they are int8 storage.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from npu_sim.errors import TosaFormatError
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Graph, Operator
from npu_sim.tosa.ops import Op

#: the storage dtype of an unsigned boundary -> the numpy dtype a user sees
UNSIGNED_VIEWS: dict[DType, np.dtype] = {DType.INT8: np.dtype(np.uint8), DType.INT16: np.dtype(np.uint16)}


def unsigned_boundaries(graph: Graph, unsigned: set[str], source: str) -> frozenset[str]:
    """The main block's inputs and outputs among the ``unsigned`` tensors; a
    :class:`TosaFormatError` for an unsigned tensor an operator would read or write as signed."""
    if not unsigned:
        return frozenset()
    for block in graph.blocks():
        for op in block.operators:
            _check_operator(op, unsigned, source)
        if block is not graph.main:
            edges = unsigned & {*block.inputs, *block.outputs}
            if edges:
                raise TosaFormatError(f"{source}: unsigned tensor {sorted(edges)[0]!r} at the edge of block "
                                      f"{block.name!r}: only the graph's own inputs and outputs may be unsigned")
    return frozenset(unsigned & {*graph.main.inputs, *graph.main.outputs})


def _check_operator(op: Operator, unsigned: set[str], source: str) -> None:
    """``op`` reads and writes unsigned tensors only where TOSA says how (RESCALE's flags)."""
    if op.op is Op.IDENTITY and (op.inputs[0] in unsigned) == (op.outputs[0] in unsigned):
        return
    for index, name in enumerate(op.inputs):
        if name in unsigned and not (op.op is Op.RESCALE and index == 0 and op.attribute.input_unsigned):
            raise TosaFormatError(f"{source}: {op.name} reads the unsigned tensor {name!r} as signed "
                                  "(TOSA 1.0 reads unsigned data with a RESCALE's input_unsigned only)")
    for name in op.outputs:
        if name in unsigned and not (op.op is Op.RESCALE and op.attribute.output_unsigned):
            raise TosaFormatError(f"{source}: {op.name} writes the unsigned tensor {name!r} as signed "
                                  "(TOSA 1.0 writes unsigned data with a RESCALE's output_unsigned only)")


def as_storage(array: np.ndarray, storage: DType) -> np.ndarray:
    """An unsigned input array viewed as its signed storage (other arrays as they are)."""
    view = UNSIGNED_VIEWS.get(storage)
    return array.view(storage.numpy_dtype) if view is not None and array.dtype == view else array


def as_unsigned_outputs(graph: Graph, outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``outputs`` with each unsigned one viewed as the unsigned dtype a user expects."""
    result = dict(outputs)
    for name in graph.unsigned_io & set(result):
        value = np.asarray(result[name])
        view = UNSIGNED_VIEWS.get(graph.output_types[name].dtype)
        if view is not None and value.dtype.itemsize == view.itemsize and value.dtype != view:
            result[name] = value.view(view)
    return result
