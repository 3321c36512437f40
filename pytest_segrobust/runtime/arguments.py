"""Types of the plugin's command-line values: each turns the text into a number or says what it expected.

argparse reports an :class:`argparse.ArgumentTypeError` as a usage error naming the option,
so ``--segrobust-batch-size 0`` ends with ``expected an integer >= 1, got '0'``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

_Number = TypeVar("_Number", int, float)


def _converted(
    text: str, convert: Callable[[str], _Number], kind: str, bound: str, within: Callable[[_Number], bool]
) -> _Number:
    """``convert(text)`` when it converts and lies ``within`` the bound, else a usage error.

    Args:
        text: The option's value as typed.
        convert: ``int`` or ``float``.
        kind: What was expected, for messages (``an integer``).
        bound: The bound in words (``>= 1``), said when the value converts but lies outside it.
        within: Whether a converted value is allowed.

    Raises:
        argparse.ArgumentTypeError: ``expected <kind>, got '<text>'`` when the text does not
            convert, ``expected <kind> <bound>, got '<text>'`` when the value is not allowed.
    """
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None
    if not within(value):
        raise argparse.ArgumentTypeError(f"expected {kind} {bound}, got {text!r}")
    return value


def _not_zero(value: _Number, text: str, expected: str) -> _Number:
    """``value`` when it is not 0, else a usage error saying what was ``expected``.

    The positive types parse as their non-negative ones first, so that a negative value is
    refused with the ">= 0" message and only 0 itself with this one.
    """
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def non_negative_integer(text: str) -> int:
    return _converted(text, int, "an integer", ">= 0", lambda value: value >= 0)


def positive_integer(text: str) -> int:
    return _not_zero(non_negative_integer(text), text, "an integer >= 1")


def non_negative_number(text: str) -> float:
    return _converted(text, float, "a number", ">= 0", lambda value: 0 <= value < float("inf"))


def positive_number(text: str) -> float:
    return _not_zero(non_negative_number(text), text, "a number > 0")


def seconds(text: str) -> float:
    return _converted(text, float, "a number of seconds", "> 0", lambda value: 0 < value < float("inf"))
