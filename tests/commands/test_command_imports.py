"""The command modules: imported when first named, the cycle collector paused meanwhile and
what the import made frozen after."""

from __future__ import annotations

import gc
import sys

import pytest

import npu_sim.commands as commands


@pytest.mark.parametrize("enabled", [True, False])
def test_a_command_import_leaves_the_collector_as_it_found_it(enabled: bool,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "npu_sim.commands.hw_cmd", raising=False)
    monkeypatch.delattr(commands, "hw_cmd", raising=False)
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        module = commands.hw_cmd
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert module.__name__ == "npu_sim.commands.hw_cmd"
    assert gc.get_freeze_count() > 0
