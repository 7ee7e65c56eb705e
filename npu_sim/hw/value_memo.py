"""An elementwise function of one tensor remembered per element value (a long stream's fast path).

:mod:`npu_sim.hw.table_folding` turns an elementwise chain over int8 values into a table of
all 256 of them. A chain over a wider value (a float state a loop carries: the quantize
steps of a recurrent cell, ``MUL``, ``CAST``, ``ADD``, a clamp, ``CAST``) has too many values
to tabulate, but a stream often feeds it few of them (what an earlier dequantize made of
int8 values). :class:`ValueMemo` keeps, by the bits of each element, the result the chain's
own kernels gave it: a call whose every element is known is looked up; any other runs the
chain on the whole tensor, as before (raising what a kernel raises), and remembers its
elements. The chain is elementwise the same way at every position, so an element's result
depends on its bits alone and a lookup gives the kernels' bits.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: The element sizes remembered (by the unsigned integer of their bits).
UNSIGNED = {2: np.uint16, 4: np.uint32}
#: Most element values remembered; past them, every call computes (a stream of so many
#: values seldom repeats a whole tensor).
MAX_ENTRIES = 4096


class ValueMemo:
    """``compute`` (one tensor in, its elementwise results out, the same shape) remembered per
    element value (elements of a size in :data:`UNSIGNED`). Called as a plan entry:
    ``[tensor] -> [results]``."""

    __slots__ = ("compute", "keys", "values")

    def __init__(self, compute: Callable[[np.ndarray], np.ndarray]):
        self.compute = compute
        self.keys: np.ndarray | None = None     # the values' bits, sorted (None: nothing remembered)
        self.values: np.ndarray | None = None   # the results, in the keys' order

    def __call__(self, operands: list[np.ndarray]) -> list[np.ndarray]:
        tensor = np.asarray(operands[0])
        bits = tensor.reshape(-1).view(UNSIGNED[tensor.dtype.itemsize])
        keys, values = self.keys, self.values
        if keys is not None and values is not None:
            if keys.size >= MAX_ENTRIES:   # a stream of ever new values: not worth looking up
                return [self.compute(tensor)]
            at = np.searchsorted(keys, bits)
            if (keys.take(at, mode="clip") == bits).all():   # (past the last key: clipped, not equal)
                return [values.take(at).reshape(tensor.shape)]
        result = self.compute(tensor)
        self._learn(bits, result)
        return [result]

    def _learn(self, bits: np.ndarray, result: np.ndarray) -> None:
        """Remember the results of ``bits`` (while fewer than :data:`MAX_ENTRIES` are)."""
        flat = result.reshape(-1)
        if self.keys is None or self.values is None:
            keys, values = bits, flat
        elif self.keys.size >= MAX_ENTRIES:
            return
        else:
            keys, values = np.concatenate([self.keys, bits]), np.concatenate([self.values, flat])
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], values[order]
        first = np.ones(keys.size, bool)
        np.not_equal(keys[1:], keys[:-1], out=first[1:])
        self.keys, self.values = keys[first], values[first]
