"""Small helpers for the words of messages: counts with their noun, articles, close names, decimals."""

from __future__ import annotations

import difflib
import re
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


def shown_number(value: float | None) -> str:
    """A number as decisions' messages show it: 4 decimals (:func:`decimals`: never ``-0.0000``),
    ``nan`` or ``inf`` as they are, ``-`` for none."""
    return "-" if value is None else decimals(value, 4)


def abbreviations(values: Iterable[str], length: int = 16, whole_up_to: int = 48) -> dict[str, str]:
    """Each of ``values`` as shown beside the others: whole up to ``whole_up_to`` characters, a
    longer one cut after ``length`` characters, or as many more as keep it apart from every other
    value (``demo-scenes:v3:split=ood-easy`` and ``...=ood-hard`` must not both read ``demo-scenes:v3:s``).

    A cut that keeps values apart runs on to the end of the word it falls in (``ood-easy``, not
    ``ood-e``) where that stays within ``whole_up_to``; a cut value ends with ``…``.
    """
    distinct = sorted(set(values))
    shown: dict[str, str] = {}
    for value in distinct:
        if len(value) <= whole_up_to:
            shown[value] = value
            continue
        # The longest prefix it shares with another value, plus one character, tells it apart.
        shared = max((_common_prefix(value, other) for other in distinct if other != value), default=0)
        cut = max(length, shared + 1)
        if cut > length:
            end = re.search(r"[^\w.-]", value[cut:])
            stop = len(value) if end is None else cut + end.start()
            cut = stop if stop <= whole_up_to else cut
        shown[value] = value if cut >= len(value) else f"{value[:cut]}…"
    return shown


def _common_prefix(a: str, b: str) -> int:
    count = 0
    for x, y in zip(a, b):
        if x != y:
            break
        count += 1
    return count
