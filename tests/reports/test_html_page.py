"""reports.html_page: self-contained pages, sortable tables whose cells keep their exact values."""

from __future__ import annotations

from reports.html_page import Column, html_page, html_table, sortable_table
from reports.human_units import cycles, percent


def test_a_sortable_table_keeps_the_exact_value_behind_each_formatted_number():
    table = sortable_table([Column("name", "op", False, width_px=200), Column("cycles", "cycles", show=cycles),
                            Column("share", "share", show=percent), Column("tag", "tag", False, lambda t: t,
                                                                           markup=True)],
                           [{"name": "<conv>", "cycles": 70516, "share": 0.25, "tag": "<b>x</b>"},
                            {"name": "add", "cycles": 5, "share": ""}],
                           table_id="ops", row_ids=["op-0", "op-1"], row_classes=["composite", ""])
    assert '<table class="sortable" id="ops">' in table
    assert ('<th data-type="text" class=t style=min-width:200px>op</th><th data-type="num">cycles</th>'
            in table)
    assert ('<tr id="op-0" class="composite"><td class="t w">&lt;conv&gt;</td><td data-v="70516">70,516</td>'
            '<td data-v="0.25">25.0 %</td><td class="t"><b>x</b></td></tr>') in table
    assert '<tr id="op-1"><td class="t w">add</td><td data-v="5">5</td><td></td><td class="t"></td></tr>' in table


def test_the_page_fetches_nothing():
    page = html_page("a <title>", ["<p>x</p>"], "sub")
    assert page.startswith("<!DOCTYPE html>") and "<title>a &lt;title&gt;</title>" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in page
    assert "<script src" not in page and "<link" not in page
    assert html_table(["a", "b"], [{"a": 1.5, "b": "x"}]) == (
        '<table><thead><tr><th data-type="num">a</th><th>b</th></tr></thead><tbody><tr>'
        '<td data-v="1.5">1.5</td><td>x</td></tr></tbody></table>')


def test_a_text_column_may_sort_by_a_key_other_than_its_markup():
    table = sortable_table([Column("label", "operation", False, lambda v: f"{v[0]} <i>{v[1]}</i>", markup=True,
                                   sort_key=lambda v: v[0])], [{"label": ("conv", "3 fused")}], table_id="t")
    assert '<td class="t" data-v="conv">conv <i>3 fused</i></td>' in table
