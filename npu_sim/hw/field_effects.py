"""What each HwConfig field changes: the schedule, only the timing, or only energy and area.

A sweep compiles one Program per *schedule* (the fields the scheduler reads), simulates it
again only where a *timing* field differs (the simulator reads it, the scheduler never
does), and only recounts energy and area where a *cost* field differs (the ``energy:`` and
``area:`` tables, read by nothing but :mod:`reports.energy`). The declarations are checked
by ``tests/hw/test_field_effects.py``, which compiles every example on every preset while
recording the fields the scheduler reads: a field it reads must be declared ``schedule``.

Anything not declared otherwise changes the schedule: a new field is safe before it is
declared. The scheduler's cost model reads the DDR's bandwidth, latencies and bursts, the
DMA setup and every unit's rates (tile shapes and the operation order are chosen on them),
so those change the schedule too, and so does the DMA's outstanding-burst limit (a read
stream's rate decides which matrix-vector products read their weights in place:
:mod:`scheduler.passes.weights_in_place`); what does not is the clock (the scheduler counts
cycles), the variable SRAM's port, and the off-chip bytes the simulator counts beside the plan's
(a convolution's channel parameters read again, the U55's per-element flash reads). Whether the compute units share
one pipeline changes the schedule (a striped chain then reads a staged input from its TCM copy:
:mod:`scheduler.passes.stripes`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from enum import Enum
from typing import Any


class Effect(str, Enum):
    SCHEDULE = "schedule"
    TIMING = "timing"
    COST = "cost"


#: Fields only the simulator reads (dotted paths).
TIMING_FIELDS = frozenset({
    "clock_hz",
    "variable_sram.bytes_per_cycle",
    "block_tensors.table_read_cycles_per_entry",
    # off-chip bytes the simulator counts beside the plan's (Vela's re-reads and flash reads)
    "mac_array.channel_parameter_bytes",
    "vector.per_channel_rescale_read_bytes",
    "vector.source_softmax_read_bytes",
    "vector.source_squared_difference_read_bytes",
})
#: Sections only energy and area are counted from.
COST_SECTIONS = frozenset({"energy", "area"})
#: Fields that change nothing a run computes (names, prose).
NAME_FIELDS = frozenset({"name", "description"})


def effect(path: str) -> Effect:
    """The effect of the HwConfig field at dotted ``path`` (a key inside a table counts as its table)."""
    if path.split(".", 1)[0] in COST_SECTIONS:
        return Effect.COST
    if path in TIMING_FIELDS:
        return Effect.TIMING
    return Effect.SCHEDULE


def _without(data: dict[str, Any], drop: Callable[[str], bool], prefix: str = "") -> dict[str, Any]:
    """``data`` (config data) without the fields at the dotted paths ``drop`` names."""
    kept = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if not drop(path):
            kept[key] = _without(value, drop, path + ".") if isinstance(value, dict) else value
    return kept


def _digest(data: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def schedule_key(config: dict[str, Any]) -> str:
    """What identifies the Program of a resolved config (``HwConfig.model_dump(mode="json")``):
    its schedule fields."""
    return _digest(_without(config, lambda p: p in NAME_FIELDS or effect(p) is not Effect.SCHEDULE))


def timing_key(config: dict[str, Any]) -> str:
    """What identifies the simulation of a resolved config: its schedule and timing fields."""
    return _digest(_without(config, lambda p: p in NAME_FIELDS or effect(p) is Effect.COST))
