"""Staging: graph inputs and constants that would be read more than once are first copied into TCM.

Tiles of a convolution or pooling read overlapping windows (halos), a matrix
product reads its operands once per tile of the other, and several operations
may read the same tensor (an unrolled recurrent cell reuses its weights every
step): streamed from DDR, the tensor would cross the bus more than once. A
COPY into a TCM value just before the first reader makes every reader use the
TCM copy (tensors read once, elementwise, stay streamed; small constants are
in the constant pool already). Residency treats the staged value like any
intermediate: if it does not fit, the copy is dropped and readers stream the
tensor from DDR as before (see :mod:`scheduler.codegen.compiler`). RESHAPE/IDENTITY
copies of an input that would alias it are turned into staging copies the
same way. A staging copy is split in row bands so the first tiles can start
before the whole tensor has arrived.
"""

from __future__ import annotations

import dataclasses

from npu_sim.hw.compute_units import MAC_ARRAY
from npu_sim.hw.compute_units.vector import POOL_OPS
from npu_sim.tosa.ops import Op
from scheduler.ir.npu_ops import LoweredGraph, NpuOp, OpKind, Value, ValueKind
from scheduler.memory.fixed_placements import tables_read_in_place

#: Readers whose tiles read overlapping windows of an operand (or the same window again).
#: (Every MAC operator reduces over a window of its inputs that the next output shares.)
REREADING_OPS = MAC_ARRAY.ops | POOL_OPS | {Op.RESIZE}


def _aliases(ops: list[NpuOp]) -> dict[str, list[str]]:
    """Value -> the values RESHAPE/IDENTITY copies that may alias it produce."""
    out: dict[str, list[str]] = {}
    for op in ops:
        if op.kind is OpKind.COPY and op.alias_ok:
            out.setdefault(op.sources[0], []).append(op.outputs[0])
    return out


def _readers(ops: list[NpuOp], key: str, aliases: dict[str, list[str]]) -> list:
    keys, todo = {key}, [key]
    while todo:
        for alias in aliases.get(todo.pop(), []):
            if alias not in keys:
                keys.add(alias)
                todo.append(alias)
    return [s for op in ops if op.kind is OpKind.COMPUTE for s in op.steps if keys & set(s.operands)]


def rereads(readers: list) -> bool:
    """True if the steps in ``readers`` read a tensor more than once."""
    return len(readers) > 1 or any(s.op in REREADING_OPS for s in readers)


def _wanted(value: Value, ops: list[NpuOp], aliases: dict[str, list[str]], pooled_max_bytes: int,
            on_chip: frozenset[ValueKind] = frozenset()) -> bool:
    """True for a graph input read more than once, or a constant above ``pooled_max_bytes``
    several operations read (one operation reading it loads it once by its tiles); never for
    values whose home is the TCM already (``on_chip``)."""
    if value.kind in on_chip:
        return False
    if value.kind is ValueKind.INPUT:
        return value.size_bytes > 0 and rereads(_readers(ops, value.key, aliases))
    return value.kind is ValueKind.CONSTANT and value.size_bytes > pooled_max_bytes \
        and len(_readers(ops, value.key, aliases)) > 1


def _renames_input(op: NpuOp, values: dict[str, Value]) -> bool:
    """Whether ``op`` is a renaming copy of a graph input to an intermediate (staged with the input;
    a copy into a graph output copies it there)."""
    return op.kind is OpKind.COPY and op.alias_ok and values[op.sources[0]].kind is ValueKind.INPUT \
        and values[op.outputs[0]].kind is ValueKind.INTERMEDIATE


def stage(lowered: LoweredGraph, pooled_max_bytes: int, on_chip: frozenset[ValueKind] = frozenset()) -> None:
    """Stage re-read graph inputs, and constants above ``pooled_max_bytes`` that several
    operations read (main block), unless their kind lives in the TCM or is read in place (``on_chip``:
    graph inputs there too with ``tcm.graph_inputs_in_place``)."""
    block = lowered.main
    values = lowered.values
    aliases = _aliases(block.ops)
    wanted: dict[str, bool] = dict.fromkeys(tables_read_in_place(block), False)   # (LUT tables: no copy)

    def want(key: str) -> bool:
        if key not in wanted:
            wanted[key] = _wanted(values[key], block.ops, aliases, pooled_max_bytes, on_chip)
        return wanted[key]

    staged: dict[str, str] = {}
    ops: list[NpuOp] = []
    for op in block.ops:
        if _renames_input(op, values) and want(op.sources[0]):
            op.staged = True
        if op.kind is OpKind.COMPUTE:
            for key in op.inputs:
                if key not in staged and want(key):
                    value = values[key]
                    new = f"{key}@tcm"
                    values[new] = Value(new, value.type, ValueKind.INTERMEDIATE, None, value.name)
                    staged[key] = new
                    ops.append(NpuOp(f"stage {value.name}", OpKind.COPY, sources=(key,), outputs=(new,),
                                     staged=True))
            if any(key in staged for key in op.inputs):   # (else the steps stay as they are)
                op.steps = tuple(dataclasses.replace(s, operands=tuple(
                    staged.get(o, o) if isinstance(o, str) else o for o in s.operands)) for s in op.steps)
        ops.append(op)
    block.ops = ops


def homed_inputs(lowered: LoweredGraph) -> frozenset[str]:
    """The graph inputs of the main block and the renaming copies aliasing them that no staging
    copied into the TCM: values its readers read where the input lives."""
    values = lowered.values
    aliases = _aliases([op for op in lowered.main.ops if not op.staged])
    homed: set[str] = set()
    todo = [key for key, value in values.items() if value.kind is ValueKind.INPUT]
    while todo:
        key = todo.pop()
        if key not in homed:
            homed.add(key)
            todo += aliases.get(key, [])
    return frozenset(homed)
