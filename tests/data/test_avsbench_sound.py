"""AVSBench's sound files against their frames: a short sound is refused unless ``audio_pad`` says how
to pad it, a sound at another rate is refused naming its file, and both messages say what was found
and what was expected."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.audio_length import AudioPad, fit_to_frames, samples_needed
from pytest_segrobust.data.avsbench import avsbench
from pytest_segrobust.data.clips import ClipAudio
from tests.data.avs_layouts import RATE, write_s4_clip, write_s4_meta

CLIPS = {"dogA": "dog_barking", "carB": "race_car"}
NEEDED = 5 * RATE  # five frames, a second each


def write_copy(root: Path, lengths: dict[str, int], rates: dict[str, int] | None = None) -> None:
    """An S4 test split of ``CLIPS`` whose sounds have ``lengths`` samples (a ramp, so a repeat shows)."""
    write_s4_meta(root, CLIPS, "test")
    frames = np.zeros((5, 8, 8, 3), np.uint8)
    mask = np.eye(8, dtype=bool)
    for clip, category in CLIPS.items():
        sound = np.linspace(-0.5, 0.5, lengths[clip]) if lengths[clip] else np.zeros(0)
        write_s4_clip(root, "test", category, clip, frames, [mask] * 5, sound, (rates or {}).get(clip, RATE))


def sound_file(root: Path, clip: str) -> Path:
    return root / "s4_data" / "audio_wav" / "test" / CLIPS[clip] / f"{clip}.wav"


@pytest.mark.parametrize(
    ("samples", "seconds"), [(72000, "4.5"), (16000, "1"), (3200, "0.2"), (0, "0"), (NEEDED - 1, "4.99994")]
)
def test_a_sound_shorter_than_its_frames_need_is_refused_naming_the_file_and_both_lengths(
    tmp_path: Path, samples: int, seconds: str
) -> None:
    write_copy(tmp_path, {"dogA": samples, "carB": NEEDED})
    dataset = avsbench(tmp_path, "s4", "test")
    for read in (lambda: dataset[0], lambda: dataset.read_audio("dogA")):
        with pytest.raises(DatasetError) as caught:
            read()
        message = str(caught.value)
        assert message.startswith(
            f"{sound_file(tmp_path, 'dogA')}: sound is {seconds} s ({samples} samples at 16000 Hz)"
        )
        assert f"the 5 s ({NEEDED} samples) for its 5 frames of 1 s" in message
        assert "option audio_pad to zeros" in message and "or repeat" in message
    assert dataset[1].fields["audio"].waveform.shape == (1, NEEDED)  # a whole sound is read as it is


@pytest.mark.parametrize("samples", [72000, 16000, 3200, 0])
def test_audio_pad_zeros_puts_silence_after_the_sound(tmp_path: Path, samples: int) -> None:
    write_copy(tmp_path, {"dogA": samples, "carB": NEEDED})
    refused = avsbench(tmp_path, "s4", "test")
    padded = avsbench(tmp_path, "s4", "test", audio_pad="zeros")
    wave = padded[0].fields["audio"].waveform
    assert wave.shape == (1, NEEDED) and padded.read_audio("dogA").waveform.shape == (1, NEEDED)
    assert not wave[:, samples:].any()
    if samples:
        assert wave[0, 0] < -0.49 and wave[0, samples - 1] > 0.49  # the ramp, where it was
    assert torch.equal(padded[1].fields["audio"].waveform, refused[1].fields["audio"].waveform)
    assert padded.fingerprint() != refused.fingerprint()  # padding changes what is read


@pytest.mark.parametrize("samples", [72000, 16000, 3200])
def test_audio_pad_repeat_plays_the_sound_again_from_its_start(tmp_path: Path, samples: int) -> None:
    write_copy(tmp_path, {"dogA": samples, "carB": NEEDED})
    wave = avsbench(tmp_path, "s4", "test", audio_pad="repeat")[0].fields["audio"].waveform
    assert wave.shape == (1, NEEDED)
    once = wave[:, :samples]
    for start in range(samples, NEEDED, samples):
        assert torch.equal(wave[:, start : start + samples], once[:, : NEEDED - start])


def test_audio_pad_repeat_refuses_an_empty_sound_and_an_unknown_pad_is_refused(tmp_path: Path) -> None:
    write_copy(tmp_path, {"dogA": 0, "carB": NEEDED})
    with pytest.raises(DatasetError, match=re.escape(f"{sound_file(tmp_path, 'dogA')}: sound is 0 s (0 samples")):
        avsbench(tmp_path, "s4", "test", audio_pad="repeat")[0]
    with pytest.raises(DatasetError, match="option audio_pad is 'loop'; expected one of none, zeros, repeat"):
        avsbench(tmp_path, "s4", "test", audio_pad="loop")


def test_refusing_short_sounds_leaves_the_fingerprint_as_it_was(tmp_path: Path) -> None:
    write_copy(tmp_path, {"dogA": NEEDED, "carB": NEEDED})
    assert (
        avsbench(tmp_path, "s4", "test").fingerprint()
        == avsbench(tmp_path, "s4", "test", audio_pad="none").fingerprint()
    )


def test_a_sound_at_another_rate_names_its_file_and_both_rates(tmp_path: Path) -> None:
    # The first clip is at fault; the second, its competitor, is as it should be.
    write_copy(tmp_path, {"dogA": 5 * 44100, "carB": NEEDED}, rates={"dogA": 44100})
    dataset = avsbench(tmp_path, "s4", "test")
    expected = re.escape(f"{sound_file(tmp_path, 'dogA')}: sound at 44100 Hz, expected 16000 Hz")
    for read in (lambda: dataset[0], lambda: dataset.read_audio("dogA")):
        with pytest.raises(DatasetError, match=expected):
            read()
    assert dataset.read_audio("carB").sample_rate == RATE
    resampled = avsbench(tmp_path, "s4", "test", sample_rate=44100)
    assert resampled[0].fields["audio"].waveform.shape == (1, 5 * 44100)
    with pytest.raises(DatasetError, match="option sample_rate is 0"):
        avsbench(tmp_path, "s4", "test", sample_rate=0)


def test_the_tolerance_is_under_one_sample_period() -> None:
    # Five frames of a third of a second at 16 kHz span 26,666.67 samples: 26,666 whole ones.
    assert samples_needed(5, 1 / 3, RATE) == 26666 and samples_needed(5, 1.0, RATE) == NEEDED
    audio = ClipAudio(torch.zeros(1, 26666), RATE)
    assert fit_to_frames(audio, Path("a.wav"), 5, 1 / 3, AudioPad.NONE) is audio
    with pytest.raises(DatasetError, match=r"a\.wav: sound is 1\.66656 s \(26665 samples"):
        fit_to_frames(ClipAudio(torch.zeros(1, 26665), RATE), Path("a.wav"), 5, 1 / 3, AudioPad.NONE)
    longer = ClipAudio(torch.zeros(2, NEEDED + 7), RATE, "left,right")
    assert fit_to_frames(longer, Path("a.wav"), 5, 1.0, AudioPad.NONE) is longer  # left as it is
    stereo = ClipAudio(torch.ones(2, 3), RATE, "left,right")
    padded = fit_to_frames(stereo, Path("a.wav"), 5, 1.0, AudioPad.ZEROS)
    assert padded.layout == "left,right" and padded.waveform.shape == (2, NEEDED) and padded.waveform.sum() == 6
