"""Will the job fit? Byte budgets checked before any work starts.

A graph whose tensors are terabytes must be refused in a moment, with the tensor, its size
and the limit, not after minutes of tiling or a MemoryError deep in a kernel. Two checks:

* :func:`check_npu_capacity`: every tensor that has a home in DDR (inputs, outputs,
  constants) fits there, as does every intermediate (spilled at worst), and no tensor is
  empty (the scheduler plans whole elements);
* :func:`check_host_memory`: the host memory a job needs (the live tensors of the
  reference executor at its peak, plus the simulated memories for ``run``) fits the budget,
  by default a fraction of what this machine (or the process's address-space limit) offers.

Sizes are exact Python integers: a product of dimensions never wraps around.
"""

from __future__ import annotations

import math
import os
import re
import sys

from npu_sim.errors import InputError, ResourceLimitError, ScheduleError
from npu_sim.hw.config import HwConfig
from npu_sim.reference.executor import DEFAULT_MAX_NESTING
from npu_sim.tosa.ir import Block, Graph, Tensor, TensorType

#: Share of the available memory a job may plan to use by default.
DEFAULT_HOST_FRACTION = 0.8
#: Budget when the available memory cannot be found out.
FALLBACK_HOST_BYTES = 8 << 30
#: Kernels widen to int64 or float64 and keep temporaries: the largest operator's output
#: may need this many times its own size on top of the live tensors.
KERNEL_TEMPORARY_FACTOR = 3
#: The simulated memories hold each byte twice (data and a written-mask).
SIMULATED_BYTES_PER_BYTE = 2

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNIT_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}


def exact_size_bytes(t: TensorType) -> int:
    """Bytes of a tensor of type ``t``, exactly (no int64 wrap-around)."""
    return t.dtype.nbytes(math.prod(max(int(d), 0) for d in t.shape))


def format_bytes(size_bytes: int) -> str:
    """``17179869184`` -> ``"16 GiB (17179869184 bytes)"``; small sizes in bytes only."""
    if size_bytes < 1 << 20:
        return f"{size_bytes} bytes"
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20)):
        if size_bytes >= 1 << shift:
            return f"{size_bytes / (1 << shift):.4g} {unit} ({size_bytes} bytes)"
    return f"{size_bytes} bytes"  # pragma: no cover


def parse_size_bytes(text: str) -> int:
    """``"4G"``, ``"512MiB"``, ``"1.5g"``, ``"1000000"`` -> bytes (binary units)."""
    match = _SIZE.match(text)
    if match is None:
        raise InputError(f"--max-memory: {text!r} is not a size (examples: 4G, 512M, 1000000)")
    number, unit = float(match.group(1)), match.group(2).lower()
    size = int(number * (1 << _UNIT_SHIFT[unit]))
    if size <= 0:
        raise InputError(f"--max-memory: {text!r} must be more than 0 bytes")
    return size


def default_host_budget_bytes() -> int:
    """A fraction of the memory this process can still use: what the machine has available,
    and what the address-space limit (``ulimit -v``) leaves, whichever is less."""
    candidates = [_available_ram_bytes(), _address_space_left_bytes()]
    known = [c for c in candidates if c is not None]
    if not known:
        return FALLBACK_HOST_BYTES
    return int(min(known) * DEFAULT_HOST_FRACTION)


def _available_ram_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if sys.platform == "win32":  # pragma: no cover - the wheel runs there too
        return None
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _address_space_left_bytes() -> int | None:
    if sys.platform == "win32":  # pragma: no cover - no address-space limits there
        return None
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            used = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        used = 0
    return max(soft - used, 0)


# --- the NPU's memories -----------------------------------------------------------------

def check_npu_capacity(graph: Graph, hw: HwConfig) -> None:
    """Refuse a graph whose fixed tensors cannot fit the NPU's memories, or that has an empty
    tensor, before the scheduler tiles anything."""
    name = hw.name or "the hardware"
    ddr_total = 0
    empty = empty_tensor(graph)
    if empty is not None:
        raise ScheduleError(empty)
    sizes: dict[TensorType, int] = {}   # (an unrolled network repeats a few types thousands of times)
    for block in graph.blocks():
        signature = set(block.inputs).union(block.outputs) if block is graph.main else set()
        for tensor in block.tensors.values():
            if tensor.variable:
                continue   # the variable SRAM: placed (and refused, naming every variable) first thing
            size = sizes.get(tensor.type)
            if size is None:
                size = sizes[tensor.type] = exact_size_bytes(tensor.type)
            # an intermediate is tiled through the TCM, spilled to the DDR at worst: it must fit there too
            _check_fits(tensor, size, hw.ddr.size_bytes, f"the DDR of {name}")
            if tensor.data is not None or tensor.name in signature:   # its home is the DDR
                ddr_total += size
    if ddr_total > hw.ddr.size_bytes:
        raise ScheduleError(f"the graph's inputs, outputs and constants need {format_bytes(ddr_total)}; "
                            f"the DDR of {name} holds {format_bytes(hw.ddr.size_bytes)}")


