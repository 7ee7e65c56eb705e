"""reports.table: the per-operation table and the totals line."""

from __future__ import annotations

import io
import sys

from rich.console import Console

from npu_sim.hw.config import load_hw_config
from reports.summary import build_summary
from reports.table import (
    block_tensors_line,
    human_bytes,
    ops_table,
    print_report,
    report_text,
    tcm_peak_line,
    totals_line,
)
from tests.reports.synthetic import many_tiles_case, tiny_case


def _render(table: str) -> str:
    return table


def test_rows_of_the_tiny_case():
    program, trace = tiny_case()
    s = build_summary(trace, load_hw_config("edge"), program, graph="tiny.tosa")
    text = _render(ops_table(s))
    assert "tiny.tosa on edge: 2 NPU operations" in text
    conv = next(line for line in text.splitlines() if " conv " in line)
    assert all(cell in conv for cell in ("CONV2D+RESCALE", "mac_array", "500", "50.0", "compute", "8,192",
                                         "768 B"))
    assert "1,000 cycles = 1.0 us at 1000 MHz; 8,192 MACs (3.2% of peak)" in totals_line(s)


def test_the_tcm_line_says_what_the_peak_is_made_of():
    """The tiny case peaks at cycle 100 with two tiles (768 B) and conv_out (256 B)."""
    program, trace = tiny_case()
    s = build_summary(trace, load_hw_config("edge"), program, graph="tiny.tosa")
    assert tcm_peak_line(s, largest=2) == ("TCM at its peak (cycle 100): tile 768 B (75%), activation 256 B (25%); "
                                           "largest: in_tcm 512 B, w_tcm 256 B")
    assert tcm_peak_line(s) in report_text(s).splitlines()
    constants = {**s, "tcm_peak": {**s["tcm_peak"], "by_kind": {"activation": 768, "constant": 256}}}
    assert tcm_peak_line({**constants, "tcm_resident_constant_bytes": 256}, largest=0) == \
        "TCM at its peak (cycle 100): activation 768 B (75%), constant 256 B (25%, 256 B resident)"
    assert tcm_peak_line(constants, largest=0) == \
        "TCM at its peak (cycle 100): activation 768 B (75%), constant 256 B (25%, streamed)"
    assert tcm_peak_line({}) == ""


def test_a_row_counts_its_busy_cycles_with_its_span_apart():
    """A lazily loaded pool: two 100-cycle loads 5,000 cycles apart are 200 cycles of work
    (2% of a 10,000-cycle run), over a 5,100-cycle span."""
    from npu_sim.hw.trace import InvocationRecord
    from npu_sim.program import OperationStats
    from tests.reports.synthetic import Trace, cmd, counters_of, operations_only

    commands = [cmd(0, "pool/0", "dma", "dma0", "copy", 0, 100, rd=64),
                cmd(1, "pool/1", "dma", "dma0", "copy", 5000, 5100, rd=64)]
    program, _ = tiny_case()
    program.stats = operations_only(OperationStats("constant_pool", "LOAD", "dma", commands=(0, 1)))
    trace = Trace(commands, [], [InvocationRecord(0, 0, 10_000)], counters_of(commands), ["dma0"])
    s = build_summary(trace, load_hw_config("edge"), program)
    [row] = s["ops"]
    assert (row["cycles"], row["span_cycles"], row["busy_intervals"]) == (200, 5100, {"dma0": [[0, 100], [5000, 5100]]})
    line = next(line for line in ops_table(s).splitlines() if "constant_pool" in line)
    assert [c.strip() for c in line.split("│")[5:9]] == ["0", "200", "2.0", "5,100"]


def test_a_summary_from_before_busy_rows_takes_its_commands_busy_cycles():
    from reports.table import op_cycles

    old = {"start_cycle": 0, "end_cycle": 5100, "cycles": 5100, "compute_cycles": 0, "dma_cycles": 200}
    assert op_cycles(old) == 200
    assert op_cycles({**old, "dma_cycles": 9000}) == 5100


