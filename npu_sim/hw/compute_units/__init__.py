"""The compute units of the NPU, as a registry: one :class:`ComputeUnit` entry per unit.

Each entry names the unit, the TOSA operators it runs and its pure cost functions of
(HwConfig, kernel steps). The scheduler asks it which unit runs an operator, the
simulator what a command costs (:mod:`npu_sim.hw.cost`), traces and reports which units
exist. A new unit is one new entry here (and its HwConfig section); a calibrated cost
model is an entry with other cost functions.

* :mod:`~npu_sim.hw.compute_units.mac_array` - the systolic MAC array;
* :mod:`~npu_sim.hw.compute_units.vector` - the vector unit (runs whatever no other unit claims);
* :mod:`~npu_sim.hw.compute_units.lut` - the table-lookup / activation unit;
* :mod:`~npu_sim.hw.compute_units.cpu` - the host CPU (the operators the NPU cannot run).
"""

from __future__ import annotations

from npu_sim.errors import ProgramError
from npu_sim.hw.compute_units import cpu, lut, mac_array, vector
from npu_sim.hw.compute_units.unit import COMPUTE_OPS, NO_UNIT_OPS, ComputeUnit
from npu_sim.tosa.ops import Op

MAC_ARRAY: ComputeUnit = mac_array.UNIT
VECTOR: ComputeUnit = vector.UNIT
LUT: ComputeUnit = lut.UNIT
CPU: ComputeUnit = cpu.UNIT

#: Every compute unit, in the order traces and reports list them.
UNITS: tuple[ComputeUnit, ...] = (MAC_ARRAY, VECTOR, LUT, CPU)

_BY_NAME = {u.name: u for u in UNITS}


def _units_by_op() -> dict[Op, ComputeUnit]:
    table: dict[Op, ComputeUnit] = {}
    for u in sorted(UNITS, key=lambda u: u.fallback):   # the specialised units claim theirs first
        for op in u.ops:
            table.setdefault(op, u)
    return table


_BY_OP = _units_by_op()


def unit_names() -> tuple[str, ...]:
    """The units' names, as commands and traces spell them."""
    return tuple(_BY_NAME)


def unit(name: str) -> ComputeUnit:
    """The unit called ``name`` (ProgramError naming the known ones if there is none)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ProgramError(f"unknown compute unit {name!r} (units: {', '.join(_BY_NAME)})") from None


def unit_for_op(op: Op) -> ComputeUnit | None:
    """The unit that runs ``op`` (None for operators no compute unit runs, :data:`NO_UNIT_OPS`)."""
    return _BY_OP.get(op)


__all__ = ["COMPUTE_OPS", "CPU", "LUT", "MAC_ARRAY", "NO_UNIT_OPS", "UNITS", "VECTOR", "ComputeUnit", "unit",
           "unit_for_op", "unit_names"]
