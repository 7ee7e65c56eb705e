"""LiteRT's fixed-point arithmetic, reproduced bit for bit as data.

LiteRT's integer LSTM (``lstm_eval.cc``, the "8x8_16" kernel) computes its gate
activations with gemmlowp's 16-bit fixed-point functions: ``logistic`` of a Q3.12 value
and ``tanh`` of a value with N integer bits, both giving Q0.15. Those functions are
sequences of 16-bit saturating, rounding operations (a Taylor polynomial for exp on
[-1/4, 0), a barrel of exp(-2^k) factors, Newton-Raphson for 1 / (1 + x)), so their
results are a staircase no interpolated table reproduces. Here they are evaluated once
for all 65,536 int16 inputs (vectorised numpy on int64, wrapping to int16 where C++
converts back to ``int16_t``); the legalization then looks the table up with a TOSA
GATHER, which gives LiteRT's bits exactly.

Also here: ``quantize_multiplier`` (a real scale as a Q31 multiplier and a shift, as
TFLite's ``QuantizeMultiplier`` rounds it).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

_I64 = np.int64
#: Every int16 value, in order: the inputs a table is evaluated on.
INT16_DOMAIN = np.arange(-32768, 32768, dtype=_I64)
#: Q31 constants gemmlowp keeps as int32 and rounds to 16 bits for int16 arithmetic.
_EXP_MINUS_ONE_EIGHTH_Q31 = 1895147668        # exp(-1/8)
_ONE_THIRD_Q31 = 715827883
_FORTY_EIGHT_SEVENTEENTHS_Q29 = 1515870810   # 48/17 with 2 integer bits
_MINUS_THIRTY_TWO_SEVENTEENTHS_Q29 = -1010580540
#: exp(-2^k) in Q31 for k = -2 .. 4: the barrel that completes exp beyond [-1/4, 0).
_EXP_BARREL_Q31 = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
                   (3, 720401), (4, 242))


def _wrap16(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap to int16 (what ``static_cast<int16_t>`` does), kept in int64."""
    return ((x + 32768) & 0xFFFF) - 32768


