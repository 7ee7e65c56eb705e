"""npu-sim: a timed, bit-exact simulation model of a TOSA NPU."""

__version__ = "0.1.0"
