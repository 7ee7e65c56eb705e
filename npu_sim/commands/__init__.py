"""One module per CLI command group; each exposes ``register(app)``."""

from npu_sim.commands import exec_cmd, inspect_cmd, hw_cmd
from npu_sim.commands import run_cmd

COMMAND_MODULES = [inspect_cmd, exec_cmd, hw_cmd, run_cmd]
