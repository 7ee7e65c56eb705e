"""Block tensors in summary.json and the plan statistics; their colours in the memory timeline."""

from __future__ import annotations

from npu_sim.hw.trace import AllocationRecord
from npu_sim.program import BlockTensor, MemorySpace, Program, block_allocation_name, block_tensor_of
from reports.block_tensors import block_tensor_totals, plan_block_tensors
from reports.memory_timeline import BLOCK_TENSOR_COLOURS, KIND_COLOURS, _fills
from reports.raster_plot import blend, hex_colour

TCM, VAR = MemorySpace.TCM, MemorySpace.VARIABLE_SRAM


def _program() -> Program:
    tensors = (BlockTensor("a", TCM, 600, 256, (0, 1024, 512), VAR, 0, 4),
               BlockTensor("b", TCM, 256, 256, (256,), VAR, 16, 4))
    return Program({TCM: 2048, VAR: 64}, [], [], block_tensors=tensors)


def test_totals_count_tensors_blocks_and_table_bytes() -> None:
    assert block_tensor_totals(_program()) == {"count": 2, "blocks": 4, "pointer_table_bytes": 16}
    assert block_tensor_totals(None) == {"count": 0, "blocks": 0, "pointer_table_bytes": 0}


def test_plan_statistics_list_each_table_and_its_blocks() -> None:
    stats = plan_block_tensors(_program())
    assert stats["tensors"][0] == {"name": "a", "size_bytes": 600, "block_bytes": 256, "memory": "tcm",
                                   "pointer_table": {"memory": "var_sram", "offset_bytes": 0, "size_bytes": 12},
                                   "block_offsets": [0, 1024, 512]}


def test_block_names_name_their_tensor() -> None:
    assert block_allocation_name("layer_3#1", 7) == "layer_3#1[block 7]"
    assert block_tensor_of("layer_3#1[block 7]") == "layer_3#1"
    assert block_tensor_of("layer_3") == block_tensor_of("x[block y]") == ""


def test_the_blocks_of_one_tensor_share_a_colour() -> None:
    def record(name: str, kind: str = "activation") -> AllocationRecord:
        return AllocationRecord(name, "tcm", 0, 16, kind, 0, 0, 10)

    fills = _fills([record("a[block 0]"), record("t", "tile"), record("b[block 0]"), record("a[block 1]")])
    first, second = (blend(hex_colour(c), 0.85) for c in BLOCK_TENSOR_COLOURS[:2])
    assert fills == [first, blend(hex_colour(KIND_COLOURS["tile"]), 0.85), second, first]
