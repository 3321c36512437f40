from __future__ import annotations

import pytest

from pytest_segrobust.core.wording import article, decimals, did_you_mean, plural


@pytest.mark.parametrize(
    ("count", "noun", "many", "expected"),
    [
        (0, "cell", None, "0 cells"),
        (1, "cell", None, "1 cell"),
        (2, "cell", None, "2 cells"),
        (1, "entry", "entries", "1 entry"),
        (3, "entry", "entries", "3 entries"),
    ],
)
def test_plural_agrees_with_the_count(count: int, noun: str, many: str | None, expected: str) -> None:
    assert plural(count, noun, many) == expected


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("int", "an int"),
        ("float", "a float"),
        ("str", "a str"),
        ("'instance'", "an 'instance'"),
        ("upernet", "an upernet"),
        ("", "a "),
    ],
)
def test_article_follows_the_first_letter(word: str, expected: str) -> None:
    assert article(word) == expected


def test_did_you_mean_names_the_closest_known_name_or_nothing() -> None:
    assert did_you_mean("mispelling", ["misspelling", "mispunctuation"]) == " (did you mean 'misspelling'?)"
    assert did_you_mean("zzz", ["misspelling"]) == ""


def test_decimals_print_a_rounded_zero_without_a_sign() -> None:
    assert [decimals(v, 4) for v in (-0.00004, -0.0, 0.0, 0.00004, -0.00006)] == ["0.0000"] * 4 + ["-0.0001"]
    assert [decimals(v, 2, sign=True) for v in (-0.004, 0.0, 0.25, -0.25)] == ["0.00", "0.00", "+0.25", "-0.25"]
    assert decimals(float("nan"), 4) == "nan" and decimals(float("-inf"), 2, sign=True) == "-inf"
