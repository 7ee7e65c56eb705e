"""``npu-sim inspect GRAPH [--json]`` (being written)."""

import typer


def register(app: typer.Typer) -> None:
    @app.command("inspect")
    def inspect(graph: str, json_output: bool = typer.Option(False, "--json")) -> None:
        """Describe a TOSA graph: version, blocks, operators, tensors, signature."""
        raise NotImplementedError("inspect is being written")
