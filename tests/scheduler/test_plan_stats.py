"""The plan's figures: every command mapped to its operation, MACs and DDR bytes as the Program has them."""

from __future__ import annotations

from scheduler.schedule import schedule
from tests.scheduler import graphs
from tests.scheduler.graphs import machine


def test_plan_stats_map_every_command_to_an_operation():
    program = schedule(graphs.small_cnn(), machine("tiny"))
    stats = program.stats
    ids = [c.id for c in program.walk()]
    assert sorted(stats.command_operation) == ids and stats.command_count == len(ids)
    assert sorted(i for o in stats.operations for i in o.commands) == ids
    assert sum(o.macs for o in stats.operations) == stats.macs == 16 * 16 * 8 * (9 * 4 + 9 + 8)
    assert {o.unit for o in stats.operations} == {"mac_array", "vector", "dma"}
    assert stats.compulsory_ddr_bytes == stats.compulsory_ddr_read_bytes + stats.compulsory_ddr_write_bytes > 0
