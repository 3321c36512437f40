"""The demo AVS clips: deterministic, in the audio-visual contract's fields, and a target only sound reveals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pytest_segrobust.core.types import Audio
from pytest_segrobust.data.clips import ClipAudio, ClipFrames, ClipObjects
from pytest_segrobust.data.demo_avs import (
    FRAME_SAMPLES,
    FRAMES,
    IMAGE_SIZE,
    SAMPLE_RATE,
    SOURCES,
    DemoAVSClips,
    demo_avs_dataset,
)


@pytest.fixture(scope="module")
def val() -> DemoAVSClips:
    return demo_avs_dataset("val")


def test_a_clip_is_the_same_from_any_instance_and_differs_from_its_neighbours(val: DemoAVSClips) -> None:
    again = DemoAVSClips("val")
    for index in (0, 7, len(val) - 1):
        one, two = val[index], again[index]
        assert one.sample_id == two.sample_id
        assert set(one.fields) == set(two.fields) == {"video", "objects", "audio"}
        assert torch.equal(one.extra["video"].frames, two.extra["video"].frames)
        assert torch.equal(one.extra["objects"].masks, two.extra["objects"].masks)
        assert torch.equal(one.extra["audio"].waveform, two.extra["audio"].waveform)
    assert not torch.equal(val[0].extra["video"].frames, val[1].extra["video"].frames)
    assert not torch.equal(val[0].extra["audio"].waveform, val[1].extra["audio"].waveform)
    # Splits draw different clips.
    assert not torch.equal(DemoAVSClips("train", clips=1)[0].extra["audio"].waveform, val[0].extra["audio"].waveform)


def test_samples_carry_the_contracts_fields(val: DemoAVSClips) -> None:
    assert len(val) == 24 and len(set(val.sample_ids)) == 24
    sample = val[-1]
    assert sample.sample_id == val.sample_ids[-1]
    video, objects, audio = sample.extra["video"], sample.extra["objects"], sample.extra["audio"]
    assert isinstance(video, ClipFrames) and isinstance(objects, ClipObjects) and isinstance(audio, ClipAudio)
    assert video.frames.shape == (FRAMES, 3, IMAGE_SIZE, IMAGE_SIZE) and video.frames.dtype == torch.uint8
    assert len(video.names) == FRAMES
    assert objects.masks.shape == (FRAMES, IMAGE_SIZE, IMAGE_SIZE) and objects.masks.dtype == torch.int64
    assert set(objects.masks.unique().tolist()) <= {0, 1}
    assert objects.annotated.all() and objects.object_ids == (1,) and objects.first_frames == (0,)
    assert audio.sample_rate == SAMPLE_RATE and audio.layout == "mono"
    assert audio.waveform.shape == (1, FRAMES * FRAME_SAMPLES) and audio.waveform.dtype == torch.float32
    assert audio.waveform.abs().max() <= 1.0
    # The task's collation cuts it into one second per frame.
    bounds = Audio.of(audio.waveform[None], audio.sample_rate, FRAMES).frame_bounds[0]
    assert (bounds[:, 1] - bounds[:, 0]).tolist() == [SAMPLE_RATE] * FRAMES
    # read_audio gives the same sound without the frames.
    assert torch.equal(val.read_audio(sample.sample_id).waveform, audio.waveform)


def test_the_sounding_mask_is_the_visible_part_of_the_shapes_heard_and_silent_shapes_are_shown(
    val: DemoAVSClips,
) -> None:
    kinds = set()
    for index in range(len(val)):
        clip = val.clip(index)
        plan = clip.plan
        kinds.add(plan.multi_source)
        sounding = [shape.sounding for shape in plan.shapes]
        assert sum(any(s) for s in sounding) == (2 if plan.multi_source else 1)
        assert len({shape.source for shape in plan.shapes}) == len(plan.shapes) >= 2
        for t in range(FRAMES):
            heard = [number for number, s in enumerate(sounding, start=1) if s[t]]
            assert heard, "every frame hears at least one shape"
            assert np.array_equal(clip.masks[t], np.isin(clip.shown[t], heard))
        silent = [number for number, s in enumerate(sounding, start=1) if not any(s)]
        assert all((clip.shown == number).any() for number in silent)
        assert len(silent) == len(plan.shapes) - (2 if plan.multi_source else 1)
    assert kinds == {False, True}, "the split has both S4-like and MS3-like clips"


def test_each_second_sounds_the_tones_of_its_sounding_shapes_only(val: DemoAVSClips) -> None:
    for index in (0, 1, 2, 12):
        clip = val.clip(index)
        for t in range(FRAMES):
            # The middle of the second, away from fades: 1 Hz bins, each tone exactly on one.
            second = clip.waveform[t * FRAME_SAMPLES : (t + 1) * FRAME_SAMPLES].astype(np.float64)
            magnitude = np.abs(np.fft.rfft(second)) / (FRAME_SAMPLES / 2)
            heard = set(clip.plan.sounding_sources(t))
            for source, tone in enumerate(SOURCES):
                level = magnitude[tone.tone_hz]
                if source in heard:
                    assert level > 0.03, (index, t, tone.name, level)
                else:
                    assert level < 0.003, (index, t, tone.name, level)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown demo AVS split 'test'"):
        DemoAVSClips("test")
    with pytest.raises(ValueError, match="clips must be non-negative"):
        DemoAVSClips("val", clips=-1)
    with pytest.raises(IndexError, match="out of range for demo-avs-val of size 3"):
        DemoAVSClips("val", clips=3)[3]
    with pytest.raises(KeyError, match="not a clip of demo-avs-val"):
        DemoAVSClips("val", clips=3).read_audio("demo-avs/val/0003")
