"""The golden cycle figures (``tests/golden/cycles.json``) still hold.

A timing change fails here, naming the model, the preset and the figures that moved; run
``make golden`` to regenerate the file and say in the commit why they moved.
"""

from __future__ import annotations

import pytest

from tests.golden.figures import case_key, cases, differences, measure, read_golden

GOLDEN = read_golden()


def test_every_case_is_pinned():
    assert sorted(GOLDEN) == sorted(case_key(*case) for case in cases())


@pytest.mark.parametrize("case", cases(), ids=lambda c: case_key(*c).replace(" ", "_"))
def test_figures_unchanged(case):
    key = case_key(*case)
    moved = differences({key: GOLDEN[key]}, {key: measure(*case)})
    assert not moved, "timing moved (run `make golden`, and say why in the commit):\n" + "\n".join(moved)
