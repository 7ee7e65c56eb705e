"""LiteRT's 16-bit fixed-point sigmoid and tanh, as tables of every int16 input.

Bit-exactness with LiteRT is checked end to end (a fused LSTM's outputs against LiteRT's in
test_recurrent_against_litert.py); here, the properties gemmlowp's functions have by
construction, and values pinned from a LiteRT run."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.tosa.tflite.fixed_point import (
    INT16_DOMAIN,
    quantize_multiplier,
    rounding_divide_by_pot,
    sigmoid_table,
    tanh_table,
)


def test_sigmoid_is_within_seven_lsb_of_the_real_function_and_mirrors_about_one_half():
    table = sigmoid_table(3).astype(np.int64)
    real = 32768 / (1 + np.exp(-INT16_DOMAIN / 4096.0))
    assert np.abs(table - real).max() < 7
    assert table[32768] == 16384   # sigmoid(0) = 1/2
    x = np.arange(1, 32768)   # gemmlowp computes the negative side as One - sigmoid(|x|)
    assert np.array_equal(table[32768 - x], 32767 - table[32768 + x])


@pytest.mark.parametrize("integer_bits", range(7))
def test_tanh_is_odd_and_within_thirteen_lsb_of_the_real_function(integer_bits):
    table = tanh_table(integer_bits).astype(np.int64)
    real = 32768 * np.tanh(INT16_DOMAIN / 2.0 ** (15 - integer_bits))
    assert np.abs(table - real).max() < 13
    x = np.arange(1, 32768)
    assert np.array_equal(table[32768 - x], -table[32768 + x]) and table[32768] == 0


def test_values_pinned_from_litert():
    """Staircase values no interpolated table gives (LiteRT 2.3, PortableApplySigmoid/Tanh)."""
    assert sigmoid_table(3)[32768 - 5: 32768 + 6].tolist() == [16369, 16371, 16375, 16379, 16383, 16384, 16384,
                                                               16388, 16392, 16396, 16398]


def test_tables_are_read_only_and_tanh_refuses_unknown_integer_bits():
    assert not sigmoid_table(3).flags.writeable
    with pytest.raises(ValueError):
        tanh_table(7)


@pytest.mark.parametrize("value, exponent, expected", [(5, 1, 3), (-5, 1, -3), (6, 2, 2), (-6, 2, -2),
                                                        (-2, 2, -1), (2, 2, 1), (-3, 2, -1)])
def test_rounding_divide_by_pot_rounds_half_away_from_zero(value, exponent, expected):
    assert int(rounding_divide_by_pot(value, exponent)) == expected


@pytest.mark.parametrize("scale, expected", [(0.5, (1 << 30, 0)), (1.0, (1 << 30, 1)), (0.75, (3 << 29, 0)),
                                             (2.0 ** -40, (0, 0)), (1e12, ((1 << 31) - 1, 30)), (0.0, (0, 0))])
def test_quantize_multiplier_is_tflites(scale, expected):
    assert quantize_multiplier(scale) == expected