def test_long_tables_are_cut_and_other_invocations_hidden():
    program, trace = many_tiles_case(layers=8, tiles=2, invocations=2)
    s = build_summary(trace, load_hw_config("edge"), program)
    text = _render(ops_table(s, max_rows=5))
    assert "(invocation 0 of 2)" in text and "3 more in summary.json" in text
    console = Console(width=200, record=True)
    print_report(s, console)
    assert "busy: dma0" in console.export_text()


def test_the_box_is_aligned_and_long_names_fold():
    program, trace = tiny_case()
    s = build_summary(trace, load_hw_config("edge"), program, graph="tiny.tosa")
    s["ops"][0]["name"] = "x" * 50
    lines = ops_table(s).splitlines()
    assert lines[0] == "tiny.tosa on edge: 2 NPU operations"
    assert len({len(line) for line in lines[1:]}) == 1          # every line of the box as wide
    assert lines[1].startswith("┏") and lines[-1].startswith("└")
    folded = [line for line in lines if "xxxx" in line]
    assert [line.count("x") for line in folded] == [44, 6]      # the operation column is 44 wide
    assert lines[2].split("┃")[1:3] == ["# ", " operation" + " " * 36]  # 44 wide + 1 space each side
    assert lines[2].split("┃")[9] == " bound   "                  # left-aligned like its cells
    assert lines[2].split("┃")[10] == "  MACs "                   # headers aligned like their column


def test_human_bytes():
    assert [human_bytes(n) for n in (0, 1023, 1024, 1536, 3 << 20, 5 << 30)] == [
        "0 B", "1023 B", "1 KiB", "1.5 KiB", "3 MiB", "5 GiB"]


def test_outputs_without_box_characters_get_ascii(monkeypatch):
    program, trace = tiny_case()
    s = build_summary(trace, load_hw_config("edge"), program, graph="tiny.tosa")
    ascii_out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr(sys, "stdout", ascii_out)
    print_report(s)
    ascii_out.seek(0)
    text = ascii_out.read()
    assert text.splitlines()[1].startswith("+==") and "busy: dma0" in text


def test_a_console_gets_what_console_out_would_write():
    # print_report writes the text as two segments (no per-line Text layout): byte for byte
    # what console.out(text, highlight=False) writes, whatever the console's settings
    program, trace = many_tiles_case(layers=8, tiles=2, invocations=1)
    s = build_summary(trace, load_hw_config("edge"), program)
    text = report_text(s)
    settings = [dict(width=132), dict(width=40),
                dict(width=80, force_terminal=True, color_system="truecolor"),
                dict(style="bold", force_terminal=True, color_system="256"), dict(soft_wrap=True, width=20),
                dict(width=60, record=True)]
    for tabs in (False, True):  # tabs (or control codes) in a name: console.out's own path
        if tabs:
            s["ops"][0]["name"] = "a\tname\rwith\x07codes"
            text = report_text(s)
        for kwargs in settings:
            ours, theirs = io.StringIO(), io.StringIO()
            ours_console, theirs_console = Console(file=ours, **kwargs), Console(file=theirs, **kwargs)
            print_report(s, ours_console)
            theirs_console.out(text, highlight=False)
            assert ours.getvalue() == theirs.getvalue(), kwargs
            if kwargs.get("record"):
                assert ours_console.export_text(styles=True) == theirs_console.export_text(styles=True)


def test_the_block_tensors_line():
    assert block_tensors_line({"block_tensors": {"count": 0, "blocks": 0, "pointer_table_bytes": 0}}) == ""
    assert block_tensors_line({}) == ""
    line = block_tensors_line({"block_tensors": {"count": 8, "blocks": 294, "pointer_table_bytes": 1176}})
    assert line == ("block tensors: 8 stored as 294 blocks in the TCM's holes instead of spilling (pointer tables "
                    "1.15 KiB in the variable SRAM; --no-block-tensors to compare)")
