"""Hardware configs read strictly: UTF-8, no repeated key, physically sane numbers, a
bounded ``extends`` chain; each refusal one line naming the file and the field."""

from __future__ import annotations

import pytest

from npu_sim.errors import ConfigError
from npu_sim.hw.config import MAX_EXTENDS_DEPTH, load_hw_config
from tests.robustness.hostile import add_graph, npu_sim, save


@pytest.mark.parametrize("text, message", [
    ("extends: edge\ndescription: caf\xe9\n".encode("latin-1"), "not UTF-8 text (byte 0xe9 at offset 30)"),
    (b"extends: edge\nclock_hz: 1000\nclock_hz: 2000\n", "duplicate key 'clock_hz' (line 3)"),
    (b"extends: edge\ntcm: {size_bytes: 1, size_bytes: 2}\n", "duplicate key 'size_bytes'"),
    (b"extends: edge\ntcm: {size_bytes: %d}\n" % 2**70,
     "tcm.size_bytes: Input should be less than or equal to 1099511627776"),
    (b"extends: edge\ndma: {setup_cycles: %d}\n" % 10**30,
     "dma.setup_cycles: Input should be less than or equal to 4294967296"),
    (b"extends: edge\nddr: {read_latency_cycles: 4294967297}\n", "ddr.read_latency_cycles"),
    (b"extends: edge\nddr: {bandwidth_bytes_per_cycle: 0}\n",
     "ddr.bandwidth_bytes_per_cycle: Input should be greater than 0"),
    (b"extends: edge\nvector: {elements_per_cycle: {int8: -4}}\n", "vector.elements_per_cycle.int8"),
    (b"extends: edge\nmac_array: {rows: 0}\n", "mac_array.rows: Input should be greater than 0"),
    (b"extends: edge\nclock_hz: 1.0e+30\n", "clock_hz"),
    (b"extends: edge\ntcm: [1, 2\n", "not valid YAML"),
    (b"- 1\n- 2\n", "must be a mapping"),
    (b"extends: edge\ncomposites: [attention_head]\n",
     "composites: unknown composite 'attention_head' (known: gru_cell, lstm_cell)"),
    (b"extends: edge\nvector: {cycles_per_element: {sqrt: 1.0}}\n", "cycles_per_element: unknown kind(s) sqrt"),
    (b"extends: edge\nvector: {cycles_per_element: {add: -1.0}}\n", "every value must lie in (0, 1024]"),
    (b"extends: edge\nvector: {rescale_micro_block: [1, 0, 16]}\n", "vector.rescale_micro_block.1"),
    (b"extends: edge\nvector: {transpose_micro_block: [1, 2, 3, 4]}\n", "vector.transpose_micro_block"),
    (b"extends: edge\nvector: {transpose_cycles_per_micro_block_bit: -2}\n",
     "vector.transpose_cycles_per_micro_block_bit"),
    (b"extends: edge\nmac_array: {ofm_micro_block: [2, 0]}\n", "mac_array.ofm_micro_block.1"),
    (b"extends: edge\nmac_array: {ofm_block_min_depth: -32}\n", "mac_array.ofm_block_min_depth"),
    (b"extends: edge\nmac_array: {epilogue_ops: [MUL]}\n", "epilogue_ops: MUL cannot be fused"),
    (b"extends: edge\nmac_array: {ifm_depth_granule: 0}\n", "mac_array.ifm_depth_granule"),
    (b"extends: edge\nmac_array: {ofm_block_elements: -1}\n", "mac_array.ofm_block_elements"),
    (b"extends: edge\nmac_array: {ofm_block_max_depth: 1.0e+40}\n", "mac_array.ofm_block_max_depth"),
    (b"extends: edge\nvector: {transpose_reductions: maybe}\n", "vector.transpose_reductions"),
    (b"extends: edge\nvector: {transpose_block_bytes: -16}\n", "vector.transpose_block_bytes"),
    (b"extends: edge\nvector: {transpose_block_positions: {int4: 8}}\n", "vector.transpose_block_positions: keys"),
    (b"extends: edge\nmac_array: {lut_epilogue_cycles_per_element: -1}\n", "mac_array.lut_epilogue_cycles_per_element"),
    (b"extends: edge\ntcm: {wide_ifm_block_fetch_bits: 99}\n", "tcm.wide_ifm_block_fetch_bits"),
    (b"extends: edge\nmac_array: {ifm_depth_granule_by_dtype: {int16: 0}}\n", "mac_array.ifm_depth_granule_by_dtype"),
    (b"extends: edge\nvector: {transpose_read_bytes_per_cycle: .nan}\n", "vector.transpose_read_bytes_per_cycle"),
    (b"extends: edge\ndma: {thin_pixel_access_bytes: -8}\n", "dma.thin_pixel_access_bytes"),
    (b"extends: edge\nlut: {table_source_latency_cycles: -1}\n", "lut.table_source_latency_cycles"),
    (b"extends: edge\nmac_array: {weight_decode_weights_per_cycle: -8}\n",
     "mac_array.weight_decode_weights_per_cycle"),
    # this session's fields
    (b"extends: edge\nvector: {block_latency_ops: [FOO]}\n", "vector.block_latency_ops: FOO is no TOSA operator"),
    (b"extends: edge\ntcm: {read_latency_cycles: -1}\n", "tcm.read_latency_cycles"),
    (b"extends: edge\ntcm: {write_latency_cycles: 70000}\n", "tcm.write_latency_cycles"),
    (b"extends: edge\ntcm: {ddr_recurrent_state: maybe}\n", "tcm.ddr_recurrent_state"),
    (b"extends: edge\ntcm: {in_place_ddr_feature_maps: 3}\n", "tcm.in_place_ddr_feature_maps"),
    (b"extends: edge\ntcm: {constant_stream_slack_fraction: 2}\n", "tcm.constant_stream_slack_fraction"),
    (b"extends: edge\nblock_tensors: {table_read_cycles_per_entry: -3}\n",
     "block_tensors.table_read_cycles_per_entry"),
    (b"extends: edge\nenergy: {cpu_cycle_pj: -1}\n", "energy.cpu_cycle_pj"),
    (b"extends: edge\ntcm: {packed_weight_streams: maybe}\n", "tcm.packed_weight_streams"),
    (b"extends: edge\ntcm: {ddr_ifm_refetch: 3}\n", "tcm.ddr_ifm_refetch"),
    (b"extends: edge\ntcm: {matrix_vector_weights_buffered_when_hidden: maybe}\n",
     "tcm.matrix_vector_weights_buffered_when_hidden"),
    (b"extends: edge\nstripes: {slack_fraction: 2}\n", "stripes.slack_fraction"),
    (b"extends: edge\nstripes: {optimise: speed}\n", "stripes.optimise"),
])
def test_a_bad_config_is_refused_naming_the_field(tmp_path, text, message):
    (tmp_path / "bad.yaml").write_bytes(text)
    with pytest.raises(ConfigError) as caught:
        load_hw_config(tmp_path / "bad.yaml")
    assert message in str(caught.value)
    assert str(tmp_path / "bad.yaml") in str(caught.value)


