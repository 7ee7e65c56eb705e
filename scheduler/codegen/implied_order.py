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
bit mask (a Python int); a "done" mask is a command's waits plus itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from npu_sim.program import MemorySpace, View
from scheduler.codegen.deps import AccessTracker
from scheduler.codegen.stream import ACommand, ACompute, ACond, ADma, ALoop
from scheduler.memory.buffers import BufView
from scheduler.memory.byte_ranges import ByteSet, view_byte_set


@dataclass(frozen=True)
class ImpliedOrder:
    """Per buffer serial: ``first_waits``, the bit mask of the commands its first command
    waits for (transitively); ``last``, the id of the last command touching it."""

    first_waits: dict[int, int]
    last: dict[int, int]

    def reuse_test(self) -> Callable[[int, int], bool]:
        """``free(earlier, later)``: whether buffer ``later`` may take bytes of buffer
        ``earlier`` (live before it) without a new wait, its first command already waiting
        for ``earlier``'s last one. Buffers no command touches are never free."""
        first_waits = self.first_waits
        last_bit = {serial: 1 << cid for serial, cid in self.last.items()}

        def free(earlier: int, later: int) -> bool:
            return bool(first_waits.get(later, 0) & last_bit.get(earlier, 0))

        return free


def _byte_set(view: BufView, cache: dict) -> ByteSet | None:
    """The exact bytes of ``view`` relative to its buffer (``cache``: by view, as tiles repeat)."""
    key = (view.offset_bytes, view.shape, view.strides_bytes, view.dtype)
    found = cache.get(key, _MISSING)
    if found is _MISSING:
        found = cache[key] = view_byte_set(View(MemorySpace.TCM, view.offset_bytes, view.shape, view.dtype,
                                                view.strides_bytes))
    return found


_MISSING = object()


def _accesses(cmd: ACommand, cache: dict) -> list[tuple[int, ByteSet, bool]]:
    """``(buffer serial, bytes, write?)`` per view one command reads and writes (nested
    commands aside), reads first; the bytes are exact (a tile of channels skips the other
    channels' bytes, so the next operation's tile of the same channels waits for it alone).
    Reads of DDR inputs and constants are left out: nothing writes them, so they order nothing."""
    if isinstance(cmd, ADma):
        reads, writes = ([] if _read_only(cmd.src) else [cmd.src]), [cmd.dst]
    elif isinstance(cmd, ACompute):
        reads = [v for step in cmd.steps for v in step.operands if isinstance(v, BufView)]
        writes = cmd.outputs
    else:
        reads, writes = [cmd.condition], []
    out = []
    for views, write in ((reads, False), (writes, True)):
        for v in views:
            if v.buffer is not None:
                byte_set = _byte_set(v, cache)
                if byte_set is not None:
                    out.append((v.buffer.serial, byte_set, write))
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
    per buffer (keyed by its serial, bytes relative to the buffer)."""
    walk = _OrderWalk(ids)
    walk.visit(cmds, 0)
    return ImpliedOrder(walk.first_waits, walk.last)


class _OrderWalk:
    """The walk of :func:`implied_order`: per command, a bit mask of the commands done before it starts."""

    def __init__(self, ids: dict[int, int]):
        self.ids = ids
        self.first_waits: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.tracker: AccessTracker[int] = AccessTracker()
        self.done_of: dict[int, int] = {}            # command id -> its done mask (before nested commands)
        self.queue_after: dict[object, int] = {}     # queue -> what its next command waits for
        self.cache: dict[BufView, tuple[int, ByteSet] | None] = {}

    def visit(self, lst: list[ACommand], entry: int) -> int:
        """Visit a command list whose commands all wait for ``entry``; the done mask of all of them."""
        everything = 0
        for cmd in lst:
            cid = self.ids[id(cmd)]
            queue = _queue(cmd)
            mask = entry | self.queue_after.get(queue, 0)
            touched = _accesses(cmd, self.cache)
            deps = self.tracker.access(cid, [(serial, byte_set) for serial, byte_set, write in touched if not write],
                                       [(serial, byte_set) for serial, byte_set, write in touched if write])
            for dep in deps:
                mask |= self.done_of[dep]
            control = isinstance(cmd, (ACond, ALoop))
            if control:
                mask |= everything   # a control command waits for every earlier command of its list
            done = self.done_of[cid] = mask | 1 << cid
            for serial, _, _ in touched:
                self.first_waits.setdefault(serial, mask)
                self.last[serial] = cid
            if isinstance(cmd, (ACond, ALoop)):
                # a loop body runs after its condition commands; the else branch is taken as
                # running after the then branch: only one of them runs, so they never wait
                for branch in ((cmd.then, cmd.orelse) if isinstance(cmd, ACond) else (cmd.cond, cmd.body)):
                    done |= self.visit(branch, done)
                entry |= done   # later commands of the list wait for the whole control command
            self.queue_after[queue] = mask if isinstance(cmd, ADma) else done
            everything |= done
        return everything
