"""Which commands already wait for which, before the memory plan exists.

The TCM planner may put two buffers with disjoint live ranges on the same bytes;
the later buffer's first writer then waits for the earlier buffer's last access
(:mod:`scheduler.codegen.deps`). That wait costs nothing when the stream orders the two
commands anyway. :func:`implied_order` finds those orders from what does not
depend on offsets:

* data dependencies within each buffer, by the exact bytes each command reads or
  writes in it (a read waits for the last overlapping writes, a write also for the
  overlapping reads since): the dependencies :mod:`scheduler.codegen.deps` finds whatever
  the offsets (a tile that reads some channels waits only for the producer's
  tiles of those channels, as a cascade needs);
* in-order queues: a command on a compute unit or the sequencer starts after the
  previous one there is done; a DMA starts once the previous DMA of its engine has
  issued its bursts, so after what that DMA waited for, not after its data landed;
* control flow: a COND_IF/WHILE command waits for every earlier command of its list,
  its nested commands start after it, and later commands of its list wait for all
  of them (:mod:`scheduler.codegen.deps` makes control commands barriers).

Orders are transitive: each command keeps the set of commands it waits for as a
bit mask (a Python int) of the commands that end some buffer's life (the only ones the
reuse test asks about); a "done" mask is a command's waits plus itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from npu_sim.program import MemorySpace, View
from scheduler.codegen.deps import AccessTracker
from scheduler.codegen.stream import ACommand, ACompute, ACond, ADma, ALoop
from scheduler.memory.allocators import FreePairs
from scheduler.memory.buffers import BufView
from scheduler.memory.byte_ranges import ByteSet, view_byte_set
from scheduler.memory.liveness import LiveRange


@dataclass(frozen=True)
class ImpliedOrder:
    """Per buffer serial: ``first_waits``, the bit mask of the buffers whose last command its
    first command waits for (transitively); ``last_bit``, its own bit in those masks (one
    bit per command that is the last of some buffer, shared by the buffers it is the last of)."""

    first_waits: dict[int, int]
    last_bit: dict[int, int]

    def reuse_test(self) -> Callable[[int, int], bool]:
        """``free(earlier, later)``: whether buffer ``later`` may take bytes of buffer
        ``earlier`` (live before it) without a new wait, its first command already waiting
        for ``earlier``'s last one. Buffers no command touches are never free."""
        first_waits, last_bit = self.first_waits, self.last_bit

        def free(earlier: int, later: int) -> bool:
            bit = last_bit.get(earlier)
            return bit is not None and bool(first_waits.get(later, 0) >> bit & 1)

        return free

    def free_pairs(self, order: Sequence[LiveRange]) -> FreePairs:
        """:meth:`reuse_test` of (``order[j]``, ``order[i]``) for every pair: each mask's bits
        unpacked (a row per range), each buffer's bit its column (a column of zeros for a buffer
        no command touches)."""
        bits = max(self.last_bit.values(), default=-1) + 1
        width = (bits + 7) // 8
        waits = np.zeros((len(order), bits + 1), dtype=bool)   # the last column: buffers never touched
        for i, r in enumerate(order):
            mask = self.first_waits.get(r.key, 0) & ((1 << bits) - 1)   # (bits no buffer has free none)
            if mask:
                waits[i, :bits] = np.unpackbits(np.frombuffer(mask.to_bytes(width, "little"), dtype=np.uint8),
                                                count=bits, bitorder="little")
        return FreePairs(waits, np.array([self.last_bit.get(r.key, bits) for r in order], dtype=np.intp))


def _byte_set(view: BufView, cache: dict) -> ByteSet | None:
    """The exact bytes of ``view`` relative to its buffer (``cache``: by view, as tiles repeat)."""
    key = (view.offset_bytes, view.shape, view.strides_bytes, view.dtype)
    found = cache.get(key, _MISSING)
    if found is _MISSING:
        found = cache[key] = view_byte_set(View(MemorySpace.TCM, view.offset_bytes, view.shape, view.dtype,
                                                view.strides_bytes))
    return found


_MISSING = object()
#: The dependency index's page in a buffer's address space: larger than any buffer.
BUFFER_PAGE_BYTES = 1 << 62


#: A command's ``(buffer serial, bytes)`` read, those written, and the serials of both.
Touched = tuple[list[tuple[int, ByteSet]], list[tuple[int, ByteSet]], list[int]]


def _accesses(cmd: ACommand, cache: dict) -> Touched:
    """``(buffer serial, bytes)`` per view one command reads, and per view it writes (nested
    commands aside), and the serials of both; the bytes are exact (a tile of channels skips
    the other channels' bytes, so the next operation's tile of the same channels waits for it
    alone). Reads of DDR inputs and constants are left out: nothing writes them, so they order
    nothing."""
    if isinstance(cmd, ADma):
        reads, writes = ([] if _read_only(cmd.src) else [cmd.src]), [cmd.dst]
    elif isinstance(cmd, ACompute):
        # (each view once: steps read the same view several times, a repeat orders nothing more)
        reads = list(dict.fromkeys([v for step in cmd.steps for v in step.operands if isinstance(v, BufView)]))
        writes = cmd.outputs
    else:
        reads, writes = [cmd.condition], []
    read_sets, write_sets = _sets(reads, cache), _sets(writes, cache)
    return read_sets, write_sets, [serial for serial, _ in (*read_sets, *write_sets)]


