"""``simulate``: a graph on a hardware config, end to end (schedule -> simulate -> summary).

This is where the compiler, the machine and the reports meet (ARCHITECTURE.md:
only the API and the CLI tie the layers together). ``npu-sim run`` and
:func:`npu_sim.simulate` both go through :func:`simulate_invocations`.

The scheduler's modules are imported when a graph is first compiled (:func:`_scheduler`): a run
whose Program the program cache holds does not load them (a twentieth of a second).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from npu_sim import program_cache
from npu_sim.budget import check_host_memory, check_npu_capacity, default_host_budget_bytes, empty_tensor
from npu_sim.errors import InputError, NpuSimError, ProgramError, ScheduleError, SchedulerBugError, SimulationError
from npu_sim.gc_pause import gc_paused
from npu_sim.hw.config import HwConfig, load_hw_config, with_block_tensors
from npu_sim.hw.trace import Trace
from npu_sim.program import Program
from npu_sim.reference.executor import check_inputs
from npu_sim.reference.session import Session
from npu_sim.simulator import simulate_program
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.loader import load_graph
from npu_sim.tosa.user_outputs import as_user_outputs
from npu_sim.tosa.validation import validate as validate_graph
from reports.summary import build_summary

if TYPE_CHECKING:
    from scheduler.passes.fusion import FusionRule


def _scheduler(module: str = "") -> ModuleType:
    """The package :mod:`scheduler` (or its ``module``), imported on first use."""
    return importlib.import_module(f"scheduler.{module}" if module else "scheduler")


def schedule(graph: Graph, hw: HwConfig, **options: Any) -> Program:
    """:func:`scheduler.schedule.schedule` (its modules imported on the first call)."""
    program: Program = _scheduler().schedule(graph, hw, **options)
    return program


@dataclass
class SimulationResult:
    """What :func:`simulate` returns.

    ``outputs``: graph output name -> array; with ``invocations > 1`` stacked along a
    new leading axis (invocation k at index k), as ``npu-sim run -n`` writes them.
    ``summary``: the ``summary.json`` dict (:mod:`reports.summary`). ``trace``: the
    simulator's records. ``program``: the compiled memory plan + command stream.
    """

    outputs: dict[str, np.ndarray]
    summary: dict[str, Any]
    trace: Trace
    program: Program
    hw: HwConfig
    invocation_outputs: list[dict[str, np.ndarray]] = field(default_factory=list)
    variables: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def plan(self) -> Program:
        return self.program

    @property
    def total_cycles(self) -> int:
        return int(self.summary["total_cycles"])


def _graph(graph: Graph | str | Path) -> tuple[Graph, str]:
    if isinstance(graph, Graph):
        return graph, ""
    return load_graph(graph), str(graph)


def _hw(hw: HwConfig | str | Path) -> HwConfig:
    return hw if isinstance(hw, HwConfig) else load_hw_config(hw)


def _hw_with(hw: HwConfig | str | Path, block_tensors: bool | None) -> HwConfig | str | Path:
    """``hw``, its block tensors on or off if ``block_tensors`` says (None: as it says)."""
    return hw if block_tensors is None else with_block_tensors(_hw(hw), block_tensors)


def compile_graph(graph: Graph, hw: HwConfig, *, spread_tcm: bool = False,
                  verify: bool = False, resident_constants: bool = False,
                  composite_fusion: bool = True) -> Program:
    """The scheduler's Program for ``graph`` on ``hw`` (ScheduleError / UnsupportedFeatureError if it cannot).

    ``spread_tcm``: trade free TCM for fewer false dependencies (see :func:`scheduler.schedule.schedule`).
    ``verify``: also run the plan verifier (:func:`scheduler.verify.verify_program`); a plan it
    rejects is npu-sim's bug (:class:`SchedulerBugError`). It costs about as much as scheduling.
    ``composite_fusion``: fuse composites such as LSTM cells (False: op by op, for comparison).
    """
    with gc_paused():
        fusion = _scheduler("passes.fusion")
        program = _schedule(graph, hw, spread_tcm, resident_constants,
                            fusion.DEFAULT_RULES if composite_fusion else fusion.CHAIN_RULES)
        if verify:
            verify_plan(program)
        return program


def compiled_program(graph: Graph, hw: HwConfig, *, use_cache: bool = False, spread_tcm: bool = False,
                     resident_constants: bool = False, composite_fusion: bool = True) -> tuple[Program, str]:
    """:func:`compile_graph` (not verified), through the program cache (:mod:`npu_sim.program_cache`)
    if ``use_cache`` and the cache is on; the Program and how it came: ``"hit"``, ``"stored"``,
    ``"uncached"`` (a graph the cache cannot key) or ``"off"``."""
    def compile_now() -> Program:
        return compile_graph(graph, hw, spread_tcm=spread_tcm, resident_constants=resident_constants,
                             composite_fusion=composite_fusion)

    if not (use_cache and program_cache.enabled()):
        return compile_now(), "off"
    options = (("spread_tcm", spread_tcm), ("resident_constants", resident_constants),
               ("composite_fusion", composite_fusion))
    with gc_paused():
        return program_cache.cached_program(graph, hw, options, compile_now)


def _schedule(graph: Graph, hw: HwConfig, spread_tcm: bool, resident_constants: bool,
              rules: tuple[FusionRule, ...]) -> Program:
    """``resident_constants`` (several invocations): constants resident in a large TCM pool
    if the working set still fits beside it, else the plain plan (they stream as before)."""
    if resident_constants:
        try:
            return schedule(graph, hw, spread_tcm=spread_tcm, resident_constants=True, rules=rules)
        except ScheduleError:
            pass
    return schedule(graph, hw, spread_tcm=spread_tcm, rules=rules)


def verify_plan(program: Program) -> None:
    """Run the plan verifier; a plan it rejects is the scheduler's bug, not the graph's."""
    scheduler = _scheduler()
    try:
        scheduler.verify_program(program)
    except scheduler.PlanError as exc:
        raise SchedulerBugError(f"the plan verifier rejects the compiled program: {exc}") from exc


@contextmanager
def _blaming_the_graph_first(graph: Graph, per_invocation: Sequence[Mapping[str, np.ndarray]]) -> Iterator[None]:
    """An unexpected failure in the scheduler or the simulator (anything but an
    :class:`NpuSimError`) is npu-sim's bug, unless the reference executor rejects the graph
    on these inputs: then its error (an ERROR_IF the graph breaks, exit 2) is raised instead."""
    try:
        yield
    except NpuSimError:
        raise
    except Exception:
        _reference_run(graph, per_invocation)
        raise


def _reference_run(graph: Graph, per_invocation: Sequence[Mapping[str, np.ndarray]]) -> None:
    """Run the invocations in the reference executor: raises the graph's own error, if any."""
    session = Session(graph, validate=False)   # simulate_invocations validated it
    for inputs in per_invocation:
        session.invoke(dict(inputs))


