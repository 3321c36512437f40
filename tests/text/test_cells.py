"""Text perturbations, cross-modal compositions and the r2bench mixture as cells, through evaluate()."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
import torch

pytest.importorskip("pycocotools.mask")

from pytest_segrobust.core.errors import UnknownCorruptionError
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions.composition import part_seed
from pytest_segrobust.data.referring import ReferringJsonl
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.randomness.seeding import sample_seed
from pytest_segrobust.tasks import get_task
from pytest_segrobust.text import TEXT_PERTURBATIONS, Modality
from pytest_segrobust.text.cells import (
    MIXTURE_CELL,
    CrossModalComposition,
    MixtureCell,
    TextCell,
    modality,
    resolve_cell,
)
from pytest_segrobust.text.distance import levenshtein as edit_distance
from tests.test_referring_suite import write_project

TASK = get_task("referring")
CPU = torch.device("cpu")
TEXT = ("misspelling", "mispunctuation", "grammar_error", "character_missing")


class ColourReader:
    """Finds "the red square" or "the blue square" (any text without "red" means blue)."""

    device = CPU

    def predict(self, images: torch.Tensor, texts: list[str]) -> torch.Tensor:
        channel = torch.tensor([0 if "red" in text else 2 for text in texts])
        chosen = images[torch.arange(len(texts)), channel]
        return chosen - images.mean(dim=1) - 0.25

    def fingerprint(self) -> str:
        return "colour-reader"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> ReferringJsonl:
    root = tmp_path_factory.mktemp("scenes")
    write_project(root)
    return ReferringJsonl(root / "scenes" / "refs.jsonl")


def cell(name: str, seed: int = 0, **kwargs: object) -> object:
    return resolve_cell(name, registry=REGISTRY, preset="coco-p", text=TEXT_PERTURBATIONS, seed=seed, **kwargs)  # type: ignore[arg-type]


def corrupted_batches(
    dataset: ReferringJsonl, corruption: object, severity: int, batch_size: int, seed: int = 0
) -> dict:
    """Every sample's corrupted fields by id, the dataset cut into batches of ``batch_size`` (in reverse order)."""
    out = {}
    positions = list(range(len(dataset)))[::-1]
    for start in range(0, len(positions), batch_size):
        chosen = positions[start : start + batch_size]
        samples = [dataset[i] for i in chosen]
        batch = TASK.collate(samples, chosen, dataset, CPU)
        seeds = [sample_seed(seed, s.sample_id, corruption.name, severity) for s in samples]  # type: ignore[attr-defined]
        result = corruption(batch, severity, seeds)  # type: ignore[operator]
        for k, s in enumerate(samples):
            out[s.sample_id] = (
                result["expression"].texts[k],
                result["image"].data[k],
                result["referring_mask"].data[k],
            )
    return out


@pytest.mark.parametrize("name", TEXT)
def test_a_text_cell_changes_only_the_expressions_the_same_in_any_batch(dataset: ReferringJsonl, name: str) -> None:
    text_cell = cell(name, seed=3)
    assert isinstance(text_cell, TextCell) and text_cell.category.value == "text" and modality("text") == "text"
    one, many = corrupted_batches(dataset, text_cell, 5, 1, seed=3), corrupted_batches(dataset, text_cell, 5, 7, seed=3)
    clean = corrupted_batches(dataset, cell("gaussian_noise"), 0, 16)
    ids = list(dataset.sample_ids)
    assert [one[i][0] for i in ids] == [many[i][0] for i in ids]
    # Exactly the text package's output for (suite seed, sample id, perturbation, severity).
    expected = TEXT_PERTURBATIONS.get(name).perturb([clean[i][0] for i in ids], ids, 5, 3)
    assert [one[i][0] for i in ids] == expected
    assert any(one[i][0] != clean[i][0] for i in ids)
    for i in ids:
        assert torch.equal(one[i][1], clean[i][1]) and torch.equal(one[i][2], clean[i][2])


def test_text_cells_nest_across_severities_and_depend_on_the_suite_seed(dataset: ReferringJsonl) -> None:
    ids = list(dataset.sample_ids)
    clean = [dataset[i].referring.expression for i in range(len(dataset))]  # type: ignore[union-attr]
    by_severity = [corrupted_batches(dataset, cell("character_missing"), s, 5) for s in range(1, 6)]
    for i, text in zip(ids, clean):
        distances = [edit_distance(text, texts[i][0]) for texts in by_severity]
        assert distances == sorted(distances)
    other_seed = corrupted_batches(dataset, cell("character_missing", seed=1), 5, 5)
    assert [other_seed[i][0] for i in ids] != [by_severity[4][i][0] for i in ids]


@pytest.mark.parametrize("name", ["misspelling", "gaussian_noise+grammar_error", "character_missing+rotate"])
def test_evaluate_gives_the_same_numbers_in_any_batch_size(dataset: ReferringJsonl, name: str) -> None:
    chosen = cell(name)
    results = [
        evaluate(
            ColourReader(),
            dataset,
            chosen,
            5,
            settings=EvalSettings.of(task=TASK, metrics=("referring_miou", "referring_p50"), batch_size=b),
        )
        for b in (1, 3, 16)
    ]
    assert results[0].metrics == results[1].metrics == results[2].metrics
    assert all(
        r.statistics["referring_miou"].tolist() == results[0].statistics["referring_miou"].tolist() for r in results
    )
    clean = evaluate(ColourReader(), dataset, None, 0, settings=EvalSettings.of(task=TASK, metrics=("referring_miou",)))
    assert results[0].score < clean.score


