"""TFLite's legacy nearest-neighbour resize (no align_corners, no half-pixel centres): the floor.

TFLite's RESIZE_NEAREST_NEIGHBOR with both flags false reads input position
``floor(out * in_size / out_size)`` (``tf.compat.v1.image.resize_nearest_neighbor``, an FPN's
top-down upsampling, ONNX's "asymmetric" mode). Arm's converter writes a TOSA RESIZE in NEAREST
mode with offset 0, and TOSA's nearest mode rounds ``(out * scale_d + offset) / scale_n`` to the
nearest position: a shifted image (rows 0, 1, 1, 2, 2, ... for 0, 0, 1, 1, 2, ...), up to the
whole range off. Rounding ``(out * d - n / 2) / n`` is the floor of ``out * d / n``, so this pass
lowers each such RESIZE's offset by half its scale numerator (doubling the scale first where the
numerator is odd), and its border with it (the output size is unchanged). Found by the TFLite
operator's output tensor name, the RESIZE's location. Plain TOSA: Arm's reference model runs it
to LiteRT's values.
"""

from __future__ import annotations

import numpy as np

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator, Tensor
from npu_sim.tosa.ops import Op
from npu_sim.tosa.schema_generated import ResizeMode
from npu_sim.tosa.tflite.flatbuffer import TfliteModel, operators_by_output, option

#: BuiltinOperator code of RESIZE_NEAREST_NEIGHBOR (schema.fbs); ResizeNearestNeighborOptions'
#: slots of align_corners and half_pixel_centers.
RESIZE_NEAREST_NEIGHBOR = 97
_ALIGN_CORNERS_SLOT, _HALF_PIXEL_SLOT = 0, 1
#: TOSA's largest scale numerator (ERROR_IF scale_y_n > (1 << 11)).
_MAX_SCALE_N = 1 << 11


def legacy_nearest_resizes(model: TfliteModel) -> set[str]:
    """Output tensor names of the nearest-neighbour resizes with neither flag, all subgraphs."""
    return {name for name, op in operators_by_output(model, RESIZE_NEAREST_NEIGHBOR)
            if not option(op.options, _ALIGN_CORNERS_SLOT, "bool", False)
            and not option(op.options, _HALF_PIXEL_SLOT, "bool", False)}


def floor_nearest_resizes(graph: Graph, model: TfliteModel) -> int:
    """Make each converted legacy nearest resize of ``graph`` take the floor; how many."""
    legacy = legacy_nearest_resizes(model)
    if not legacy:
        return 0
    changed = 0
    for block in graph.blocks():
        for op in list(block.operators):   # (each rewrite inserts its constants before it)
            if op.op is Op.RESIZE and op.location in legacy and op.attribute.mode == ResizeMode.NEAREST \
                    and _floor(block, op):
                changed += 1
    return changed


def _floor(block: Block, resize: Operator) -> bool:
    """Shift ``resize``'s offset and border down by half its scale numerator (False: its operands
    are not constants, or the doubled scale would pass TOSA's limit)."""
    operands = [values for name in resize.inputs[1:4] if (values := _shape_values(block, name)) is not None]
    if [len(values) for values in operands] != [4, 2, 2]:
        return False
    scale, offset, border = operands
    for axis in (0, 1):
        n, d = scale[2 * axis], scale[2 * axis + 1]
        if n % 2:   # an odd numerator: the same ratio doubled, so that n / 2 is whole
            if 2 * n > _MAX_SCALE_N:
                return False
            n, d = 2 * n, 2 * d
            scale[2 * axis], scale[2 * axis + 1] = n, d
            offset[axis], border[axis] = 2 * offset[axis], 2 * border[axis]
        offset[axis] -= n // 2
        border[axis] -= n // 2
    base = resize.outputs[0]
    names = []
    for suffix, values in (("scale", scale), ("offset", offset), ("border", border)):
        name = f"{base}_floor_{suffix}"
        block.tensors[name] = Tensor(name, (len(values),), DType.SHAPE, np.array(values, np.int64))
        block.operators.insert(block.operators.index(resize), Operator(Op.CONST_SHAPE, [], [name]))
        names.append(name)
    resize.inputs = [resize.inputs[0], *names]
    return True


def _shape_values(block: Block, name: str) -> list[int] | None:
    tensor = block.tensors.get(name)
    if tensor is None or tensor.data is None:
        return None
    return [int(v) for v in np.asarray(tensor.data).reshape(-1)]