def _checked_job(graph: Graph, hw: HwConfig, per_invocation: Sequence[Mapping[str, np.ndarray]],
                 stack: bool, max_memory_bytes: int | None, host_memory_checked: bool) -> list[dict[str, np.ndarray]]:
    """The inputs of each invocation, checked, once the job is known to fit its budgets (the host's
    checked here unless ``host_memory_checked``)."""
    if not host_memory_checked:
        check_host_memory(graph, max_memory_bytes or default_host_budget_bytes(), simulated=True)
    if not per_invocation:
        raise InputError("at least one invocation is needed")
    if not stack and len(per_invocation) != 1:
        raise InputError(f"{len(per_invocation)} invocations: their outputs must be stacked")
    checked = [check_inputs(graph, dict(inputs)) for inputs in per_invocation]
    if empty_tensor(graph) is not None:   # the scheduler may refuse it: unless the graph itself is wrong
        _reference_run(graph, checked)
        graph = _scheduler("passes.empty_tensors").drop_empty_tensors(graph)
    check_npu_capacity(graph, hw)
    return checked


def simulate_invocations(graph: Graph | str | Path, hw: HwConfig | str | Path,
                         per_invocation: Sequence[Mapping[str, np.ndarray]], *,
                         graph_label: str = "", stack: bool = False,
                         spread_tcm: bool = False, verify: bool = False,
                         validate: bool = True, max_memory_bytes: int | None = None,
                         composite_fusion: bool = True, timing_only: bool = False,
                         program: Program | None = None, host_memory_checked: bool = False,
                         use_cache: bool = False) -> SimulationResult:
    """Schedule ``graph`` for ``hw`` and simulate one invocation per element of ``per_invocation``.

    ``stack``: return outputs stacked along a leading invocation axis (else those
    of the single invocation). ``spread_tcm``, ``verify``: see :func:`compile_graph`.
    ``validate``: check a Graph object first (one built in Python may break what the
    loader checks); False for a graph the loader just validated. A path is loaded, so
    validated, anyway. ``max_memory_bytes``: the host memory the job may use (default: most
    of what is available); a graph that needs more is refused before any work.
    ``composite_fusion``: see :func:`compile_graph`. ``timing_only``: the same Program and
    event schedule, every figure the same, but no value computed (no outputs; the summary's
    ``timing_only`` says so; a graph with control flow computes them anyway, as its
    conditions are values): what a sweep needs of a configuration whose bits are known.
    ``program``: the Program this graph compiles to on ``hw`` for these invocations, compiled
    before (a sweep's points that differ only in timing fields share it): not compiled again.
    ``host_memory_checked``: the caller has checked the graph against ``max_memory_bytes`` already
    (:func:`npu_sim.budget.check_host_memory`, as ``npu-sim run`` does before reading the inputs).
    ``use_cache``: read the Program back from the program cache if an earlier run kept it, else
    keep it there (:mod:`npu_sim.program_cache`; summary.json's ``program_cache`` says which).
    """
    graph, path_label = _graph(graph)
    if validate and not path_label:
        validate_graph(graph)
    hw = _hw(hw)
    checked = _checked_job(graph, hw, per_invocation, stack, max_memory_bytes, host_memory_checked)
    wall: dict[str, float] = {}
    with gc_paused():
        start = time.perf_counter()
        cache_use = "given"
        if program is None:
            with _blaming_the_graph_first(graph, checked):
                program, cache_use = compiled_program(graph, hw, use_cache=use_cache, spread_tcm=spread_tcm,
                                                      resident_constants=len(per_invocation) > 1,
                                                      composite_fusion=composite_fusion)
        wall["schedule"] = time.perf_counter() - start
        if verify:
            start = time.perf_counter()
            verify_plan(program)
            wall["verify"] = time.perf_counter() - start
        start = time.perf_counter()
        with _blaming_the_graph_first(graph, checked):
            try:
                result = simulate_program(program, hw, checked, timing_only=timing_only)
            except (ProgramError, SimulationError) as exc:   # the compiled program is at fault
                raise SchedulerBugError(f"the compiled program failed in the simulator: {exc}") from exc
        wall["simulate"] = time.perf_counter() - start
        start = time.perf_counter()
        summary = build_summary(result.trace, hw, program, graph=graph_label or path_label or program.graph_name)
        wall["summary"] = time.perf_counter() - start
    summary["wall_seconds"] = wall
    summary["program_cache"] = cache_use
    summary["timing_only"] = result.timing_only
    if timing_only and not result.timing_only:
        summary["timing_only_note"] = "control flow decides on computed values: every value was computed"
    per_invocation_outputs = [dict(as_user_outputs(graph, r)) for r in result.outputs]   # (uint8, int64 edges)
    outputs = {} if result.timing_only else _outputs(graph, per_invocation_outputs, stack)
    return SimulationResult(outputs, summary, result.trace, program, hw, per_invocation_outputs,
                            dict(result.variables))


