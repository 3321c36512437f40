"""Small generated audio-visual clips and models for the AVS tests (also copied into pytester projects).

Each clip (24x24, 3 frames, 0.3 s of 8 kHz mono sound) shows a red and a green square; the
clip's tone says which one sounds: 500 Hz the red one, 1500 Hz the green one (clip index even:
red). ``tone_reader`` finds the louder of the two tones in the waveform and segments that
colour, so it scores 100 on clean clips and is hurt by sound that drowns or filters its tone;
frames without sound are left empty (so clean clips score 100);
``colour_guess`` never reads the sound (it always segments red): it is audio-blind.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from pytest_segrobust.data.base import Sample
from pytest_segrobust.data.clips import ClipAudio, ClipFrames, ClipObjects

SIZE = 24
FRAMES = 3
RATE = 8000
SECONDS = 0.3
TONES = {1: 500.0, 2: 1500.0}  # 1: the red square sounds, 2: the green one
COLOURS = {1: (255, 0, 0), 2: (0, 255, 0)}


def av_clip(index: int) -> Sample:
    pixels = torch.zeros(FRAMES, 3, SIZE, SIZE, dtype=torch.uint8)
    labels = torch.zeros(FRAMES, SIZE, SIZE, dtype=torch.int64)
    for t in range(FRAMES):
        labels[t, 3 + t : 11 + t, 2 + (index % 3) : 10 + (index % 3)] = 1
        labels[t, 14:21, 12 + t : 19 + t] = 2
    for colour_id, colour in COLOURS.items():
        pixels.permute(0, 2, 3, 1)[labels == colour_id] = torch.tensor(colour, dtype=torch.uint8)
    sounding = 1 if index % 2 == 0 else 2
    times = torch.arange(int(RATE * SECONDS), dtype=torch.float64) / RATE
    wave = (0.5 * torch.sin(2 * math.pi * TONES[sounding] * times + index)).float()[None]
    masks = (labels == sounding).long()
    if index % 4 == 3:  # a silent second frame: its truth is empty
        span = wave.shape[-1] // FRAMES
        wave[:, span : 2 * span] = 0.0
        masks[1] = 0
    objects = ClipObjects(masks, torch.ones(FRAMES, dtype=torch.bool), (1,), (0,), (False,))
    return Sample.of(
        f"av{index:03d}",
        video=ClipFrames(pixels, tuple(f"{t:05d}" for t in range(FRAMES))),
        objects=objects,
        audio=ClipAudio(wave, RATE),
    )


class AudioClips:
    class_names = ("background", "sounding")
    ignore_index = 255

    def __init__(self, count: int) -> None:
        self.name = f"av-clips-{count}"
        self.count = count
        self.audio_reads = 0

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> Sample:
        if not 0 <= index < self.count:
            raise IndexError(index)
        return av_clip(index)

    def fingerprint(self) -> str:
        return f"{self.name}-v1"


class ListedAudioClips(AudioClips):
    """The same clips, with ids listed and sound read alone (what a real reader offers)."""

    @property
    def sample_ids(self) -> tuple[str, ...]:
        return tuple(f"av{i:03d}" for i in range(self.count))

    def read_audio(self, sample_id: str) -> ClipAudio:
        self.audio_reads += 1
        return av_clip(int(sample_id[2:])).fields["audio"]


def audio_clips(count: int = 4) -> AudioClips:
    return AudioClips(count)


def listed_audio_clips(count: int = 4) -> ListedAudioClips:
    return ListedAudioClips(count)


def _tone_power(wave: np.ndarray, frequency: float, sample_rate: int = RATE) -> np.ndarray:
    times = np.arange(wave.shape[-1]) / sample_rate
    return np.abs((wave * np.exp(-2j * np.pi * frequency * times)).sum(axis=-1))


def _colour_masks(clips: torch.Tensor, colour_id: torch.Tensor) -> torch.Tensor:
    red = (clips[:, :, 0] > 0.5) & (clips[:, :, 1] < 0.5)
    green = (clips[:, :, 1] > 0.5) & (clips[:, :, 0] < 0.5)
    return torch.where(colour_id.view(-1, 1, 1, 1) == 1, red, green)


class ToneReader(torch.nn.Module):
    """``module(clips, waveform, frame_bounds, sample_rate)``: logits of the colour whose tone is louder."""

    def __init__(self) -> None:
        super().__init__()
        self.sharpness = torch.nn.Parameter(torch.tensor(4.0), requires_grad=False)

    def forward(self, clips: torch.Tensor, waveform: torch.Tensor, frame_bounds: torch.Tensor, sample_rate: int):
        wave = waveform.mean(dim=1).cpu().double().numpy()
        louder = np.where(_tone_power(wave, TONES[1], sample_rate) >= _tone_power(wave, TONES[2], sample_rate), 1, 2)
        masks = _colour_masks(clips, torch.as_tensor(louder, device=clips.device))
        for clip, bounds in enumerate(frame_bounds.tolist()):
            for frame, (start, stop) in enumerate(bounds):
                if np.sqrt(np.mean(wave[clip, start:stop] ** 2)) < 0.05:  # nothing sounds in this frame
                    masks[clip, frame] = False
        return (masks.float() * 2 - 1) * self.sharpness


def tone_reader() -> ToneReader:
    return ToneReader()


def colour_guess(clips: np.ndarray, waveform: np.ndarray, frame_bounds: np.ndarray, sample_rate: int) -> np.ndarray:
    """Audio-blind: always the red square, as bool masks."""
    return _colour_masks(torch.from_numpy(clips), torch.ones(clips.shape[0], dtype=torch.long)).numpy()


SOURCE = Path(__file__).read_text(encoding="utf-8")
