"""Static verification of a compiled Program: a second opinion on the scheduler's plan.
Takes: any Program (memory plan and command stream), whoever built it.
Gives: nothing, or a PlanError naming the first overlapping allocation or unordered access.
"""

from scheduler.verify.verifier import PlanError, verify_program

__all__ = ["PlanError", "verify_program"]