def rounding_divide_by_pot(x: np.ndarray | int, exponent: int) -> np.ndarray:
    """x / 2^exponent rounded to nearest, ties away from zero (gemmlowp ``RoundingDivideByPOT``)."""
    x = np.asarray(x, dtype=_I64)
    mask = (1 << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def _constant16(q31: int) -> int:
    """A Q31 constant as the 16-bit arithmetic uses it (rounded by 2^16)."""
    return int(_wrap16(rounding_divide_by_pot(q31, 16)))


def _high_mul16(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int16: (2ab + 2^15) / 2^16 with C's
    truncating division of a nudged product, -1 * -1 saturating to the largest value.

    The nudge is 2^14 for a product p >= 0 and 1 - 2^14 below it; C's division by 2^15
    truncates toward zero, for a negative nudged product the floor of
    (p + 1 - 2^14 + 2^15 - 1) / 2^15: either way the quotient is ``(p + 2^14) >> 15``."""
    quotient = (a * b + (1 << 14)) >> 15
    return np.where((a == -32768) & (np.asarray(b) == -32768), 32767, _wrap16(quotient))


def _times_pot16(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingMultiplyByPOT`` on int16: a saturating left shift, or a
    rounding right shift for a negative exponent."""
    if exponent < 0:
        return _wrap16(rounding_divide_by_pot(x, -exponent))
    if exponent == 0:
        return x
    limit = (1 << (15 - exponent)) - 1
    shifted = _wrap16(x << exponent)
    return np.where(x > limit, 32767, np.where(x < -limit, -32768, shifted))


def _rounding_half_sum16(a: np.ndarray, b: int) -> np.ndarray:
    total = a + b
    return _wrap16(np.where(total >= 0, (total + 1) >> 1, -((1 - total) >> 1)))


def _exp_on_quarter_interval(a: np.ndarray) -> np.ndarray:
    """exp(a) for Q0.15 ``a`` in [-1/4, 0): a Taylor expansion around -1/8."""
    constant, third = _constant16(_EXP_MINUS_ONE_EIGHTH_Q31), _constant16(_ONE_THIRD_Q31)
    x = _wrap16(a + (1 << 12))                      # a + 1/8
    x2 = _high_mul16(x, x)
    x3 = _high_mul16(x2, x)
    x4 = _high_mul16(x2, x2)
    x4_over_4 = _times_pot16(x4, -2)
    tail = _times_pot16(_wrap16(_high_mul16(_wrap16(x4_over_4 + x3), third) + x2), -1)
    return np.clip(constant + _high_mul16(np.full_like(x, constant), _wrap16(x + tail)), -32768, 32767)


def _exp_on_negative(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """exp(a) in Q0.15 for ``a`` <= 0 with ``integer_bits`` integer bits."""
    fractional_bits = 15 - integer_bits
    quarter = 1 << (fractional_bits - 2)
    reduced = _wrap16((a & (quarter - 1)) - quarter)   # a mod 1/4, minus 1/4
    result = _exp_on_quarter_interval(_times_pot16(reduced, integer_bits))
    remainder = _wrap16(reduced - a)
    for exponent, q31 in _EXP_BARREL_Q31:
        if integer_bits > exponent:
            factor = _constant16(q31)
            bit = 1 << (fractional_bits + exponent)
            result = np.where(remainder & bit, _high_mul16(result, factor), result)
    if integer_bits > 5:   # below -32 the result is 0
        result = np.where(a < _constant16(-(1 << (36 - integer_bits))), 0, result)
    return np.where(a == 0, 32767, result)


def _newton_reciprocal(a: np.ndarray) -> np.ndarray:
    """1 / (1 + a) for Q0.15 ``a`` in (0, 1), in Q2.13: three Newton-Raphson steps on the
    half denominator."""
    half_denominator = _rounding_half_sum16(a, 32767)
    x = _wrap16(_constant16(_FORTY_EIGHT_SEVENTEENTHS_Q29)
                + _high_mul16(half_denominator, _constant16(_MINUS_THIRTY_TWO_SEVENTEENTHS_Q29)))
    one = 1 << 13
    for _ in range(3):
        error = _wrap16(one - _high_mul16(half_denominator, x))
        x = _wrap16(x + _times_pot16(_high_mul16(x, error), 2))
    return x


def _logistic(a: np.ndarray, integer_bits: int) -> np.ndarray:
    positive = a > 0
    magnitude = np.where(positive, a, _wrap16(-a))
    # 1 / (1 + exp(-|a|)): the Q2.13 reciprocal halved is a Q1.14 raw value; rescale to Q0.15
    high = _times_pot16(_newton_reciprocal(_exp_on_negative(_wrap16(-magnitude), integer_bits)), 1)
    return np.where(a == 0, 1 << 14, np.where(positive, high, _wrap16(32767 - high)))


def _tanh(a: np.ndarray, integer_bits: int) -> np.ndarray:
    negative = a < 0
    non_positive = np.where(negative, a, _wrap16(-a))
    # (1 - exp(2n)) / (1 + exp(2n)) for n <= 0: doubling n is one more integer bit
    reciprocal = _newton_reciprocal(_exp_on_negative(non_positive, integer_bits + 1))
    magnitude = _times_pot16(_wrap16(reciprocal - (1 << 13)), 2)
    return np.where(a == 0, 0, np.where(negative, _wrap16(-magnitude), magnitude))


@cache
def sigmoid_table(integer_bits: int = 3) -> np.ndarray:
    """LiteRT's int16 sigmoid of a value with ``integer_bits`` integer bits, for every int16
    input (index = input + 32768), in Q0.15; read-only."""
    return _frozen(_logistic(INT16_DOMAIN, integer_bits))


@cache
def tanh_table(integer_bits: int) -> np.ndarray:
    """LiteRT's int16 tanh of a value with ``integer_bits`` integer bits (0..6), for every
    int16 input (index = input + 32768), in Q0.15; read-only."""
    if not 0 <= integer_bits <= 6:
        raise ValueError(f"tanh with {integer_bits} integer bits: LiteRT supports 0 to 6")
    return _frozen(_tanh(INT16_DOMAIN, integer_bits))


def _frozen(values: np.ndarray) -> np.ndarray:
    table = values.astype(np.int16)
    table.flags.writeable = False
    return table


def quantize_multiplier(scale: float) -> tuple[int, int]:
    """``scale`` as (Q31 multiplier, shift) with scale ~= multiplier * 2^(shift - 31), as
    TFLite's ``QuantizeMultiplier`` rounds it (half away from zero, a multiplier of 2^31
    carried into the shift, tiny scales flushed to zero, huge ones capped)."""
    if scale == 0:
        return 0, 0
    fraction, shift = math.frexp(scale)
    multiplier = int(math.copysign(math.floor(abs(fraction) * (1 << 31) + 0.5), fraction))
    if multiplier == 1 << 31:
        multiplier //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        return (1 << 31) - 1, 30
    return multiplier, shift
