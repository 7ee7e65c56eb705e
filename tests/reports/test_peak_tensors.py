"""reports.peak_tensors: the allocations in the TCM at its busiest cycle."""

from __future__ import annotations

from npu_sim.hw.config import load_hw_config
from npu_sim.hw.trace import AllocationRecord
from npu_sim.program import Allocation, MemorySpace
from reports.occupancy import occupancy_steps
from reports.peak_tensors import resident_constant_tcm_bytes, tcm_peak
from reports.summary import build_summary
from tests.reports.synthetic import tiny_case


def test_the_tiny_case_peaks_when_the_conv_output_joins_its_inputs():
    """in_tcm (512 B) and w_tcm (256 B) from cycle 0, conv_out (256 B) from 100: 1 KiB at 100."""
    _, trace = tiny_case()
    peak = tcm_peak(trace.allocations, *occupancy_steps(trace.allocations, MemorySpace.TCM))
    assert (peak["cycle"], peak["bytes"], peak["more"]) == (100, 1024, 0)
    assert peak["by_kind"] == {"tile": 768, "activation": 256}
    assert [(t["name"], t["kind"], t["offset_bytes"], t["size_bytes"], t["first_cycle"], t["last_cycle"])
            for t in peak["tensors"]] == [("in_tcm", "tile", 0, 512, 0, 500), ("w_tcm", "tile", 512, 256, 0, 500),
                                          ("conv_out", "activation", 768, 256, 100, 700)]


def test_the_summary_carries_it_and_its_bytes_are_the_live_peak():
    program, trace = tiny_case()
    s = build_summary(trace, load_hw_config("edge"), program)
    assert s["tcm_peak"]["bytes"] == s["peak_live_tcm_bytes"] == 1024
    assert sum(t["size_bytes"] for t in s["tcm_peak"]["tensors"]) == 1024


def test_an_empty_tcm_and_a_long_list():
    assert tcm_peak([], [], []) == {"cycle": 0, "bytes": 0, "by_kind": {}, "tensors": [], "more": 0}
    many = [AllocationRecord(f"t{i}", "tcm", 16 * i, 16, "tile", 0, 0, 10) for i in range(205)]
    peak = tcm_peak(many, *occupancy_steps(many, MemorySpace.TCM))
    assert (peak["bytes"], len(peak["tensors"]), peak["more"]) == (205 * 16, 200, 5)
    assert peak["tensors"][0]["name"] == "t0" and peak["tensors"][-1]["name"] == "t199"


def test_resident_constants_are_the_tcm_constants_without_a_lifetime():
    """A resident pool (whole program) counts; a streamed chunk (live over commands 3-7), a
    constant in the DDR and a TCM activation do not."""
    allocations = [Allocation("constant_pool", MemorySpace.TCM, 0, 4096, "constant"),
                   Allocation("constant_pool[0:512)", MemorySpace.TCM, 4096, 512, "constant", 3, 7),
                   Allocation("w", MemorySpace.DDR, 0, 65536, "constant"),
                   Allocation("x", MemorySpace.TCM, 4608, 1024, "activation")]
    assert resident_constant_tcm_bytes(allocations) == 4096
    program, trace = tiny_case()
    assert build_summary(trace, load_hw_config("edge"), program)["tcm_resident_constant_bytes"] == 0
