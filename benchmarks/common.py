"""Helpers the benchmarks share: result files, plain-text tables, the machine they ran on.

Every benchmark prints a table and writes ``benchmarks/results/<benchmark>.json``:
``{"benchmark", "created", "environment", "goals", "rows", ...}``. The committed
snapshot of those files is what benchmarks/README.md quotes.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def reference_outputs(results: Sequence[Any], types: Sequence[Any]) -> list:
    """The reference model's outputs (raw words for bf16/fp8, wider ints) in our storage dtypes
    and shapes (``types``: TensorTypes)."""
    import numpy as np

    converted = []
    for array, t in zip(results, types):
        array = np.asarray(array)
        storage = t.dtype.numpy_dtype
        if array.dtype != storage:
            if array.dtype.itemsize == storage.itemsize and array.dtype.kind in "uV":
                array = array.view(storage)
            else:
                array = array.astype(storage)
        converted.append(array.reshape(t.shape))
    return converted


def environment() -> dict[str, Any]:
    """Where the numbers come from (the timing benchmarks depend on it)."""
    import numpy

    return {
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(terse=True),
    }


def write_result(benchmark: str, payload: dict[str, Any], directory: Path | None = None) -> Path:
    """Write ``payload`` (plus name, date, environment) to ``<directory>/<benchmark>.json``."""
    directory = directory or RESULTS
    directory.mkdir(parents=True, exist_ok=True)
    data = {"benchmark": benchmark, "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "environment": environment(), **payload}
    path = directory / f"{benchmark}.json"
    path.write_text(json.dumps(data, indent=1, default=_jsonable) + "\n")
    return path


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):   # numpy scalars
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def fmt(value: Any, digits: int = 2) -> str:
    """A table cell: floats rounded, None as '-', ints with thousands separators."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != 0 and abs(value) < 10 ** -digits * 10:   # small: 3 significant digits
            return f"{value:.3g}"
        return f"{value:.{digits}f}"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table, numbers right-aligned."""
    cells = [[fmt(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in rows) and bool(rows)
               for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in cells])


def goal_mark(ratio: float | None, goal: float) -> str:
    """'ok' when ``ratio <= goal``, 'MISS' above it, '-' when there is no ratio."""
    if ratio is None:
        return "-"
    return "ok" if ratio <= goal else "MISS"

