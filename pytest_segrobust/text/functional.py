"""Pure character- and word-level edits, each drawing only from the generator it is given.

Every function draws a fixed number of uniform numbers for a given text, whatever the rate,
so the same generator state gives nested edits at growing rates (see :mod:`.base`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from pytest_segrobust.text.distance import levenshtein

WORD = re.compile(r"[^\W\d_]+")
"""A word: a maximal run of letters (digits, underscores and punctuation split words)."""

PUNCTUATION = ",.;:!?'-"
"""The marks :func:`insert_punctuation` inserts (the ones R2-Bench's examples show)."""

_KEYBOARD_ROWS = ("1234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm")


def _keyboard_neighbours() -> dict[str, str]:
    # Rows of a QWERTY keyboard are staggered by about half a key, so key (row, col) touches
    # (row, col +- 1), (row - 1, col), (row - 1, col + 1), (row + 1, col - 1), (row + 1, col).
    neighbours: dict[str, str] = {}
    for row, keys in enumerate(_KEYBOARD_ROWS):
        for col, key in enumerate(keys):
            around = [(row, col - 1), (row, col + 1), (row - 1, col), (row - 1, col + 1), (row + 1, col - 1), (row + 1, col)]
            neighbours[key] = "".join(
                _KEYBOARD_ROWS[r][c] for r, c in around if 0 <= r < len(_KEYBOARD_ROWS) and 0 <= c < len(_KEYBOARD_ROWS[r])
            )
    return neighbours


KEYBOARD_NEIGHBOURS: dict[str, str] = _keyboard_neighbours()
"""Keys next to each key of a QWERTY keyboard (lower case letters and the digit row)."""

MISSPELLING_OPERATIONS = ("substitute", "transpose", "double", "drop")
"""How :func:`misspell_word` changes a word: a neighbouring key, two letters swapped, a letter typed twice, a letter left out."""


def _index(uniform: float, count: int) -> int:
    return min(int(uniform * count), count - 1)


def delete_characters(text: str, rate: float, rng: np.random.Generator) -> str:
    """Delete each character with probability ``rate``, keeping at least one non-space character.

    One uniform per character; a character goes when its uniform is below ``rate``. If that
    would leave no non-space character, the non-space character with the largest uniform
    (the last one a growing rate would take) stays, so edits stay nested across rates.
    """
    draws = rng.random(len(text))
    keep = draws >= rate
    visible = [i for i, char in enumerate(text) if not char.isspace()]
    if visible and not keep[visible].any():
        keep[max(visible, key=lambda i: draws[i])] = True
    return "".join(char for char, kept in zip(text, keep) if kept)


def insert_punctuation(text: str, rate: float, rng: np.random.Generator) -> str:
    """Insert a punctuation mark after each character with probability ``rate``.

    There are ``len(text)`` insertion points (after every character). Per point one uniform
    decides whether a mark goes there and a second, independent of ``rate``, which mark.
    """
    draws = rng.random((len(text), 2))
    pieces: list[str] = []
    for char, (chance, which) in zip(text, draws):
        pieces.append(char)
        if chance < rate:
            pieces.append(PUNCTUATION[_index(which, len(PUNCTUATION))])
    return "".join(pieces)


def _same_case(template: str, char: str) -> str:
    return char.upper() if template.isupper() else char


def misspell_word(word: str, operation_draw: float, position_draw: float, key_draw: float) -> str:
    """A typo of ``word`` (a run of letters) chosen by three uniforms; always differs from ``word``.

    The operation is drawn uniformly among those the word allows: ``substitute`` (a letter
    with a keyboard neighbour becomes that neighbour, digits included, as R2-Bench's examples
    show), ``transpose`` (two adjacent different letters swap), ``double`` (a letter is typed
    twice) and ``drop`` (a letter is left out; only in words of two or more letters).
    """
    lowered = word.lower()
    places: dict[str, list[int]] = {
        "substitute": [i for i, char in enumerate(lowered) if char in KEYBOARD_NEIGHBOURS],
        "transpose": [i for i in range(len(word) - 1) if lowered[i] != lowered[i + 1]],
        "double": list(range(len(word))),
        "drop": list(range(len(word))) if len(word) >= 2 else [],
    }
    allowed = [op for op in MISSPELLING_OPERATIONS if places[op]]
    operation = allowed[_index(operation_draw, len(allowed))]
    at = places[operation][_index(position_draw, len(places[operation]))]
    if operation == "substitute":
        options = KEYBOARD_NEIGHBOURS[lowered[at]]
        replacement = _same_case(word[at], options[_index(key_draw, len(options))])
        return word[:at] + replacement + word[at + 1 :]
    if operation == "transpose":
        return word[:at] + word[at + 1] + word[at] + word[at + 2 :]
    if operation == "double":
        return word[: at + 1] + word[at:]
    return word[:at] + word[at + 1 :]


def edit_words(
    text: str, fractions: Sequence[float], rng: np.random.Generator, draws_per_word: int,
    edit: Callable[[str, np.ndarray], str | None],
) -> str:
    """Replace words of ``text`` by ``edit(word, draws)``, a growing fraction per severity.

    ``fractions`` are the rates of severities 1..s (non-decreasing); the result is severity
    s. Every word gets ``1 + draws_per_word`` uniforms, editable or not, so the stream does
    not depend on the rates. ``edit`` returns None for a word it cannot change; such a word is
    never edited. A word is chosen at the first severity whose rate exceeds its first
    uniform; the other uniforms choose how it changes, the same at every severity.

    Severities build on each other: the words new at a severity are added in text order,
    each kept only if the Levenshtein distance to the original does not drop (a replacement
    can, rarely, realign with a neighbour and undo part of an earlier edit). So the edits of
    severity s include those of s - 1 and the distance never decreases; the realised rate
    can fall a little below the nominal one on such texts.
    """
    words = list(WORD.finditer(text))
    draws = rng.random((len(words), 1 + draws_per_word))
    replacements: dict[int, str] = {}
    distance = 0
    lower = 0.0
    for fraction in fractions:
        for index, (match, (select, *rest)) in enumerate(zip(words, draws)):
            if not lower <= select < fraction:
                continue
            replacement = edit(match.group(), np.asarray(rest))
            if replacement is None:
                continue
            trial = {**replacements, index: replacement}
            trial_distance = levenshtein(text, _replaced(text, words, trial))
            if trial_distance >= distance:
                replacements, distance = trial, trial_distance
        lower = max(lower, fraction)
    return _replaced(text, words, replacements)


def _replaced(text: str, words: list[re.Match[str]], replacements: dict[int, str]) -> str:
    pieces: list[str] = []
    last = 0
    for index in sorted(replacements):
        match = words[index]
        pieces += [text[last : match.start()], replacements[index]]
        last = match.end()
    pieces.append(text[last:])
    return "".join(pieces)


def misspell(text: str, fractions: Sequence[float], rng: np.random.Generator) -> str:
    """Misspell each word with probability ``fractions[-1]`` (:func:`misspell_word`, :func:`edit_words`)."""
    return edit_words(text, fractions, rng, 3, lambda word, draws: misspell_word(word, *draws))
