"""Weight streams: each matrix product reads weights and per-channel parameters of its own.

Where the NPU keeps no reused constant (``tcm.keep_reused_constants`` false) and constants
stream from their home (``tcm.constant_stream_slack_fraction``, one invocation), Vela gives
every operation its weights as a constant of its own (ethosu/vela/lstm.py: one FullyConnected
per gate and time step) and encodes them, with each output channel's bias and scale, into one
stream the operation reads at its every use (regor's weight encoder). Here every main-block
operation with a matrix product whose small weights or parameters other operations share too
(an unrolled LSTM's gates at each step) gets private copies of them: the same bytes under keys
of its own. The streamed constant pool (:mod:`scheduler.memory.fixed_placements`) then lays an
operation's copies out together and loads them with one DMA before it (dead after it), rather
than one DMA per tensor, each rounded to whole bursts of the constants' memory.

Only constants the pool takes are copied (up to ``item_max_bytes``); larger weights keep
streaming in output-channel stripes through the tiler's buffers.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from npu_sim.hw.compute_units.mac_array import MAC_OPS
from npu_sim.tosa.ops import Op
from scheduler.ir.npu_ops import LoweredGraph, NpuOp, OpKind, ValueKind
from scheduler.passes.constant_merging import renamed_step


def weights_and_parameters(op: NpuOp) -> tuple[set[str], set[str]]:
    """The weights of ``op``'s MAC steps and its per-channel parameters (operands 1 and 2 of
    a MAC step or a per-channel RESCALE with more than one element)."""
    weights: set[str] = set()
    parameters: set[str] = set()
    for step in op.steps:
        if step.op in MAC_OPS and len(step.operands) > 1 and isinstance(step.operands[1], str):
            weights.add(step.operands[1])
        if step.op in MAC_OPS or step.op is Op.RESCALE and bool(step.attribute.per_channel):
            parameters |= {operand for j, operand in enumerate(step.operands[1:3], start=1)
                           if isinstance(operand, str) and step.input_types[j].element_count > 1}
    return weights, parameters


def private_weight_streams(lowered: LoweredGraph, item_max_bytes: int) -> int:
    """Give each main-block MAC operation private copies of the shared constants among its
    weights and per-channel parameters of at most ``item_max_bytes``; the number of copies made."""
    streams = {i: _stream_keys(op) for i, op in enumerate(lowered.main.ops) if op.kind is OpKind.COMPUTE}
    readers = Counter(key for keys in streams.values() for key in keys)
    copies = 0
    for i, keys in streams.items():
        shared = {key for key in keys if readers[key] > 1 and copyable_constant(lowered, key, item_max_bytes)}
        if not shared:
            continue
        op = lowered.main.ops[i]
        renamed = {key: f"{key}@{op.name}" for key in sorted(shared)}
        for key, copy in renamed.items():
            lowered.values[copy] = dataclasses.replace(lowered.values[key], key=copy)
        op.steps = tuple(renamed_step(step, renamed) for step in op.steps)
        copies += len(renamed)
    return copies


def _stream_keys(op: NpuOp) -> set[str]:
    """The constants ``op`` would stream as its weight stream (none without a MAC step)."""
    weights, parameters = weights_and_parameters(op)
    if not weights or op.weights_in_place:   # (in place: the stream is read where it lives)
        return set()
    return weights | parameters


def copyable_constant(lowered: LoweredGraph, key: str, item_max_bytes: int) -> bool:
    """True for a constant the pool takes (at most ``item_max_bytes``) that is no graph output:
    a reader may have a copy of its own."""
    value = lowered.values[key]
    return value.kind is ValueKind.CONSTANT and 0 < value.size_bytes <= item_max_bytes \
        and key not in lowered.output_keys
