"""A graph's outputs as its user gets them: the edges TOSA holds in another type given back in the
model's (uint8 edges held as int8: :mod:`npu_sim.tosa.unsigned_io`; int64 indices held as int32:
:mod:`npu_sim.tosa.int64_outputs`). The reference executor and the simulator both return these."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from npu_sim.tosa.int64_outputs import as_int64_outputs
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.unsigned_io import as_unsigned_outputs


def as_user_outputs(graph: Graph, outputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    """``outputs`` in the types the model gives them (as they are where no edge differs)."""
    if graph.unsigned_io:
        outputs = as_unsigned_outputs(graph, outputs)
    if graph.int64_outputs:
        outputs = as_int64_outputs(graph, outputs)
    return outputs
