"""Energy and area: counted from the simulated events with the config's per-event figures."""

from __future__ import annotations

import pytest

from npu_sim.hw.config import hw_config_from_dict, raw_config_dict
from npu_sim.inputs import load_inputs
from npu_sim.simulation import simulate
from npu_sim.tosa.loader import load_graph
from reports.energy import area_breakdown_mm2


def test_area_grows_with_tcm_and_mac_rows_and_scales_with_technology():
    data = raw_config_dict("edge")
    base = sum(area_breakdown_mm2(hw_config_from_dict(data)).values())
    data["mac_array"]["rows"] = 32
    more_pes = sum(area_breakdown_mm2(hw_config_from_dict(data)).values())
    data["tcm"]["size_bytes"] *= 2
    more_tcm = sum(area_breakdown_mm2(hw_config_from_dict(data)).values())
    assert base < more_pes < more_tcm
    # 16 more rows of 16 PEs, each with int8, int16, fp16, bf16 and fp32 datapaths
    assert more_pes - base == pytest.approx(256 * (0.00032 + 0.0012 + 0.002 + 0.002 + 0.0085))
    data["area"] = {"technology_nm": 22.5}
    assert sum(area_breakdown_mm2(hw_config_from_dict(data)).values()) == pytest.approx(more_tcm / 4)


def test_run_summary_energy_counts_macs_ddr_bursts_and_static_power():
    graph = load_graph("examples/conv_rescale_int8.tosa")
    inputs = load_inputs(graph, [], random_seed=0).invocations[0]
    result = simulate(graph, "edge", inputs)
    s = result.summary
    parts = s["energy_breakdown_pj"]
    assert s["energy_pj"] == pytest.approx(sum(parts.values()))
    assert parts["mac_array"] == pytest.approx(s["macs"] * 0.23)
    assert parts["ddr"] == pytest.approx((s["ddr_read_burst_bytes"] + s["ddr_write_burst_bytes"]) * 160.0)
    sram_kib = (524288 + 65536) / 1024
    assert parts["static"] == pytest.approx((5.0 + 0.01 * sram_kib) * 1e-3 * s["seconds"] * 1e12)
    assert s["area_mm2"] == pytest.approx(sum(s["area_breakdown_mm2"].values()))


def test_the_host_cpu_s_busy_cycles_count_at_its_energy_per_cycle():
    """On the Ethos-U55 the keyword transformer's softmax (int32 REDUCE_MAX, int16 TABLEs)
    runs on the host CPU: its busy cycles times energy.cpu_cycle_pj (20 pJ at 45 nm)."""
    graph = load_graph("examples/kws_transformer_int8.tosa")
    inputs = load_inputs(graph, [], random_seed=0).invocations[0]
    s = simulate(graph, "ethos-u55-256", inputs).summary
    cpu_cycles = sum(op["cycles"] for op in s["cpu_ops"])
    assert cpu_cycles > 0
    assert s["energy_breakdown_pj"]["cpu"] == pytest.approx(cpu_cycles * 20.0)
    assert simulate(graph, "edge", inputs).summary["energy_breakdown_pj"]["cpu"] == 0.0


def test_pointer_table_reads_count_as_variable_sram_bytes():
    from npu_sim.program import ComputeCommand, DmaCommand, MemorySpace, View
    from npu_sim.tosa.dtype import DType
    from reports.energy import pointer_table_read_bytes

    hw = hw_config_from_dict(raw_config_dict("tiny"))
    blocks = View(MemorySpace.TCM, 200, (600,), DType.INT8, blocks=(0, 512, 1024, 256), block_bytes=256)
    load = DmaCommand(0, 0, View(MemorySpace.DDR, 0, (600,), DType.INT8), blocks)
    assert blocks.table_entries == (0, 1, 2, 3)
    assert pointer_table_read_bytes(load, hw) == 4 * 4
    assert pointer_table_read_bytes(ComputeCommand(1, "vector", (), ()), hw) == 0
