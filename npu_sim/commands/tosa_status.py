"""``tosa_status`` in summary.json, and the one warning of a run that went on past a REQUIRE."""

from __future__ import annotations

import sys
from typing import Any

from npu_sim.reference.unpredictable import UnpredictableLog


def tosa_status_figures(log: UnpredictableLog) -> dict[str, Any]:
    """``tosa_status`` (``valid`` or ``unpredictable``) and, if unpredictable, the first REQUIRE broken."""
    figures: dict[str, Any] = {"tosa_status": log.status}
    if log.count:
        figures["tosa_unpredictable"] = {"operator": log.operator, "condition": log.condition,
                                         "violations": log.count}
    return figures


def warn_if_unpredictable(summary: dict[str, Any]) -> None:
    first = summary.get("tosa_unpredictable")
    if first:
        print(f"warning: the result is unpredictable (TOSA): {first['operator']}: {first['condition']} "
              f"({first['violations']} violation(s)); cycles and traffic are still valid", file=sys.stderr)
