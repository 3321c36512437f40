"""Small helpers for the words of messages: counts with their noun, articles, close names, decimals."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def plural(count: float, noun: str, many: str | None = None) -> str:
    """``1 cell``, ``0 cells``, ``3 cells``, ``0.5 CPUs``; ``many`` is the plural of an irregular noun (``entries``)."""
    shown = f"{count:g}" if isinstance(count, float) else str(count)
    return f"{shown} {noun if count == 1 else many or f'{noun}s'}"


def article(word: str) -> str:
    """``word`` after its indefinite article, by its first letter: ``an int``, ``a float``, ``an 'instance'``.

    Written for the type, task and model names messages are built from, not for English at
    large (``a uint8`` and ``an hour`` are out of its reach).
    """
    first = word.lstrip("'\"`")[:1].lower()
    return f"{'an' if first and first in 'aeiou' else 'a'} {word}"


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'misspelling'?)`` for the known name closest to ``name``, or ``""``."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def decimals(value: float, digits: int, *, sign: bool = False) -> str:
    """``value`` to ``digits`` decimals, with ``+`` before a positive one when ``sign``; a value that
    rounds to zero is ``0.0000``, never ``-0.0000`` (nor ``+0.0000``): zero has no direction."""
    text = f"{value:{'+' if sign else ''}.{digits}f}"
    return text.lstrip("+-") if float(text) == 0 else text
