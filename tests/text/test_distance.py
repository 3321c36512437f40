from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.text.distance import levenshtein
from tests.text import helpers


@settings(max_examples=500)
@given(a=st.text(alphabet="abcd é", max_size=80), b=st.text(alphabet="abcd é", max_size=80))
def test_bit_parallel_distance_equals_the_table(a: str, b: str) -> None:
    assert levenshtein(a, b) == helpers.levenshtein(a, b)


def test_distances_longer_than_a_machine_word() -> None:
    a = "the striped square right of the dotted circle " * 4
    b = a.replace("s", "z").replace(" of ", " ")
    assert levenshtein(a, b) == helpers.levenshtein(a, b)
