"""Suite-wide settings: converted .tflite models are cached in a folder of the test run,
never in the user's cache; compiled Programs are not cached (a test that replaces a compiler
stage must see it run: the program cache's own tests turn it on)."""

from __future__ import annotations

import os
import tempfile


def pytest_configure(config: object) -> None:
    os.environ.setdefault("NPU_SIM_CACHE", tempfile.mkdtemp(prefix="npu-sim-test-cache-"))
    os.environ.setdefault("NPU_SIM_PROGRAM_CACHE", "0")
