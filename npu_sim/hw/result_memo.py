"""A compute command whose operands from memory are a few bytes, remembered by those bytes (a
long stream's fast path).

A WHILE loop's condition (``GREATER``), counter updates (``ADD``) and their carries read a
scalar or two, and take the same few values in every invocation of a stream. Their kernels
are pure, so a command's results are a function of the bytes it reads from memory (its
constants never change once loaded): :class:`ResultMemo` keeps the results of each such
key the command's kernels gave (every check passed), and later runs with that key write
them again without running a kernel. Nothing is remembered in a run that goes on past
REQUIREs (``--allow-unpredictable``): the kernels record each violation where it happens.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from npu_sim.hw.memory import ViewAccess
from npu_sim.reference.unpredictable import active_log

#: Most bytes a command may read from memory to be remembered.
MAX_KEY_BYTES = 16
#: Most keys remembered per command; a command that reads more distinct values is not worth it.
MAX_ENTRIES = 256


class ResultMemo:
    """The results a command wrote, by the bytes of its operands read from memory."""

    __slots__ = ("reads", "results")

    def __init__(self, reads: list[ViewAccess]):
        self.reads = reads
        self.results: dict[bytes, list[np.ndarray]] = {}

    @staticmethod
    def of(feeds: Iterable[Iterable[tuple[int, Any]]]) -> ResultMemo | None:
        """A memo for a command whose steps read these feeds (``ComputeOp.feeds``), or None if it
        reads nothing or more than :data:`MAX_KEY_BYTES` from memory, or REQUIREs are let pass."""
        reads: dict[int, ViewAccess] = {}
        for step_feeds in feeds:
            for kind, source in step_feeds:
                if kind == 0:
                    reads.setdefault(id(source), source)
        if not reads or sum(a.size_bytes for a in reads.values()) > MAX_KEY_BYTES or active_log() is not None:
            return None
        return ResultMemo(list(reads.values()))

    def key(self) -> bytes:
        """The bytes the command reads now (raises as a read does: bytes never written)."""
        reads = self.reads
        if len(reads) == 1:
            return reads[0].read_bytes()
        return b"".join([access.read_bytes() for access in reads])

    def remember(self, key: bytes, produced: list[np.ndarray]) -> bool:
        """Keep ``produced`` (read-only) for ``key``; False once :data:`MAX_ENTRIES` are kept
        (the command should stop looking up)."""
        if len(self.results) >= MAX_ENTRIES:
            return False
        for array in produced:
            array.flags.writeable = False
        self.results[key] = produced
        return True
