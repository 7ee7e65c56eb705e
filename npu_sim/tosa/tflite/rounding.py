"""LiteRT's rounding of a FULLY_CONNECTED's requantization, restored in the converted graph.

LiteRT (since TF 2.20, and ``ai-edge-litert``) requantizes the accumulators of its
integer FULLY_CONNECTED kernels with one rounding, ``(acc * m + 2^(s-1)) >> s``, where its
CONV_2D and DEPTHWISE_CONV_2D kernels (and TFLite's older reference) round twice
(gemmlowp's ``MultiplyByQuantizedMultiplier``). Arm's converter writes every one of them
as a RESCALE with ``rounding_mode = DOUBLE_ROUND``, so a converted Dense layer's output
differs from LiteRT's by one LSB wherever the two roundings part (a few elements in a
thousand). This pass finds the converted FULLY_CONNECTEDs (a CONV2D whose constant
weights are, byte for byte, the weights of a FULLY_CONNECTED of the .tflite: the
converter writes them as [out, 1, 1, in], TFLite's [out, in] layout) and gives the
RESCALE of their accumulators ``SINGLE_ROUND``: then LiteRT's outputs come out bit for
bit (checked against ``ai-edge-litert``'s builtin kernels in the test suite). The graph
stays plain TOSA: Arm's reference model runs it to the same bits.
"""

from __future__ import annotations

import numpy as np

from npu_sim.tosa.ir import Block, Graph, Operator
from npu_sim.tosa.ops import Op
from npu_sim.tosa.schema_generated import RoundingMode
from npu_sim.tosa.tflite.flatbuffer import FULLY_CONNECTED, TfliteModel

#: The accumulator types a requantizing RESCALE reads.
_ACCUMULATORS = ("INT32", "INT48")


def fully_connected_weights(model: TfliteModel) -> set[tuple[tuple[int, int], bytes]]:
    """(shape [out, in], bytes) of the constant weights of every FULLY_CONNECTED, all subgraphs."""
    found = set()
    for subgraph in range(model.subgraph_count):
        for op in model.operators(subgraph):
            if op.code != FULLY_CONNECTED or len(op.inputs) < 2 or op.inputs[1] < 0:
                continue
            data = model.tensor(op.inputs[1], subgraph).data
            if data is not None and data.ndim == 2:
                found.add(((int(data.shape[0]), int(data.shape[1])), np.ascontiguousarray(data).tobytes()))
    return found


def round_fully_connected_once(graph: Graph, model: TfliteModel) -> int:
    """Give the accumulator RESCALEs of the converted FULLY_CONNECTEDs of ``graph`` single
    rounding, as LiteRT computes them; the number of RESCALEs changed."""
    weights = fully_connected_weights(model)
    if not weights:
        return 0
    changed = 0
    for block in graph.blocks():
        readers: dict[str, list[int]] = {}
        for index, op in enumerate(block.operators):
            for name in op.inputs:
                readers.setdefault(name, []).append(index)
        producer = {name: op for op in block.operators for name in op.outputs}
        for op in block.operators:
            if op.op is not Op.CONV2D or len(op.inputs) < 2 or not op.outputs:
                continue
            shape = block.tensor(op.inputs[1]).shape
            data = _constant_through_reshapes(block, producer, op.inputs[1])
            if data is None or len(shape) != 4 or tuple(shape[1:3]) != (1, 1):
                continue
            key = ((int(shape[0]), int(shape[3])), np.ascontiguousarray(data).tobytes())
            if key not in weights:
                continue
            for index in readers.get(op.outputs[0], []):
                rescale = block.operators[index]
                if rescale.op is Op.RESCALE and rescale.inputs[0] == op.outputs[0] \
                        and block.tensor(rescale.inputs[0]).dtype.name in _ACCUMULATORS \
                        and rescale.attribute.rounding_mode != RoundingMode.SINGLE_ROUND:
                    fields = {**rescale.attribute.to_dict(), "rounding_mode": RoundingMode.SINGLE_ROUND}
                    rescale.attribute = type(rescale.attribute)(**fields)
                    changed += 1
    return changed


def _constant_through_reshapes(block: Block, producer: dict[str, Operator], name: str) -> np.ndarray | None:
    """The constant data behind ``name``, through the RESHAPEs the converter puts before a
    FULLY_CONNECTED's weights ([out, in] to [out, 1, 1, in]); None if not a constant."""
    for _ in range(8):
        tensor = block.tensors.get(name)
        if tensor is None:
            return None
        if tensor.data is not None:
            return np.asarray(tensor.data)
        op = producer.get(name)
        if op is None or op.op is not Op.RESHAPE or not op.inputs:
            return None
        name = op.inputs[0]
    return None
