"""Running a sweep's points: cached ones are read back, the others go to local worker
processes or to a dask.distributed cluster, in batches, with a rich progress bar.

Cache: ``DIR/cache/<key>.json`` per finished point (key: :func:`~npu_sim.sweep.points.plan_point`),
written by the main process as each batch returns (whole, then renamed into place), so a
stopped sweep resumes where it was and a sweep with more axis values only runs the new
points. Results do not depend on where a point ran: the same function runs it on the same
bytes.

Points that share a schedule go in the same batches (a worker compiles their Program once).
A worker that dies (killed, out of memory) loses only the batch it was running: a local
pool is started again and the batches not finished are given to it; a dask cluster gives a
dead worker's tasks to the others, and a batch whose worker died is submitted again. A batch
that takes :data:`MAX_ATTEMPTS` workers down with it reports its points as errors.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from npu_sim.errors import NpuSimError
from npu_sim.sweep.points import BatchItem, PlannedPoint, SweepContext, run_batch

Row = dict[str, Any]
Batch = list[BatchItem]
Done = list[tuple[int, Row]]
#: Times a batch is run before its points are given up (each time its worker died under it).
MAX_ATTEMPTS = 3


class SweepClusterError(NpuSimError):
    """The dask scheduler cannot be reached, or dask is not installed."""


def cache_path(out_dir: Path, key: str) -> Path:
    return out_dir / "cache" / f"{key}.json"


def read_cached(out_dir: Path, point: PlannedPoint) -> Row | None:
    """The cached figures of a point, or None."""
    if not point.key:
        return None
    try:
        return dict(json.loads(cache_path(out_dir, point.key).read_text()))
    except (OSError, ValueError):
        return None


def write_cached(out_dir: Path, key: str, row: Row) -> None:
    path = cache_path(out_dir, key)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(row, sort_keys=True))
    tmp.replace(path)   # atomic: a Ctrl-C never leaves half a file


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def batches_of(points: list[PlannedPoint], workers: int) -> list[Batch]:
    """The valid points in batches, each of points that share a schedule (its worker compiles
    their Program once), those sharing a simulation next to each other. With at least as many
    schedules as workers a schedule's points stay in one batch (up to a worker's share of the
    sweep, and 16 points); with fewer, each schedule's points are split over the workers."""
    groups: dict[str, list[BatchItem]] = {}
    for point in sorted((p for p in points if p.hw_data is not None),
                        key=lambda p: (p.keys.schedule, p.keys.timing, p.index)):
        groups.setdefault(point.keys.schedule, []).append((point.index, point.hw_data or {}, point.keys))
    total, workers = sum(len(g) for g in groups.values()), max(1, workers)
    batches: list[Batch] = []
    for group in groups.values():
        if len(groups) >= workers:
            size = max(16, -(-total // workers))
        else:
            size = -(-len(group) // -(-workers // len(groups)))
        batches += [group[i:i + size] for i in range(0, len(group), size)]
    return batches


def _given_up(batch: Batch, attempts: int) -> Done:
    reason = f"the worker running this point died {attempts} times (killed, or out of memory?)"
    return [(index, {"status": "error", "error": reason}) for index, _, _ in batch]


_WORKER_CONTEXT: list[SweepContext] = []


def _init_worker(ctx: SweepContext) -> None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the main process's to handle
    _WORKER_CONTEXT[:] = [ctx]


def _run_local_batch(batch: Batch) -> Done:
    return run_batch(_WORKER_CONTEXT[0], batch)


def worker_pool(ctx: SweepContext, workers: int) -> ProcessPoolExecutor | None:
    """Worker processes that each hold ``ctx`` (None for one worker: points run in this process).
    A search that runs points in rounds keeps one pool for all of them."""
    if workers <= 1:
        return None
    methods = multiprocessing.get_all_start_methods()
    mp = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    return ProcessPoolExecutor(max_workers=workers, mp_context=mp, initializer=_init_worker, initargs=(ctx,))


def _local(ctx: SweepContext, batches: list[Batch], workers: int,
           pool: ProcessPoolExecutor | None) -> Iterator[Done]:
    """Batches run in worker processes (here if there is one worker); a pool that breaks (a
    worker died) is replaced and the unfinished batches go to the new one."""
    owned = pool is None
    pool = pool or worker_pool(ctx, workers)
    if pool is None:
        for batch in batches:
            yield run_batch(ctx, batch)
        return
    attempts = [0] * len(batches)
    pending = set(range(len(batches)))
    try:
        while pending:
            try:
                yield from _round(pool, batches, pending, attempts)
            except BrokenProcessPool:
                pool.shutdown(wait=False, cancel_futures=True)
                for k in [k for k in pending if attempts[k] >= MAX_ATTEMPTS]:
                    pending.discard(k)
                    yield _given_up(batches[k], attempts[k])
                pool, owned = worker_pool(ctx, workers), True
                assert pool is not None
    finally:
        if owned and pool is not None:
            pool.shutdown(wait=not pending, cancel_futures=bool(pending))


def _round(pool: ProcessPoolExecutor, batches: list[Batch], pending: set[int],
           attempts: list[int]) -> Iterator[Done]:
    """Submit the ``pending`` batches; yield each as it finishes (and drop it from ``pending``)."""
    futures: dict[Future[Done], int] = {}
    for k in sorted(pending):
        attempts[k] += 1
        futures[pool.submit(_run_local_batch, batches[k])] = k
    try:
        for future in as_completed(futures):
            done = future.result()
            pending.discard(futures[future])
            yield done
    except BaseException:
        for future in futures:
            future.cancel()
        raise


#: What a dask future raises when the worker running it died (dask's own exception classes).
_WORKER_DIED = frozenset({"KilledWorker", "FutureCancelledError", "CancelledError"})


def _dask(ctx: SweepContext, batches: list[Batch], address: str) -> Iterator[Done]:
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError:
        raise SweepClusterError("--scheduler needs dask.distributed: pip install 'npu-sim[dask]'") from None
    try:
        client = Client(address, timeout="10s")
    except (OSError, TimeoutError) as exc:
        raise SweepClusterError(f"cannot reach the dask scheduler at {address}: {exc}") from None
    with client:
        shared = client.scatter(ctx, broadcast=True)   # graph bytes and inputs travel to each worker once
        attempts = dict.fromkeys(range(len(batches)), 1)
        futures = {client.submit(run_batch, shared, batch, pure=False): k for k, batch in enumerate(batches)}
        running = dask_completed(futures)
        for future in running:
            k = futures.pop(future)
            try:
                yield future.result()
            except Exception as exc:
                if type(exc).__name__ not in _WORKER_DIED:
                    raise
                if attempts[k] >= MAX_ATTEMPTS:
                    yield _given_up(batches[k], attempts[k])
                    continue
                attempts[k] += 1
                again = client.submit(run_batch, shared, batches[k], pure=False)
                futures[again] = k
                running.add(again)


def run_points(ctx: SweepContext, points: list[PlannedPoint], out_dir: Path, *, workers: int,
               scheduler: str | None = None, progress: bool = True,
               pool: ProcessPoolExecutor | None = None) -> tuple[dict[int, Row], int]:
    """Figures of every point by index (invalid configs, cached points, then the rest as they
    finish), and how many points ran now. ``pool``: reuse these worker processes (see
    :func:`worker_pool`) for the points (they must hold the same ``ctx``)."""
    (out_dir / "cache").mkdir(parents=True, exist_ok=True)
    rows: dict[int, Row] = {}
    todo: list[PlannedPoint] = []
    for point in points:
        if point.hw_data is None:
            rows[point.index] = {"status": "error", "error": " ".join(point.error.split())}
            continue
        cached = read_cached(out_dir, point)
        if cached is None:
            todo.append(point)
        else:
            rows[point.index] = cached
    keys = {p.index: p.key for p in todo}
    batches = batches_of(todo, workers)
    source = _dask(ctx, batches, scheduler) if scheduler else _local(ctx, batches, workers, pool)
    with _progress_bar(len(points), progress) as bar:
        state = _ProgressState(bar, len(points), rows)
        for batch in source:
            for index, row in batch:
                rows[index] = row
                write_cached(out_dir, keys[index], row)
            state.update(rows)
    return rows, len(todo)


class _ProgressState:
    def __init__(self, bar: Progress | None, total: int, rows: dict[int, Row]):
        self.bar, self.total = bar, total
        self.start, self.first = time.perf_counter(), len(rows)
        self.task = bar.add_task("sweep", total=total) if bar is not None else None
        self.update(rows)

    def update(self, rows: dict[int, Row]) -> None:
        if self.bar is None or self.task is None:
            return
        errors = sum(1 for r in rows.values() if r["status"] != "ok")
        minutes = (time.perf_counter() - self.start) / 60
        rate = (len(rows) - self.first) / minutes if minutes > 0 else 0.0
        self.bar.update(self.task, completed=len(rows),
                        description=f"{len(rows) - errors} ok, {errors} error, {rate:,.0f} points/min")


def _progress_bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return _NoBar()
    return Progress(TextColumn("{task.description}"), BarColumn(),
                    TextColumn("{task.completed}/{task.total} points"), TimeRemainingColumn(), transient=False)


class _NoBar:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: object) -> None:
        return None
