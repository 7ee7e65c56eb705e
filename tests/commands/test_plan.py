"""``npu-sim plan``: the Program listing and memory-plan statistics, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npu_sim.cli import main
from npu_sim.hw.config import load_hw_config
from npu_sim.program import Allocation, DmaCommand, MemorySpace, Program, View
from npu_sim.tosa.dtype import DType
from reports.plan_stats import format_plan_stats, plan_stats

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _cli(args: list, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_plan_prints_listing_and_stats(capsys):
    code, out, err = _cli(["plan", EXAMPLES / "conv_rescale_int8.tosa", "--hw", "tiny"], capsys)
    assert (code, err) == (0, "")
    assert out.startswith("ddr = alloc_storage(size=")
    assert "tcm = alloc_storage(size=" in out and "mac_array: CONV2D+RESCALE+CLAMP" in out
    stats_line = next(line for line in out.splitlines() if line.startswith("TCM: peak"))
    assert "lower bound" in stats_line and "overhead" in stats_line
    assert f"plan of {EXAMPLES / 'conv_rescale_int8.tosa'} for tiny:" in out


def test_plan_json(capsys):
    code, out, err = _cli(["plan", EXAMPLES / "while_loop_int32.tosa", "--hw", "edge", "--json"], capsys)
    assert (code, err) == (0, "")
    stats = json.loads(out)
    assert stats["hw_config"] == "edge" and stats["commands_per_unit"]["sequencer"] >= 1
    assert 0 < stats["tcm_lower_bound_bytes"] <= stats["peak_tcm_bytes"] <= stats["tcm_size_bytes"]
    assert stats["commands"] == sum(stats["commands_per_unit"].values())


def test_plan_counts_commands_per_unit_as_run_does(tmp_path, capsys):
    """Unused units too: add_mul_fp32 has nothing for the MAC array or the LUT."""
    graph = EXAMPLES / "add_mul_fp32.tosa"
    code, out, _ = _cli(["plan", graph, "--hw", "edge", "--json"], capsys)
    planned = json.loads(out)["commands_per_unit"]
    code, _, _ = _cli(["run", graph, "--hw", "edge", "--random-inputs", 1, "-o", tmp_path], capsys)
    ran = json.loads((tmp_path / "summary.json").read_text())["command_counts"]
    assert planned == ran
    assert planned["mac_array"] == planned["lut"] == 0


@pytest.mark.parametrize("args, message", [
    (["--hw", "nosuch"], "unknown hardware config"),
    (["--hw", "edge", "--bogus"], "--bogus"),
])
def test_plan_errors_exit_2_with_one_line(args, message, capsys):
    code, out, err = _cli(["plan", EXAMPLES / "conv_rescale_int8.tosa", *args], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err


def test_plan_stats_of_a_hand_built_program():
    tcm = View(MemorySpace.TCM, 0, (64,), DType.INT8)
    ddr = View(MemorySpace.DDR, 0, (64,), DType.INT8)
    commands = [DmaCommand(0, 0, ddr, tcm), DmaCommand(1, 1, tcm, ddr, deps=(0,))]
    allocations = [Allocation("x", MemorySpace.DDR, 0, 64, "input"),
                   Allocation("t", MemorySpace.TCM, 0, 64, "tile", 0, 1),
                   Allocation("u", MemorySpace.TCM, 64, 32, "tile", 1, 1)]
    program = Program({MemorySpace.DDR: 128, MemorySpace.TCM: 256}, allocations, commands, graph_name="g")
    stats = plan_stats(program, load_hw_config("edge"))
    assert stats["commands_per_unit"] == {"cpu": 0, "dma0": 1, "dma1": 1, "lut": 0, "mac_array": 0, "vector": 0}
    assert (stats["peak_tcm_bytes"], stats["tcm_lower_bound_bytes"], stats["tcm_overhead"]) == (96, 96, 0.0)
    assert stats["memories"]["tcm"] == {"plan_size_bytes": 256, "allocations": 2, "allocated_bytes": 96,
                                        "bytes_by_kind": {"tile": 96}}
    text = format_plan_stats(stats)
    assert "TCM: peak 96 B of 512 KiB; lower bound 96 B; overhead 0.0%" in text
    assert "spilled to DDR: nothing" in text


def test_plan_json_shows_each_block_tensors_table_and_blocks(capsys):
    """ds_cnn_kws_int16 on tiny with a 36 KiB TCM: 8 tensors stored as blocks (the first four
    activations of 16,000 B, 63 blocks of 256 B each, the last one 128 B), their tables one
    after another in the variable SRAM; without block tensors layer_66 spills."""
    args = ["plan", EXAMPLES / "ds_cnn_kws_int16.tosa", "--hw", EXAMPLES / "tiny_tcm36k.yaml", "--json"]
    code, out, err = _cli(args, capsys)
    assert (code, err) == (0, "")
    stats = json.loads(out)
    blocks = stats["block_tensors"]
    assert (blocks["count"], blocks["blocks"], blocks["pointer_table_bytes"]) == (8, 294, 1176)
    first = blocks["tensors"][0]
    assert {k: v for k, v in first.items() if k != "block_offsets"} == {
        "name": "layer_66", "size_bytes": 16000, "block_bytes": 256, "memory": "tcm",
        "pointer_table": {"memory": "var_sram", "offset_bytes": 0, "size_bytes": 252}}
    assert len(first["block_offsets"]) == 63 and first["block_offsets"][:4] == [0, 256, 512, 768]
    assert [t["pointer_table"]["offset_bytes"] for t in blocks["tensors"]] == [0, 256, 512, 768, 1024, 1056, 1088,
                                                                              1152]
    assert stats["spilled_values"] == ["layer_81"]
    assert stats["memories"]["var_sram"]["bytes_by_kind"] == {"pointer_table": 1176}
    code, out, err = _cli([*args, "--no-block-tensors"], capsys)
    assert (code, err) == (0, "")
    stats = json.loads(out)
    assert stats["block_tensors"] == {"count": 0, "blocks": 0, "pointer_table_bytes": 0, "tensors": []}
    assert stats["spilled_values"] == ["layer_66", "layer_81"]


def test_plan_text_names_the_block_tensors(capsys):
    code, out, err = _cli(["plan", EXAMPLES / "ds_cnn_kws_int16.tosa", "--hw", EXAMPLES / "tiny_tcm36k.yaml"], capsys)
    assert (code, err) == (0, "")
    line = next(line for line in out.splitlines() if line.startswith("block tensors:"))
    assert line.startswith("block tensors: 8 (294 blocks in the TCM's holes, pointer tables 1.15 KiB): layer_66, ")
    assert "%layer_66[block 62] = alloc_tensor(tcm, offset=" in out and "size=128, kind=activation)" in out


def test_optimise_size_runs_mobilenet_v3s_first_layers_in_stripes(capsys):
    args = ["plan", EXAMPLES / "mobilenet_v3_small_int8.tosa", "--hw", "ethos-u85-256", "--json"]
    code, out, err = _cli([*args, "--optimise", "size"], capsys)
    assert (code, err) == (0, "")
    stats = json.loads(out)
    # (the input read where it lives, tcm.graph_inputs_in_place: the first chain as staged, and a third,
    # the swish of layer_296-299 in 1-row stripes, 2,048 B off the peak)
    assert (stats["peak_tcm_bytes"], stats["tcm_lower_bound_bytes"]) == (16608, 16608)
    stripes = stats["stripes"]
    assert (stripes["count"], stripes["rolling_bytes"], stripes["rolling_whole_bytes"]) == (3, 6048, 74880)
    first = stripes["chains"][0]
    # (the hard-swish lookup is the first convolution's activation: mac_array.epilogue_ops)
    assert first["operations"][0] == "CONV2D(layer_274)+RESCALE(layer_275)+TABLE(layer_276)"
    assert (first["stripe_rows"], first["stripe_count"]) == (1, 24)
    assert [(b["value"], b["rows"], b["size_bytes"]) for b in first["rolling_buffers"]] == [("layer_276", 3, 2304)]
    # the preset's own choice: stripes within 5% of the cycles, taller: 6 rows (3-row ones are estimated
    # 9% slower than the convolution run whole, which reads its input in the DRAM as they do), then
    # holding the block's peak, so no second chain
    code, out, err = _cli(args, capsys)
    stats = json.loads(out)
    assert (stats["peak_tcm_bytes"], stats["stripes"]["count"], stats["stripes"]["chains"][0]["stripe_rows"]) == (
        35808, 1, 6)
    code, out, err = _cli([*args[:-1], "--optimise", "fast"], capsys)
    assert code == 2 and "--optimise" in err
