"""R2-Bench's cross-modal mixture for promptable suites: the draw, its batch invariance, the composition order,
the ``mixture`` key's validation, and an evaluation of the cell."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch

from pytest_segrobust.core.errors import SuiteError
from pytest_segrobust.core.modality import Modality, cell_modality
from pytest_segrobust.core.prompts import PromptedInstances
from pytest_segrobust.core.types import InstanceTarget
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions.composition import part_seed
from pytest_segrobust.corruptions.mixture import MixtureDraw
from pytest_segrobust.data.base import Sample
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.randomness.seeding import sample_seed
from pytest_segrobust.suite.schema import load_suite
from pytest_segrobust.tasks.prompt_mixture import MIXTURE_CELL, PROMPT_MIXTURE, PromptMixture
from pytest_segrobust.tasks.promptable import PromptableTask
from tests.test_tasks_promptable import Oracle

VISUAL, PROMPT = ["gaussian_noise", "rotate"], ["box_jitter", "missing_click", "false_click"]


class Squares:
    """Six images of two square instances each, placed a little differently in each."""

    name = "squares6"
    class_names = ("background", "square")
    ignore_index = 255

    def __init__(self) -> None:
        self.samples = []
        for i in range(6):
            masks = torch.zeros(2, 48, 48, dtype=torch.bool)
            masks[0, 2 + i : 12 + i, 3:13] = True
            masks[1, 20:44, 18 + i : 42 + i] = True
            image = (masks.any(dim=0) * 200).to(torch.uint8).expand(3, 48, 48).clone()
            self.samples.append(Sample(f"sq{i}", image, instances=InstanceTarget.from_masks(masks, torch.tensor([1, 1]))))

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> Sample:
        return self.samples[index]

    def fingerprint(self) -> str:
        return "squares6"


def test_the_mixture_draws_40_40_20_per_image_the_same_at_every_call() -> None:
    ids = [f"img{i}" for i in range(4000)]
    draws = [PROMPT_MIXTURE.draw(7, i, VISUAL, PROMPT) for i in ids]
    shares = Counter(d.modality.value for d in draws)
    assert abs(shares["visual"] / 4000 - 0.4) < 0.03 and abs(shares["prompt"] / 4000 - 0.4) < 0.03
    assert abs(shares["both"] / 4000 - 0.2) < 0.03
    assert all((d.visual is None) == (d.modality.value == "prompt") for d in draws)
    assert all((d.prompt is None) == (d.modality.value == "visual") and d.text is None for d in draws)
    assert Counter(d.prompt for d in draws if d.prompt).keys() == set(PROMPT)
    assert [PROMPT_MIXTURE.draw(7, i, VISUAL, PROMPT) for i in ids] == draws
    assert [PROMPT_MIXTURE.draw(8, i, VISUAL, PROMPT) for i in ids] != draws
    assert all(MixtureDraw.from_json(d.to_json()) == d for d in draws[:50])


def _batch(task: PromptableTask, dataset: Squares, positions: range) -> dict:
    samples = [dataset[i] for i in positions]
    return task.collate(samples, positions, dataset, torch.device("cpu"))


def _seeds(dataset: Squares, positions: range) -> list[int]:
    return [sample_seed(0, dataset[i].sample_id, MIXTURE_CELL, 3) for i in positions]


def test_a_mixture_image_is_perturbed_alike_in_any_batch_image_part_first() -> None:
    dataset, task = Squares(), PromptableTask(seed=0)
    rotate, jitter = REGISTRY.get("rotate", "coco-p-prompts"), REGISTRY.get("box_jitter", "coco-p-prompts")
    cell = PromptMixture([rotate], [jitter], seed=4)
    whole = cell(_batch(task, dataset, range(6)), 3, _seeds(dataset, range(6)))
    for start in (0, 2, 5):
        part = range(start, min(start + 2, 6))
        batch = cell(_batch(task, dataset, part), 3, _seeds(dataset, part))
        assert torch.equal(batch["image"].data, whole["image"].data[part.start : part.stop])
        for mine, theirs in zip(batch["prompted"].targets, whole["prompted"].targets[part.start : part.stop]):
            assert torch.equal(mine.boxes, theirs.boxes) and torch.equal(mine.points, theirs.points)
    # Each image is what its drawn parts make of it alone, the image part (which moves the prompts) first.
    draws = cell.draws([dataset[i].sample_id for i in range(6)], 3)
    assert {d.modality.value for d in draws} >= {"visual", "both"}, "the test needs both kinds of draw"
    for i, draw in enumerate(draws):
        one, seed = _batch(task, dataset, range(i, i + 1)), _seeds(dataset, range(i, i + 1))[0]
        if draw.visual:
            one = rotate(one, 3, [part_seed(seed, "rotate")])
        if draw.prompt:
            one = jitter(one, 3, [part_seed(seed, "box_jitter")])
        assert torch.equal(one["image"].data[0], whole["image"].data[i])
        assert torch.equal(one["prompted"].targets[0].boxes, whole["prompted"].targets[i].boxes)


SUITE = (
    "name: p\ntask: promptable\npreset: coco-p-prompts\n"
    "dataset: {factory: tests.test_prompt_mixture:Squares}\n"
    "models: [{name: m, factory: tests.test_tasks_promptable:Oracle}]\n"
    "corruptions: [rotate, gaussian_noise, box_jitter, rotate+point_displacement]\n"
)


def _suite(tmp_path: Path, mixture: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(f"{SUITE}mixture: {mixture}\nseed: 5\n")
    return path


def test_the_key_adds_one_mixture_cell_drawing_from_the_suites_own_lists(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path, "r2bench"))
    assert suite.corruptions[-1] == MIXTURE_CELL
    cell = suite.corruption(MIXTURE_CELL)
    assert isinstance(cell, PromptMixture) and cell.seed == 5 and cell.geometric
    assert list(cell.visual) == ["rotate", "gaussian_noise"] and list(cell.other) == ["box_jitter"]
    # What a report records and groups the cell by.
    assert cell.category.value == "mixture" and cell_modality(cell.category.value, MIXTURE_CELL) is Modality.MIXTURE
    assert cell.table[3].startswith("visual 40%, prompt 40%, both 20%")
    listed = load_suite(_suite(tmp_path, "{protocol: r2bench, visual: [contrast], prompt: [missing_click, box_shift]}"))
    assert list(listed.corruption(MIXTURE_CELL).other) == ["missing_click", "box_shift"]


@pytest.mark.parametrize(
    ("mixture", "field"),
    [
        ("r2bnech", "mixture"),
        ("[r2bench]", "mixture"),
        ("{protocol: r2bench, text: [misspelling]}", "mixture.text"),
        ("{protocol: r2bench, visual: [box_jitter]}", r"mixture.visual\[0\]"),
        ("{protocol: r2bench, visual: [rotate, rotate]}", r"mixture.visual\[1\]"),
        ("{protocol: r2bench, prompt: [rotate]}", r"mixture.prompt\[0\]"),
        ("{protocol: r2bench, prompt: [box_jiter]}", r"mixture.prompt\[0\]"),
        ("{protocol: r2bench, prompt: []}", "mixture.prompt"),
    ],
)
def test_a_bad_mixture_names_the_file_and_field(tmp_path: Path, mixture: str, field: str) -> None:
    with pytest.raises(SuiteError, match=rf"p\.yaml: field '{field}'"):
        load_suite(_suite(tmp_path, mixture))


def test_the_cell_evaluates_alike_at_any_batch_size_and_costs_the_oracle(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path, "r2bench"))
    cell, dataset = suite.corruption(MIXTURE_CELL), Squares()
    scores = {}
    for batch_size in (1, 4):
        settings = EvalSettings(PromptableTask(seed=5), ("promptable_miou",), seed=5, batch_size=batch_size)
        scores[batch_size] = evaluate(Oracle(), dataset, cell, 3, settings).metrics["promptable_miou"]
    assert scores[1].score == pytest.approx(scores[4].score) and scores[1].details == pytest.approx(scores[4].details, nan_ok=True)
    clean = evaluate(Oracle(), dataset, settings=EvalSettings(PromptableTask(seed=5), ("promptable_miou",), seed=5))
    assert clean.metrics["promptable_miou"].score == pytest.approx(100.0)
    assert scores[4].score < 95.0


def test_the_prompted_field_is_the_one_the_prompt_parts_change() -> None:
    dataset, task = Squares(), PromptableTask(seed=0)
    noise, jitter = REGISTRY.get("gaussian_noise"), REGISTRY.get("box_jitter", "coco-p-prompts")
    batch = _batch(task, dataset, range(6))
    out = PromptMixture([noise], [jitter], seed=1)(batch, 5, _seeds(dataset, range(6)))
    draws = PromptMixture([noise], [jitter], seed=1).draws([s.sample_id for s in dataset.samples], 5)
    assert isinstance(out["prompted"], PromptedInstances)
    for i, draw in enumerate(draws):
        moved = not torch.equal(out["prompted"].targets[i].boxes, batch["prompted"].targets[i].boxes)
        noisy = not torch.equal(out["image"].data[i], batch["image"].data[i])
        assert (moved, noisy) == (draw.prompt is not None, draw.visual is not None), draw