def empty_tensor(graph: Graph) -> str | None:
    """Why the scheduler cannot take ``graph`` if it has a tensor without elements, else None."""
    for block in graph.blocks():
        for tensor in block.tensors.values():
            if tensor.type.shape and 0 in tensor.type.shape:
                return (f"tensor {tensor.name!r} of block {block.name!r} has shape {list(tensor.type.shape)}: "
                        "npu-sim does not schedule empty tensors (npu-sim exec runs the graph)")
    return None


def _check_fits(tensor: Tensor, size: int, limit: int, where: str) -> None:
    if size > limit:
        raise ScheduleError(f"tensor {tensor.name!r} {list(tensor.type.shape)} {tensor.type.dtype.name} "
                            f"needs {format_bytes(size)}; {where} holds {format_bytes(limit)}")


# --- the host's memory ------------------------------------------------------------------

def host_bytes_needed(graph: Graph, *, simulated: bool) -> tuple[int, str, int]:
    """(bytes, largest tensor's name, its bytes): a lower estimate of the host memory a job
    needs. ``simulated``: the job also keeps the NPU's memories (``run``)."""
    peak, largest, largest_bytes = _block_need(graph, graph.main, 0, {})
    if simulated:
        fixed = sum(exact_size_bytes(t.type) for b in graph.blocks() for t in b.tensors.values()
                    if t.data is not None or t.variable)
        io = sum(exact_size_bytes(t) for t in (*graph.input_types.values(), *graph.output_types.values()))
        peak += SIMULATED_BYTES_PER_BYTE * (fixed + io)
    return peak, largest, largest_bytes


def check_host_memory(graph: Graph, limit_bytes: int, *, simulated: bool) -> None:
    """Refuse a job that cannot fit ``limit_bytes`` of host memory."""
    need, largest, largest_bytes = host_bytes_needed(graph, simulated=simulated)
    if need > limit_bytes:
        raise ResourceLimitError(f"the graph needs at least {format_bytes(need)} of host memory "
                                 f"(tensor {largest!r} alone is {format_bytes(largest_bytes)}); "
                                 f"the limit is {format_bytes(limit_bytes)} (change it with --max-memory)")


def _block_need(graph: Graph, block: Block, depth: int, known: dict[str, int]) -> tuple[int, str, int]:
    """Peak bytes of the tensors alive at once while ``block`` runs (constants always), plus
    the temporaries of its largest operator; nested blocks add their own peak (each block
    counted once, down to the nesting the executor allows)."""
    sizes, freed, last_use, last_reads = _lifetimes(block)
    live = set(block.inputs) | {n for n, t in block.tensors.items() if t.data is not None}
    live_bytes = sum(sizes.get(n, 0) for n in live)
    largest, largest_bytes = max(((n, s) for n, s in sizes.items()), key=lambda item: item[1], default=("", 0))
    peak = live_bytes
    nested_by_attribute: dict[int, int] = {}   # id -> need (operators share attributes)
    for position, operator in enumerate(block.operators):
        produced = sum([sizes.get(n, 0) for n in operator.outputs])
        nested = nested_by_attribute.get(id(operator.attribute))
        if nested is None:
            nested = nested_by_attribute[id(operator.attribute)] = \
                _nested_need(graph, operator.attribute, depth + 1, known)
        peak = max(peak, live_bytes + produced * KERNEL_TEMPORARY_FACTOR + nested)
        live_bytes += produced - last_reads.get(position, 0)
        for name in set(operator.outputs) if len(operator.outputs) > 1 else operator.outputs:
            if name in freed and last_use.get(name, -1) < position:
                live_bytes -= freed[name]
    return peak, largest, largest_bytes


def _lifetimes(block: Block) -> tuple[dict[str, int], dict[str, int], dict[str, int], dict[int, int]]:
    """Of ``block``'s tensors: bytes by name; bytes of those freed after their last use (not
    the constants); the position of that use (an output's: after the last operator); and per
    operator position, the bytes of the inputs it reads last."""
    sizes: dict[str, int] = {}
    by_type: dict[TensorType, int] = {}   # (a graph repeats few tensor types)
    for name, tensor in block.tensors.items():
        size = by_type.get(tensor.type)
        sizes[name] = by_type[tensor.type] = exact_size_bytes(tensor.type) if size is None else size
    freed = {name: sizes[name] for name, t in block.tensors.items() if t.data is None}
    last_use: dict[str, int] = {}
    for position, operator in enumerate(block.operators):
        for name in operator.inputs:
            last_use[name] = position
    for name in block.outputs:
        last_use[name] = len(block.operators)
    last_reads: dict[int, int] = {}
    for name, position in last_use.items():
        last_reads[position] = last_reads.get(position, 0) + freed.get(name, 0)
    return sizes, freed, last_use, last_reads


def _nested_need(graph: Graph, attribute: object, depth: int, known: dict[str, int]) -> int:
    need = 0
    for field in ("then_graph", "else_graph", "cond_graph", "body_graph"):
        name = getattr(attribute, field, None)
        if not isinstance(name, str) or depth > DEFAULT_MAX_NESTING or not graph.has_block(name):
            continue   # deeper nesting is the executor's ERROR_IF to report
        if name not in known:
            known[name] = 0   # a block reached again while counting it (recursion) adds nothing
            known[name] = _block_need(graph, graph.block(name), depth, known)[0]
        need = max(need, known[name])
    return need