def _sets(views: list[BufView], cache: dict) -> list[tuple[int, ByteSet]]:
    """``(buffer serial, bytes)`` of the views with bytes."""
    out = []
    for v in views:
        if v.buffer is not None:
            byte_set = _byte_set(v, cache)
            if byte_set is not None:
                out.append((v.buffer.serial, byte_set))
    return out


def _queue(cmd: ACommand) -> object:
    """The in-order queue that runs ``cmd``: its DMA engine, its compute unit or the sequencer."""
    if isinstance(cmd, ADma):
        return ("dma", cmd.engine)
    return cmd.unit if isinstance(cmd, ACompute) else "sequencer"


def _read_only(view: BufView) -> bool:
    b = view.buffer
    return b is not None and b.memory is MemorySpace.DDR and b.kind in ("input", "constant")


def implied_order(cmds: list[ACommand], ids: dict[int, int]) -> ImpliedOrder:
    """The orders the stream ``cmds`` has whatever the memory plan (``ids``: id(command) -> command id).

    Data dependencies come from :class:`scheduler.codegen.deps.AccessTracker`, one address space
    per buffer (keyed by its serial, bytes relative to the buffer). The masks keep only the
    commands that are the last of some buffer (a first walk finds them): what the reuse test
    asks, in a few bits per command where all commands would take quadratic memory."""
    cache: dict = {}
    touched = {cid: _accesses(cmd, cache) for cmd, cid in _walk(cmds, ids)}
    last: dict[int, int] = {}
    for cid, (_, _, serials) in touched.items():
        for serial in serials:
            last[serial] = cid
    bit_of = {cid: i for i, cid in enumerate(sorted(set(last.values())))}
    walk = _OrderWalk(ids, touched, {cid: 1 << i for cid, i in bit_of.items()})
    walk.visit(cmds, 0)
    return ImpliedOrder(walk.first_waits, {serial: bit_of[cid] for serial, cid in last.items()})


def _walk(cmds: list[ACommand], ids: dict[int, int]) -> Iterator[tuple[ACommand, int]]:
    """Every command with its id, nested ones after their control command."""
    for cmd in cmds:
        yield cmd, ids[id(cmd)]
        if isinstance(cmd, ACond):
            yield from _walk(cmd.then, ids)
            yield from _walk(cmd.orelse, ids)
        elif isinstance(cmd, ALoop):
            yield from _walk(cmd.cond, ids)
            yield from _walk(cmd.body, ids)


class _OrderWalk:
    """The walk of :func:`implied_order`: per command, a bit mask of the buffer-last commands
    done before it starts (``bits``: command id -> its bit, for the commands that have one)."""

    def __init__(self, ids: dict[int, int], touched: dict[int, Touched],
                 bits: dict[int, int]):
        self.ids, self.touched, self.bits = ids, touched, bits
        self.first_waits: dict[int, int] = {}
        # one index page per buffer: a buffer's live records are few (its tiles, each soon
        # overwritten or read whole), so one list scanned is cheaper than filing them on pages
        self.tracker: AccessTracker[int] = AccessTracker(default_page_bytes=BUFFER_PAGE_BYTES)
        self.done_of: dict[int, int] = {}            # command id -> its done mask (before nested commands)
        self.queue_after: dict[object, int] = {}     # queue -> what its next command waits for

    def visit(self, lst: list[ACommand], entry: int) -> int:
        """Visit a command list whose commands all wait for ``entry``; the done mask of all of them."""
        everything = 0
        for cmd in lst:
            cid = self.ids[id(cmd)]
            queue = _queue(cmd)
            mask = entry | self.queue_after.get(queue, 0)
            reads, writes, serials = self.touched[cid]
            for dep in self.tracker.access(cid, reads, writes):
                mask |= self.done_of[dep]
            control = isinstance(cmd, (ACond, ALoop))
            if control:
                mask |= everything   # a control command waits for every earlier command of its list
            done = self.done_of[cid] = mask | self.bits.get(cid, 0)
            for serial in serials:
                self.first_waits.setdefault(serial, mask)
            if isinstance(cmd, (ACond, ALoop)):
                # a loop body runs after its condition commands; the else branch is taken as
                # running after the then branch: only one of them runs, so they never wait
                for branch in ((cmd.then, cmd.orelse) if isinstance(cmd, ACond) else (cmd.cond, cmd.body)):
                    done |= self.visit(branch, done)
                entry |= done   # later commands of the list wait for the whole control command
            self.queue_after[queue] = mask if isinstance(cmd, ADma) else done
            everything |= done
        return everything
