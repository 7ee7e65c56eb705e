"""The NPU hardware model: configs, memories, DMA engines, compute units, trace.

* :mod:`~npu_sim.hw.config` - ``HwConfig`` (pydantic) and ``load_hw_config`` (presets in ``presets/``);
* :mod:`~npu_sim.hw.compute_units` - the compute-unit registry: each unit's name, the TOSA
  operators it runs and its pure cost functions (asked by scheduler, simulator and reports);
* :mod:`~npu_sim.hw.cost` - pure cost of a compute command or an uncontended DMA (the
  simulator's timing, also used by the scheduler);
* :mod:`~npu_sim.hw.memory` - byte-array memories with written-ness tracking;
* :mod:`~npu_sim.hw.ddr` - bandwidth shared by concurrent transfers (fluid max-min fair model);
* :mod:`~npu_sim.hw.dma` - DMA descriptors, burst accounting and the DMA command (engines
  pipeline descriptors: the DDR latency of one overlaps the issue of the next);
* :mod:`~npu_sim.hw.compute` - compute commands running the reference kernels (and registered
  CUSTOM operators) on tiles, their results checked against the command;
* :mod:`~npu_sim.hw.queues` - in-order unit queues and dependency bookkeeping;
* :mod:`~npu_sim.hw.trace` - what a run recorded, and when allocations are in use.

:func:`npu_sim.simulator.simulate_program` runs a Program on them.
"""

from npu_sim.hw.config import HwConfig, load_hw_config

__all__ = ["HwConfig", "load_hw_config"]
