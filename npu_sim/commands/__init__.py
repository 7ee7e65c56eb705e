"""One module per CLI command group; each exposes ``register(app)``."""

from npu_sim.commands import inspect_cmd

COMMAND_MODULES = [inspect_cmd]
