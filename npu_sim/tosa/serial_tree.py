"""Map between the IR and the schema-shaped *tree* of a serialized graph.

A tree is what :mod:`npu_sim.tosa.flatbuffer_io` decodes from a ``.tosa`` file
and what :mod:`npu_sim.tosa.json_io` decodes from the JSON form: dicts and lists
following the ``tosa.fbs`` tables, enums as ints, byte vectors as ``bytes``.

``graph_from_tree`` interprets it: version check, enum and op codes, constant
data decoded to numpy, ``shapes`` entries as SHAPE tensors, attributes as the
typed attribute classes of :mod:`npu_sim.tosa.ops`, and the two variable
encodings normalized to the IR's form (see :mod:`npu_sim.tosa.ir`).
``graph_to_tree`` is its inverse, writing what tosa-tools' reference model runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from npu_sim.errors import (
    GraphValidationError,
    TosaFormatError,
    TosaVersionError,
    UnknownOperatorError,
    UnsupportedFeatureError,
)
from npu_sim.tosa import fb_schema
from npu_sim.tosa.dtype import DType, decode, encode
from npu_sim.tosa.ir import Block, BlockScale, Graph, Operator, Region, Tensor
from npu_sim.tosa.ops import Attribute, Op, attribute_class, op_from_code

Tree = dict[str, Any]

#: The TOSA major version npu-sim reads (1.0 files and the 1.1 draft of tosa-tools 2026.8).
SUPPORTED_MAJOR = 1

_VARIABLE_ATTRIBUTES = {"VariableReadAttribute": Op.VARIABLE_READ,
                        "VariableWriteAttribute": Op.VARIABLE_WRITE}


def format_version(version: tuple[int, int, int, bool]) -> str:
    """``"1.0.0"``, or ``"1.1.0d"`` for a draft (the notation tosa-tools prints)."""
    major, minor, patch, draft = version
    return f"{major}.{minor}.{patch}{'d' if draft else ''}"


# --- tree -> IR -----------------------------------------------------------------
def graph_from_tree(tree: Tree) -> Graph:
    """Interpret a decoded tree as a Graph (raises TosaFormatError and friends)."""
    version = _version(tree)
    regions = [_region(r, i) for i, r in enumerate(_list(tree, "regions", "graph"))]
    if not any(r.blocks for r in regions):
        raise TosaFormatError("the file holds no basic block (no region with blocks)")
    software = tree.get("software_version")
    software_version = ""
    if isinstance(software, dict) and software.get("_major", -1) >= 0:
        software_version = (f"{software.get('_major', -1)}.{software.get('_minor', -1)}."
                            f"{software.get('_micro', -1)}{software.get('_modifier', '')}")
    graph = Graph(regions=regions, version=version, software_version=software_version)
    _normalize_variables(graph)
    return graph


def _version(tree: Tree) -> tuple[int, int, int, bool]:
    table = tree.get("version")
    if not isinstance(table, dict):
        raise TosaFormatError("the file has no TOSA version (a required field)")
    defaults = {name: fb_schema.NONZERO_DEFAULTS[("Version", name)]
                for name in ("_major", "_minor", "_patch", "_draft")}
    major, minor, patch = (int(table.get(k, defaults[k])) for k in ("_major", "_minor", "_patch"))
    draft = bool(table.get("_draft", defaults["_draft"]))
    version = (major, minor, patch, draft)
    if major != SUPPORTED_MAJOR:
        raise TosaVersionError(f"the file declares TOSA {format_version(version)}; npu-sim reads "
                               f"TOSA {SUPPORTED_MAJOR}.x (1.0 and the 1.1 draft)")
    return version


def _list(tree: Tree, key: str, where: str) -> list:
    value = tree.get(key, [])
    if not isinstance(value, list):
        raise TosaFormatError(f"{where}: {key} must be a list")
    return value


def _region(tree: Tree, index: int) -> Region:
    name = tree.get("name", "")
    return Region(name, [_block(b, name or f"#{index}") for b in _list(tree, "blocks", "region")])


def _block(tree: Tree, region: str) -> Block:
    name = tree.get("name", "")
    where = f"block {name!r}"
    tensors: dict[str, Tensor] = {}
    for i, t in enumerate(_list(tree, "tensors", where)):
        tensor = _tensor(t, where, i)
        if tensor.name in tensors:
            raise TosaFormatError(f"{where}: two tensors are named {tensor.name!r}")
        tensors[tensor.name] = tensor
    for i, s in enumerate(_list(tree, "shapes", where)):
        tensor = _shape(s, where, i)
        if tensor.name in tensors:
            raise TosaFormatError(f"{where}: shape {tensor.name!r} has the name of another tensor")
        tensors[tensor.name] = tensor
    attributes: dict[tuple, Attribute] = {}
    operators = [_operator(o, where, i, attributes)
                 for i, o in enumerate(_list(tree, "operators", where))]
    for op in operators:  # zero-element constants carry an empty data vector
        if op.op in (Op.CONST, Op.CONST_SHAPE):
            for out in op.outputs:
                t = tensors.get(out)
                if t is not None and t.data is None and t.element_count == 0 and \
                        t.dtype.is_tosa_1_0:
                    try:
                        t.data = np.zeros(t.shape, t.dtype.numpy_dtype)
                    except ValueError as exc:   # a negative, huge or too many dimensions
                        raise TosaFormatError(f"{where}: constant {out!r} of shape {list(t.shape)} "
                                              f"cannot be built ({exc})") from None
    return Block(name, operators, tensors, list(tree.get("inputs", [])),
                 list(tree.get("outputs", [])))


_DTYPES = {int(d): d for d in DType}


def _dtype(code: int, where: Callable[[], str]) -> DType:
    dtype = _DTYPES.get(code) if type(code) is int else None
    if dtype is not None:
        return dtype
    try:
        return DType(code)
    except ValueError:
        raise TosaFormatError(f"{where()}: unknown element type code {code}") from None


# Messages name the entry: "block 'main', tensor 'x'". The readers build them only on
# errors (``where`` arguments are functions returning the text), as most files have none.
def _entry(block_where: str, kind: str, index: int, name: Any) -> str:
    prefix = f"{block_where}, {kind} #{index}".split(f", {kind}")[0]
    return f"{prefix}, {kind} {name!r}"


def _tensor(tree: Tree, block_where: str, index: int) -> Tensor:
    name = tree.get("name")
    if not name:
        raise TosaFormatError(f"{block_where}, tensor #{index} has no name")

    def where() -> str:
        return _entry(block_where, "tensor", index, name)

    get = tree.get
    if not _EXTERNAL_DATA.isdisjoint(tree) and (get("offset", 0) > 1 or get("size", 0) > 0 or
                                                get("scale_offset", 0) > 0 or get("scale_size", 0) > 0):
        raise UnsupportedFeatureError(f"{where()}: its data is stored outside the flatbuffer "
                                      "(the >2 GB 'offset'/'size' format), which npu-sim "
                                      "does not read")
    dtype = _dtype(get("type", 0), where)
    shape = tuple(get("shape", []))
    is_unranked = bool(get("is_unranked", False))
    data = None
    raw = get("data", b"")
    if raw:
        if is_unranked or any(d < 0 for d in shape):
            raise TosaFormatError(f"{where()}: constant data for a tensor of unknown shape "
                                  f"{list(shape)}")
        data = _decode(raw, dtype, shape, where)
    block_scale = None
    if get("scale_type", 0) or get("scale_data") or get("block_shape", 0):
        block_scale = BlockScale(_dtype(get("scale_type", 0), where),
                                 int(get("block_shape", 0)),
                                 bytes(get("scale_data", b"")))
    return Tensor(name, shape, dtype, data, bool(get("variable", False)),
                  get("variable_name", ""), is_unranked, block_scale)


_EXTERNAL_DATA = frozenset(("offset", "size", "scale_offset", "scale_size"))


def _decode(raw: bytes, dtype: DType, shape: tuple[int, ...],
            where: Callable[[], str]) -> np.ndarray:
    if dtype is DType.UNKNOWN:
        raise TosaFormatError(f"{where()}: constant data of element type UNKNOWN")
    if not has_numpy_storage(dtype):
        return np.frombuffer(raw, dtype=np.uint8).copy()  # 1.1-draft packed types: raw bytes
    count = math.prod(shape)
    need = dtype.nbytes(count)
    if need > len(raw):
        raise TosaFormatError(f"{where()}: {dtype.name} data of shape {list(shape)} needs "
                              f"{need} bytes, the file holds {len(raw)}")
    try:
        return decode(raw, dtype, shape)
    except TosaFormatError as exc:
        raise TosaFormatError(f"{where()}: {exc}") from None
    except (ValueError, TypeError, OverflowError, MemoryError) as exc:
        raise TosaFormatError(f"{where()}: cannot decode its data ({exc})") from None


def has_numpy_storage(dtype: DType) -> bool:
    """True for the element types the IR holds as numpy arrays of their own dtype."""
    try:
        _ = dtype.numpy_dtype
    except TosaFormatError:
        return False
    return True


def _shape(tree: Tree, block_where: str, index: int) -> Tensor:
    name = tree.get("name")
    if not name:
        raise TosaFormatError(f"{block_where}, shape #{index} has no name")
    rank = int(tree.get("rank", 0))
    raw = tree.get("data", b"")
    data = _decode(raw, DType.SHAPE, (rank,), lambda: _entry(block_where, "shape", index, name)) \
        if raw else None
    return Tensor(name=name, shape=(rank,), dtype=DType.SHAPE, data=data)


def _operator(tree: Tree, block_where: str, index: int, attributes: dict[tuple, Attribute]) -> Operator:
    """The operator ``tree``; ``attributes`` holds the attributes read so far, by
    :func:`_attribute_key` (frozen, so operators with equal ones share one)."""
    get = tree.get
    code = get("op", 0)
    try:
        op = op_from_code(code)
    except UnknownOperatorError as exc:
        raise UnknownOperatorError(f"{block_where}, operator #{index}: {exc}") from None
    inputs = list(map(str, get("inputs", [])))
    outputs = list(map(str, get("outputs", [])))
    location_table = get("location")
    location = location_table.get("text", "") if isinstance(location_table, dict) else ""
    tag = get("attribute_type", 0)
    expected = attribute_class(op)
    if not tag:
        return Operator(op, inputs, outputs, expected(), location)

    def where() -> str:
        return f"{block_where}, operator #{index} ({op.name})"

    member = fb_schema.union_member("Attribute", tag)
    if member is None:
        raise TosaFormatError(f"{where()}: unknown attribute type tag {tag}")
    if member == expected.schema_name:
        attribute_tree = get("attribute", {})
        key = _attribute_key(expected, attribute_tree)
        attribute = attributes.get(key) if key is not None else None
        if attribute is None:
            attribute = _attribute(expected, attribute_tree, where)
            if key is not None:
                attributes[key] = attribute
        return Operator(op, inputs, outputs, attribute, location)
    if op == Op.IDENTITY and member in _VARIABLE_ATTRIBUTES:
        # tosa-opt's encoding of tosa.variable_read / tosa.variable_write
        if len(inputs) != 1 or len(outputs) != 1:
            raise TosaFormatError(f"{where()}: a variable access needs one input and one output")
        target = _VARIABLE_ATTRIBUTES[member]
        if target == Op.VARIABLE_READ:
            return Operator(target, inputs, outputs, attribute_class(target)(), location)
        return Operator(target, [outputs[0], inputs[0]], [], attribute_class(target)(), location)
    raise TosaFormatError(f"{where()}: carries a {member}, expected {expected.schema_name}")


def _attribute_key(cls: type[Attribute], tree: Any) -> tuple | None:
    """``cls`` and the fields of an attribute's tree with their types (an int field holding
    True is an error, 1 is not), or None where a value is of a kind the key does not keep."""
    if type(tree) is not dict:
        return None
    key: list[object] = [cls]
    for name, value in tree.items():
        kind = type(value)
        if kind is list:
            if not all(type(v) is int for v in value):
                return None
            value = tuple(value)
        elif kind not in _KEY_TYPES:
            return None
        key += (name, kind, value)
    return tuple(key)


_KEY_TYPES = frozenset((int, bool, str, bytes))


def _attribute(cls: type[Attribute], tree: Tree, where: Callable[[], str]) -> Attribute:
    values = {}
    for name in cls.field_kinds:
        if name in tree:
            value = tree[name]
            values[name] = tuple(value) if isinstance(value, list) else value
    try:
        return cls(**values)
    except GraphValidationError as exc:
        raise TosaFormatError(f"{where()}: {exc}") from None


# --- variables ------------------------------------------------------------------
def _normalize_variables(graph: Graph) -> None:
    """Bring the spec's VARIABLE operators and flagged tensors to the IR's one form."""
    for block in graph.blocks():
        kept = []
        for op in block.operators:
            if op.op == Op.VARIABLE:
                _declare(block, op)
                continue
            if op.op == Op.VARIABLE_READ:
                if len(op.inputs) != 1 or len(op.outputs) != 1:
                    raise TosaFormatError(f"block {block.name!r}: {op.name} needs one variable "
                                          "input and one output")
                _flag(block, op.inputs[0])
            elif op.op == Op.VARIABLE_WRITE:
                op.inputs, op.outputs = _write_operands(block, op)
                _flag(block, op.inputs[0])
            kept.append(op)
        block.operators = kept
    _share_declarations(graph)


def _flag(block: Block, name: str) -> None:
    tensor = block.tensors.get(name)
    if tensor is not None and not tensor.variable:
        tensor.variable = True


def _declare(block: Block, op: Operator) -> None:
    names = [*op.outputs, *op.inputs]
    if not names:
        raise TosaFormatError(f"block {block.name!r}: a VARIABLE operator names no tensor")
    flagged = [n for n in names if n in block.tensors and block.tensors[n].variable]
    name = flagged[0] if flagged else names[0]
    if name not in block.tensors:
        raise TosaFormatError(f"block {block.name!r}: VARIABLE declares missing tensor {name!r}")
    tensor = block.tensors[name]
    tensor.variable = True
    for other in op.inputs:  # an initial value given as a constant operand
        t = block.tensors.get(other)
        if other != name and t is not None and t.data is not None and tensor.data is None:
            tensor.data = np.asarray(t.data).reshape(tensor.shape)


def _write_operands(block: Block, op: Operator) -> tuple[list[str], list[str]]:
    """VARIABLE_WRITE operands as ``[variable, value]`` with no outputs."""
    if len(op.inputs) == 1 and len(op.outputs) == 1:
        return [op.outputs[0], op.inputs[0]], []
    if len(op.inputs) == 2 and not op.outputs:
        first, second = op.inputs
        t1, t2 = block.tensors.get(first), block.tensors.get(second)
        if t2 is not None and t2.variable and not (t1 is not None and t1.variable):
            return [second, first], []
        return [first, second], []
    raise TosaFormatError(f"block {block.name!r}: {op.name} needs a variable and a value")


def _referenced_variables(block: Block) -> list[str]:
    return [op.inputs[0] for op in block.operators
            if op.op in (Op.VARIABLE_READ, Op.VARIABLE_WRITE) and op.inputs]


def _share_declarations(graph: Graph) -> None:
    """Every variable declared in main; a copy in every block that accesses it."""
    main = graph.main
    for block in graph.blocks():
        if block is not main:
            for tensor in [t for t in block.tensors.values() if t.variable]:
                _declare_in_main(main, block, tensor)
    for block in graph.blocks():
        _keep_accessed_copies(block, main)


def _declare_in_main(main: Block, block: Block, tensor: Tensor) -> None:
    """Merge ``block``'s declaration of variable ``tensor`` into the main block's."""
    declared = main.tensors.get(tensor.name)
    if declared is None:
        main.tensors[tensor.name] = _copy_tensor(tensor)
    elif not declared.variable or declared.type != tensor.type or \
            declared.variable_key != tensor.variable_key:
        raise TosaFormatError(f"block {block.name!r}: variable {tensor.name!r} does not "
                              "match the declaration of the main block")
    elif declared.data is None and tensor.data is not None:
        declared.data = tensor.data


def _keep_accessed_copies(block: Block, main: Block) -> None:
    """A block other than main holds a copy of exactly the variables it accesses."""
    used = set(_referenced_variables(block))
    if block is not main:
        for name in [n for n, t in block.tensors.items() if t.variable and n not in used]:
            del block.tensors[name]
    for name in sorted(used):
        if name not in block.tensors and name in main.tensors and main.tensors[name].variable:
            block.tensors[name] = _copy_tensor(main.tensors[name])


def _copy_tensor(tensor: Tensor) -> Tensor:
    data = None if tensor.data is None else np.array(tensor.data, copy=True)
    return Tensor(tensor.name, tensor.shape, tensor.dtype, data, tensor.variable,
                  tensor.variable_name, tensor.is_unranked, tensor.block_scale)


# --- IR -> tree -----------------------------------------------------------------
def graph_to_tree(graph: Graph) -> Tree:
    """The tree tosa-tools would write for ``graph`` (version as the graph says)."""
    major, minor, patch, draft = graph.version
    if not graph.regions or not any(r.blocks for r in graph.regions):
        raise GraphValidationError("graph has no main block: nothing to write")
    used_anywhere = {name for b in graph.blocks() for name in _referenced_variables(b)}
    main = graph.main
    return {
        "version": {"_major": int(major), "_minor": int(minor), "_patch": int(patch),
                    "_draft": bool(draft)},
        "regions": [{"name": name,
                     "blocks": [_block_tree(b, main, b is main, used_anywhere) for b in blocks]}
                    for name, blocks in _region_layout(graph)],
    }


def _region_layout(graph: Graph) -> list[tuple[str, list[Block]]]:
    """Regions to write: blocks after main in the main region move to regions of their own.

    tosa-tools 2026.8 (its reference model, tosa-opt) finds a control-flow branch by
    *region* name, so the serialization README's layout (branches as extra blocks of the
    main region) would not run. A region named like its block is found either way.
    """
    first, rest = graph.regions[0], graph.regions[1:]
    taken = {r.name for r in graph.regions}
    layout = [(first.name, first.blocks[:1])]
    for block in first.blocks[1:]:
        if block.name in taken:
            layout[0][1].append(block)
        else:
            layout.append((block.name, [block]))
            taken.add(block.name)
    return layout + [(r.name, list(r.blocks)) for r in rest]


def _block_tree(block: Block, main: Block, is_main: bool, used_anywhere: set[str]) -> Tree:
    used_here = set(_referenced_variables(block))
    tensors, shapes = [], []
    for tensor in block.tensors.values():
        if tensor.variable and tensor.name not in used_here and \
                not (is_main and tensor.name not in used_anywhere):
            # tosa-tools' reference model refuses a variable tensor that a block never
            # touches; the declaration lives on in the blocks that access it.
            continue
        if tensor.dtype is DType.SHAPE:
            shapes.append(_shape_tree(tensor, block.name))
        else:
            tensors.append(_tensor_tree(tensor, block.name))
    for name in sorted(used_here - set(block.tensors)):
        declared = main.tensors.get(name)
        if declared is not None and declared.variable:
            tensors.append(_tensor_tree(declared, block.name))
    tree: Tree = {
        "name": block.name,
        "operators": [_operator_tree(op, block.name) for op in block.operators],
        "tensors": tensors,
        "inputs": list(block.inputs),
        "outputs": list(block.outputs),
    }
    if shapes:
        tree["shapes"] = shapes
    return tree


def _data_bytes(tensor: Tensor, block: str) -> bytes:
    data = np.asarray(tensor.data)
    where = f"block {block!r}: tensor {tensor.name!r}"
    if not has_numpy_storage(tensor.dtype):
        if data.dtype != np.uint8:
            raise GraphValidationError(f"{where}: {tensor.dtype.name} data must be raw uint8 bytes")
        return data.tobytes()
    if data.size != tensor.element_count:
        raise GraphValidationError(f"{where}: data holds {data.size} element(s), the tensor "
                                   f"{list(tensor.shape)} needs {tensor.element_count}")
    return encode(data, tensor.dtype)


def _tensor_tree(tensor: Tensor, block: str) -> Tree:
    tree: Tree = {"name": tensor.name, "shape": list(tensor.shape), "type": int(tensor.dtype)}
    if tensor.data is not None:
        tree["data"] = _data_bytes(tensor, block)
    if tensor.variable:
        tree["variable"] = True
    if tensor.is_unranked:
        tree["is_unranked"] = True
    if tensor.variable:
        tree["variable_name"] = tensor.variable_name or tensor.name
    if tensor.block_scale is not None:
        tree["scale_type"] = int(tensor.block_scale.dtype)
        tree["scale_data"] = bytes(tensor.block_scale.data)
        tree["block_shape"] = int(tensor.block_scale.block_size)
    return tree


def _shape_tree(tensor: Tensor, block: str) -> Tree:
    if len(tensor.shape) != 1:
        raise GraphValidationError(f"block {block!r}: SHAPE tensor {tensor.name!r} must have "
                                   f"shape (rank,), has {list(tensor.shape)}")
    tree: Tree = {"name": tensor.name, "rank": int(tensor.shape[0])}
    if tensor.data is not None:
        tree["data"] = _data_bytes(tensor, block)
    return tree


def _operator_tree(op: Operator, block: str) -> Tree:
    attribute: Tree = {}
    if op.op == Op.VARIABLE_READ and len(op.inputs) == 1:
        op_code, tag_table = Op.IDENTITY, "VariableReadAttribute"
        inputs, outputs = op.inputs, op.outputs
    elif op.op == Op.VARIABLE_WRITE and len(op.inputs) == 2 and not op.outputs:
        op_code, tag_table = Op.IDENTITY, "VariableWriteAttribute"
        inputs, outputs = [op.inputs[1]], [op.inputs[0]]
    else:
        op_code, inputs, outputs = op.op, op.inputs, op.outputs
        tag_table = op.attribute.schema_name
        attribute = _attribute_tree(op.attribute)
    tree: Tree = {"op": int(op_code),
                  "attribute_type": fb_schema.union_tag("Attribute", tag_table),
                  "attribute": attribute,
                  "inputs": list(inputs), "outputs": list(outputs)}
    if op.location:
        tree["location"] = {"text": op.location}
    return tree


def _attribute_tree(attribute: Attribute) -> Tree:
    tree: Tree = {}
    for name, kind in attribute.field_kinds.items():
        value = getattr(attribute, name)
        if kind == "[ubyte]":
            tree[name] = bytes(value)
        elif kind == "[int32]":
            tree[name] = [int(v) for v in value]
        elif kind == "bool":
            tree[name] = bool(value)
        elif kind == "string":
            tree[name] = str(value)
        else:
            tree[name] = int(value)
    return tree
