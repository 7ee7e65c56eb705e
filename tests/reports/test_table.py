"""reports.table: the per-operation table and the totals line."""

from __future__ import annotations

from rich.console import Console

from npu_sim.hw.config import load_hw_config
from reports.summary import build_summary
from reports.table import human_bytes, ops_table, print_report, totals_line
from tests.reports.synthetic import many_tiles_case, tiny_case


def _render(table) -> str:
    console = Console(width=160, record=True)
    console.print(table)
    return console.export_text()


def test_rows_of_the_tiny_case():
    program, trace = tiny_case()
    s = build_summary(trace, load_hw_config("edge"), program, graph="tiny.tosa")
    text = _render(ops_table(s))
    assert "tiny.tosa on edge: 2 NPU operations" in text
    conv = next(line for line in text.splitlines() if " conv " in line)
    assert all(cell in conv for cell in ("CONV2D+RESCALE", "mac_array", "500", "50.0", "8,192", "768 B"))
    assert "1,000 cycles = 1.0 us at 1000 MHz; 8,192 MACs (3.2% of peak)" in totals_line(s)


def test_long_tables_are_cut_and_other_invocations_hidden():
    program, trace = many_tiles_case(layers=8, tiles=2, invocations=2)
    s = build_summary(trace, load_hw_config("edge"), program)
    text = _render(ops_table(s, max_rows=5))
    assert "(invocation 0 of 2)" in text and "3 more in summary.json" in text
    console = Console(width=200, record=True)
    print_report(s, console)
    assert "busy: dma0" in console.export_text()


def test_human_bytes():
    assert [human_bytes(n) for n in (0, 1023, 1024, 1536, 3 << 20, 5 << 30)] == [
        "0 B", "1023 B", "1 KiB", "1.5 KiB", "3 MiB", "5 GiB"]
