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

from npu_sim.hw.config import HwConfig
from scheduler.ir.npu_ops import LoweredGraph, OpKind
from scheduler.passes.constant_merging import renamed_step
from scheduler.passes.ordering import operation_timing
from scheduler.passes.weight_streams import copyable_constant

#: Readers of a shared constant further apart than this many operations load it again. Each
#: load costs a DMA's setup and the bytes again, and nearer readers keep the chunk: measured on
#: the unrolled GRU and LSTM (one time step is 20-40 operations), reloading after 32 operations
#: took the GRU's peak on ethos-u85-256 from 13.2 to 7.0 KB for 5% more cycles, where reloading
#: after every second operation (the pool's prefetch) gave 5.9 KB for 10%, and cost some models
#: TCM (their chunks' loads then met other operations' weights).
RELOAD_AFTER_OPERATIONS = 32

#: Readers further apart than this many times the constant's load (the DDR's latency and its bytes
#: at the DDR's bandwidth), by the operations' estimated cycles between them, load it again too: a
#: CNN's few long operations (ResNet-50 reads one 2 KB multiplier vector in operations 17 to 74,
#: 21 M cycles on the U85, held through its peak) where 32 operations are most of the network.
RELOAD_AFTER_LOAD_MULTIPLE = 100


def reload_distant_constants(lowered: LoweredGraph, item_max_bytes: int,
                             near_operations: int = RELOAD_AFTER_OPERATIONS, hw: HwConfig | None = None) -> int:
    """Give each run of main-block readers of a shared constant (of at most ``item_max_bytes``)
    after the first a copy of its own; runs break where a reader comes more than
    ``near_operations`` operations after the previous one, or (given ``hw``) more than
    :data:`RELOAD_AFTER_LOAD_MULTIPLE` loads of it later by the operations' estimated cycles.
    The number of copies made."""
    ops = lowered.main.ops
    elapsed = _elapsed_cycles(lowered, hw) if hw is not None else None
    readers = _compute_readers(lowered)
    renames: dict[int, dict[str, str]] = {}
    copies = 0
    for key in sorted(readers):
        indices = readers[key]
        if len(indices) < 2 or not copyable_constant(lowered, key, item_max_bytes):
            continue
        far = _far_cycles(lowered, key, hw) if hw is not None else 0.0
        runs = _runs(indices, near_operations, elapsed, far)
        for run in range(1, max(runs) + 1):
            copy = f"{key}@reload{run}"
            lowered.values[copy] = dataclasses.replace(lowered.values[key], key=copy)
            copies += 1
        for index, run in zip(indices, runs):
            if run:
                renames.setdefault(index, {})[key] = f"{key}@reload{run}"
    for index, renamed in renames.items():
        op = ops[index]
        op.steps = tuple(renamed_step(step, renamed) for step in op.steps)
    return copies


def _compute_readers(lowered: LoweredGraph) -> dict[str, list[int]]:
    """Value key -> the main-block compute operations reading it, in order."""
    readers: dict[str, list[int]] = {}
    for i, op in enumerate(lowered.main.ops):
        if op.kind is OpKind.COMPUTE:
            for key in {o for step in op.steps for o in step.operands if isinstance(o, str)}:
                readers.setdefault(key, []).append(i)
    return readers


def _runs(indices: list[int], near_operations: int, elapsed: list[float] | None, far: float) -> list[int]:
    """The run each reader (operation index) belongs to: a new one where it comes more than
    ``near_operations`` operations, or ``far`` estimated cycles, after the previous reader."""
    runs = [0]
    for previous, index in zip(indices, indices[1:]):
        apart = index - previous > near_operations or \
            (elapsed is not None and elapsed[index] - elapsed[previous + 1] > far)
        runs.append(runs[-1] + apart)
    return runs


def _elapsed_cycles(lowered: LoweredGraph, hw: HwConfig) -> list[float]:
    """The main block's operations' estimated cycles before each operation (a prefix sum)."""
    out = [0.0]
    for op in lowered.main.ops:
        out.append(out[-1] + operation_timing(op, lowered.values, hw)[0])
    return out


def _far_cycles(lowered: LoweredGraph, key: str, hw: HwConfig) -> float:
    """Cycles between two readers of constant ``key`` beyond which it is loaded again."""
    load = hw.ddr.read_latency_cycles + lowered.values[key].size_bytes / hw.ddr.bandwidth_bytes_per_cycle
    return RELOAD_AFTER_LOAD_MULTIPLE * load
