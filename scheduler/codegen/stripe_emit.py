"""Emission of a striped chain (:mod:`scheduler.passes.stripes`): its operations' tiles stripe by
stripe, with the halo copies of its rolling buffers.

Stripe ``s`` first moves each rolling buffer's halo (the rows its readers still need) to the
buffer's top, in chunks whose source and destination do not overlap (a TCM to TCM copy: the
vector unit's IDENTITY), then emits each operation's tile of the stripe in block order. An
operation addresses a rolling value through a :class:`~scheduler.memory.buffers.Placement`
shifted back by the rows the buffer has let go: a window of rows ``[a, b)`` of the value is
then rows ``[a - base, b - base)`` of the buffer, a plain strided view. Dependencies come, as
everywhere, from the bytes each command touches (:mod:`scheduler.codegen.deps`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from npu_sim.tosa.ir import TensorType
from scheduler.codegen.emit import Emitter
from scheduler.codegen.stream import ACommand
from scheduler.ir.npu_ops import NpuOp
from scheduler.memory.buffers import Placement
from scheduler.passes.stripes import H, RollingBuffer, StripedChain, halo_chunks
from scheduler.passes.tiling import Tiler


def emit_chain(chain: StripedChain, ops: Sequence[NpuOp], emitter: Emitter, tiler: Tiler,
               place: Callable[[str], Placement], records: dict[int, int],
               budget_bytes: int, ddr_home: Callable[[str], bool] | None = None
               ) -> tuple[list[ACommand], dict[int, list[ACommand]]]:
    """The chain's commands in stream order, and each operation's own (by block index).

    ``place(key)``: where each value lives (a rolling value: its buffer, from its first row);
    ``records[i]``: the OpRecord index of operation ``i``; ``ddr_home``: see
    :meth:`~scheduler.codegen.emit.Emitter.operation`."""
    bases = {key: 0 for key in chain.rolling}
    homes = {key: place(key) for key in chain.rolling}
    producers = {ops[i].outputs[0]: i for i in chain.ops}

    shifted: dict[tuple[str, int], Placement] = {}   # (a Placement's window cache serves all tiles of a stripe)

    def placed(key: str) -> Placement:
        buffer = chain.rolling.get(key)
        if buffer is None:
            return place(key)
        base = bases[key]
        found = shifted.get((key, base))
        if found is None:
            home = homes[key]
            found = shifted[key, base] = Placement(home.buffer, home.offset_bytes - base * buffer.row_bytes,
                                                   home.type)
        return found

    emissions = {i: emitter.operation(ops[i], chain.plans[i], placed, records[i], ddr_home) for i in chain.ops}
    tiles = {i: 0 for i in chain.ops}
    cmds: list[ACommand] = []
    own: dict[int, list[ACommand]] = {i: [] for i in chain.ops}
    for s in range(chain.stripe_count):
        for key, buffer in chain.rolling.items():
            producer = producers[key]
            halo = _halo_copies(buffer, s, homes[key], emitter, ops[producer].name, records[producer], budget_bytes)
            cmds += halo
            own[producer] += halo
            bases[key] = buffer.bases[s]
        for i in chain.ops:
            region = chain.regions[i][s]
            if region is None:
                continue
            emission = emissions[i]
            before = len(emission.cmds)
            emission.tile(tiles[i], tiler.tiling(ops[i]).windows(region))
            tiles[i] += 1
            cmds += emission.cmds[before:]
            own[i] += emission.cmds[before:]
    return cmds, own


def _halo_copies(buffer: RollingBuffer, s: int, home: Placement, emitter: Emitter, name: str, record: int,
                 budget_bytes: int) -> list[ACommand]:
    """The copies moving ``buffer``'s halo to its top before stripe ``s``."""
    kept, shift = buffer.kept_rows(s)
    shape = tuple(home.type.shape)
    cmds: list[ACommand] = []
    for start, rows in halo_chunks(kept, shift):
        slab = TensorType(tuple(rows if d == H else n for d, n in enumerate(shape)), home.type.dtype)
        src = Placement(home.buffer, home.offset_bytes + (shift + start) * buffer.row_bytes, slab)
        dst = Placement(home.buffer, home.offset_bytes + start * buffer.row_bytes, slab)
        what = f"{name}: keep {rows} row{'s' if rows > 1 else ''} for stripe {s}"
        cmds += emitter.copy(src, dst, what, record, budget_bytes)
    return cmds
