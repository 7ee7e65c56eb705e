"""summary.json's ops rows as text: the rows of moved invocations from one template, the same text."""

from __future__ import annotations

import json

import numpy as np
import pytest

from npu_sim.simulation import simulate
from reports.operations import MovedRow, OperationSpan
from reports.ops_json import ROW_SEPARATOR, ops_rows_json


def _plain(rows) -> str:
    return ROW_SEPARATOR.join(json.dumps(row) for row in rows)


def test_a_long_stream_s_rows_are_written_as_json_writes_them():
    inputs = np.random.default_rng(0).integers(-128, 128, (70, 1, 1, 16), dtype=np.int8)
    summary = simulate("examples/lstm_step64_int8.tosa", "edge", {"TosaInput_0": inputs}, invocations=70).summary
    rows = summary["ops"]
    assert sum(type(row) is MovedRow for row in rows) > len(rows) // 2
    assert ops_rows_json(rows) == _plain(rows)
    assert json.loads("[" + ops_rows_json(rows) + "]") == rows


@pytest.mark.parametrize("name", ["50% of MUL(x)", "odd \u0000 name %d"])
def test_rows_of_any_name_are_written_as_json_writes_them(name):
    first = OperationSpan(name, "MUL", "vector", 0, 10, 30, compute_cycles=20, compute_commands=2,
                          units={"vector": 20}, busy_intervals={"vector": [(10, 20), (25, 30)], "dma0": [(10, 12)]})
    other = OperationSpan("ADD", "ADD", "vector", 0, 30, 40, busy_intervals={"vector": [(30, 40)]})
    spans = [first, other, first.shifted(1, 40), other.shifted(1, 40), first.shifted(2, 80), other.shifted(2, 80)]
    rows = [span.as_dict(busy_intervals=True) for span in spans]
    assert type(rows[2]) is MovedRow and rows[4]["busy_intervals"]["vector"] == [[90, 100], [105, 110]]
    assert ops_rows_json(rows) == _plain(rows)
    assert ops_rows_json(rows[3:]) == _plain(rows[3:])   # a group cut short: its own template


def test_a_moved_row_pickles_as_a_plain_dict():
    import pickle

    span = OperationSpan("ADD", "ADD", "vector", 0, 30, 40, busy_intervals={"vector": [(30, 40)]})
    row = span.shifted(1, 10).as_dict()
    copy = pickle.loads(pickle.dumps(row))
    assert type(copy) is dict and copy == row
