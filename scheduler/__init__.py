"""The scheduler: compiles a TOSA graph for a hardware config into a :class:`npu_sim.program.Program`.

``schedule(graph, hw)`` runs the pass pipeline described in :mod:`scheduler.schedule`;
:func:`scheduler.verify.verify_program` checks any Program's memory plan and command order.
"""

from scheduler.schedule import schedule
from scheduler.verify import PlanError, verify_program

__all__ = ["PlanError", "schedule", "verify_program"]
