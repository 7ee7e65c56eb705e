"""Graph outputs a user gets as ``int64``, held as INT32 inside the graph.

TOSA 1.0 has no int64 values (no profile lists INT64 for any operator but shapes), while a
TFLite model may return int64: ``tf.argmax``'s default index type. The front door computes such
indices in INT32 (an index is below its axis' length) and records the outputs in
:attr:`Graph.int64_outputs`; a user gets them widened to ``int64``, LiteRT's type, the same
values. A graph saved as a .tosa flatbuffer or JSON keeps them INT32.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from npu_sim.tosa.ir import Graph


def as_int64_outputs(graph: Graph, outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``outputs`` with each of the graph's int64 outputs widened to ``int64``."""
    result = dict(outputs)
    for name in graph.int64_outputs & set(result):
        result[name] = np.asarray(result[name]).astype(np.int64)
    return result
