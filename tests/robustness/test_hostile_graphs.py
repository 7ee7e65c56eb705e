"""Graphs that would take terabytes, loop for ever or are empty: refused in a moment with
one line (exit 2), or, where only unusual, run correctly."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from npu_sim.tosa import DType, GraphBuilder, Op
from npu_sim.tosa.ir import Block, Graph, Operator, Region, Tensor
from npu_sim.tosa.ops import make_attribute
from tests.robustness.hostile import add_graph, counting_loop_graph, npu_sim, save, tile_graph


@pytest.mark.parametrize("command", [["plan", "--hw", "edge"],
                                     ["run", "--hw", "edge", "--random-inputs", "0", "-o", "out"]])
def test_a_terabyte_tensor_is_refused_before_scheduling(tmp_path, command):
    graph = save(add_graph((1 << 20, 1 << 20)), tmp_path / "huge.tosa")
    outcome = npu_sim([command[0], graph, *command[1:]], tmp_path, timeout=30)
    outcome.refused("'x'", "4 TiB")
    assert not (tmp_path / "out").exists()


def test_exec_refuses_an_output_larger_than_the_memory_budget(tmp_path):
    graph = save(tile_graph((1024, 1024), [64, 64]), tmp_path / "tile.tosa")   # 16 GiB out
    outcome = npu_sim(["exec", graph, "--random-inputs", "0", "-o", "out"], tmp_path, timeout=30)
    outcome.refused("'z' alone is 16 GiB", "--max-memory")


def test_max_memory_sets_the_budget(tmp_path):
    graph = save(add_graph((1024, 1024)), tmp_path / "add.tosa")   # 4 MiB per tensor
    refused = npu_sim(["exec", graph, "--random-inputs", "0", "-o", "out", "--max-memory", "8M"], tmp_path)
    refused.refused("the limit is 8 MiB")
    assert npu_sim(["exec", graph, "--random-inputs", "0", "-o", "out", "--max-memory", "1G"], tmp_path).code == 0
    npu_sim(["exec", graph, "--random-inputs", "0", "-o", "o2", "--max-memory", "lots"], tmp_path).refused(
        "--max-memory: 'lots' is not a size")


@pytest.mark.parametrize("command", [["exec"], ["run", "--hw", "edge"]])
def test_a_loop_whose_trip_count_comes_from_the_data_stops_at_its_work_budget(tmp_path, command):
    graph = save(counting_loop_graph(1 << 16), tmp_path / "loop.tosa")   # 256 KiB per iteration
    np.save(tmp_path / "n.npy", np.array([1 << 30], np.int32))
    np.save(tmp_path / "x.npy", np.zeros(1 << 16, np.int32))
    outcome = npu_sim([*command, graph, "-i", "x=x.npy", "-i", "n=n.npy", "-o", "out",
                       "--max-loop-work", str(64 << 20)], tmp_path)
    outcome.refused("WHILE_LOOP", "loop stopped after", "--max-loop-work")
    assert not (tmp_path / "out").exists()


def test_timeout_ends_a_long_loop(tmp_path):
    graph = save(counting_loop_graph(1 << 10), tmp_path / "loop.tosa")
    np.save(tmp_path / "n.npy", np.array([90_000], np.int32))
    np.save(tmp_path / "x.npy", np.zeros(1 << 10, np.int32))
    outcome = npu_sim(["run", graph, "--hw", "edge", "-i", "x=x.npy", "-i", "n=n.npy", "-o", "out",
                       "--timeout", "2"], tmp_path)
    outcome.refused("timed out after 2 s", "--timeout")


def test_the_same_loop_within_its_budgets_runs(tmp_path):
    graph = save(counting_loop_graph(1 << 10), tmp_path / "loop.tosa")
    np.save(tmp_path / "n.npy", np.array([5], np.int32))
    np.save(tmp_path / "x.npy", np.arange(1 << 10, dtype=np.int32))
    outcome = npu_sim(["run", graph, "--hw", "edge", "-i", "x=x.npy", "-i", "n=n.npy", "-o", "out"], tmp_path)
    assert outcome.code == 0, outcome.stderr_lines
    result = np.load(next((tmp_path / "out" / "outputs").glob("*.npy")))
    assert np.array_equal(result, np.arange(1 << 10, dtype=np.int32) + 5)


def test_an_empty_graph_input_runs_in_exec_and_is_refused_by_the_scheduler(tmp_path):
    graph = save(add_graph((0, 4)), tmp_path / "empty.tosa")
    done = npu_sim(["exec", graph, "--random-inputs", "0", "-o", "out"], tmp_path)
    assert done.code == 0, done.stderr_lines
    assert np.load(tmp_path / "out" / "outputs" / "z.npy").shape == (0, 4)
    npu_sim(["run", graph, "--hw", "edge", "--random-inputs", "0", "-o", "out2"], tmp_path).refused(
        "shape [0, 4]", "does not schedule an empty graph or block input or output")


def _nested_cond_if(depth: int) -> Graph:
    """``depth`` COND_IFs, each then-branch holding the next (built block by block: no recursion)."""
    def block(name: str, operators: list[Operator]) -> Block:
        tensors = {n: Tensor(n, (1,), DType.BOOL) for n in ("c",)}
        tensors.update({n: Tensor(n, (4,), DType.INT32) for n in ("x", "y")})
        return Block(name, operators, tensors, ["c", "x"], ["y"])

    leaf = block("leaf", [Operator(Op.ADD, ["x", "x"], ["y"])])
    blocks = [leaf]
    for level in range(depth):
        attribute = make_attribute(Op.COND_IF, then_graph=blocks[-1].name, else_graph="leaf")
        blocks.append(block("main" if level == depth - 1 else f"b{level}",
                            [Operator(Op.COND_IF, ["c", "c", "x"], ["y"], attribute)]))
    return Graph([Region("main", blocks[::-1])])


def test_deeply_nested_control_flow_is_refused(tmp_path):
    graph = save(_nested_cond_if(2000), tmp_path / "deep.tosa")
    assert npu_sim(["inspect", graph], tmp_path).code == 0    # describing it is fine
    for command in (["exec"], ["run", "--hw", "edge"]):   # running it breaks MAX_NESTING
        npu_sim([*command, graph, "--random-inputs", "0", "-o", "out"], tmp_path).refused("nested deeper than")


def test_a_bad_attribute_is_refused(tmp_path):
    b = GraphBuilder()
    x = b.input("x", (1, 8, 8, 4), DType.INT8)
    b.output(b.op(Op.MAX_POOL2D, [x], kernel=[2, 2], stride=[2, 2], pad=[0, 0, 0, 0], nan_mode=1))
    graph = b.build()
    pool = graph.main.operators[0]
    pool.attribute = dataclasses.replace(pool.attribute, stride=[0, 2])
    path = save(graph, tmp_path / "bad.tosa")
    for command in (["exec"], ["run", "--hw", "edge"]):
        npu_sim([*command, path, "--random-inputs", "0", "-o", "out"], tmp_path).refused("stride")
