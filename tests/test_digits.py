"""approx and rounded: the digits they print survive a move of the value as large as a
CPU's round-off, and they refuse a value too close to a rounding edge."""

import doctest

import pytest
import torch

from dynagraph import digits
from dynagraph.digits import approx, rounded


def test_docstring_examples_run():
    result = doctest.testmod(digits)
    assert result.attempted >= 4 and result.failed == 0


@pytest.mark.parametrize("x, text", [
    (0.0, "0"), (0.0059134, "0.0059"), (28.4, "28"), (310.2, "310"), (0.40824829, "0.41"),
    (0.0452, "0.045"), (2.4e-11, "10^-11"), (3.2e-5, "10^-4"), (2.9e-5, "10^-5"),
])
def test_approx_prints_two_digits_else_one_else_the_nearest_power_of_ten_on_a_log_scale(x, text):
    assert approx(x) == text


@pytest.mark.parametrize("x", [0.0059134, 28.4, 0.40824829, 2.4e-11, 731.1])
def test_approx_gives_the_same_text_for_a_cpu_sized_move(x):
    assert approx(x * (1 + 5e-6)) == approx(x) == approx(x * (1 - 5e-6))


def test_approx_falls_back_to_one_digit_at_a_two_digit_edge():
    assert approx(0.0455) == "0.05"   # 0.045 or 0.046 within the drift; one digit is stable


def test_approx_refuses_a_value_at_a_power_of_ten_edge():
    with pytest.raises(ValueError, match="too close to a rounding edge"):
        approx(10 ** -6.5)


def test_approx_refuses_a_negative_value():
    with pytest.raises(ValueError, match="needs a value >= 0"):
        approx(-0.5)


def test_rounded_keeps_shape_and_never_prints_minus_zero():
    assert rounded(torch.tensor([[0.12344, -0.00001], [1.0, 2.5]])) == [[0.1234, 0.0], [1.0, 2.5]]
    assert rounded(0.73105858) == 0.7311
    assert str(rounded(torch.tensor(-0.00001))) == "0.0"


def test_rounded_refuses_a_value_on_a_rounding_boundary():
    with pytest.raises(ValueError, match="within 1e-6 of a rounding boundary"):
        rounded(torch.tensor([0.1, 0.12345]))
