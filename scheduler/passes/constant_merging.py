"""Constant merging: constants of the same type and bytes become one value.

Converters and folding leave copies of one constant behind: an unrolled Keras LSTM reshapes its
kernel for every time step (49 copies of a 16 KiB recurrent kernel in a 49-step LSTM(64), each
folded RESHAPE a constant of its own) and repeats its biases, multipliers and shifts at every
step. Held apart they fill the constant pool many times over (that LSTM's resident pool
overflowed its 384 KiB, so its small constants were loaded from the DDR at every step of every
invocation) and stage the same bytes again and again. Merged, they are one buffer, loaded once,
that every reader shares. Where the hardware streams weights at every use
(``tcm.keep_reused_constants`` false), a shared weight still streams at each of its uses
(:mod:`scheduler.memory.fixed_placements`).

Merged: small constants (the constant pool's entries: sharing only saves pool bytes), and larger
ones that folding made (copies of one tensor). Larger constants of the graph that happen to hold
the same bytes (two layers initialised alike) stay apart: shared, they would be staged into the
TCM once and kept from the first reader to the last, however far apart. Graph outputs keep
their own value.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable

import numpy as np

from scheduler.ir.npu_ops import LoweredBlock, LoweredGraph, NpuOp, Step, Value, ValueKind


def merge_identical_constants(lowered: LoweredGraph, small_bytes: int, folded: set[str]) -> int:
    """Make every reader of a constant equal to an earlier one (same dtype, shape and bytes) read
    that one instead, and drop the copy, for constants of at most ``small_bytes`` and those in
    ``folded`` (made by constant folding: such a copy may also merge into a larger graph constant);
    returns the number of constants merged away."""
    by_type: dict[tuple[object, ...], list[str]] = {}   # only constants sharing a type can be equal
    for key, value in lowered.values.items():
        if value.kind is ValueKind.CONSTANT and value.data is not None and key not in lowered.output_keys:
            by_type.setdefault((value.type.dtype, tuple(value.type.shape)), []).append(key)

    def mergeable(key: str) -> bool:   # (the others are only kept, for mergeable ones to merge into)
        return lowered.values[key].size_bytes <= small_bytes or key in folded

    merged: dict[str, str] = {}
    for keys in by_type.values():
        if len(keys) > 1 and any(mergeable(k) for k in keys[1:]):
            merged.update(_merged_among(lowered, keys, mergeable))
    if merged:
        _rename(lowered.main, merged)
        for key in merged:
            del lowered.values[key]
    return len(merged)


def _merged_among(lowered: LoweredGraph, keys: list[str], mergeable: Callable[[str], bool]) -> dict[str, str]:
    """Of constants ``keys`` (one type, in graph order), each ``mergeable`` one equal to an
    earlier one -> that one."""
    kept: dict[bytes, list[str]] = {}
    merged: dict[str, str] = {}
    for key in keys:
        value = lowered.values[key]
        assert value.data is not None
        digest = _digest(value.data)
        same = next((k for k in kept.get(digest, []) if _equal(lowered.values[k], value)), None) \
            if mergeable(key) else None
        if same is None:
            kept.setdefault(digest, []).append(key)
        else:
            merged[key] = same
    return merged


def _digest(data: np.ndarray) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(data).tobytes(), digest_size=16).digest()


def _equal(a: Value, b: Value) -> bool:
    assert a.data is not None and b.data is not None
    return bool(np.array_equal(a.data, b.data)) and a.data.dtype == b.data.dtype


def _rename(block: LoweredBlock, merged: dict[str, str]) -> None:
    """Every reference to a merged constant in ``block`` and its nested blocks names the one kept."""
    block.inputs = [merged.get(k, k) for k in block.inputs]
    block.outputs = [merged.get(k, k) for k in block.outputs]
    for op in block.ops:
        _rename_op(op, merged)
        for sub in op.blocks:
            _rename(sub, merged)


def _rename_op(op: NpuOp, merged: dict[str, str]) -> None:
    if any(isinstance(o, str) and o in merged for step in op.steps for o in step.operands):
        op.steps = tuple(renamed_step(step, merged) for step in op.steps)
    if any(k in merged for k in op.sources):
        op.sources = tuple(merged.get(k, k) for k in op.sources)


def renamed_step(step: Step, renamed: dict[str, str]) -> Step:
    """``step`` reading ``renamed[key]`` wherever it read ``key`` (itself if nothing changes)."""
    operands = tuple(renamed.get(o, o) if isinstance(o, str) else o for o in step.operands)
    return step if operands == step.operands else dataclasses.replace(step, operands=operands)
