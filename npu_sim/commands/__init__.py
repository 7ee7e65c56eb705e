"""What each ``npu-sim`` command does, one module per command group; :mod:`npu_sim.cli` declares
the commands and their options and imports this package when one runs."""

from npu_sim.commands import cache_cmd, convert_cmd, exec_cmd, hw_cmd, inspect_cmd, report_cmd, run_cmd, sweep_cmd

__all__ = ["cache_cmd", "convert_cmd", "exec_cmd", "hw_cmd", "inspect_cmd", "report_cmd", "run_cmd", "sweep_cmd"]
