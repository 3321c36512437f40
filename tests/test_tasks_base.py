"""The checks tasks share (tasks/base.py): what a video or referring model returned, and a suite key's name list.

Each message is spelled out in full: the tasks' users (and the suites' tests) read these words,
so one helper serving several tasks must give each the words it gave alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
import torch

from pytest_segrobust.core.errors import DatasetError, ModelOutputError
from pytest_segrobust.core.types import (
    Batch,
    Field,
    Image,
    InstanceTarget,
    PanopticTarget,
    SampleIndex,
    SemanticMask,
    VideoMasks,
)
from pytest_segrobust.data.base import Sample, SemanticTarget
from pytest_segrobust.tasks import get_task
from pytest_segrobust.tasks.avs import audio_visual_cells
from pytest_segrobust.tasks.base import ImageAnnotation, SuiteKeyError, Task, suite_list, suite_mapping

SHAPE = (2, 3, 4, 5)


def clip_batch() -> dict[str, Any]:
    """Two clips of objects 1 and 2, with their index (the first sample is ``c0``)."""
    masks = VideoMasks.of(torch.zeros(SHAPE, dtype=torch.int64))
    masks = VideoMasks(
        masks.data, ((1, 2), (1, 2)), masks.annotated, masks.frame_ids, masks.ignore_index, ((False, False),) * 2
    )
    return {"objects": masks, "index": SampleIndex((0, 1), ("c0", "c1"))}


MASK_TASK_ERRORS = [
    ([1], "model returned list, expected a tensor (2, 3, 4, 5) (a mask per frame)"),
    (
        torch.zeros(2, 3, 4),
        "model returned masks of shape (2, 3, 4), expected (2, 3, 4, 5) (B, T, H, W) (first sample c0)",
    ),
    (
        torch.zeros(SHAPE, dtype=torch.int64),
        "model returned masks of dtype torch.int64; expected bool masks or float logits (thresholded at 0)",
    ),
    (
        torch.zeros(SHAPE).index_fill_(0, torch.tensor([1]), float("inf")),
        "model returned NaN or infinite logits (60 of 120 values; first sample c0)",
    ),
]


@pytest.mark.parametrize("task", ["rvos", "avs"])
@pytest.mark.parametrize(("predictions", "message"), MASK_TASK_ERRORS)
def test_a_mask_task_names_what_is_wrong_with_its_predictions(task: str, predictions: Any, message: str) -> None:
    with pytest.raises(ModelOutputError, match=f"^{re.escape(message)}$"):
        get_task(task).check_predictions(predictions, clip_batch())


@pytest.mark.parametrize(
    ("predictions", "message"),
    [
        ([1], "model returned list, expected a tensor of object ids (2, 3, 4, 5)"),
        (
            torch.zeros(2, 3, 4, dtype=torch.int64),
            "model returned ids of shape (2, 3, 4), expected (2, 3, 4, 5) (B, T, H, W) (first sample c0)",
        ),
    ],
)
def test_the_vos_task_names_what_is_wrong_with_its_ids(predictions: Any, message: str) -> None:
    with pytest.raises(ModelOutputError, match=f"^{re.escape(message)}$"):
        get_task("vos").check_predictions(predictions, clip_batch())


def test_mask_tasks_threshold_logits_at_zero_and_keep_bool_masks() -> None:
    logits = torch.linspace(-1.0, 1.0, 120).reshape(SHAPE)
    assert torch.equal(get_task("rvos").check_predictions(logits, clip_batch()), (logits > 0).long())
    assert torch.equal(get_task("rvos").check_predictions(logits > 0.5, clip_batch()), (logits > 0.5).long())
    sounding = get_task("avs").check_predictions(logits, clip_batch())
    assert torch.equal(sounding.data, (logits > 0).long())
    assert torch.equal(sounding.probabilities, torch.sigmoid(logits))
    assert get_task("avs").check_predictions(logits > 0, clip_batch()).probabilities is None


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        ("fog", "dynamic.corruptions", "expected a non-empty list of corruption names, got 'fog'"),
        ([], "dynamic.corruptions", "expected a non-empty list of corruption names, got []"),
        (["fog", 3], "dynamic.corruptions", "expected a non-empty list of corruption names, got ['fog', 3]"),
        (["fog", "snow"], "dynamic.corruptions[1]", "'snow' is not wanted"),
        (["fog", "fog"], "dynamic.corruptions[1]", "'fog' is listed twice"),
        (["blur"], "dynamic.corruptions[0]", "'blur' is listed twice"),
    ],
)
def test_a_suite_list_names_the_item_at_fault(raw: Any, field: str, message: str) -> None:
    def refusal(name: str) -> str | None:
        return f"{name!r} is not wanted" if name == "snow" else None

    with pytest.raises(SuiteKeyError, match=f"^{re.escape(message)}$") as caught:
        suite_list("dynamic.corruptions", raw, "corruption names", refusal, taken=("blur",))
    assert caught.value.field == field


def test_a_suite_list_that_passes_is_its_names_in_order() -> None:
    assert suite_list("temporal", ["b", "a"], "names", lambda name: None, taken=("c",)) == ("b", "a")


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        (["fog"], "static", "expected a mapping such as {redraw: per_frame}, got ['fog']"),
        (
            {"redraw": "per_frame", "speed": 2},
            "static.speed",
            "unknown option; expected redraw (per_clip or per_frame)",
        ),
    ],
)
def test_a_suite_mapping_names_the_key_or_the_option_at_fault(raw: Any, field: str, message: str) -> None:
    with pytest.raises(SuiteKeyError, match=f"^{re.escape(message)}$") as caught:
        suite_mapping(
            "static",
            raw,
            "a mapping such as {redraw: per_frame}",
            ("redraw",),
            "unknown option; expected redraw (per_clip or per_frame)",
        )
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("options", "field", "message"),
    [
        ({"static": "per_frame"}, "static", "expected a mapping such as {redraw: per_frame}, got 'per_frame'"),
        ({"dynamic": {"levels": [1], "speed": 2}}, "dynamic.speed", "unknown option; expected corruptions, types or levels"),
        ({"mixture": "r3bench"}, "mixture", "expected 'r2bench' or a mapping {protocol: r2bench, visual: [...], audio: [...]}, got 'r3bench'"),
        ({"mixture": [1]}, "mixture", "expected 'r2bench' or a mapping {protocol: r2bench, visual: [...], audio: [...]}, got [1]"),
        # A wrong protocol is named before an unknown field.
        ({"mixture": {"protocol": "x", "speed": 2}}, "mixture", "expected 'r2bench' or a mapping {protocol: r2bench, visual: [...], audio: [...]}, got {'protocol': 'x', 'speed': 2}"),
        ({"mixture": {"protocol": "r2bench", "speed": 2}}, "mixture.speed", "unknown field; expected protocol, visual or audio"),
    ],
)  # fmt: skip
def test_the_avs_keys_name_a_wrong_mapping(options: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(SuiteKeyError, match=f"^{re.escape(message)}$") as caught:
        audio_visual_cells(options, (), lambda *args: None)
    assert caught.value.field == field


class _Named:
    """A dataset as a task's annotation check reads it: its name."""

    name = "scenes"