def _outputs(graph: Graph, per_invocation: list[dict[str, np.ndarray]], stack: bool) -> dict[str, np.ndarray]:
    """The graph's outputs: stacked along a leading invocation axis, or the single invocation's."""
    names = list(graph.output_types)
    if stack:
        return {name: np.stack([r[name] for r in per_invocation]) for name in names}
    return {name: per_invocation[0][name] for name in names}


def simulate(graph: Graph | str | Path, hw: HwConfig | str | Path,
             inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray] | None = None,
             invocations: int = 1, *, spread_tcm: bool = False, verify: bool = False,
             composite_fusion: bool = True, timing_only: bool = False,
             block_tensors: bool | None = None, use_cache: bool = False) -> SimulationResult:
    """Run ``graph`` on the simulated NPU ``hw`` (a HwConfig, preset name or YAML path).

    ``inputs``: input name -> array (or arrays in the graph's input order). With
    ``invocations`` N > 1 each array has a leading axis of length N, invocation k
    uses slice k, variables persist between invocations, and outputs come back
    stacked the same way. ``spread_tcm``, ``verify``, ``composite_fusion``: see
    :func:`compile_graph`; ``timing_only``: see :func:`simulate_invocations`; ``block_tensors``:
    True or False overrides ``hw``'s ``block_tensors.enabled`` (False: the plan without them);
    ``use_cache``: reuse the Program an earlier run compiled (see :func:`simulate_invocations`).
    """
    hw = _hw_with(hw, block_tensors)
    if not isinstance(invocations, int) or isinstance(invocations, bool) or invocations < 1:
        raise InputError(f"invocations must be an integer >= 1, got {invocations!r}")
    graph, label = _graph(graph)
    if invocations == 1:
        return simulate_invocations(graph, hw, [check_inputs(graph, inputs)], graph_label=label,
                                    spread_tcm=spread_tcm, verify=verify, validate=not label,
                                    composite_fusion=composite_fusion, timing_only=timing_only,
                                    use_cache=use_cache)
    names = list(graph.input_types)
    if inputs is None:
        inputs = {}
    if not isinstance(inputs, Mapping):
        inputs = dict(zip(names, inputs)) if len(inputs) == len(names) else check_inputs(graph, inputs)
    for name in names:
        value = inputs.get(name)
        if isinstance(value, np.ndarray) and (value.ndim == 0 or value.shape[0] != invocations):
            raise InputError(f"input {name!r}: with invocations={invocations} expected a leading "
                             f"axis of {invocations}, got shape {list(value.shape)}")
    per = [{name: (value[k] if isinstance(value, np.ndarray) else value)
            for name, value in inputs.items()} for k in range(invocations)]
    return simulate_invocations(graph, hw, per, graph_label=label, stack=True, spread_tcm=spread_tcm,
                                verify=verify, validate=not label, composite_fusion=composite_fusion,
                                timing_only=timing_only, use_cache=use_cache)
