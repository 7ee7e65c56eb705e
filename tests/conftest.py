"""Suite-wide settings: converted .tflite models are cached in a folder of the test run,
never in the user's cache."""

from __future__ import annotations

import os
import tempfile


def pytest_configure(config: object) -> None:
    os.environ.setdefault("NPU_SIM_CACHE", tempfile.mkdtemp(prefix="npu-sim-test-cache-"))
