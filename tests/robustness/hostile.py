"""Running ``npu-sim`` as a careless user would: a subprocess under a 6 GiB address-space
limit and a time limit, whose exit code, stderr and leftovers the tests check."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from npu_sim.tosa import DType, GraphBuilder, Op
from npu_sim.tosa.ir import Graph
from npu_sim.tosa.loader import save_graph

ADDRESS_SPACE_BYTES = 6 << 30
TIME_LIMIT_SECONDS = 60
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr_lines: list[str]

    def refused(self, *fragments: str) -> None:
        """Exit 2, one to three lines on stderr, no traceback, each fragment in the message."""
        text = "\n".join(self.stderr_lines)
        assert self.code == 2, (self.code, text)
        assert 1 <= len(self.stderr_lines) <= 3, text
        assert "Traceback" not in text and "internal error" not in text, text
        for fragment in fragments:
            assert fragment in text, (fragment, text)


def _limit_address_space() -> None:  # pragma: no cover - runs in the child
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def npu_sim(args: list[object], cwd: Path, timeout: float = TIME_LIMIT_SECONDS,
            env: dict[str, str] | None = None) -> Outcome:
    """Run the CLI (as ``python -m npu_sim.cli``) in ``cwd``; a hang fails the test."""
    done = subprocess.run([sys.executable, "-m", "npu_sim.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=_limit_address_space if sys.platform != "win32" else None,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    return Outcome(done.returncode, done.stdout, done.stderr.strip().splitlines())


def save(graph: Graph, path: Path) -> Path:
    save_graph(graph, path, validate=False)
    return path


def add_graph(shape: tuple[int, ...], dtype: DType = DType.INT32) -> Graph:
    b = GraphBuilder()
    x, y = b.input("x", shape, dtype), b.input("y", shape, dtype)
    b.output(b.op(Op.ADD, [x, y], name="z"))
    return b.build(validate=False)


def tile_graph(shape: tuple[int, ...], multiples: list[int]) -> Graph:
    b = GraphBuilder()
    x = b.input("x", shape, DType.INT32)
    b.output(b.op(Op.TILE, [x, b.const_shape("multiples", multiples)], name="z"))
    return b.build(validate=False)


def counting_loop_graph(elements: int) -> Graph:
    """WHILE_LOOP running ``n`` (an input) times, adding 1 to an ``elements``-long int32
    tensor each time: the trip count comes from the data."""
    b = GraphBuilder()
    x = b.input("x", (elements,), DType.INT32)
    n = b.input("n", (1,), DType.INT32)
    one = np.array([1], np.int32)

    def cond_fn(bb, i, acc, limit):  # type: ignore[no-untyped-def]
        return bb.op(Op.GREATER, [limit, i])

    def body_fn(bb, i, acc, limit):  # type: ignore[no-untyped-def]
        return [bb.op(Op.ADD, [i, bb.const(None, one)]), bb.op(Op.ADD, [acc, bb.const(None, np.ones((1,), np.int32))]),
                limit]

    _, acc, _ = b.while_loop([b.const(None, np.array([0], np.int32)), x, n], cond_fn, body_fn)
    b.output(acc)
    return b.build()


def leftovers(directory: Path) -> list[str]:
    """Temporary or lock files a run left beside its output directory."""
    return sorted(p.name for p in directory.iterdir() if ".tmp-" in p.name or ".old-" in p.name
                  or p.name.endswith(".lock"))
