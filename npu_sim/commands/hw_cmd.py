"""``npu-sim hw list`` and ``npu-sim hw show NAME|PATH [--json]``: the hardware presets."""

from __future__ import annotations

import json

import typer
import yaml


def register(app: typer.Typer) -> None:
    hw_app = typer.Typer(no_args_is_help=True, help="Hardware configurations (presets and YAML files).")

    @hw_app.command("list")
    def hw_list() -> None:
        """List the bundled presets with what each resembles."""
        from npu_sim.hw.config import load_hw_config, preset_names

        for name in preset_names():
            config = load_hw_config(name)
            typer.echo(f"{name:<16} {config.description}")

    @hw_app.command("show")
    def hw_show(
        config: str = typer.Argument(..., help="A preset name or a YAML file path."),
        json_output: bool = typer.Option(False, "--json", help="Print JSON instead of YAML."),
    ) -> None:
        """Print a config fully resolved (``extends`` merged, defaults filled in)."""
        from npu_sim.hw.config import resolved_config_dict

        data = resolved_config_dict(config)
        if json_output:
            typer.echo(json.dumps(data, indent=2))
        else:
            typer.echo(yaml.safe_dump(data, sort_keys=False, width=1000).rstrip())

    app.add_typer(hw_app, name="hw")