def test_a_cross_modal_cell_runs_the_image_part_then_the_text_part(dataset: ReferringJsonl) -> None:
    chain = cell("misspelling+rotate")
    assert isinstance(chain, CrossModalComposition)
    assert chain.name == "rotate+misspelling" and chain.category.value == "cross-modal" and chain.geometric
    samples = [dataset[i] for i in range(4)]
    batch = TASK.collate(samples, range(4), dataset, CPU)
    seeds = [sample_seed(0, s.sample_id, chain.name, 4) for s in samples]
    out = chain(batch, 4, seeds)
    rotated = REGISTRY.get("rotate")(batch, 4, [part_seed(s, "rotate") for s in seeds])
    assert torch.equal(out["image"].data, rotated["image"].data)
    assert torch.equal(out["referring_mask"].data, rotated["referring_mask"].data)  # the mask moved with the image
    assert not torch.equal(out["referring_mask"].data, batch["referring_mask"].data)
    ids = [s.sample_id for s in samples]
    assert list(out["expression"].texts) == TEXT_PERTURBATIONS.get("misspelling").perturb(
        list(batch["expression"].texts), ids, 4, 0
    )
    again = chain(batch, 4, seeds)
    assert torch.equal(again["image"].data, out["image"].data) and again["expression"] == out["expression"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("misspelling+grammar_error", "at most one text perturbation per cell"),
        ("gaussian_noise+rotate+misspelling", "chains at most 2 perturbations"),
        ("not_a_thing+misspelling", "unknown corruption 'not_a_thing'"),
        ("mispelling", r"unknown corruption or text perturbation 'mispelling' \(did you mean 'misspelling'\?\)"),
        (MIXTURE_CELL, "mixture: r2bench"),
    ],
)
def test_invalid_cells_are_refused(name: str, message: str) -> None:
    with pytest.raises(UnknownCorruptionError, match=message):
        cell(name)


def test_the_mixture_draws_forty_forty_twenty_and_perturbs_what_it_drew(dataset: ReferringJsonl) -> None:
    mixture = MixtureCell([REGISTRY.get("gaussian_noise"), REGISTRY.get("rotate")], [cell(n) for n in TEXT], seed=0)  # type: ignore[misc]
    draws = mixture.draws([f"img{i}/0/0" for i in range(4000)], 3)
    counts = Counter(d.modality for d in draws)
    for kind, share in ((Modality.VISUAL, 0.4), (Modality.TEXT, 0.4), (Modality.BOTH, 0.2)):
        assert abs(counts[kind] / 4000 - share) < 5 * math.sqrt(share * (1 - share) / 4000), kind
    assert Counter(d.visual for d in draws if d.visual).keys() == {"gaussian_noise", "rotate"}
    assert Counter(d.text for d in draws if d.text).keys() == set(TEXT)
    assert [d.modality for d in mixture.draws(dataset.sample_ids, 1)] == [
        d.modality for d in mixture.draws(dataset.sample_ids, 5)
    ]

    clean = corrupted_batches(dataset, mixture, 0, 16)
    one, many = corrupted_batches(dataset, mixture, 5, 1), corrupted_batches(dataset, mixture, 5, 6)
    for draw, sample_id in zip(mixture.draws(dataset.sample_ids, 5), dataset.sample_ids):
        text, image, mask = one[sample_id]
        assert (
            text == many[sample_id][0]
            and torch.equal(image, many[sample_id][1])
            and torch.equal(mask, many[sample_id][2])
        )
        if draw.text is not None:
            assert text == cell(draw.text).texts([clean[sample_id][0]], [sample_id], 5)[0]  # type: ignore[attr-defined]
        if draw.visual is None:
            assert torch.equal(image, clean[sample_id][1]) and torch.equal(mask, clean[sample_id][2])
        else:
            assert not torch.equal(image, clean[sample_id][1])
        if draw.text is None:
            assert text == clean[sample_id][0]
    assert (
        evaluate(ColourReader(), dataset, mixture, 5, settings=EvalSettings.of(task=TASK, batch_size=3)).metrics
        == evaluate(ColourReader(), dataset, mixture, 5, settings=EvalSettings.of(task=TASK, batch_size=16)).metrics
    )


def test_a_text_cell_needs_a_referring_batch() -> None:
    with pytest.raises(ValueError, match="needs one Expressions field"):
        cell("misspelling")(torch.rand(2, 3, 8, 8), 3, [1, 2])


def test_the_cells_keep_the_text_package_tables(tmp_path: Path) -> None:
    assert cell("mispunctuation").table == TEXT_PERTURBATIONS.get("mispunctuation").table  # type: ignore[attr-defined]
    assert len(cell("gaussian_noise+misspelling").table.describe()) == 5  # type: ignore[attr-defined]
