"""The demo clips: deterministic, in the clip contract's fields, with objects that move, occlude,
enter, leave and appear late, and expressions that name one object for the whole clip."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from pytest_segrobust.data.clips import ClipExpression, ClipFrames, ClipObjects
from pytest_segrobust.data.demo import CLASS_NAMES
from pytest_segrobust.data.demo_video import (
    COLOUR_NAMES,
    FRAMES,
    IMAGE_SIZE,
    MIN_FIRST_AREA,
    SHAPE_NAMES,
    DemoClips,
    _covered,
    demo_rvos_dataset,
    demo_vos_dataset,
    generate_clip,
    given_masks,
    stack_clips,
)


@pytest.fixture(scope="module")
def val() -> DemoClips:
    return demo_vos_dataset("val")


@pytest.fixture(scope="module")
def clips(val: DemoClips) -> list:
    return [val.clip(index) for index in range(len(val))]


def test_a_sample_holds_the_contracts_fields(val: DemoClips) -> None:
    sample = val[3]
    assert sample.sample_id == "demo-video/val/0003"
    video, objects = sample.field("video"), sample.field("objects")
    assert isinstance(video, ClipFrames) and isinstance(objects, ClipObjects)
    assert video.frames.dtype == torch.uint8 and tuple(video.frames.shape) == (FRAMES, 3, IMAGE_SIZE, IMAGE_SIZE)
    assert video.names == tuple(f"{t:05d}" for t in range(FRAMES))
    assert objects.masks.dtype == torch.int64 and tuple(objects.masks.shape) == (FRAMES, IMAGE_SIZE, IMAGE_SIZE)
    assert bool(objects.annotated.all())
    assert objects.unseen == (False,) * len(objects.object_ids)
    assert set(objects.masks.unique().tolist()) <= {0, *objects.object_ids}
    assert len(val) == 12 and val[-1].sample_id == val[11].sample_id
    with pytest.raises(IndexError):
        val[12]


def test_clips_are_a_function_of_split_and_index_alone() -> None:
    first = generate_clip("val", 5)
    # Global generators drawn from or reseeded in between change nothing.
    np.random.seed(123)
    torch.manual_seed(321)
    random.seed(7)
    np.random.rand(10)
    again = generate_clip("val", 5)
    assert np.array_equal(first.frames, again.frames) and np.array_equal(first.masks, again.masks)
    assert first.first_frames == again.first_frames
    assert not np.array_equal(first.frames, generate_clip("val", 6).frames)
    assert not np.array_equal(first.frames, generate_clip("train", 5).frames)


def test_every_object_first_shows_in_its_first_frame_as_more_than_a_sliver(clips: list) -> None:
    for clip in clips:
        for obj, first in zip(clip.objects, clip.first_frames, strict=True):
            area = (clip.masks == obj.number).sum(axis=(1, 2))
            assert not area[:first].any(), (obj.number, first)
            assert area[first] >= MIN_FIRST_AREA


def test_objects_move_occlude_enter_leave_and_appear_late(clips: list) -> None:
    late = [clip for clip in clips if any(first > 0 for first in clip.first_frames)]
    assert len(late) >= 3
    entering = leaving = occluded = moving = 0
    border = np.zeros((IMAGE_SIZE, IMAGE_SIZE), dtype=bool)
    border[[0, -1], :] = border[:, [0, -1]] = True
    for clip in clips:
        for obj, first in zip(clip.objects, clip.first_frames, strict=True):
            shown = clip.masks == obj.number
            area = shown.sum(axis=(1, 2))
            entering += bool((shown[first] & border).any()) and area[-1] > area[first]
            leaving += bool(area[-1] == 0 and first == 0)
            moving += bool(np.abs(np.subtract(obj.centre(FRAMES - 1), obj.centre(0))).max() > 4)
            full = _drawn_alone(obj)
            occluded += bool(((full > area) & (area > 0)).any())
    assert entering >= 2 and leaving >= 2 and occluded >= 2
    assert moving == sum(len(clip.objects) for clip in clips)


def _drawn_alone(obj) -> np.ndarray:
    """The pixels the object would cover in each frame with nothing in front of it. Shape: ``(T,)``."""
    coordinates = np.arange(IMAGE_SIZE, dtype=np.float32) + np.float32(0.5)
    ys, xs = coordinates[:, None], coordinates[None, :]
    areas = []
    for t in range(FRAMES):
        cx, cy = obj.centre(t)
        dx, dy = xs - np.float32(cx), ys - np.float32(cy)
        cos_a, sin_a = np.float32(math.cos(obj.angle)), np.float32(math.sin(obj.angle))
        covered = _covered(obj, dx * cos_a + dy * sin_a, dy * cos_a - dx * sin_a, dx, dy)
        areas.append(int(covered.sum()) if t >= obj.appears else 0)
    return np.asarray(areas)


def test_no_two_objects_of_a_clip_look_alike(clips: list) -> None:
    for clip in clips:
        looks = [(obj.class_id, obj.colour) for obj in clip.objects]
        assert len(set(looks)) == len(looks)


def test_the_reference_holds_each_object_in_its_first_frame_only(val: DemoClips) -> None:
    objects = val[9].field("objects")
    reference = given_masks(objects.masks, objects.object_ids, objects.first_frames)
    for object_id, first in zip(objects.object_ids, objects.first_frames, strict=True):
        shown = (reference == object_id).flatten(1).any(dim=1)
        assert shown.nonzero().flatten().tolist() == [first]
        assert torch.equal(reference[first] == object_id, objects.masks[first] == object_id)
    video, masks, stacked = stack_clips([val[9], val[0]])
    assert tuple(video.data.shape) == (2, FRAMES, 3, IMAGE_SIZE, IMAGE_SIZE) and video.data.max() <= 1.0
    assert masks.object_ids[0] == objects.object_ids and torch.equal(stacked[0], reference)


def _words_fit(text: str, obj) -> bool:
    """Whether every word of ``text`` is true of ``obj`` (``the``/``shape`` say nothing)."""
    words = set(text.split()) - {"the", "shape"}
    truths = {obj.texture, obj.colour_name, obj.shape_name}
    known = set(CLASS_NAMES[1:]) | {name for name, _ in COLOUR_NAMES} | set(SHAPE_NAMES)
    assert words <= known, text
    return words <= truths


def test_each_expression_names_its_object_and_no_other() -> None:
    dataset = demo_rvos_dataset("val")
    assert len(dataset) >= 30
    ids = [dataset[i].sample_id for i in range(len(dataset))]
    assert len(set(ids)) == len(ids)
    for index in range(len(dataset)):
        sample = dataset[index]
        expression = sample.field("expression")
        assert isinstance(expression, ClipExpression)
        clip_id, _, rest = sample.sample_id.rpartition("/")
        assert rest.split("-")[0] == str(expression.object_id)
        objects = dataset.clip(int(clip_id.rsplit("/", 1)[1])).objects
        fitting = [obj.number for obj in objects if _words_fit(expression.text, obj)]
        assert fitting == [expression.object_id], (sample.sample_id, expression.text)
        assert expression.object_id in sample.field("objects").object_ids
    # Texture, colour and shape words all occur; places and sizes never do.
    text = " ".join(dataset.expressions)
    assert any(name in text for name in SHAPE_NAMES) and "dotted" in text and "blue" in text
    assert not any(word in text for word in ("left", "right", "top", "bottom", "largest", "smallest"))


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown demo video split"):
        demo_vos_dataset("test")
    with pytest.raises(ValueError, match="non-negative"):
        demo_rvos_dataset("val", clips=-1)
    assert demo_vos_dataset("val", clips=3).fingerprint() != demo_vos_dataset("val").fingerprint()