def _annotated(field: str, size: tuple[int, int]) -> Sample:
    """Sample ``s0``: a (3, 4, 5) image and, where ``field`` names one, that annotation of size ``size``."""
    image = torch.zeros(3, 4, 5, dtype=torch.uint8)
    mask = torch.zeros(size, dtype=torch.int64)
    one = torch.ones(1, dtype=torch.int64)
    annotations: dict[str, Any] = {
        "target": SemanticTarget(mask),
        "instances": InstanceTarget.from_masks(mask[None].bool(), one),
        "panoptic": PanopticTarget(mask, one, one, torch.zeros(1, dtype=torch.bool)),
    }
    return Sample("s0", image, **{name: value for name, value in annotations.items() if name == field})


ANNOTATION_ERRORS = [
    (
        "semantic",
        "target",
        (
            "has no semantic label map; a semantic evaluation needs a dataset with one, "
            "e.g. pytest_segrobust.data.semantic_folder:SemanticFolder"
        ),
        ": mask size (4, 6) differs from image size (4, 5)",
    ),
    (
        "instance",
        "instances",
        "has no instance annotations; an instance evaluation needs a dataset with instances, e.g. COCO-format data",
        ": instance masks of size (4, 6) differ from image size (4, 5)",
    ),
    (
        "panoptic",
        "panoptic",
        (
            "has no panoptic annotation; a panoptic evaluation needs a dataset with segments, "
            "e.g. pytest_segrobust.data.coco_panoptic:CocoPanoptic"
        ),
        ": panoptic map of size (4, 6) differs from image size (4, 5)",
    ),
    (
        "promptable",
        "instances",
        "has no instance annotations; a promptable evaluation draws its prompts from instances, e.g. COCO-format data",
        ": instance masks of size (4, 6) differ from image size (4, 5)",
    ),
]


@pytest.mark.parametrize(("task", "field", "missing", "mismatch"), ANNOTATION_ERRORS)
def test_an_image_task_names_a_sample_without_its_annotation_or_of_another_size(
    task: str, field: str, missing: str, mismatch: str
) -> None:
    image_task = get_task(task)
    sample = _annotated(field, (4, 5))
    [found] = image_task.annotations([sample], _Named())
    assert found is sample.fields[field]
    with pytest.raises(DatasetError, match=f"^{re.escape(f'scenes: sample s0 {missing}')}$"):
        image_task.annotations([_annotated("", (4, 5))], _Named())
    with pytest.raises(DatasetError, match=f"^{re.escape(f'scenes: sample s0{mismatch}')}$"):
        image_task.annotations([_annotated(field, (4, 6))], _Named())


def test_an_image_task_reads_and_collates_the_annotation_it_declares() -> None:
    class Outlines(Task):
        name = "outlines"
        default_metrics = ("miou",)
        annotation = ImageAnnotation(
            "target", "outline", SemanticMask, "mask", 0, "outline", "needs outlines", "outline of size {} differs"
        )
        model_protocol = object
        model_description = "any object"

        def targets(self, samples: Sequence[Sample], dataset: Any, device: torch.device) -> dict[str, Field]:
            return {"outline": SemanticMask(torch.stack([target.mask for target in self.annotations(samples, dataset)]))}

        def check_predictions(self, predictions: Any, batch: Batch) -> Any:
            return predictions

    assert Outlines.reads == ("image", "target")
    assert dict(Outlines.collates) == {"image": Image, "index": SampleIndex, "outline": SemanticMask}
    assert Outlines.target_types == (SemanticMask,)
    batch = Outlines().collate([_annotated("target", (4, 5))], [0], _Named(), torch.device("cpu"))
    assert {name: type(value) for name, value in batch.items()} == dict(Outlines.collates)

    class OutlinesAndDepth(Outlines):
        annotation = Outlines.annotation
        reads = ("image", "target", "depth")

    # What the task declares itself stands; the rest follows from the annotation.
    assert OutlinesAndDepth.reads == ("image", "target", "depth")
    assert OutlinesAndDepth.target_types == (SemanticMask,)
