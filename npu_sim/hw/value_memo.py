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
#: The unsigned integers that hold a result's bits, by its element size.
_RESULT_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
#: Most element values remembered; past them, every call computes (a stream of so many
#: values seldom repeats a whole tensor).
MAX_ENTRIES = 4096


class ValueMemo:
    """``compute`` (one tensor in, its elementwise results out, the same shape) remembered per
    element value (elements of a size in :data:`UNSIGNED`). Called as a plan entry:
    ``[tensor] -> [results]``. The values are a dict from an element's bits to its result's
    bits (Python ints): a tensor of a few dozen elements is looked up in fewer numpy calls
    than a search of sorted keys takes."""

    __slots__ = ("compute", "known", "result_type")

    def __init__(self, compute: Callable[[np.ndarray], np.ndarray]):
        self.compute = compute
        self.known: dict[int, int] = {}   # an element's bits -> its result's bits
        #: the results' dtype and the unsigned integer of their bits (None: nothing remembered)
        self.result_type: tuple[np.dtype, type] | None = None

    def __call__(self, operands: list[np.ndarray]) -> list[np.ndarray]:
        tensor = np.asarray(operands[0])
        known, result_type = self.known, self.result_type
        if result_type is not None and len(known) >= MAX_ENTRIES:   # ever new values: not worth it
            return [self.compute(tensor)]
        bits = tensor.reshape(-1).view(UNSIGNED[tensor.dtype.itemsize]).tolist()
        if result_type is not None:
            try:
                found = [known[b] for b in bits]
            except KeyError:
                pass
            else:
                return [np.array(found, result_type[1]).view(result_type[0]).reshape(tensor.shape)]
        result = self.compute(tensor)
        self._learn(bits, result)
        return [result]

    def _learn(self, bits: list[int], result: np.ndarray) -> None:
        """Remember the results of ``bits`` (while fewer than :data:`MAX_ENTRIES` are)."""
        unsigned = _RESULT_BITS.get(result.dtype.itemsize)
        if unsigned is None or len(self.known) >= MAX_ENTRIES:
            return
        self.known.update(zip(bits, result.reshape(-1).view(unsigned).tolist()))
        self.result_type = (result.dtype, unsigned)
