"""FFT2D and RFFT2D (EXT-FFT, fp32), from the TOSA 1.0 pseudocode.

The spec defines each output as a DFT sum, judged by the dot-product accuracy
rule (KS = 2*H*W for FFT2D, H*W for RFFT2D). We compute each image's transform
in fp64 (numpy's pocketfft, far more accurate than the fp32 bound needs) and
round once to fp32. Tiles cover (N, H, W) of the output: every tile transforms
the whole images of its batch range, one image at a time with the same call,
and keeps its part, so tiles give the bits of the whole-tensor call.

RFFT2D's imaginary outputs at (0, 0), (0, W/2), (H/2, 0) and (H/2, W/2) are
exactly zero (the spec allows skipping them, and then requires zero).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from npu_sim.reference.kernel_api import KernelArgs, Region, register
from npu_sim.reference.kernel_util import input_offset, output_region
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Attribute, Op


def _power_of_two(value: int) -> bool:
    return value >= 1 and value & (value - 1) == 0


def _check(args: KernelArgs, out_width: int) -> tuple[int, int, int]:
    """ERROR_IFs and shape rules shared by FFT2D and RFFT2D; returns (N, H, W)."""
    shape = tuple(args.input_types[0].shape)
    args.require(len(shape) == 3, f"input must have rank 3, got shape {list(shape)}")
    args.require(all(t.dtype is DType.FP32 for t in (*args.input_types, *args.output_types)),
                 "FFT operands must be FP32")
    n, h, w = shape
    args.require(_power_of_two(h), f"H = {h} must be a power of two")
    args.require(_power_of_two(w), f"W = {w} must be a power of two")
    for t in args.input_types[1:]:
        args.require(tuple(t.shape) == shape, "input_real and input_imag must have the same shape")
    expected = (n, h, out_width if out_width else w)
    for t in args.output_types:
        args.require(tuple(t.shape) == expected, f"output shape {list(t.shape)} must be {list(expected)}")
    return n, h, w


def _fft_window(attribute: Attribute, input_types: Sequence[TensorType],
                output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    (n0, n1) = out_region[0]
    return [((n0, n1), (0, t.shape[1]), (0, t.shape[2])) for t in input_types]


def _batch(args: KernelArgs, index: int, n0: int, n1: int) -> np.ndarray:
    offset = input_offset(args, index)[0]
    h, w = args.input_types[index].shape[1:]
    x = np.asarray(args.inputs[index])[n0 - offset:n1 - offset]
    return x[:, :h, :w].astype(np.float64)


def _split(spectra: list[np.ndarray], region: Region) -> list[np.ndarray]:
    (_, _), (y0, y1), (x0, x1) = region
    if not spectra:
        shape = (0, y1 - y0, x1 - x0)
        return [np.zeros(shape, np.float32), np.zeros(shape, np.float32)]
    block = np.stack([s[y0:y1, x0:x1] for s in spectra])
    with np.errstate(over="ignore", invalid="ignore"):
        return [block.real.astype(np.float32), block.imag.astype(np.float32)]


@register(Op.FFT2D, window=_fft_window)
def fft2d(args: KernelArgs) -> list[np.ndarray]:
    """FFT2D: unnormalised complex 2D DFT (inverse: exponent sign +) of real/imag planes."""
    _check(args, 0)
    region = output_region(args)
    (n0, n1) = region[0]
    real, imag = _batch(args, 0, n0, n1), _batch(args, 1, n0, n1)
    spectra = []
    with np.errstate(over="ignore", invalid="ignore"):
        for n in range(n1 - n0):
            image = real[n] + 1j * imag[n]
            if args.attribute.inverse:
                # sum x * exp(+i a) without the 1/(H*W) of numpy's ifft2
                spectra.append(np.conj(np.fft.fft2(np.conj(image))))
            else:
                spectra.append(np.fft.fft2(image))
    return _split(spectra, region)


def _rfft_window(attribute: Attribute, input_types: Sequence[TensorType],
                 output_types: Sequence[TensorType], out_region: Region) -> list[Region]:
    return _fft_window(attribute, input_types, output_types, out_region)


@register(Op.RFFT2D, window=_rfft_window)
def rfft2d(args: KernelArgs) -> list[np.ndarray]:
    """RFFT2D: forward 2D DFT of a real input, columns 0 .. W/2 of the spectrum."""
    _, h, w = _check(args, args.input_types[0].shape[2] // 2 + 1)
    region = output_region(args)
    (n0, n1) = region[0]
    real = _batch(args, 0, n0, n1)
    spectra = []
    with np.errstate(over="ignore", invalid="ignore"):
        for n in range(n1 - n0):
            spectrum = np.fft.rfft2(real[n])
            for y in {0, h // 2}:
                for x in {0, w // 2}:
                    spectrum[y, x] = spectrum[y, x].real   # imaginary part exactly zero
            spectra.append(spectrum)
    return _split(spectra, region)


__all__ = ["fft2d", "rfft2d"]
