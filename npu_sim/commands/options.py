"""Options several commands share."""

from __future__ import annotations

import typer


def tosa_level_option():
    """``--tosa-level 8K|none``: the TOSA level a graph is loaded at (:mod:`npu_sim.tosa.levels`)."""
    return typer.Option("8K", "--tosa-level", metavar="LEVEL",
                        help="TOSA level the graph's operator arguments must respect: 8K (ranks up "
                             "to 6, kernels up to 8192, ..., as Arm's reference model) or none.")
