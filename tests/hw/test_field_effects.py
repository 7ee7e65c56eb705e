"""npu_sim.hw.field_effects: every HwConfig field has an effect, and the declarations hold: the
scheduler reads only schedule fields (recorded while it compiles every example on every
preset) and the simulator no cost field; the keys tell configs apart by what they change."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel

import npu_sim
from npu_sim.hw.config import HwConfig, load_hw_config
from npu_sim.hw.field_effects import COST_SECTIONS, TIMING_FIELDS, Effect, effect, schedule_key, timing_key
from npu_sim.inputs import random_array
from npu_sim.simulation import compile_graph
from npu_sim.simulator import simulate_program

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.tosa"))
PRESETS = ("tiny", "edge", "server", "ethos-u55-256", "ethos-u65-256", "ethos-u85-256")


class Recorder:
    """A config that records the dotted path of every field read through it (a section's
    property counts as reading every field of the section; a method call as reading all)."""

    def __init__(self, model: BaseModel, path: str, reads: Counter):
        self._model, self._path, self._reads = model, path, reads

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._model, name)
        path = f"{self._path}{name}"
        if isinstance(value, BaseModel):
            return Recorder(value, path + ".", self._reads)
        if name not in type(self._model).model_fields:
            fields = type(self._model).model_fields if not callable(value) else ["*"]
            self._reads.update(f"{self._path}{field}" for field in fields)
        else:
            self._reads[path] += 1
        return value


def _fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out += _fields(annotation, f"{prefix}{name}.")
        else:
            out.append(f"{prefix}{name}")
    return out


def test_every_field_has_an_effect_and_the_declared_ones_exist():
    fields = _fields(HwConfig)
    assert TIMING_FIELDS <= set(fields)
    assert all(any(f.startswith(section + ".") for f in fields) for section in COST_SECTIONS)
    effects = Counter(effect(f) for f in fields)
    assert effects[Effect.TIMING] == len(TIMING_FIELDS) and effects[Effect.COST] > 10
    assert effect("energy.mac_pj.int8") is Effect.COST and effect("mac_array.macs_per_cycle.int8") is Effect.SCHEDULE


@pytest.mark.slow
def test_the_scheduler_reads_only_schedule_fields_and_the_simulator_no_cost_field():
    scheduler_reads: Counter = Counter()
    simulator_reads: Counter = Counter()
    for model in EXAMPLES:
        graph = npu_sim.load_graph(model)
        rng = np.random.default_rng(0)
        inputs = {name: random_array(t, rng) for name, t in graph.input_types.items()}
        for preset in PRESETS:
            hw = load_hw_config(preset)
            program = compile_graph(graph, Recorder(hw, "", scheduler_reads))   # type: ignore[arg-type]
            if model.stem != "while_loop_int32":   # (a random loop count may be large)
                simulate_program(program, Recorder(hw, "", simulator_reads), [inputs])   # type: ignore[arg-type]
    assert "*" not in scheduler_reads and scheduler_reads["tcm.size_bytes"] > 0
    assert sorted(p for p in scheduler_reads if effect(p) is not Effect.SCHEDULE) == []
    assert sorted(p for p in simulator_reads if effect(p) is Effect.COST) == []
    assert {"clock_hz", "variable_sram.bytes_per_cycle"} <= set(simulator_reads)   # timing fields are timing


def test_keys_follow_the_effects():
    base = load_hw_config("edge").model_dump(mode="json")

    def changed(**fields: Any) -> dict[str, Any]:
        data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
        for path, value in fields.items():
            section, _, leaf = path.partition("__")
            if leaf:
                data[section][leaf] = value
            else:
                data[section] = value
        return data

    clock = changed(clock_hz=base["clock_hz"] * 2)
    energy = changed(energy__ddr_byte_pj=1.0)
    tcm = changed(tcm__size_bytes=base["tcm"]["size_bytes"] * 2)
    renamed = changed(name="other", description="another")
    assert schedule_key(clock) == schedule_key(base) != timing_key(clock) != timing_key(base)
    assert schedule_key(energy) == schedule_key(base) and timing_key(energy) == timing_key(base)
    assert schedule_key(tcm) != schedule_key(base) and timing_key(tcm) != timing_key(base)
    assert (schedule_key(renamed), timing_key(renamed)) == (schedule_key(base), timing_key(base))


def test_no_scheduler_module_names_a_timing_field():
    # the recorded reads cover the examples' paths; no path of any graph may read a timing field
    leaves = {path.rsplit(".", 1)[-1] for path in TIMING_FIELDS}
    sources = (Path(__file__).resolve().parents[2] / "scheduler").rglob("*.py")
    named = sorted(f"{path.name}: {leaf}" for path in sources for leaf in leaves
                   if re.search(rf"\b{leaf}\b", path.read_text()))
    assert named == []
