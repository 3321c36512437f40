"""The referring task: its batch fields, the predict hook, output checks, the nn.Module adapter, evaluate()."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch

from pytest_segrobust.core.errors import DatasetError, ModelOutputError
from pytest_segrobust.core.types import Expressions, Image, ReferringMask, field_of
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.base import ReferringTarget, Sample, SemanticTarget
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.models import TorchModuleReferringSegmenter, adapt_model
from pytest_segrobust.tasks import get_task

HEIGHT, WIDTH = 8, 10
WORDS = ("left", "right")


class HalvesDataset:
    """Each image has one expression per half: "the left half" names columns 0..4, "the right half" 5..9."""

    name = "halves"
    class_names = ("background", "referent")
    ignore_index = 255

    def __init__(self, images: int = 3, expression: str | None = None, mask_width: int = WIDTH) -> None:
        self.images = images
        self.expression = expression
        self.mask_width = mask_width

    def __len__(self) -> int:
        return 2 * self.images

    def __getitem__(self, index: int) -> Sample:
        image_index, side = divmod(index, 2)
        mask = torch.zeros(HEIGHT, self.mask_width, dtype=torch.bool)
        half = self.mask_width // 2
        if side == 0:
            mask[:, :half] = True
        else:
            mask[:, half:] = True
        image = torch.full((3, HEIGHT, WIDTH), 40 * image_index, dtype=torch.uint8)
        expression = self.expression if self.expression is not None else f"the {WORDS[side]} half"
        target = ReferringTarget(expression, mask)
        return Sample(f"img{image_index}/ref{side}/0", image, referring=target, unit=f"img{image_index}")

    def fingerprint(self) -> str:
        return f"halves-{self.images}"


class HalfReader(torch.nn.Module):
    """Reads the side from the text; returns logits at half resolution as (B, 1, h, w)."""

    def __init__(self, flip: bool = False) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(1.0))
        self.flip = flip

    def forward(self, images: torch.Tensor, texts: list[str]) -> torch.Tensor:
        assert isinstance(texts, list) and len(texts) == images.shape[0]
        columns = torch.arange(WIDTH // 2, dtype=torch.float32) - WIDTH // 4  # 0 at the centre column
        logits = []
        for text in texts:
            side = -1.0 if "left" in text else 1.0
            logits.append((-side if self.flip else side) * columns.expand(HEIGHT // 2, -1))
        return self.scale * torch.stack(logits)[:, None]


class ListModel:
    """A protocol model returning whatever it was given, to test the output checks."""

    def __init__(self, output: object) -> None:
        self.device = torch.device("cpu")
        self.task = "referring"
        self.output = output
        self.seen: list[Sequence[str]] = []

    def predict(self, images: torch.Tensor, texts: Sequence[str]) -> object:
        self.seen.append(texts)
        return self.output

    def fingerprint(self) -> str:
        return "list"


def batch_of(dataset: HalvesDataset, count: int = 2) -> dict:
    samples = [dataset[i] for i in range(count)]
    return get_task("referring").collate(samples, range(count), dataset, torch.device("cpu"))


def test_collate_gives_one_expression_and_one_bool_mask_per_sample() -> None:
    batch = batch_of(HalvesDataset(), 4)
    assert field_of(batch, Expressions).texts == ("the left half", "the right half") * 2
    masks = field_of(batch, ReferringMask)
    assert masks.data.dtype == torch.bool and masks.batch_size() == 4 and masks.size() == (HEIGHT, WIDTH)
    assert field_of(batch, Expressions).size() is None
    assert bool(masks.data[0, :, :5].all()) and not bool(masks.data[0, :, 5:].any())


@pytest.mark.parametrize("expression", ["", "   "])
def test_an_empty_expression_is_a_dataset_error_naming_the_sample(expression: str) -> None:
    with pytest.raises(DatasetError, match=r"halves: sample img0/ref0/0: expected a non-empty referring expression"):
        batch_of(HalvesDataset(expression=expression))


def test_a_mask_of_another_size_than_the_image_is_a_dataset_error() -> None:
    with pytest.raises(DatasetError, match=r"img0/ref0/0: expected a bool mask of the image's size \(8, 10\)"):
        batch_of(HalvesDataset(mask_width=6))


def test_a_sample_without_expression_is_a_dataset_error() -> None:
    sample = Sample("a", torch.zeros(3, 2, 2, dtype=torch.uint8), SemanticTarget(torch.zeros(2, 2, dtype=torch.int64)))
    with pytest.raises(DatasetError, match="sample a has no referring expression"):
        get_task("referring").collate([sample], [0], HalvesDataset(), torch.device("cpu"))


def test_a_semantic_evaluation_of_referring_data_says_what_is_missing() -> None:
    with pytest.raises(DatasetError, match="has no semantic label map"):
        get_task("semantic").collate([HalvesDataset()[0]], [0], HalvesDataset(), torch.device("cpu"))


def test_predict_passes_images_and_the_expressions_as_a_list() -> None:
    batch = batch_of(HalvesDataset())
    model = ListModel(torch.zeros(2, HEIGHT, WIDTH, dtype=torch.bool))
    get_task("referring").predict(model, batch)
    assert model.seen == [["the left half", "the right half"]]


def test_logits_are_thresholded_at_zero_and_bool_masks_pass() -> None:
    task, batch = get_task("referring"), batch_of(HalvesDataset())
    logits = torch.tensor([-1.0, 0.0, 1e-6]).repeat(2, HEIGHT, 4)[..., :WIDTH]
    checked = task.check_predictions(logits, batch)
    assert checked.dtype == torch.bool
    assert torch.equal(checked, logits > 0)
    masks = torch.ones(2, HEIGHT, WIDTH, dtype=torch.bool)
    assert task.check_predictions(masks, batch) is masks


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ([1, 2], "model returned list, expected a tensor of shape (2, 8, 10)"),
        (torch.zeros(3, HEIGHT, WIDTH), "model returned 3 masks for a batch of 2 expressions"),
        (torch.zeros(2, 1, HEIGHT, WIDTH), "masks of shape (2, 1, 8, 10), expected (2, 8, 10)"),
        (torch.zeros(2, HEIGHT, 4), "masks of shape (2, 8, 4), expected (2, 8, 10)"),
        (torch.zeros(2, HEIGHT, WIDTH, dtype=torch.uint8), "dtype torch.uint8; expected bool masks or float logits"),
        (torch.full((2, HEIGHT, WIDTH), float("nan")), "NaN or infinite logits (160 of 160 values"),
    ],
)
def test_wrong_outputs_are_model_errors(output: object, message: str) -> None:
    with pytest.raises(ModelOutputError) as raised:
        get_task("referring").check_predictions(output, batch_of(HalvesDataset()))
    assert message in str(raised.value)


def test_an_nn_module_is_adapted_and_its_low_resolution_logits_resized() -> None:
    model = adapt_model(HalfReader(), get_task("referring"))
    assert isinstance(model, TorchModuleReferringSegmenter)
    images = torch.zeros(2, 3, HEIGHT, WIDTH)
    masks = model.predict(images, ["the left half", "the right half"])
    assert masks.dtype == torch.bool and masks.shape == (2, HEIGHT, WIDTH)
    assert bool(masks[0, :, :5].all()) and not bool(masks[0, :, 5:].any())
    assert bool(masks[1, :, 5:].all()) and not bool(masks[1, :, :5].any())
    assert model.fingerprint() == adapt_model(HalfReader(), get_task("referring")).fingerprint()


def test_the_adapter_refuses_nan_logits_and_wrong_shapes() -> None:
    class Bad(torch.nn.Module):
        def __init__(self, output: torch.Tensor) -> None:
            super().__init__()
            self.output = output

        def forward(self, images: torch.Tensor, texts: list[str]) -> torch.Tensor:
            return self.output

    images = torch.zeros(2, 3, HEIGHT, WIDTH)
    with pytest.raises(ModelOutputError, match="NaN or infinite mask logits"):
        TorchModuleReferringSegmenter(Bad(torch.full((2, HEIGHT, WIDTH), float("nan")))).predict(images, ["a", "b"])
    with pytest.raises(
        ModelOutputError, match=r"shape \(B, H, W\) or \(B, 1, H, W\) for B=2 expressions, got \(2, 3, 8, 10\)"
    ):
        TorchModuleReferringSegmenter(Bad(torch.zeros(2, 3, HEIGHT, WIDTH))).predict(images, ["a", "b"])


def test_evaluate_runs_the_referring_task_end_to_end() -> None:
    model = adapt_model(HalfReader(), get_task("referring"))
    result = evaluate(model, HalvesDataset(), settings=EvalSettings.of(task="referring", batch_size=4))
    assert result.num_images == 6
    assert result.headline == "referring_miou"
    assert result.score == pytest.approx(100.0)
    assert result.metrics["referring_oiou"].score == pytest.approx(100.0)
    wrong = evaluate(
        adapt_model(HalfReader(flip=True), get_task("referring")),
        HalvesDataset(),
        settings=EvalSettings.of(task="referring"),
    )
    assert wrong.score == 0.0 and wrong.details["p50"] == 0.0


def test_a_geometric_corruption_moves_the_target_mask_and_keeps_the_expressions() -> None:
    batch = batch_of(HalvesDataset(), 2)
    shear = REGISTRY.get("shear")
    corrupted = shear(batch, 5, [1, 2])
    assert field_of(corrupted, Expressions) == field_of(batch, Expressions)
    moved = field_of(corrupted, ReferringMask)
    assert moved.data.dtype == torch.bool and moved.data.shape == (2, HEIGHT, WIDTH)
    assert field_of(corrupted, Image).data.shape == (2, 3, HEIGHT, WIDTH)
