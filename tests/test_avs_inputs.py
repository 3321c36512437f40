"""What the audio-visual task says of clips whose sounds disagree: two clips at different sample
rates are both named, with both rates, and neither is blamed for the other."""

from __future__ import annotations

import re

import pytest
import torch

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import Sample
from pytest_segrobust.data.clips import ClipAudio
from pytest_segrobust.tasks import get_task
from tests.av_fakes import ListedAudioClips

TASK = get_task("avs")


class TwoRates(ListedAudioClips):
    """Two clips; the second one's sound at twice the first one's rate (the samples doubled)."""

    def __init__(self) -> None:
        super().__init__(2)

    def _doubled(self, audio: ClipAudio) -> ClipAudio:
        return ClipAudio(audio.waveform.repeat_interleave(2, dim=-1), 2 * audio.sample_rate, audio.layout)

    def __getitem__(self, index: int) -> Sample:
        sample = super().__getitem__(index)
        if index == 1:
            return Sample.of(sample.sample_id, **{**sample.fields, "audio": self._doubled(sample.fields["audio"])})
        return sample

    def read_audio(self, sample_id: str) -> ClipAudio:
        audio = super().read_audio(sample_id)
        return self._doubled(audio) if sample_id == "av001" else audio


@pytest.mark.parametrize("index", [0, 1])
def test_a_clip_and_its_competitor_at_different_rates_are_both_named_with_both_rates(index: int) -> None:
    dataset = TwoRates()
    own, other = ("av000", "av001") if index == 0 else ("av001", "av000")
    rates = (8000, 16000) if index == 0 else (16000, 8000)
    expected = (
        f"{dataset.name}: sample {own}'s field 'audio' is at {rates[0]} Hz and sample {other}'s (the clip competing "
        f"with it in background_noise) at {rates[1]} Hz; the clips of a dataset share one sample rate"
    )
    with pytest.raises(DatasetError, match=re.escape(expected)):
        TASK.collate([dataset[index]], [index], dataset, torch.device("cpu"))
