"""The demo audio-visual model: the protocol, a clean mIoU its shipped weights clear, and that it listens."""

from __future__ import annotations

import importlib.resources

import pytest
import torch

from pytest_segrobust.core.types import Audio
from pytest_segrobust.corruptions.acoustic import audio_gaussian_noise
from pytest_segrobust.data.demo_avs import FRAMES, SAMPLE_RATE, demo_avs_dataset
from pytest_segrobust.models.demo_avs import WEIGHTS_PATH, TinyAVSNet, tiny_avs
from pytest_segrobust.randomness.seeding import sample_seed

CLEAN_BOUND = 90.0  # the shipped weights score 99.4


def miou(logits: torch.Tensor, truth: torch.Tensor) -> float:
    """Per-frame IoU of the predicted (logit > 0) and true sounding masks, averaged, in percent.

    A frame with an empty truth scores the share of pixels predicted silent (AVSBench).
    """
    scores = []
    for predicted, true in zip((logits > 0).flatten(0, 1), truth.bool().flatten(0, 1), strict=True):
        if not true.any():
            scores.append(float((~predicted).float().mean()))
        else:
            scores.append(float((predicted & true).sum()) / float((predicted | true).sum()))
    return 100.0 * sum(scores) / len(scores)


@pytest.fixture(scope="module")
def model() -> TinyAVSNet:
    return tiny_avs()


@pytest.fixture(scope="module")
def val() -> tuple[torch.Tensor, Audio, torch.Tensor, tuple[str, ...]]:
    dataset = demo_avs_dataset("val")
    samples = [dataset[i] for i in range(len(dataset))]
    clips = torch.stack([s.extra["video"].frames for s in samples]).float() / 255.0
    audio = Audio.of(torch.stack([s.extra["audio"].waveform for s in samples]), SAMPLE_RATE, FRAMES)
    masks = torch.stack([s.extra["objects"].masks for s in samples])
    return clips, audio, masks, tuple(s.sample_id for s in samples)


@pytest.fixture(scope="module")
def clean(model: TinyAVSNet, val: tuple[torch.Tensor, Audio, torch.Tensor, tuple[str, ...]]) -> torch.Tensor:
    clips, audio, _, _ = val
    return model.predict(clips, audio)


def test_it_implements_the_audio_visual_protocol(model: TinyAVSNet, val, clean: torch.Tensor) -> None:  # type: ignore[no-untyped-def]
    clips, audio, _, _ = val
    assert model.task == "avs" and model.device == torch.device("cpu") and not model.training
    assert clean.shape == (clips.shape[0], FRAMES, *clips.shape[-2:]) and clean.is_floating_point()
    assert model.fingerprint() == tiny_avs().fingerprint()
    other = tiny_avs()
    with torch.no_grad():
        other.readout.bias += 1.0
    assert other.fingerprint() != model.fingerprint()
    # A clip's logits are its own: the same alone as in the batch.
    alone = model.predict(clips[3:4], Audio(audio.data[3:4], audio.frame_bounds[3:4], SAMPLE_RATE))
    torch.testing.assert_close(alone[0], clean[3], atol=1e-4, rtol=1e-4)


def test_the_shipped_weights_are_small() -> None:
    folder, name = WEIGHTS_PATH
    size = len((importlib.resources.files("pytest_segrobust.models") / folder / name).read_bytes())
    assert size < 1024 * 1024


def test_clean_miou_on_val_clears_the_bound(val, clean: torch.Tensor) -> None:  # type: ignore[no-untyped-def]
    assert miou(clean, val[2]) > CLEAN_BOUND


def test_it_listens_another_clips_sound_moves_its_masks(model: TinyAVSNet, val, clean: torch.Tensor) -> None:  # type: ignore[no-untyped-def]
    clips, audio, masks, _ = val
    swapped = Audio(audio.data.roll(1, dims=0), audio.frame_bounds, SAMPLE_RATE)
    assert miou(model.predict(clips, swapped), masks) < miou(clean, masks) - 30.0


def test_audio_gaussian_noise_at_level_5_lowers_its_miou(model: TinyAVSNet, val, clean: torch.Tensor) -> None:  # type: ignore[no-untyped-def]
    clips, audio, masks, ids = val
    seeds = [sample_seed(0, sample_id, audio_gaussian_noise.name, 5) for sample_id in ids]
    noisy = audio_gaussian_noise({"audio": audio}, 5, seeds)["audio"]
    assert isinstance(noisy, Audio) and not torch.equal(noisy.data, audio.data)
    assert miou(model.predict(clips, noisy), masks) < miou(clean, masks) - 10.0
