"""R2-Bench's mixture: 40 / 40 / 20 over samples, uniform types, a pure function of (seed, id)."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_segrobust.text import MixtureDraw, Modality, r2bench_mixture
from tests.text.helpers import sample_ids, seeds

VISUAL = ["gaussian_noise", "fog", "rotate"]
TEXT = ["misspelling", "mispunctuation", "grammar_error", "character_missing"]
COUNT = 20_000
DRAWS = [r2bench_mixture(0, f"img{i}/0/0", VISUAL, TEXT, 3) for i in range(COUNT)]


def _assert_near(count: int, probability: float, trials: int, label: str) -> None:
    tolerance = 5 * math.sqrt(probability * (1 - probability) / trials)
    assert abs(count / trials - probability) <= tolerance, f"{label}: {count / trials:.4f} vs {probability}"


def test_modalities_are_drawn_forty_forty_twenty() -> None:
    counts = Counter(draw.modality for draw in DRAWS)
    _assert_near(counts[Modality.VISUAL], 0.4, COUNT, "visual only")
    _assert_near(counts[Modality.TEXT], 0.4, COUNT, "text only")
    _assert_near(counts[Modality.BOTH], 0.2, COUNT, "both")


def test_types_are_drawn_uniformly() -> None:
    visual = Counter(draw.visual for draw in DRAWS if draw.visual is not None)
    text = Counter(draw.text for draw in DRAWS if draw.text is not None)
    assert set(visual) == set(VISUAL) and set(text) == set(TEXT)
    for name in VISUAL:
        _assert_near(visual[name], 1 / len(VISUAL), sum(visual.values()), name)
    for name in TEXT:
        _assert_near(text[name], 1 / len(TEXT), sum(text.values()), name)


def test_a_draw_says_what_it_perturbs() -> None:
    for draw in DRAWS:
        assert (draw.visual is None) == (draw.modality is Modality.TEXT)
        assert (draw.text is None) == (draw.modality is Modality.VISUAL)
        assert draw.severity == 3
    both = next(draw for draw in DRAWS if draw.modality is Modality.BOTH)
    assert both.name == f"{both.visual}+{both.text}"
    with pytest.raises(AttributeError):
        both.severity = 1  # type: ignore[misc]
    assert all(MixtureDraw.from_json(json.loads(json.dumps(draw.to_json()))) == draw for draw in DRAWS[:50])


@given(seed=seeds, sample_id=sample_ids)
def test_a_draw_is_a_function_of_seed_and_sample_id(seed: int, sample_id: str) -> None:
    draw = r2bench_mixture(seed, sample_id, VISUAL, TEXT, [1, 3, 5])
    assert r2bench_mixture(seed, sample_id, VISUAL, TEXT, [1, 3, 5]) == draw
    assert isinstance(draw, MixtureDraw) and draw.severity in (1, 3, 5)


def test_seeds_change_the_draws() -> None:
    other = [r2bench_mixture(1, f"img{i}/0/0", VISUAL, TEXT, 3) for i in range(200)]
    assert other != DRAWS[:200]


def test_several_severities_are_drawn_uniformly() -> None:
    counts = Counter(r2bench_mixture(0, str(i), VISUAL, TEXT, (1, 3, 5)).severity for i in range(6000))
    for severity in (1, 3, 5):
        _assert_near(counts[severity], 1 / 3, 6000, f"severity {severity}")


@pytest.mark.parametrize(
    ("visual", "text", "severity", "message"),
    [
        ([], TEXT, 3, "the visual list must be a non-empty sequence"),
        (VISUAL, [], 3, "the text list must be a non-empty sequence"),
        (VISUAL, "misspelling", 3, "the text list must be a non-empty sequence"),
        (["fog", "fog"], TEXT, 3, "the visual list names 'fog' twice"),
        (VISUAL, TEXT, 0, "severity must be 1..5"),
        (VISUAL, TEXT, [], "severity must be 1..5"),
        (VISUAL, TEXT, [3, 6], "severity must be 1..5"),
    ],
)
def test_bad_arguments_are_refused(visual: list[str], text: list[str], severity: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        r2bench_mixture(0, "a", visual, text, severity)  # type: ignore[arg-type]


@given(st.integers(min_value=0, max_value=10**6))
def test_one_name_lists_always_give_that_name(index: int) -> None:
    draw = r2bench_mixture(index, "a", ["fog"], ["misspelling"], 5)
    assert draw.visual in (None, "fog") and draw.text in (None, "misspelling")
