"""Constant reloads: a small constant read by distant operations is loaded again for each.

Where the NPU keeps no reused constant (``tcm.keep_reused_constants`` false: every operation
streams its constants from their home, as Vela's schedules do) and constants stream
(``tcm.constant_stream_slack_fraction``, one invocation), the streamed constant pool
(:mod:`scheduler.memory.fixed_placements`) loads each of its entries once and keeps it in the
TCM from its first reader to its last. A bias or a multiplier that constant merging made one
value for all the time steps of an unrolled GRU then stays in the TCM for the whole network
(twenty-six such 304-byte chunks held 7.8 KB of the U85's peak). Here, after the operations are
in their final order, each run of readers of such a constant (each at most
:data:`RELOAD_AFTER_OPERATIONS` operations after the one before) gets a copy of its own after
the first: the same bytes under a key of their own, loaded before the run and dead after it.
The DDR reads the bytes once per run, as Vela reads them once per operation.
"""

from __future__ import annotations

import dataclasses

from scheduler.ir.npu_ops import LoweredGraph, OpKind
from scheduler.passes.constant_merging import renamed_step
from scheduler.passes.weight_streams import copyable_constant

#: Readers of a shared constant further apart than this many operations load it again. Each
#: load costs a DMA's setup and the bytes again, and nearer readers keep the chunk: measured on
#: the unrolled GRU and LSTM (one time step is 20-40 operations), reloading after 32 operations
#: took the GRU's peak on ethos-u85-256 from 13.2 to 7.0 KB for 5% more cycles, where reloading
#: after every second operation (the pool's prefetch) gave 5.9 KB for 10%, and cost some models
#: TCM (their chunks' loads then met other operations' weights).
RELOAD_AFTER_OPERATIONS = 32


def reload_distant_constants(lowered: LoweredGraph, item_max_bytes: int,
                             near_operations: int = RELOAD_AFTER_OPERATIONS) -> int:
    """Give each run of main-block readers of a shared constant (of at most ``item_max_bytes``)
    after the first a copy of its own; runs break where a reader comes more than
    ``near_operations`` operations after the previous one. The number of copies made."""
    ops = lowered.main.ops
    readers: dict[str, list[int]] = {}
    for i, op in enumerate(ops):
        if op.kind is not OpKind.COMPUTE:
            continue
        for key in {o for step in op.steps for o in step.operands if isinstance(o, str)}:
            readers.setdefault(key, []).append(i)
    renames: dict[int, dict[str, str]] = {}
    copies = 0
    for key in sorted(readers):
        indices = readers[key]
        if len(indices) < 2 or not copyable_constant(lowered, key, item_max_bytes):
            continue
        run = 0
        for previous, index in zip(indices, indices[1:]):
            if index - previous > near_operations:
                run += 1
                copy = f"{key}@reload{run}"
                lowered.values[copy] = dataclasses.replace(lowered.values[key], key=copy)
                copies += 1
            if run:
                renames.setdefault(index, {})[key] = f"{key}@reload{run}"
    for index, renamed in renames.items():
        op = ops[index]
        op.steps = tuple(renamed_step(step, renamed) for step in op.steps)
    return copies

