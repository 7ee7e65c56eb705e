"""The Python API of npu-sim (see ARCHITECTURE.md).

>>> import npu_sim
>>> g = npu_sim.load_graph("model.tosa")
>>> outs = npu_sim.execute(g, {"input": x})          # reference, one invocation
>>> s = npu_sim.Session(g); s.invoke({...}); s.invoke({...})   # variables persist
>>> hw = npu_sim.load_hw_config("edge")              # preset or path
>>> r = npu_sim.simulate(g, hw, {"input": x})        # outputs, summary, trace, program
"""

from __future__ import annotations

from pathlib import Path

from npu_sim.hw.config import load_hw_config
from npu_sim.reference.session import Session, execute
from npu_sim.simulation import SimulationResult, simulate
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.loader import load_graph as _load_graph


def load_graph(path: str | Path, *, level: str = "8K") -> Graph:
    """Read a TOSA graph from a ``.tosa`` flatbuffer or its JSON form, and validate it.

    ``level``: the TOSA level its operator arguments must respect, "8K" (as Arm's reference
    model by default) or "none" (see :mod:`npu_sim.tosa.levels`).
    """
    return _load_graph(path, level=level)


__all__ = ["Graph", "Session", "SimulationResult", "execute", "load_graph", "load_hw_config", "simulate"]
