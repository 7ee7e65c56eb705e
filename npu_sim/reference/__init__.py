"""Bit-exact TOSA kernels (numpy, from the specification's pseudocode) and the reference executor.

Importing this package registers every kernel in :data:`KERNELS`.
"""

from npu_sim.reference import (  # noqa: F401  (imported for kernel registration)
    activation,
    conv,
    data_layout,
    elementwise,
    fft,
    image,
    pooling,
    reduction,
    scatter_gather,
    type_conversion,
)
from npu_sim.reference.kernel_api import KERNELS, KernelArgs, input_window, run_kernel

__all__ = ["KERNELS", "KernelArgs", "input_window", "run_kernel"]
