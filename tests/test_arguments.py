"""The command-line value types: what each accepts, and the message each gives when it refuses."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from pytest_segrobust.runtime import arguments


@pytest.mark.parametrize(
    ("parse", "text", "value"),
    [
        (arguments.non_negative_integer, "0", 0),
        (arguments.positive_integer, "3", 3),
        (arguments.non_negative_number, "0", 0.0),
        (arguments.positive_number, "0.5", 0.5),
        (arguments.seconds, "2.5", 2.5),
    ],
)
def test_a_value_in_range_is_returned_converted(parse: Callable[[str], float], text: str, value: float) -> None:
    parsed = parse(text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (arguments.non_negative_integer, "x", "expected an integer, got 'x'"),
        (arguments.non_negative_integer, "-1", "expected an integer >= 0, got '-1'"),
        (arguments.positive_integer, "0.5", "expected an integer, got '0.5'"),
        (arguments.positive_integer, "-1", "expected an integer >= 0, got '-1'"),
        (arguments.positive_integer, "0", "expected an integer >= 1, got '0'"),
        (arguments.non_negative_number, "x", "expected a number, got 'x'"),
        (arguments.non_negative_number, "inf", "expected a number >= 0, got 'inf'"),
        (arguments.non_negative_number, "nan", "expected a number >= 0, got 'nan'"),
        (arguments.positive_number, "-1", "expected a number >= 0, got '-1'"),
        (arguments.positive_number, "0", "expected a number > 0, got '0'"),
        (arguments.seconds, "x", "expected a number of seconds, got 'x'"),
        (arguments.seconds, "0", "expected a number of seconds > 0, got '0'"),
        (arguments.seconds, "inf", "expected a number of seconds > 0, got 'inf'"),
    ],
)
def test_a_refused_value_says_what_was_expected(parse: Callable[[str], float], text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as raised:
        parse(text)
    assert str(raised.value) == message
