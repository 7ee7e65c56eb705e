"""Hardware configs: presets, extends, validation errors naming the field, and `npu-sim hw`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from npu_sim.cli import main
from npu_sim.errors import ConfigError
from npu_sim.hw.config import (
    PRESET_DIR,
    deep_merge,
    hw_config_from_dict,
    load_hw_config,
    preset_names,
    raw_config_dict,
    resolved_config_dict,
    with_block_tensors,
)
from tests.hw.hw_programs import config_dict


def test_presets_load_with_their_headline_figures():
    assert {"tiny", "edge", "server", "ethos-u55-128", "ethos-u55-256", "ethos-u65-256", "ethos-u65-512",
            "ethos-u85-256"} <= set(preset_names())
    tiny, edge, server = load_hw_config("tiny"), load_hw_config("edge"), load_hw_config("server")
    assert (tiny.mac_array.int8_macs_per_cycle, tiny.tcm.size_bytes, tiny.clock_hz,
            tiny.ddr.bandwidth_bytes_per_cycle) == (128, 256 * 1024, 500_000_000, 8)
    assert (edge.mac_array.int8_macs_per_cycle, edge.tcm.size_bytes, edge.clock_hz,
            edge.ddr.bandwidth_bytes_per_cycle, edge.ddr.read_latency_cycles,
            edge.ddr.write_latency_cycles, edge.ddr.burst_size_bytes) == (
        256, 512 * 1024, 1_000_000_000, 16, 500, 250, 128)
    assert (server.mac_array.int8_macs_per_cycle, server.tcm.size_bytes,
            server.ddr.bandwidth_bytes_per_cycle) == (4096, 4 * 1024 * 1024, 64)
    assert "fp32" not in tiny.mac_array.macs_per_cycle  # like the Ethos-U55: no floating point


@pytest.mark.parametrize("name, macs, tcm_bytes, clock_hz, profile, arena, add_cycles", [
    ("ethos-u55-128", 128, 8 << 20, 500_000_000, "ethos-u55", "tcm", 1.5),
    ("ethos-u55-256", 256, 8 << 20, 500_000_000, "ethos-u55", "tcm", 0.75),
    ("ethos-u65-256", 256, 384 << 10, 1_000_000_000, "ethos-u65", "ddr", 0.75),
    ("ethos-u65-512", 512, 384 << 10, 1_000_000_000, "ethos-u65", "ddr", 0.375),
    ("ethos-u85-256", 256, 384 << 10, 1_000_000_000, "ethos-u85", "ddr", 0.25),
])
def test_the_ethos_presets_by_vela_config(name, macs, tcm_bytes, clock_hz, profile, arena, add_cycles):
    """MACs, SRAM, clock, operator support and memory mode of each Vela match (bench_vela MATCHES);
    the output unit's advanced-ADD cycles per element from regor's s_EthosU5xPerfInfo."""
    hw = load_hw_config(name)
    assert (hw.mac_array.int8_macs_per_cycle, hw.tcm.size_bytes, hw.clock_hz) == (macs, tcm_bytes, clock_hz)
    assert (hw.npu_support.profile, hw.memory_roles.arena, hw.vector.cycles_per_element["add"]) == \
        (profile, arena, add_cycles)
    assert hw.ddr.read_only == (arena == "tcm")   # Shared_Sram: the U55's DDR is its flash


def test_repo_hw_configs_folder_is_the_preset_folder():
    repo = Path(__file__).resolve().parents[2]
    assert (repo / "hw_configs").resolve() == PRESET_DIR.resolve()


def test_extends_deep_merges_a_preset(tmp_path):
    path = tmp_path / "fast_edge.yaml"
    path.write_text("extends: edge\nddr:\n  bandwidth_bytes_per_cycle: 32\n")
    config = load_hw_config(path)
    assert config.name == "fast_edge"
    assert config.description == "edge with overrides"
    assert config.ddr.bandwidth_bytes_per_cycle == 32
    assert config.ddr.read_latency_cycles == 500  # kept from edge
    assert load_hw_config("ethos-u65-256").ddr.bandwidth_bytes_per_cycle == 12


def test_extends_a_relative_path_and_detects_cycles(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(ConfigError, match="extends cycle"):
        load_hw_config(tmp_path / "a.yaml")


def test_int8_rate_is_implied_by_the_array():
    data = config_dict(mac_array={"rows": 4, "cols": 8, "macs_per_cycle": {"int16": 16}})
    assert hw_config_from_dict(data).mac_array.macs_per_cycle == {"int8": 32, "int16": 16}


def test_deep_merge_replaces_scalars_and_merges_mappings():
    assert deep_merge({"a": {"x": 1, "y": 2}, "b": 1}, {"a": {"y": 3}, "b": {"z": 1}}) == {
        "a": {"x": 1, "y": 3}, "b": {"z": 1}}


@pytest.mark.parametrize("overrides, message", [
    ({"ddr": {"bandwith_bytes_per_cycle": 16}}, r"^test: ddr\.bandwith_bytes_per_cycle: Extra inputs"),
    ({"ddr": {"bandwidth_bytes_per_cycle": 0}}, r"^test: ddr\.bandwidth_bytes_per_cycle: .*greater than 0"),
    ({"tcm": {"size_bytes": -4}}, r"^test: tcm\.size_bytes: .*greater than 0"),
    ({"clock_hz": 0}, r"^test: clock_hz: .*greater than 0"),
    ({"ddr": {"size_bytes": 32}}, r"^test: ddr\.burst_size_bytes: a burst of 64 bytes is larger than the DDR"),
    ({"tcm": {"bank_count": 3}}, r"^test: tcm\.bank_count: 3 banks do not divide size_bytes"),
    ({"mac_array": {"macs_per_cycle": {"int8": 64}}},
     r"^test: mac_array\.macs_per_cycle\.int8: 64 is inconsistent with rows\*cols = 32"),
    ({"mac_array": {"macs_per_cycle": {"int16": 12}}}, r"^test: mac_array\.macs_per_cycle\.int16: 12 must divide"),
    ({"vector": {"elements_per_cycle": {"int8": 8, "int7": 4}}},
     r"^test: vector\.elements_per_cycle\.int7: unknown dtype"),
    ({"dma": {"engine_count": "two"}}, r"^test: dma\.engine_count: "),
    ({"lut": {"elements_per_cycle": 2.5}}, r"^test: lut\.elements_per_cycle: "),
    ({"mac_array": {"accumulator_buffers": 3}}, r"^test: mac_array\.accumulator_buffers: .*less than or equal to 2"),
    ({"mac_array": {"accumulator_buffers": 0}}, r"^test: mac_array\.accumulator_buffers: .*greater than or equal to 1"),
    ({"npu_support": {"profile": "ethos-u99"}},
     r"^test: npu_support\.profile: unknown profile 'ethos-u99' \(known: all, ethos-u55, ethos-u65, ethos-u85\)"),
    ({"cpu": {"cycles_per_mac": {"int7": 1.0}}}, r"^test: cpu\.cycles_per_mac\.int7: unknown dtype"),
    ({"cpu": {"elementwise_cycles_per_element": {"fp32": 0.0}}},
     r"^test: cpu\.elementwise_cycles_per_element\.fp32: must lie in \(0, 65536\], got 0\.0"),
    ({"cpu": {"transcendental_cycles_per_element": {}}}, r"^test: cpu\.transcendental_cycles_per_element: needs"),
    ({"ddr": {"read_only": True}}, r"^test: memory_roles\.arena: the ddr is read-only \(flash\); nothing may be"),
    ({"ddr": {"read_only": True}, "memory_roles": {"arena": "tcm"}}, r"^test: memory_roles\.spills: the ddr is read"),
    ({"memory_roles": {"spills": "tcm"}}, r"^test: memory_roles\.spills: Input should be 'ddr' or 'none'"),
    ({"vector": {"scaled_ops": ["TABLE"]}}, r"^test: vector\.scaled_ops: TABLE cannot be scaled \(known: ADD, SUB"),
    ({"vector": {"cycles_per_element": {"reduce_maximum": 1.0}}}, r"^test: vector\.cycles_per_element: unknown kind"),
    ({"vector": {"transpose_block_positions": {"int4": 8}}}, r"^test: vector\.transpose_block_positions: keys are"),
    ({"vector": {"transpose_block_positions": {"int16": 0}}}, r"^test: vector\.transpose_block_positions\.int16: "),
    ({"mac_array": {"part_kernel_elements": 65}}, r"^test: mac_array\.part_kernel_elements: .*less than or equal"),
    ({"lut": {"wide_cycles_per_element": -1}}, r"^test: lut\.wide_cycles_per_element: .*greater than or equal"),
])
def test_invalid_configs_name_the_field(overrides, message):
    data = config_dict(**overrides)
    with pytest.raises(ConfigError, match=message) as info:
        hw_config_from_dict(data, "test")
    assert "\n" not in str(info.value)


def test_missing_field_is_named():
    data = config_dict()
    del data["lut"]["setup_cycles"]
    with pytest.raises(ConfigError, match=r"^test: lut\.setup_cycles: Field required$"):
        hw_config_from_dict(data, "test")


def test_unknown_preset_and_missing_file():
    with pytest.raises(ConfigError, match="unknown hardware config 'nosuch'.*edge"):
        load_hw_config("nosuch")
    with pytest.raises(ConfigError, match="not found"):
        load_hw_config("missing/dir/config.yaml")


def test_bad_yaml_and_non_mapping(tmp_path):
    (tmp_path / "bad.yaml").write_text("ddr: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_hw_config(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_hw_config(tmp_path / "list.yaml")


def test_cli_hw_list_and_show(capsys):
    assert main(["hw", "list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("tiny", "edge", "server"))
    assert main(["hw", "show", "ethos-u55-256"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown == resolved_config_dict("ethos-u55-256")
    assert shown["mac_array"]["rows"] == 16 and shown["dma"]["engine_count"] == 2  # from tiny


def test_cli_hw_show_unknown_exits_2_with_one_line():
    result = subprocess.run([sys.executable, "-m", "npu_sim.cli", "hw", "show", "nosuch"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: unknown hardware config")


def test_accumulators_are_double_buffered_unless_the_config_says_one():
    assert hw_config_from_dict(config_dict(), "test").mac_array.accumulator_buffers == 2
    single = hw_config_from_dict(config_dict(mac_array={"accumulator_buffers": 1}), "test")
    assert single.mac_array.accumulator_buffers == 1


def test_mac_array_rates_are_per_pe_so_rows_alone_can_change():
    """Presets state cycles per MAC per PE, so changing rows keeps a valid config with scaled rates."""
    data = raw_config_dict("edge")
    data["mac_array"]["rows"] = 8
    hw = hw_config_from_dict(data)
    assert hw.mac_array.pe_cycles_per_mac == {"int8": 1, "int16": 2, "fp16": 2, "bf16": 2, "fp32": 4}
    assert hw.mac_array.macs_per_cycle == {"int8": 128, "int16": 64, "fp16": 64, "bf16": 64, "fp32": 32}


def test_mac_array_rate_tables_must_agree():
    data = config_dict(mac_array={"rows": 4, "cols": 8, "macs_per_cycle": {"int16": 16},
                                  "pe_cycles_per_mac": {"int16": 4}})
    with pytest.raises(ConfigError, match=r"pe_cycles_per_mac\.int16: 4 disagrees"):
        hw_config_from_dict(data, "test")


def test_block_tensors_are_on_by_default_and_switch_off():
    hw = load_hw_config("tiny")
    assert (hw.block_tensors.enabled, hw.block_tensors.block_bytes, hw.block_tensors.pointer_bytes,
            hw.block_tensors.table_read_cycles_per_entry) == (True, 256, 4, 1)
    off = with_block_tensors(hw, False)
    assert not off.block_tensors.enabled and off.tcm == hw.tcm
    assert with_block_tensors(hw, True) is hw
