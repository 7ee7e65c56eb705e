"""``npu-sim inspect GRAPH [--json]``: describe a TOSA graph.

Shows the TOSA version, the graph's input/output signature, regions and blocks,
every operator with its operand shapes and types, the count and bytes of
constants, activations and variables, and the TOSA profiles and extensions the
graph needs. ``--json`` prints the same as a stable dict (:func:`describe_graph`).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Tensor
from npu_sim.tosa.loader import detect_format, load_graph
from npu_sim.tosa.profiles import required_profiles
from npu_sim.tosa.serial_tree import format_version
from npu_sim.tosa.unsigned_io import UNSIGNED_VIEWS


def _type(tensor: Tensor) -> dict[str, Any]:
    return {"name": tensor.name, "shape": list(tensor.shape), "dtype": tensor.dtype.name}


def _attribute(attribute: Any) -> dict[str, Any]:
    result = {}
    for name, value in (attribute.to_dict().items() if attribute is not None else []):
        if isinstance(value, Enum):
            value = value.name
        elif isinstance(value, bytes):
            value = list(value)
        elif isinstance(value, tuple):
            value = list(value)
        result[name] = value
    return result


def _tensor_totals(graph: Graph) -> dict[str, dict[str, int]]:
    totals = {kind: {"count": 0, "bytes": 0} for kind in ("constants", "activations", "variables")}
    for block in graph.blocks():
        for tensor in block.tensors.values():
            if tensor.variable:
                continue  # counted once below, from the main block's declarations
            kind = "constants" if tensor.data is not None else "activations"
            totals[kind]["count"] += 1
            totals[kind]["bytes"] += _size_bytes(tensor)
    for tensor in graph.variables().values():
        totals["variables"]["count"] += 1
        totals["variables"]["bytes"] += _size_bytes(tensor)
    return totals


def _size_bytes(tensor: Tensor) -> int:
    if tensor.is_unranked or any(d < 0 for d in tensor.shape):
        return 0
    return tensor.size_bytes


def _region_of(graph: Graph, block: Block) -> str:
    return next(r.name for r in graph.regions if any(b is block for b in r.blocks))


def describe_graph(graph: Graph, path: str = "", file_format: str = "") -> dict[str, Any]:
    """The stable dict ``npu-sim inspect --json`` prints."""
    main = graph.main
    operators = []
    for block in graph.blocks():
        for index, op in enumerate(block.operators):
            operators.append({
                "region": _region_of(graph, block), "block": block.name, "index": index,
                "op": op.op.name,
                "inputs": [_type(block.tensors[n]) if n in block.tensors else {"name": n}
                           for n in op.inputs],
                "outputs": [_type(block.tensors[n]) if n in block.tensors else {"name": n}
                            for n in op.outputs],
                "attribute": _attribute(op.attribute),
                "location": op.location,
            })
    report = required_profiles(graph)
    return {
        "file": path,
        "format": file_format,
        "tosa_version": format_version(graph.version),
        "draft": bool(graph.version[3]),
        "software_version": graph.software_version,
        "inputs": [_with_original(_type(main.tensors[n]), graph) for n in main.inputs],
        "outputs": [_with_original(_type(main.tensors[n]), graph) for n in main.outputs],
        "regions": [{"name": r.name, "blocks": [
            {"name": b.name, "inputs": list(b.inputs), "outputs": list(b.outputs),
             "operator_count": len(b.operators), "tensor_count": len(b.tensors)}
            for b in r.blocks]} for r in graph.regions],
        "operator_count": len(operators),
        "op_counts": dict(sorted(Counter(o["op"] for o in operators).items())),
        "operators": operators,
        "tensors": _tensor_totals(graph),
        "variables": [{**_type(t), "variable_name": t.variable_key,
                       "bytes": _size_bytes(t), "initial_value": t.data is not None}
                      for t in graph.variables().values()],
        **report.to_dict(),
    }


def _describe_operand(o: dict[str, Any]) -> str:
    if "dtype" not in o:
        return f"{o['name']} (missing)"
    return f"{o['name']}: {o['dtype']}{o['shape']}"


def _describe_attribute(attribute: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in attribute.items())


def print_description(info: dict[str, Any]) -> None:
    """Human-readable tables of :func:`describe_graph`'s dict (rich)."""
    # piped output (no terminal): wide enough that names are not cut
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    version = info["tosa_version"].rstrip("d") + (" (draft)" if info["draft"] else "")
    writer = f", written by serialization library {info['software_version']}" \
        if info["software_version"] else ""
    console.print(f"[bold]{info['file']}[/bold]: TOSA {version}, {info['format']}{writer}")
    for table in (_signature_table(info), _blocks_table(info), _operators_table(info), _tensors_table(info)):
        console.print(table)
    for v in info["variables"]:
        initial = "yes" if v["initial_value"] else "no"
        console.print(f"variable {v['variable_name']!r}: {v['dtype']}{v['shape']} "
                      f"({v['bytes']} bytes, initial value: {initial})")
    counts = ", ".join(f"{op} x{n}" for op, n in info["op_counts"].items())
    console.print(f"[bold]Operator counts:[/bold] {counts or 'none'}")
    console.print(f"[bold]Profiles:[/bold] {', '.join(info['profiles']) or 'none'}; "
                  f"[bold]extensions:[/bold] {', '.join(info['extensions']) or 'none'}")
    if info["draft_operators"]:
        console.print("[bold]TOSA 1.1 draft operators (not executable):[/bold] "
                      + ", ".join(info["draft_operators"]))
    for line in info["unsupported"]:
        console.print(f"[bold]No TOSA 1.0 profile covers:[/bold] {line}")


