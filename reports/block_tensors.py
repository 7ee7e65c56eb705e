"""Block tensors in the run summary (``block_tensors``) and the plan statistics.

A block tensor (seed 002, :mod:`scheduler.memory.block_tensors`) is stored as fixed-size
blocks in the TCM's holes, listed by a pointer table in the variable SRAM. The summary gives
their count, their blocks and their tables' bytes; the plan statistics also each tensor's
table and block offsets.
"""

from __future__ import annotations

from typing import Any

from npu_sim.program import Program


def block_tensor_totals(program: Program | None) -> dict[str, int]:
    """``count`` (block tensors), ``blocks`` and ``pointer_table_bytes`` of the plan."""
    tensors = program.block_tensors if program is not None else ()
    return {"count": len(tensors), "blocks": sum(len(t.blocks) for t in tensors),
            "pointer_table_bytes": sum(t.table_bytes for t in tensors)}


def plan_block_tensors(program: Program) -> dict[str, Any]:
    """:func:`block_tensor_totals` and, per tensor, its size, block size, pointer table (memory,
    offset, bytes) and block offsets."""
    return {**block_tensor_totals(program), "tensors": [
        {"name": t.name, "size_bytes": t.size_bytes, "block_bytes": t.block_bytes,
         "pointer_table": {"memory": t.table_memory.value, "offset_bytes": t.table_offset_bytes,
                           "size_bytes": t.table_bytes},
         "memory": t.memory.value, "block_offsets": list(t.blocks)}
        for t in program.block_tensors]}
