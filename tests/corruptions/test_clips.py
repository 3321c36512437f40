"""Clips: video frames, per-frame masks and audio under photometric, geometric and temporal corruptions.

Per clip, every frame draws what the clip's image would (a one-frame clip is an image); per
frame, each frame draws from its own key; either way a clip's draws do not depend on its batch.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.core.types import (
    Audio,
    Field,
    Image,
    ReferringMask,
    SampleIndex,
    Video,
    VideoMasks,
    frames_of,
)
from pytest_segrobust.corruptions import REGISTRY, Corruption, kernels
from pytest_segrobust.corruptions.base import whole_batches, with_frame_draws
from pytest_segrobust.corruptions.temporal import FRAME_FREEZE, frame_freeze, freeze_length
from pytest_segrobust.data.base import Sample, SemanticTarget
from pytest_segrobust.data.sample_cache import SampleCache
from pytest_segrobust.randomness.seeding import FrameDraws, SampleStreams, StreamKeys, derived_seed
from pytest_segrobust.testing.strategies import make_batch

PHOTOMETRIC = ("gaussian_noise", "shot_noise", "impulse_noise", "motion_blur", "jpeg_compression", "fog", "snow")
GEOMETRIC = ("rotate", "shear", "translate")
DRAWS_NOTHING = {"jpeg_compression"}  # the same on every frame however it is keyed
FRAMES = 4


def clips(
    batch: int = 3, frames: int = FRAMES, seed: int = 5, still: bool = False
) -> tuple[dict[str, Field], list[int]]:
    """Clips of 24x32 frames (every frame alike when ``still``), their masks, audio and index; one seed per clip."""
    made = make_batch(batch * frames, 24, 32, classes=3, seed=seed)
    images = made.images.unflatten(0, (batch, frames))
    masks = made.masks.unflatten(0, (batch, frames))
    if still:
        images, masks = images[:, :1].expand_as(images).contiguous(), masks[:, :1].expand_as(masks).contiguous()
    fields: dict[str, Field] = {
        "video": Video.of(images),
        "masks": VideoMasks.of(masks),
        "audio": Audio.of(torch.linspace(-1, 1, batch * 2 * 800).reshape(batch, 2, 800), 16_000, frames, "left,right"),
        "index": SampleIndex(tuple(range(batch)), tuple(f"clip/{i}" for i in range(batch))),
    }
    return fields, made.seeds[:batch]


def frame(fields: dict[str, Field], b: int, t: int) -> dict[str, Field]:
    """Frame ``t`` of clip ``b`` as a one-image batch, its object 1 as a referring mask."""
    video, masks = fields["video"], fields["masks"]
    assert isinstance(video, Video) and isinstance(masks, VideoMasks)
    return {"image": Image(video.data[b : b + 1, t]), "object": ReferringMask(masks.data[b : b + 1, t] == 1)}


@pytest.mark.parametrize("name", PHOTOMETRIC + GEOMETRIC)
def test_drawn_per_clip_every_frame_is_its_image_corrupted_with_the_clips_seed(name: str) -> None:
    corruption = REGISTRY.get(name)
    fields, seeds = clips(still=True)
    out = corruption(fields, 3, seeds)
    for b in range(len(seeds)):
        alone = corruption(frame(fields, b, 0), 3, [seeds[b]])
        for t in range(FRAMES):
            assert torch.equal(out["video"].data[b, t], alone["image"].data[0]), (name, b, t)
            if corruption.geometric:
                assert torch.equal(out["masks"].data[b, t] == 1, alone["object"].data[0]), (name, b, t)


@pytest.mark.parametrize("name", PHOTOMETRIC + GEOMETRIC)
def test_drawn_per_frame_each_frame_has_its_own_key(name: str) -> None:
    corruption = with_frame_draws(REGISTRY.get(name), FrameDraws.FRAME)
    fields, seeds = clips(still=True)
    severity = 1 if corruption.geometric else 3  # translate's 60 pixels leave a 24x32 frame black
    out = corruption(fields, severity, seeds)
    repeats = [
        [torch.equal(out["video"].data[b, 0], out["video"].data[b, t]) for t in range(1, FRAMES)] for b in range(3)
    ]
    if corruption.geometric:  # a warp may draw only a sign: some frames of a clip may repeat, not all of every clip
        assert not all(all(clip) for clip in repeats), name
    elif name not in DRAWS_NOTHING:
        assert not any(any(clip) for clip in repeats), name
    for b in range(len(seeds)):
        frames = out["video"].data[b]
        for t in range(FRAMES):
            alone = corruption(frame(fields, b, t), severity, [derived_seed(seeds[b], "frame", t)])
            assert torch.equal(frames[t], alone["image"].data[0]), (name, b, t)
            if corruption.geometric:
                assert torch.equal(out["masks"].data[b, t] == 1, alone["object"].data[0]), (name, b, t)


CELLS = [
    *(
        (f"{name}/{mode.value}", with_frame_draws(REGISTRY.get(name), mode))
        for name in ("gaussian_noise", "rotate", "motion_blur")
        for mode in FrameDraws
    ),
    ("elastic_transform/frame", with_frame_draws(REGISTRY.get("elastic_transform", "imagenet-c"), FrameDraws.FRAME)),
    ("frame_freeze", frame_freeze),
]


@pytest.mark.parametrize(("label", "corruption"), CELLS, ids=[label for label, _ in CELLS])
def test_a_clips_draws_do_not_depend_on_its_batch(label: str, corruption: Corruption[Any]) -> None:
    fields, seeds = clips(batch=4)
    whole = corruption(fields, 5, seeds)
    with whole_batches():
        assert all(same(whole[name], f) for name, f in corruption(fields, 5, seeds).items()), label
    order = [3, 0, 2]
    part = corruption({name: f.take(order) for name, f in fields.items()}, 5, [seeds[i] for i in order])
    for name, f in part.items():
        assert same(f, whole[name].take(order)), (label, name)


def same(a: Field, b: Field) -> bool:
    values = [(getattr(a, name), getattr(b, name)) for name in a.__dataclass_fields__]  # type: ignore[attr-defined]
    return type(a) is type(b) and all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in values)


def test_photometric_and_geometric_corruptions_leave_audio_alone() -> None:
    fields, seeds = clips()
    for name in ("gaussian_noise", "rotate"):
        for mode in FrameDraws:
            assert same(with_frame_draws(REGISTRY.get(name), mode)(fields, 2, seeds)["audio"], fields["audio"])


def test_a_frozen_run_moves_frames_masks_and_frame_ids_together() -> None:
    fields, seeds = clips(batch=4, frames=10)
    video, masks = fields["video"], fields["masks"]
    assert isinstance(video, Video) and isinstance(masks, VideoMasks)
    masks = VideoMasks(masks.data, masks.object_ids, torch.arange(10).expand(4, 10) % 2 == 0, masks.frame_ids)
    fields["masks"] = masks
    for severity in range(1, 6):
        out = frame_freeze(fields, severity, seeds)
        ids = out["video"].frame_ids
        assert torch.equal(out["masks"].frame_ids, ids)
        for b in range(4):
            shown = ids[b]
            assert torch.equal(out["video"].data[b], video.data[b, shown])
            assert torch.equal(out["masks"].data[b], masks.data[b, shown])
            assert torch.equal(out["masks"].annotated[b], masks.annotated[b, shown])
            stalled = (shown != torch.arange(10)).nonzero()[:, 0]
            length = freeze_length(FRAME_FREEZE[severity].fraction, 10)
            assert len(stalled) == length and bool((shown[stalled] == stalled[0] - 1).all())
            assert torch.equal(stalled, torch.arange(int(stalled[0]), int(stalled[0]) + length))
        assert out["audio"] is fields["audio"] and out["index"] is fields["index"]
    assert frame_freeze.temporal and not frame_freeze.geometric


def test_a_single_frame_cannot_freeze_and_its_clip_is_refused() -> None:
    fields, seeds = clips(frames=1)
    order = frame_freeze.frame_order(FRAME_FREEZE[5], SampleStreams(seeds, torch.device("cpu")), 1, torch.device("cpu"))
    assert order.tolist() == [[0]] * len(seeds)
    with pytest.raises(DatasetError, match="frame_freeze: clips clip/0, clip/1, clip/2 have 1 frame"):
        frame_freeze(fields, 5, seeds)


def test_a_temporal_corruption_needs_a_clip_and_a_kernel_for_every_field_with_frames() -> None:
    fields, seeds = clips()
    with pytest.raises(ValueError, match="frame_freeze: needs one Video field, the batch has none"):
        frame_freeze({"image": Image(fields["video"].data[:, 0])}, 1, seeds)

    class Subtitles(Field):  # frames, but no temporal kernel
        def batch_size(self) -> int:
            return 3

        def size(self) -> None:
            return None

        def frames(self) -> int:
            return FRAMES

    with pytest.raises(TypeError, match="Subtitles has frames but no temporal kernel"):
        frame_freeze({**fields, "subtitles": Subtitles()}, 1, seeds)
    kernels.reorder.register(Subtitles)(lambda field, order: field)
    assert isinstance(frame_freeze({**fields, "subtitles": Subtitles()}, 1, seeds)["subtitles"], Subtitles)


def test_fields_of_different_lengths_are_refused() -> None:
    fields, seeds = clips()
    short, _ = clips(frames=2)
    with pytest.raises(ValueError, match=r"different numbers of frames \(video: 4, masks: 4, audio: 4, short: 2\)"):
        REGISTRY.get("gaussian_noise")({**fields, "short": short["video"]}, 1, seeds)
    assert frames_of(fields) == FRAMES and frames_of({"index": fields["index"]}) is None


def test_stream_keys_are_derived_per_field_frame_and_channel() -> None:
    keys = StreamKeys((11, 12))
    assert keys.frames(3) == [11, 11, 11, 12, 12, 12]
    per_frame = StreamKeys((11, 12), FrameDraws.FRAME).frames(3)
    assert len(set(per_frame)) == 6 and per_frame[4] == derived_seed(12, "frame", 1)
    audio = keys.of_field("audio")
    assert audio.seeds == (derived_seed(11, "field", "audio"), derived_seed(12, "field", "audio"))
    assert len({*audio.seeds, *keys.seeds, *keys.channels(2)}) == 8


def test_clip_fields_are_cut_and_joined_per_clip() -> None:
    fields, _ = clips(batch=3)
    for name, f in fields.items():
        joined = type(f).join([f.take([2]), f.take(range(2))])
        assert same(joined, f.take([2, 0, 1])), name
    audio = fields["audio"]
    assert isinstance(audio, Audio)
    assert audio.channels() == ("left", "right") and audio.frame(1, 3).shape == (2, 200)
    assert fields["masks"].object_ids[0] == tuple(sorted(set(fields["masks"].data[0, 0].unique().tolist()) - {0}))


def test_a_sample_is_an_open_set_of_fields_and_the_cache_keeps_them() -> None:
    clip = torch.zeros(2, 3, 4, 5, dtype=torch.uint8)
    sample = Sample.of("clip/0", video=clip, masks=torch.ones(2, 4, 5, dtype=torch.int64))
    assert sample.image is None and set(sample.fields) == {"video", "masks"}
    with pytest.raises(KeyError, match="sample clip/0 has no field 'audio'; it has video, masks"):
        sample.field("audio")
    image = Sample.of("img", image=torch.zeros(3, 4, 5, dtype=torch.uint8), target=SemanticTarget(torch.zeros(4, 5)))
    assert image.extra == {} and list(image.fields) == ["image", "target"]
    with pytest.raises(ValueError, match="image are attributes of a Sample"):
        Sample("x", extra={"image": clip})

    class Clips:
        name = "clips"

    cache, dataset = SampleCache(budget=1 << 20), Clips()
    first = next(cache.samples(dataset, 1, lambda indices: iter([sample])))  # type: ignore[arg-type]
    again = next(cache.samples(dataset, 1, lambda indices: iter(())))  # type: ignore[arg-type]
    assert first is sample and cache.hits == 1
    assert torch.equal(again.field("masks"), sample.field("masks")) and again.field("masks").dtype == torch.int64
    assert again.field("video") is not sample.field("video")