def _with_original(described: dict[str, Any], graph: Graph) -> dict[str, Any]:
    """Add the name the user knows (a TFLite signature's) where it differs from TOSA's, and the
    unsigned type a uint8 edge of the graph holds (``unsigned``: ``uint8``)."""
    original = graph.original_names.get(described["name"])
    if original and original != described["name"]:
        described["original_name"] = original
    view = UNSIGNED_VIEWS.get(DType[described["dtype"]]) if described["name"] in graph.unsigned_io else None
    if view is not None:
        described["unsigned"] = view.name
    return described


def _table(title: str, columns: tuple[str, ...]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column)
    return table


def _signature_table(info: dict[str, Any]) -> Table:
    signature = _table("Signature", ("", "name", "dtype", "shape"))
    for kind in ("inputs", "outputs"):
        for t in info[kind]:
            name = t["name"] + (f" ({t['original_name']})" if t.get("original_name") else "")
            dtype = f"{t['unsigned']} ({t['dtype']} storage)" if t.get("unsigned") else t["dtype"]
            signature.add_row(kind[:-1], name, dtype, str(t["shape"]))
    return signature


def _blocks_table(info: dict[str, Any]) -> Table:
    blocks = _table("Regions and blocks", ("region", "block", "operators", "tensors", "inputs", "outputs"))
    for region in info["regions"]:
        for b in region["blocks"]:
            blocks.add_row(region["name"], b["name"], str(b["operator_count"]),
                           str(b["tensor_count"]), ", ".join(b["inputs"]), ", ".join(b["outputs"]))
    return blocks


def _operators_table(info: dict[str, Any]) -> Table:
    ops = _table(f"Operators ({info['operator_count']})", ("block", "#", "op", "inputs", "outputs", "attributes"))
    for o in info["operators"]:
        ops.add_row(o["block"], str(o["index"]), o["op"],
                    "\n".join(_describe_operand(i) for i in o["inputs"]),
                    "\n".join(_describe_operand(i) for i in o["outputs"]),
                    _describe_attribute(o["attribute"]))
    return ops


def _tensors_table(info: dict[str, Any]) -> Table:
    tensors = _table("Tensors", ("kind", "count", "bytes"))
    for kind, total in info["tensors"].items():
        tensors.add_row(kind, str(total["count"]), f"{total['bytes']:,}")
    return tensors


def run_inspect(graph_path: str, tosa_level: str = "8K") -> dict[str, Any]:
    """Load, validate and describe a graph file (errors: NpuSimError subclasses)."""
    graph = load_graph(graph_path, level=tosa_level)
    file_format = detect_format(Path(graph_path).read_bytes(), graph_path)
    return describe_graph(graph, str(graph_path), file_format)


def inspect(graph_path: str, json_output: bool, tosa_level: str = "8K") -> None:
    """``npu-sim inspect``: the description as tables, or as JSON."""
    info = run_inspect(graph_path, tosa_level)
    if json_output:
        typer.echo(json.dumps(info, indent=2))
    else:
        print_description(info)
