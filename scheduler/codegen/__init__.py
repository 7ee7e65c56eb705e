"""Code generation: block compilation, emission, numbering, memory plan, views and dependencies.
Takes: lowered blocks with their tile plans and residency decisions.
Gives: the Program's commands (DMA, compute, control flow) with resolved views, dependencies and allocations.
"""
