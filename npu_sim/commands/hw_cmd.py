"""``npu-sim hw list`` and ``npu-sim hw show NAME|PATH [--json]``: the hardware presets."""

from __future__ import annotations

import json

import typer
import yaml

from npu_sim.hw.config import load_hw_config, preset_names, resolved_config_dict


def hw_list() -> None:
    """Print the bundled presets with what each resembles."""
    for name in preset_names():
        typer.echo(f"{name:<16} {load_hw_config(name).description}")


def hw_show(config: str, json_output: bool) -> None:
    """Print a config fully resolved (``extends`` merged, defaults filled in), as YAML or JSON."""
    data = resolved_config_dict(config)
    if json_output:
        typer.echo(json.dumps(data, indent=2))
    else:
        typer.echo(yaml.safe_dump(data, sort_keys=False, width=1000).rstrip())
