"""Properties every seeded text perturbation keeps, checked on generated expressions."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.text import TEXT_PERTURBATIONS, TextPerturbation
from tests.text.helpers import levenshtein, non_blank_texts, sample_ids, seeds, texts

PERTURBATIONS = list(TEXT_PERTURBATIONS)
NAMES = [p.name for p in PERTURBATIONS]
severities = st.integers(min_value=0, max_value=5)

pytestmark = pytest.mark.parametrize("perturbation", PERTURBATIONS, ids=NAMES)


@given(text=texts, sample_id=sample_ids, severity=severities, seed=seeds)
def test_same_inputs_give_the_same_text(perturbation: TextPerturbation, text: str, sample_id: str,
                                        severity: int, seed: int) -> None:
    first = perturbation.perturb([text], [sample_id], severity, seed)
    assert perturbation.perturb([text], [sample_id], severity, seed) == first


@settings(max_examples=50)
@given(batch=st.lists(st.tuples(texts, sample_ids), min_size=1, max_size=6), severity=severities,
       seed=seeds, data=st.data())
def test_a_text_does_not_depend_on_its_batch_or_position(perturbation: TextPerturbation,
                                                         batch: list[tuple[str, str]], severity: int,
                                                         seed: int, data: st.DataObject) -> None:
    together = perturbation.perturb([t for t, _ in batch], [i for _, i in batch], severity, seed)
    alone = [perturbation.perturb([t], [i], severity, seed)[0] for t, i in batch]
    assert together == alone
    order = data.draw(st.permutations(range(len(batch))))
    shuffled = perturbation.perturb([batch[k][0] for k in order], [batch[k][1] for k in order], severity, seed)
    assert shuffled == [together[k] for k in order]


@given(text=texts, sample_id=sample_ids, seed=seeds)
def test_severity_zero_is_the_identity(perturbation: TextPerturbation, text: str, sample_id: str, seed: int) -> None:
    assert perturbation.perturb([text], [sample_id], 0, seed) == [text]


@given(text=non_blank_texts, sample_id=sample_ids, seed=seeds)
def test_edit_distance_never_decreases_with_severity(perturbation: TextPerturbation, text: str,
                                                     sample_id: str, seed: int) -> None:
    distances = [levenshtein(text, perturbation.perturb([text], [sample_id], s, seed)[0]) for s in range(6)]
    assert distances == sorted(distances), distances


@given(text=non_blank_texts, sample_id=sample_ids, severity=severities, seed=seeds)
def test_a_non_blank_text_stays_non_blank(perturbation: TextPerturbation, text: str, sample_id: str,
                                          severity: int, seed: int) -> None:
    assert perturbation.perturb([text], [sample_id], severity, seed)[0].strip()


@given(text=st.text(alphabet=" \t\n", max_size=5), severity=severities, seed=seeds)
def test_blank_texts_come_back_unchanged(perturbation: TextPerturbation, text: str, severity: int, seed: int) -> None:
    assert perturbation.perturb([text], ["id"], severity, seed) == [text]


def test_the_seed_and_the_sample_id_change_the_draws(perturbation: TextPerturbation) -> None:
    text = "the large striped square to the right of the small dotted circle near the top edge " * 3
    base = perturbation.perturb([text], ["a/0/0"], 5, 0)[0]
    assert base != text
    assert perturbation.perturb([text], ["a/0/0"], 5, 1)[0] != base
    assert perturbation.perturb([text], ["a/0/1"], 5, 0)[0] != base


def test_the_output_is_the_same_in_another_process(perturbation: TextPerturbation) -> None:
    text = "the dotted circle left of the striped square"
    code = (
        "from pytest_segrobust.text import TEXT_PERTURBATIONS as R; "
        f"print(R.get({perturbation.name!r}).perturb([{text!r}], ['img/3/1'], 4, 7)[0])"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "321", "PATH": "", "PYTHONPATH": ":".join(sys.path)})
    assert other.stdout.rstrip("\n") == perturbation.perturb([text], ["img/3/1"], 4, 7)[0]


def test_bad_calls_are_refused(perturbation: TextPerturbation) -> None:
    assert perturbation.family == "text"
    with pytest.raises(ValueError, match="severity must be an int 0..5, got 6"):
        perturbation.perturb(["a b"], ["x"], 6, 0)
    with pytest.raises(ValueError, match="got 2 sample ids for 1 texts"):
        perturbation.perturb(["a b"], ["x", "y"], 1, 0)
    with pytest.raises(TypeError, match="sample 0: text and sample id must be str, got bytes"):
        perturbation.perturb([b"a b"], ["x"], 1, 0)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not a str"):
        perturbation.perturb("a b", ["x"], 1, 0)  # type: ignore[arg-type]
