"""summary.json's ``ops`` rows as JSON text, one row a line, fast for a long stream.

A long stream's steady state repeats its invocations: the summary gives each repeated
operation its first run's row moved in time (:class:`~reports.operations.MovedRow`). Encoding
thousands of such rows one by one is most of what writing summary.json costs, so the rows an
invocation moved together (the same delta, from the rows of one earlier invocation, in order)
are written from one template of their origins' text, where only the numbers a move changes
(invocation, start and end cycle, busy intervals) are put in (``%d``: an int's JSON text is its
``repr``). Every other row is encoded as it stands. The text is what ``json.dumps`` gives each
row, joined by ``,\\n    ``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from reports.operations import MovedRow, OperationSpan

#: Where a template takes a number: a string no encoded row holds elsewhere (checked).
_MARK = "\u0000"
_MARK_TEXT = json.dumps(_MARK)
#: Between two rows.
ROW_SEPARATOR = ",\n    "


class _Block:
    """The text of consecutive rows moved together, as a template of their origins' rows."""

    __slots__ = ("template", "values", "invocations")

    def __init__(self, template: str, values: list[int], invocations: list[int]):
        self.template = template           # %d where a number goes
        self.values = values               # the origins' numbers, in template order
        self.invocations = invocations     # the positions of the rows' invocation numbers

    @staticmethod
    def of(origins: Sequence[OperationSpan]) -> _Block | None:
        """The block of rows moved from ``origins`` (None if a row's text holds the mark)."""
        rows: list[str] = []
        values: list[int] = []
        invocations: list[int] = []
        for origin in origins:
            row = origin.as_dict(busy_intervals=True)
            invocations.append(len(values))
            values += [row["invocation"], row["start_cycle"], row["end_cycle"]]
            row.update(invocation=_MARK, start_cycle=_MARK, end_cycle=_MARK)
            busy = row["busy_intervals"]
            for unit, intervals in busy.items():
                values += [cycle for interval in intervals for cycle in interval]
                busy[unit] = [[_MARK] * len(interval) for interval in intervals]
            rows.append(json.dumps(row).replace("%", "%%"))
        text = ROW_SEPARATOR.join(rows)
        if text.count(_MARK_TEXT) != len(values):
            return None
        return _Block(text.replace(_MARK_TEXT, "%d"), values, invocations)

    def text(self, invocation: int, delta: int) -> str:
        values = [value + delta for value in self.values]
        for position in self.invocations:
            values[position] = invocation
        return self.template % tuple(values)


def ops_rows_json(rows: Sequence[dict[str, Any]]) -> str:
    """Each row's ``json.dumps``, joined by :data:`ROW_SEPARATOR`."""
    return "".join(ops_rows_pieces(rows))


def ops_rows_pieces(rows: Sequence[dict[str, Any]]) -> list[str]:
    """:func:`ops_rows_json`'s text in pieces, separators included (a long stream's is megabytes:
    whoever writes it joins it once, with what goes around it)."""
    parts: list[str] = []
    blocks: dict[tuple[int, ...], _Block | None] = {}
    i, count = 0, len(rows)
    while i < count:
        row = rows[i]
        if type(row) is not MovedRow:
            parts.append(json.dumps(row))
            i += 1
            continue
        end = _moved_together(rows, i)
        group: Sequence[Any] = rows[i:end]
        key = tuple([id(moved.origin) for moved in group])
        if key not in blocks:
            blocks[key] = _Block.of([moved.origin for moved in group])
        block = blocks[key]
        if block is None:
            parts += [json.dumps(moved) for moved in group]
        else:
            parts.append(block.text(row["invocation"], row.delta))
        i = end
    pieces = [ROW_SEPARATOR] * (2 * len(parts) - 1) if parts else []
    pieces[::2] = parts
    return pieces


def _moved_together(rows: Sequence[dict[str, Any]], first: int) -> int:
    """The end of the run of moved rows from ``first`` of its invocation and delta."""
    head = rows[first]
    assert isinstance(head, MovedRow)
    invocation, delta = head["invocation"], head.delta
    end = first + 1
    while end < len(rows):
        row = rows[end]
        if type(row) is not MovedRow or row["invocation"] != invocation or row.delta != delta:
            break
        end += 1
    return end
