"""``npu-sim cache info`` and ``npu-sim cache clear``: the cache of converted models
(:mod:`npu_sim.conversion_cache`), shown and emptied."""

from __future__ import annotations

import typer

from npu_sim import conversion_cache
from reports.table import human_bytes


def cache_info() -> None:
    """Print where the cache is, its entries and size against its limit."""
    info = conversion_cache.info()
    typer.echo(f"cache: {info.directory}")
    typer.echo(f"entries: {info.entries}, {human_bytes(info.size_bytes)} ({info.size_bytes} bytes) of "
               f"{human_bytes(info.max_bytes)} ({conversion_cache.MAX_BYTES_ENV}; least recently used evicted)")


def cache_clear() -> None:
    """Remove every entry and say how much was freed."""
    files, freed = conversion_cache.clear()
    typer.echo(f"cache: {conversion_cache.cache_dir()}: removed {files} file(s), {human_bytes(freed)} freed")
