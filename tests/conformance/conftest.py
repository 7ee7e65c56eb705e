"""Fixtures of the conformance runs: where generated tests are cached."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def conformance_cache(request) -> Path:
    """Generated tests and reference results live here between runs.

    ``NPU_SIM_CONFORMANCE_CACHE`` overrides the default (pytest's cache directory, or
    the system temporary directory when pytest's cache is disabled).
    """
    override = os.environ.get("NPU_SIM_CONFORMANCE_CACHE")
    if override:
        path = Path(override)
        path.mkdir(parents=True, exist_ok=True)
        return path
    cache = getattr(request.config, "cache", None)  # absent with -p no:cacheprovider
    if cache is None:
        path = Path(tempfile.gettempdir()) / "npu_sim_conformance"
        path.mkdir(parents=True, exist_ok=True)
        return path
    return Path(cache.mkdir("npu_sim_conformance"))
