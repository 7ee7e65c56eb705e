"""Hand-built Program / Trace objects for report tests (no scheduler, no simulator).

:func:`tiny_case` is small enough to work every summary number out by hand;
:func:`many_tiles_case` has hundreds of allocations, like a tiled network.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from npu_sim.hw.trace import AllocationRecord, CommandRecord, Counters, InvocationRecord
from npu_sim.program import Allocation, MemorySpace, OperationStats, PlanStats, Program

UNITS = ["dma0", "dma1", "mac_array", "vector", "lut"]


@dataclass
class Trace:
    """What reports read of :class:`npu_sim.hw.trace.Trace`, built from records directly
    (the simulator's Trace builds them from its raw log)."""

    commands: list[CommandRecord]
    allocations: list[AllocationRecord]
    invocations: list[InvocationRecord]
    counters: Counters = field(default_factory=Counters)
    units: list[str] = field(default_factory=list)
    repeats: dict[int, tuple[int, int]] = field(default_factory=dict)


def operations_only(*operations: OperationStats, tcm_bytes: int = 0) -> PlanStats:
    """Plan stats with the given operations and one TCM figure for footprint and bound."""
    return PlanStats(tcm_bytes, tcm_bytes, tcm_bytes, operations=operations)


def cmd(cid, name, kind, unit, op, start, end, *, inv=0, nbytes=0, macs=0, rd=0, wr=0) -> CommandRecord:
    return CommandRecord(cid, name, kind, unit, op, inv, start, end, nbytes, macs, rd, wr)


def counters_of(commands: list[CommandRecord]) -> Counters:
    """Counters as the trace recorder builds them (bursts = payload here)."""
    c = Counters(busy_cycles={u: 0 for u in UNITS}, command_counts={u: 0 for u in UNITS})
    for r in commands:
        if r.kind in ("dma", "compute"):
            c.busy_cycles[r.unit] += r.cycles
            c.command_counts[r.unit] += 1
            c.ddr_read_bytes += r.ddr_read_bytes
            c.ddr_write_bytes += r.ddr_write_bytes
            c.ddr_read_burst_bytes += r.ddr_read_bytes
            c.ddr_write_burst_bytes += r.ddr_write_bytes
            c.macs += r.macs
            c.mac_pe_cycles += r.macs if r.unit == "mac_array" else 0  # int8 MACs: one PE-cycle each
    return c


def tiny_case() -> tuple[Program, Trace]:
    """One conv operation in two tiles, then a vector op; one invocation of 1000 cycles.

    conv:  load input (dma0, 0..100, 512 B from DDR), load weights (dma1, 0..50, 256 B),
           tile 0 (mac 100..300, 4096 MACs), tile 1 (mac 300..500, 4096 MACs)
    add:   vector 500..700, store result (dma0, 700..1000, 128 B to DDR)
    """
    commands = [
        cmd(0, "conv/load_in", "dma", "dma0", "copy", 0, 100, nbytes=512, rd=512),
        cmd(1, "conv/load_w", "dma", "dma1", "copy", 0, 50, nbytes=256, rd=256),
        cmd(2, "conv/tile0", "compute", "mac_array", "CONV2D+RESCALE", 100, 300, nbytes=600, macs=4096),
        cmd(3, "conv/tile1", "compute", "mac_array", "CONV2D+RESCALE", 300, 500, nbytes=600, macs=4096),
        cmd(4, "add", "compute", "vector", "ADD", 500, 700, nbytes=384),
        cmd(5, "add/store", "dma", "dma0", "copy", 700, 1000, nbytes=128, wr=128),
    ]
    allocations = [
        Allocation("in", MemorySpace.DDR, 0, 512, "input"),
        Allocation("w", MemorySpace.DDR, 512, 256, "constant"),
        Allocation("out", MemorySpace.DDR, 1024, 128, "output"),
        Allocation("in_tcm", MemorySpace.TCM, 0, 512, "tile", 0, 3),
        Allocation("w_tcm", MemorySpace.TCM, 512, 256, "tile", 1, 3),
        Allocation("conv_out", MemorySpace.TCM, 768, 256, "activation", 2, 4),
        Allocation("add_out", MemorySpace.TCM, 0, 128, "activation", 4, 5),
        Allocation("state", MemorySpace.VARIABLE_SRAM, 0, 64, "variable"),
    ]
    program = Program({MemorySpace.DDR: 4096, MemorySpace.TCM: 1024, MemorySpace.VARIABLE_SRAM: 64},
                      allocations, [], graph_name="tiny")
    # TCM: conv_out ends at 1024; in_tcm + w_tcm + conv_out are live together at commands 2..3
    program.stats = operations_only(
        OperationStats("conv", "CONV2D+RESCALE", "mac_array", ("conv2d_0", "rescale_1"), commands=(0, 1, 2, 3)),
        OperationStats("add", "ADD", "vector", commands=(4, 5)), tcm_bytes=1024)
    records = [
        AllocationRecord("in", "ddr", 0, 512, "input", 0, 0, 100),
        AllocationRecord("w", "ddr", 512, 256, "constant", 0, 0, 50),
        AllocationRecord("out", "ddr", 1024, 128, "output", 0, 700, 1000),
        AllocationRecord("in_tcm", "tcm", 0, 512, "tile", 0, 0, 500),
        AllocationRecord("w_tcm", "tcm", 512, 256, "tile", 0, 0, 500),
        AllocationRecord("conv_out", "tcm", 768, 256, "activation", 0, 100, 700),
        AllocationRecord("add_out", "tcm", 0, 128, "activation", 0, 500, 1000),
        AllocationRecord("state", "var_sram", 0, 64, "variable", 0, None, None),
    ]
    trace = Trace(commands, records, [InvocationRecord(0, 0, 1000)], counters_of(commands), list(UNITS))
    return program, trace


def many_tiles_case(layers: int = 12, tiles: int = 24, invocations: int = 1, seed: int = 0
                    ) -> tuple[Program, Trace]:
    """A pipelined, tiled network: per layer ``tiles`` input tiles ping-ponging in TCM,
    a resident activation, a few spills to DDR. Several hundred allocation records."""
    rng = np.random.default_rng(seed)
    commands: list[CommandRecord] = []
    records: list[AllocationRecord] = []
    ops = []
    cid = 0
    t = 0
    tcm_size = 256 * 1024
    invs = []
    for inv in range(invocations):
        inv_start = t
        for layer in range(layers):
            name = f"layer{layer}"
            op_cmds = []
            act = int(rng.integers(16, 64)) * 1024
            act_off = (layer % 2) * 96 * 1024
            layer_start = t
            tile_bytes = int(rng.integers(2, 8)) * 1024
            mac_free = t
            for k in range(tiles):  # tile k+1 loads while tile k computes (ping-pong buffers)
                load = int(rng.integers(40, 120))
                comp = int(rng.integers(80, 300))
                commands.append(cmd(cid, f"{name}/load{k}", "dma", f"dma{k % 2}", "copy", t, t + load,
                                    inv=inv, nbytes=tile_bytes, rd=tile_bytes))
                op_cmds.append(cid)
                cid += 1
                begin = max(t + load, mac_free)
                mac_free = begin + comp
                commands.append(cmd(cid, f"{name}/tile{k}", "compute", "mac_array", "CONV2D+RESCALE+CLAMP",
                                    begin, mac_free, inv=inv, nbytes=2 * tile_bytes, macs=comp * 200))
                op_cmds.append(cid)
                cid += 1
                off = 192 * 1024 + (k % 2) * 16 * 1024
                records.append(AllocationRecord(f"{name}.in_tile{k}", "tcm", off, tile_bytes, "tile",
                                                inv, t, mac_free))
                t = max(t + load, begin)
            t = mac_free + 200
            records.append(AllocationRecord(f"{name}.out", "tcm", act_off, act, "activation", inv,
                                            layer_start, t + 400))
            if layer % 4 == 3:
                commands.append(cmd(cid, f"{name}/spill", "dma", "dma1", "copy", t, t + 300, inv=inv,
                                    nbytes=act, wr=act))
                op_cmds.append(cid)
                cid += 1
                records.append(AllocationRecord(f"{name}.spill", "ddr", 1 << 20, act, "spill", inv,
                                                t, t + 3000))
            ops.append((name, op_cmds))
        records.append(AllocationRecord("state", "var_sram", 0, 2048, "variable", inv, inv_start + 10, t))
        invs.append(InvocationRecord(inv, inv_start, t + 500))
        t += 500
    commands.sort(key=lambda r: (r.start_cycle, r.end_cycle, r.id))
    program = Program({MemorySpace.DDR: 1 << 24, MemorySpace.TCM: tcm_size,
                       MemorySpace.VARIABLE_SRAM: 4096}, [], [], graph_name="many")
    # one operation per layer, over the invocations (same names, ids differ)
    merged: dict[str, list[int]] = {}
    for name, op_cmds in ops:
        merged.setdefault(name, []).extend(op_cmds)
    program.stats = operations_only(*(OperationStats(name, "CONV2D+RESCALE+CLAMP", "mac_array",
                                                     commands=tuple(cids)) for name, cids in merged.items()))
    return program, Trace(commands, records, invs, counters_of(commands), list(UNITS))
