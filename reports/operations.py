"""Per-operation view of a trace: the executed commands grouped by the NPU operation they belong to.

The simulator records commands; the scheduler knows which NPU operation
(``CONV2D+RESCALE+CLAMP`` on the MAC array, a variable copy, ...) each command
serves: its tiles, the DMAs that feed them and store their results. That map
travels in ``Program.stats`` (see :func:`command_operations`). This module joins
the two, per invocation, into :class:`OperationSpan` rows that the summary,
the per-op table and the Perfetto trace share.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from npu_sim.errors import ProgramError
from npu_sim.hw.compute_units import unit
from npu_sim.hw.config import HwConfig
from npu_sim.hw.trace import CommandRecord
from npu_sim.program import OperationStats, PlanStats, Program

#: What an operation's cycles go to (see :attr:`OperationSpan.bound_cycles`).
BOUNDS = ("compute", "memory", "setup_latency")


def shares(parts: dict[str, int]) -> dict[str, float]:
    """Each part's fraction of their sum (all 0.0 for an empty sum), to 4 decimals."""
    total = sum(parts.values())
    return {key: round(value / total, 4) if total else 0.0 for key, value in parts.items()}


def merged(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``(start, end)`` intervals as sorted disjoint ones (touching ones joined; empty ones dropped)."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def bound_of(parts: dict[str, int]) -> str:
    """The bound of an operation whose cycles go to ``parts`` (:attr:`OperationSpan.bound_cycles`):
    the largest part, compute first on ties; compute when all are 0."""
    best = BOUNDS[0]
    for bound in BOUNDS[1:]:
        if parts[bound] > parts[best]:
            best = bound
    return best


#: The values of an operation's row that are containers (a copied row gets copies of them).
_ROW_CONTAINERS = ("bound_shares", "graph_ops", "unit_busy_cycles", "tile_shape")

class MovedRow(dict):
    """The row of an operation :meth:`~OperationSpan.shifted` from another: that one's row with
    ``invocation``, ``start_cycle``, ``end_cycle`` and the busy intervals moved ``delta`` cycles
    (a plain dict to any reader; :mod:`reports.ops_json` writes the rows of a moved invocation
    from its origin's text). Pickled as a plain dict."""

    __slots__ = ("origin", "delta")

    origin: OperationSpan
    delta: int

    def __reduce__(self) -> tuple[Any, ...]:
        return dict, (dict(self),)


#: A command's setup cycles (part of its busy cycles), given the hardware.
SetupCycles = Callable[[CommandRecord], int]


@dataclass
class OperationSpan:
    """One NPU operation in one invocation, aggregated over its commands."""

    name: str
    op: str
    unit: str
    invocation: int
    start_cycle: int
    end_cycle: int
    macs: int = 0
    ddr_read_bytes: int = 0
    ddr_write_bytes: int = 0
    compute_cycles: int = 0  # summed busy cycles of its compute commands
    dma_cycles: int = 0  # summed busy cycles of its DMA commands (engine time; latency excluded)
    compute_commands: int = 0  # tiles (a command in a loop counts once per iteration)
    dma_commands: int = 0
    units: dict[str, int] = field(default_factory=dict)  # unit -> busy cycles
    plan: OperationStats | None = None   # what the scheduler says of it (None: a command alone)
    setup_cycles: int = 0  # of its commands' busy cycles, the setups (compute units' and DMAs')
    compute_setup_cycles: int = 0  # the part of ``setup_cycles`` on compute units
    latency_cycles: int = 0  # its DMAs' data latency (issued to landed; outside busy cycles)
    #: unit -> the cycles its commands occupied that unit, as sorted disjoint ``(start, end)``
    busy_intervals: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    #: the span this one is :meth:`shifted` from (None: computed from its own records)
    moved_from: OperationSpan | None = field(default=None, repr=False, compare=False)
    _base_row: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def span_cycles(self) -> int:
        """From its first command's start to its last command's end (idle gaps included)."""
        return self.end_cycle - self.start_cycle

    @property
    def cycles(self) -> int:
        """Its work: the cycles in which at least one of its commands occupied its unit. Never
        more than its span, nor than its commands' busy cycles summed; the gaps of an operation
        whose commands are issued lazily (the constant pool's loads) are not its work."""
        if self.moved_from is not None:
            return self.moved_from.cycles
        if len(self.busy_intervals) == 1:   # (one unit's intervals are merged already)
            intervals = next(iter(self.busy_intervals.values()))
        else:
            intervals = merged([i for intervals in self.busy_intervals.values() for i in intervals])
        return sum(end - start for start, end in intervals)

    @property
    def bound_cycles(self) -> dict[str, int]:
        """Its commands' cycles by what they spent them on: ``compute`` (compute bodies),
        ``memory`` (DMA data phases) and ``setup_latency`` (command setups and DMA latency).
        They overlap in time: their sum is work, not the span."""
        return {"compute": max(0, self.compute_cycles - self.compute_setup_cycles),
                "memory": max(0, self.dma_cycles - (self.setup_cycles - self.compute_setup_cycles)),
                "setup_latency": self.setup_cycles + self.latency_cycles}

    @property
    def bound(self) -> str:
        """What bounds it: the largest of :attr:`bound_cycles` (compute first on ties)."""
        return bound_of(self.bound_cycles)

    def as_dict(self, *, busy_intervals: bool = False) -> dict[str, Any]:
        """Its row of summary.json's ``ops`` (``busy_intervals``: with each unit's busy
        intervals, which the run page's Gantt draws). A span :meth:`shifted` from another
        copies that one's row, its times moved."""
        original = self.moved_from
        if original is None:
            row = self._row()
        else:
            row = moved = MovedRow(original.base_row())
            moved.origin, moved.delta = original, self.start_cycle - original.start_cycle
            for key in _ROW_CONTAINERS:
                if key in row:
                    row[key] = row[key].copy()
            row.update(invocation=self.invocation, start_cycle=self.start_cycle, end_cycle=self.end_cycle)
        if busy_intervals:
            row["busy_intervals"] = {u: [list(i) for i in spans] for u, spans in self.busy_intervals.items()}
        return row

    def base_row(self) -> dict[str, Any]:
        """Its row without busy intervals, computed once (read only: the rows of the spans
        shifted from it are copied from it)."""
        if self._base_row is None:
            self._base_row = self._row()
        return self._base_row

    def _row(self) -> dict[str, Any]:
        parts = self.bound_cycles
        return {
            "name": self.name,
            "op": self.op,
            "unit": self.unit,
            "invocation": self.invocation,
            "start_cycle": self.start_cycle,
            "end_cycle": self.end_cycle,
            "cycles": self.cycles,
            "span_cycles": self.span_cycles,
            "macs": self.macs,
            "ddr_read_bytes": self.ddr_read_bytes,
            "ddr_write_bytes": self.ddr_write_bytes,
            "compute_cycles": self.compute_cycles,
            "dma_cycles": self.dma_cycles,
            "compute_commands": self.compute_commands,
            "dma_commands": self.dma_commands,
            "bound": bound_of(parts),
            "bound_shares": shares(parts),
            "graph_ops": list(self.plan.graph_ops) if self.plan else [],
            "unit_busy_cycles": dict(self.units),
            **(self._tiling() if self.plan else {}),
        }

    def shifted(self, invocation: int, delta: int) -> OperationSpan:
        """This operation as it ran again in ``invocation``, ``delta`` cycles later (its
        commands' times moved by ``delta``, every other figure the same)."""
        return OperationSpan(self.name, self.op, self.unit, invocation, self.start_cycle + delta,
                             self.end_cycle + delta, self.macs, self.ddr_read_bytes, self.ddr_write_bytes,
                             self.compute_cycles, self.dma_cycles, self.compute_commands, self.dma_commands,
                             dict(self.units), self.plan, self.setup_cycles, self.compute_setup_cycles,
                             self.latency_cycles,
                             {u: [(a + delta, b + delta) for a, b in i] for u, i in self.busy_intervals.items()},
                             self.moved_from or self)

    def _tiling(self) -> dict[str, Any]:
        """The scheduler's tiling facts, as the summary rows carry them."""
        plan = self.plan
        assert plan is not None
        facts: dict[str, Any] = {"block": plan.block}
        if plan.tile_shape is not None:
            facts["tile_shape"] = list(plan.tile_shape)
        facts.update(tile_count=plan.tile_count, working_set_bytes=plan.working_set_bytes)
        return facts


def command_operations(program: Program | None) -> tuple[dict[int, str], dict[str, OperationStats]]:
    """``(command id -> operation key, operation key -> its record)`` from ``program.stats``
    (read only: the last plan's are kept).

    The key of an operation is its name, suffixed ``#index`` if two operations share a
    name. A command the scheduler did not map is its own operation (see
    :func:`fallback_operation_name`).
    """
    if program is None or program.stats is None:
        return {}, {}
    stats = program.stats
    known = _operations_of.get(id(stats))
    if known is not None and known[0] is stats:   # (the summary's and the trace's, of one plan)
        return known[1]
    counts = Counter(op.name for op in stats.operations)
    keys = [op.name if counts[op.name] == 1 else f"{op.name}#{i}" for i, op in enumerate(stats.operations)]
    by_command: dict[int, str] = {}
    infos: dict[str, OperationStats] = {}
    for key, op in zip(keys, stats.operations):
        infos[key] = op
        for cid in op.commands:
            by_command[cid] = key
    for cid, index in stats.command_operation.items():
        if 0 <= index < len(keys):
            by_command.setdefault(cid, keys[index])
    _operations_of.clear()
    _operations_of[id(stats)] = (stats, (by_command, infos))
    return by_command, infos


#: The last plan's :func:`command_operations` (read only), by the id of its stats (frozen).
_operations_of: dict[int, tuple[PlanStats, tuple[dict[int, str], dict[str, OperationStats]]]] = {}


def fallback_operation_name(record: CommandRecord) -> str:
    """The operation of a command the scheduler did not map: the command itself."""
    return record.name or f"{record.kind}{record.id}"


#: The ``invocation`` of the operations of a multi-invocation run's preamble (constants loaded
#: once, before the first invocation).
PREAMBLE = -1


def operation_spans(commands: Iterable[CommandRecord], program: Program | None = None,
                    setup_cycles: SetupCycles | None = None, preamble_end_cycle: int = 0,
                    repeats: dict[int, tuple[int, int]] | None = None) -> list[OperationSpan]:
    """Commands grouped by (operation, invocation), sorted by invocation then start cycle.
    ``setup_cycles`` (see :func:`command_setup_cycles`) splits their busy cycles into setup and
    work (:attr:`OperationSpan.bound_cycles`); without it all is work. The program's preamble
    commands that started before ``preamble_end_cycle`` (the first invocation's start) form
    operations of their own, of invocation :data:`PREAMBLE`. ``repeats``: the invocations whose
    records are an earlier one's moved in time (:attr:`npu_sim.hw.trace.Trace.repeats`): they get
    that one's spans, moved."""
    by_command, infos = command_operations(program)
    preamble = program.preamble_command_ids if program is not None and preamble_end_cycle else frozenset()
    repeats = repeats or {}
    preamble_groups: dict[tuple[int, str], list[CommandRecord]] = {}
    by_invocation: dict[int, list[CommandRecord]] = {}
    for record in commands:
        if record.id in preamble and record.start_cycle < preamble_end_cycle:
            preamble_groups.setdefault((PREAMBLE, _operation(record, by_command)), []).append(record)
        elif record.invocation not in repeats:
            by_invocation.setdefault(record.invocation, []).append(record)
    spans = [_span(name, invocation, records, infos.get(name), setup_cycles)
             for (invocation, name), records in preamble_groups.items()]
    spans += _invocation_spans(by_invocation, by_command, infos, setup_cycles, repeats)
    spans.sort(key=lambda s: (s.invocation, s.start_cycle, s.end_cycle, s.name))
    return spans


def _operation(record: CommandRecord, by_command: dict[int, str]) -> str:
    return by_command.get(record.id) or fallback_operation_name(record)


def _invocation_spans(by_invocation: dict[int, list[CommandRecord]], by_command: dict[int, str],
                      infos: dict[str, OperationStats], setup_cycles: SetupCycles | None,
                      repeats: dict[int, tuple[int, int]]) -> list[OperationSpan]:
    """One span per (invocation, operation). An invocation whose commands ran exactly as an
    earlier one's, only later (a long stream's steady state), gets that one's spans moved in
    time: the same figures, without grouping or summing its records (``repeats``: the ones the
    simulator knows, replayed; the others found by their records' timing)."""
    seen: dict[tuple[Any, ...], tuple[int, list[OperationSpan]]] = {}
    sources = {source for source, _ in repeats.values()}
    spans_of: dict[int, list[OperationSpan]] = {}   # of the invocations repeated
    spans: list[OperationSpan] = []
    for invocation in sorted(by_invocation.keys() | repeats.keys()):
        repeat = repeats.get(invocation)
        if repeat is not None:
            spans += [span.shifted(invocation, repeat[1]) for span in spans_of[repeat[0]]]
            continue
        records = by_invocation[invocation]
        base = min(r.start_cycle for r in records)
        # (an invocation can repeat only another one: a run of one has none to key)
        key = _timing_key(records, base) if len(by_invocation) > 1 else None
        known = seen.get(key) if key is not None else None
        if known is not None:
            ran = [span.shifted(invocation, base - known[0]) for span in known[1]]
        else:
            groups: dict[str, list[CommandRecord]] = {}
            for record in records:
                groups.setdefault(by_command.get(record.id) or fallback_operation_name(record), []).append(record)
            ran = [_span(name, invocation, group, infos.get(name), setup_cycles) for name, group in groups.items()]
            if key is not None:
                seen[key] = (base, ran)
        if invocation in sources:
            spans_of[invocation] = ran
        spans += ran
    return spans


def _timing_key(records: list[CommandRecord], base: int) -> tuple[Any, ...]:
    """What an invocation's spans are computed from (its records, which name their operations),
    its times relative to ``base``: two invocations of one key have the same spans, moved in time."""
    return tuple((r[:5], r[8:12], r.start_cycle - base, r.end_cycle - base,
                  None if r.busy_end_cycle is None else r.busy_end_cycle - base) for r in records)


def command_setup_cycles(hw: HwConfig) -> SetupCycles:
    """The setup a command pays before its body: its compute unit's ``setup_cycles``, a DMA's
    ``dma.setup_cycles``, nothing for control flow."""
    per_unit: dict[str, int] = {}

    def setup(record: CommandRecord) -> int:
        if record.kind == "dma":
            return hw.dma.setup_cycles
        if record.kind != "compute":
            return 0
        cycles = per_unit.get(record.unit)
        if cycles is None:
            try:
                cycles = unit(record.unit).setup_cycles(hw)
            except ProgramError:
                cycles = 0
            per_unit[record.unit] = cycles
        return min(cycles, record.busy_cycles)

    return setup


def _span(name: str, invocation: int, records: list[CommandRecord],
          info: OperationStats | None, setup_cycles: SetupCycles | None = None) -> OperationSpan:
    """One pass over the operation's records: extent, totals, busy cycles per unit."""
    start = records[0].start_cycle
    end = records[0].end_cycle
    macs = ddr_read = ddr_write = 0
    compute_cycles = dma_cycles = compute_commands = dma_commands = 0
    setup = compute_setup = latency = 0
    busy: dict[str, int] = {}  # unit -> busy cycles, in first-seen order
    intervals: dict[str, list[tuple[int, int]]] = {}  # unit -> its commands' busy intervals
    compute_ops: list[str] = []
    compute_units: list[str] = []
    for r in records:
        _, _, kind, unit, op, _, first, last, _, r_macs, r_read, r_write, r_busy_end = r
        if first < start:
            start = first
        if last > end:
            end = last
        macs += r_macs
        ddr_read += r_read
        ddr_write += r_write
        busy_end = last if r_busy_end is None else r_busy_end
        busy_cycles = busy_end - first
        busy[unit] = busy.get(unit, 0) + busy_cycles
        unit_intervals = intervals.get(unit)
        if unit_intervals is None:
            intervals[unit] = [(first, busy_end)]
        else:
            unit_intervals.append((first, busy_end))
        command_setup = setup_cycles(r) if setup_cycles is not None else 0
        setup += command_setup
        if kind == "compute":
            compute_cycles += busy_cycles
            compute_commands += 1
            compute_setup += command_setup
            compute_ops.append(op)
            compute_units.append(unit)
        elif kind == "dma":
            dma_cycles += busy_cycles
            dma_commands += 1
            if r_busy_end is not None:
                latency += last - r_busy_end
    op, unit = _label(info, records, compute_ops, compute_units, busy)
    return OperationSpan(name, op, unit, invocation, start, end, macs, ddr_read, ddr_write,
                         compute_cycles, dma_cycles, compute_commands, dma_commands, busy, info,
                         setup, compute_setup, latency, {u: merged(i) for u, i in intervals.items()})


def _label(info: OperationStats | None, records: list[CommandRecord], compute_ops: list[str],
           compute_units: list[str], busy: dict[str, int]) -> tuple[str, str]:
    """What the operation computes and on which unit: as the scheduler says, else the most
    frequent of its compute commands (of its commands), else its units joined."""
    op = (info.op if info and info.op else None) or _most_common(compute_ops) \
        or _most_common([r.op for r in records]) or "?"
    if info and info.unit:
        return op, info.unit
    if compute_units:
        return op, _most_common(compute_units)
    return op, "+".join(sorted(busy)) or "?"


def _most_common(values: list[str]) -> str:
    """The most frequent value (first seen on ties), or ``""``."""
    if not values:
        return ""
    first = values[0]
    if len(values) == 1 or values.count(first) == len(values):  # the usual case: all alike
        return first
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    best, most = first, 0
    for value, count in counts.items():  # insertion order: the first seen wins a tie
        if count > most:
            best, most = value, count
    return best
