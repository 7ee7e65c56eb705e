"""Small hand-built hardware configs and Programs for the hardware-model tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from npu_sim.hw.config import HwConfig, hw_config_from_dict
from npu_sim.program import (
    Allocation,
    ComputeCommand,
    DmaCommand,
    KernelStep,
    LoopCommand,
    MemorySpace,
    Program,
    View,
)
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, make_attribute

DDR, TCM, VAR = MemorySpace.DDR, MemorySpace.TCM, MemorySpace.VARIABLE_SRAM


def config_dict(**overrides: Any) -> dict[str, Any]:
    """A small machine with round numbers; ``overrides`` deep-merge by section."""
    base: dict[str, Any] = {
        "name": "test",
        "clock_hz": 1_000_000_000,
        "ddr": {"size_bytes": 1 << 20, "bandwidth_bytes_per_cycle": 16, "read_latency_cycles": 100,
                "write_latency_cycles": 50, "burst_size_bytes": 64},
        "dma": {"engine_count": 2, "setup_cycles": 10, "max_outstanding_bursts": 64},
        "tcm": {"size_bytes": 1 << 16, "bank_count": 4, "port_count": 2, "port_bytes_per_cycle": 16},
        "variable_sram": {"size_bytes": 4096, "bytes_per_cycle": 8},
        "mac_array": {"rows": 4, "cols": 8, "macs_per_cycle": {"int8": 32, "int16": 16},
                      "setup_cycles": 5},
        "vector": {"elements_per_cycle": {"int8": 32, "int32": 8}, "setup_cycles": 8},
        "lut": {"elements_per_cycle": 4, "setup_cycles": 3},
    }
    for section, values in overrides.items():
        if isinstance(values, dict):
            base[section] = {**base.get(section, {}), **values}
        else:
            base[section] = values
    return base


def make_hw(**overrides: Any) -> HwConfig:
    return hw_config_from_dict(config_dict(**overrides), "test")


def i32(memory: MemorySpace, offset: int, *shape: int) -> View:
    return View(memory, offset, tuple(shape), DType.INT32)


def add_step(a: View | int, b: View | int, shape: tuple[int, ...]) -> KernelStep:
    t = TensorType(shape, DType.INT32)
    return KernelStep(Op.ADD, make_attribute(Op.ADD), (a, b), (t, t), (t,))


def conv_step(out_region=None, dtype=DType.INT8, kernel=3) -> KernelStep:
    """CONV2D [1,4,4,8] * [16,k,k,8] 'same' padding -> [1,4,4,16] int32 (k = 3 or 1)."""
    types = (TensorType((1, 4, 4, 8), dtype), TensorType((16, kernel, kernel, 8), dtype),
             TensorType((16,), DType.INT32), TensorType((1,), dtype), TensorType((1,), dtype))
    pad = (kernel // 2,) * 4
    attr = make_attribute(Op.CONV2D, pad=pad, stride=(1, 1), dilation=(1, 1), acc_type=DType.INT32)
    views = tuple(View(TCM, 0, t.shape, t.dtype) for t in types)
    return KernelStep(Op.CONV2D, attr, views, types, (TensorType((1, 4, 4, 16), DType.INT32),),
                      out_region=out_region)


def copy_program(size_bytes: int, *, src_offset: int = 0, engine: int = 0) -> Program:
    """One DMA of ``size_bytes`` from DDR (a graph input) to the TCM and back out (an output)."""
    n = size_bytes // 4
    src, tile = i32(DDR, src_offset, n), i32(TCM, 0, n)
    out = i32(DDR, src_offset + size_bytes + 4096, n)
    commands = [DmaCommand(0, engine, src, tile, name="load"),
                DmaCommand(1, engine, tile, out, deps=(0,), name="store")]
    return Program({DDR: src_offset + 2 * size_bytes + 4096, TCM: size_bytes}, [], commands,
                   inputs={"x": src}, outputs={"y": out})


def pipeline_program(tiles: int, tile_elements: int) -> tuple[Program, np.ndarray]:
    """Double-buffered load (dma0) -> vector ADD x+x -> store (dma1), like the benchmark."""
    tile_bytes = tile_elements * 4
    total = tiles * tile_bytes
    in_bufs = [i32(TCM, b * tile_bytes, tile_elements) for b in range(2)]
    out_bufs = [i32(TCM, (2 + b) * tile_bytes, tile_elements) for b in range(2)]
    commands: list = []
    for i in range(tiles):
        b = i % 2
        load, comp, store = 3 * i, 3 * i + 1, 3 * i + 2
        commands.append(DmaCommand(load, 0, i32(DDR, i * tile_bytes, tile_elements), in_bufs[b],
                                   deps=(comp - 6,) if i >= 2 else (), name=f"load{i}"))
        commands.append(ComputeCommand(comp, "vector", (add_step(in_bufs[b], in_bufs[b], (tile_elements,)),),
                                       (out_bufs[b],), deps=(load,) + ((store - 6,) if i >= 2 else ()),
                                       name=f"add{i}"))
        commands.append(DmaCommand(store, 1, out_bufs[b], i32(DDR, total + i * tile_bytes, tile_elements),
                                   deps=(comp,), name=f"store{i}"))
    program = Program(
        {DDR: 2 * total, TCM: 4 * tile_bytes},
        [Allocation("x", DDR, 0, total, "input"), Allocation("y", DDR, total, total, "output"),
         Allocation("in0", TCM, 0, tile_bytes, "tile"), Allocation("in1", TCM, tile_bytes, tile_bytes, "tile"),
         Allocation("out0", TCM, 2 * tile_bytes, tile_bytes, "tile"),
         Allocation("out1", TCM, 3 * tile_bytes, tile_bytes, "tile")],
        commands,
        inputs={"x": i32(DDR, 0, tiles * tile_elements)},
        outputs={"y": i32(DDR, total, tiles * tile_elements)},
    )
    x = (np.arange(tiles * tile_elements, dtype=np.int32) * 7 - 1000).astype(np.int32)
    return program, x


def counting_loop(max_iterations: int = 100, one_engine: int = 0, preamble: bool = False) -> Program:
    """``i = 0; while n > i: i = i + 1`` with the condition and the counter in the TCM; the constant
    one loaded on DMA engine ``one_engine`` (0: the loads one after another on one engine, each
    transfer moving alone), once before the first invocation where ``preamble``."""
    n_ddr, zero_ddr, one_ddr, out = i32(DDR, 0, 1), i32(DDR, 16, 1), i32(DDR, 32, 1), i32(DDR, 48, 1)
    n, i, one = i32(TCM, 0, 1), i32(TCM, 16, 1), i32(TCM, 32, 1)
    flag = View(TCM, 48, (1,), DType.BOOL)
    t32, tb = TensorType((1,), DType.INT32), TensorType((1,), DType.BOOL)
    greater = KernelStep(Op.GREATER, make_attribute(Op.GREATER), (n, i), (t32, t32), (tb,))
    loop = LoopCommand(3, (ComputeCommand(4, "vector", (greater,), (flag,), name="n > i"),), flag,
                       (ComputeCommand(5, "vector", (add_step(i, one, (1,)),), (i,), name="i += 1"),),
                       max_iterations=max_iterations, deps=(0, 1, 2), name="while")
    commands = [DmaCommand(0, 0, n_ddr, n), DmaCommand(1, 0, zero_ddr, i), DmaCommand(2, one_engine, one_ddr, one),
                loop, DmaCommand(6, 0, i, out, deps=(3,), name="store i")]
    constants = [Allocation("zero", DDR, 16, 4, "constant", initial_data=bytes(4)),
                 Allocation("one", DDR, 32, 4, "constant", initial_data=(1).to_bytes(4, "little"))]
    return Program({DDR: 64, TCM: 64}, constants, commands, inputs={"n": n_ddr}, outputs={"i": out},
                   preamble_command_ids=frozenset({2} if preamble else ()))