def test_an_extends_chain_deeper_than_the_limit_is_refused(tmp_path):
    depth = 2000
    for k in range(depth):
        (tmp_path / f"c{k}.yaml").write_text(f"extends: c{k + 1}.yaml\n" if k < depth - 1 else "extends: edge\n")
    with pytest.raises(ConfigError, match=f"extends chain deeper than {MAX_EXTENDS_DEPTH} files"):
        load_hw_config(tmp_path / "c0.yaml")
    (tmp_path / "c10.yaml").write_text("extends: edge\n")   # 11 deep: fine
    assert load_hw_config(tmp_path / "c0.yaml").tcm == load_hw_config("edge").tcm


def test_an_extends_cycle_is_named(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(ConfigError, match="extends cycle \\(a -> b -> a\\)"):
        load_hw_config(tmp_path / "a.yaml")


@pytest.mark.parametrize("command", [["plan"], ["run", "--random-inputs", "0", "-o", "out"]])
def test_the_cli_refuses_a_bad_config_in_one_line(tmp_path, command):
    graph = save(add_graph((4, 4)), tmp_path / "add.tosa")
    (tmp_path / "dup.yaml").write_text("extends: edge\nclock_hz: 1000\nclock_hz: 2000\n")
    npu_sim([command[0], graph, "--hw", "dup.yaml", *command[1:]], tmp_path).refused("duplicate key 'clock_hz'")
    assert not (tmp_path / "out").exists()


def test_a_sweep_spec_is_read_as_strictly(tmp_path):
    from npu_sim.sweep.spec import SweepSpecError, load_sweep_spec

    (tmp_path / "spec.yaml").write_text("graph: g.tosa\nhw: edge\nhw: tiny\naxes: {tcm.size_bytes: [65536]}\n")
    with pytest.raises(SweepSpecError, match="duplicate key 'hw' \\(line 3\\)"):
        load_sweep_spec(tmp_path / "spec.yaml")
    (tmp_path / "spec.yaml").write_bytes("graph: caf\xe9.tosa\n".encode("latin-1"))
    with pytest.raises(SweepSpecError, match="not UTF-8"):
        load_sweep_spec(tmp_path / "spec.yaml")


def test_the_cli_refuses_an_unknown_composite_in_one_line(tmp_path):
    graph = save(add_graph((4, 4)), tmp_path / "add.tosa")
    (tmp_path / "mine.yaml").write_text("extends: edge\ncomposites: [attention_head]\n")
    npu_sim(["plan", graph, "--hw", "mine.yaml"], tmp_path).refused("unknown composite 'attention_head'")


@pytest.mark.parametrize("text, message", [
    ("extends: ethos-u85-256\nmac_array: {ofm_block_elements: -1}\n", "mac_array.ofm_block_elements"),
    ("extends: ethos-u85-256\nvector: {transpose_block_bytes: many}\n", "vector.transpose_block_bytes"),
    ("extends: ethos-u85-256\ndma: {thin_pixel_access_bytes: 1.0e+12}\n", "dma.thin_pixel_access_bytes"),
    ("extends: ethos-u85-256\nlut: {table_source_latency_cycles: -500}\n", "lut.table_source_latency_cycles"),
    ("extends: ethos-u85-256\nmac_array: {channel_parameter_bytes: -10}\n", "mac_array.channel_parameter_bytes"),
    ("extends: ethos-u55-256\nvector: {per_channel_rescale_read_bytes: 1.0e+9}\n",
     "vector.per_channel_rescale_read_bytes"),
    ("extends: ethos-u55-256\nvector: {source_softmax_read_bytes: -1}\n", "vector.source_softmax_read_bytes"),
    ("extends: ethos-u85-256\nvector: {depth_reshape_min_depth: -16}\n", "vector.depth_reshape_min_depth"),
    ("extends: ethos-u55-256\ntcm: {read_once_weights_in_place: maybe}\n", "tcm.read_once_weights_in_place"),
    ("extends: ethos-u55-256\nvector: {rescale_multiplier_fetch_bytes: -64}\n",
     "vector.rescale_multiplier_fetch_bytes"),
    ("extends: ethos-u55-256\nmac_array: {max_stride: -1}\n", "mac_array.max_stride"),
    ("extends: ethos-u85-256\nmac_array: {decomposed_fetch_bytes_per_cycle: 0}\n",
     "mac_array.decomposed_fetch_bytes_per_cycle"),
    ("extends: ethos-u55-256\nvector: {depth_reshape_min_depth: 16.5}\n", "vector.depth_reshape_min_depth"),
    ("extends: ethos-u85-256\ndma: {prefetch_holds_partner_buffers: maybe}\n", "dma.prefetch_holds_partner_buffers"),
    ("extends: ethos-u55-256\ntcm: {parameters_in_command_stream: 3}\n", "tcm.parameters_in_command_stream"),
    ("extends: ethos-u55-256\nvector: {source_squared_difference_read_bytes: -4}\n",
     "vector.source_squared_difference_read_bytes"),
    ("extends: ethos-u55-256\nvector: {cycles_per_element: {source_squared_difference: -1}}\n",
     "vector.cycles_per_element"),
    ("extends: ethos-u85-256\nvector: {cycles_per_element: {source_softmax_int16: 1.0e+9}}\n",
     "vector.cycles_per_element"),
    ("extends: ethos-u85-256\nlut: {fused_activation_table_loads_free: maybe}\n",
     "lut.fused_activation_table_loads_free"),
])
def test_the_cli_refuses_a_bad_calibration_field_in_one_line(tmp_path, text, message):
    graph = save(add_graph((4, 4)), tmp_path / "add.tosa")
    (tmp_path / "bad.yaml").write_text(text)
    npu_sim(["plan", graph, "--hw", "bad.yaml"], tmp_path).refused(message)
